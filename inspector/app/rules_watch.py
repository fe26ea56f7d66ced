"""Applying an edited rule file to the running line, keeping the running set when the edit is bad.

The kiosk polls the file's modification time; the dashboard calls `apply_text`
after its editor validates. Either way a malformed file or one naming experts
the zoo lacks is refused with file:line, counted, and the line goes on with the
set it had. Each applied version is remembered (newest last) for rollback.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..routing.rules import RuleSet, parse_rules
from .line import Line


@dataclass(frozen=True)
class AppliedRules:
    """One version the line ran: the set, the text it was parsed from (for rollback), when it was applied."""

    rules: RuleSet
    text: str | None  # None: the starting set came from memory, not a file
    at: datetime


@dataclass
class RulesState:
    applied: int = 0
    refused: int = 0
    last_error: str | None = None
    history: list[AppliedRules] = field(default_factory=list)


class RulesWatcher:
    def __init__(self, line: Line, path: str | Path | None = None, poll_s: float = 2.0,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        self.line, self.poll_s, self.say = line, poll_s, say
        self.path = Path(path) if path else None
        self.state = RulesState(history=[AppliedRules(line.rules, _text_of(line.rules), datetime.now(timezone.utc))])
        self._mtime = self.path.stat().st_mtime_ns if self.path and self.path.exists() else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def apply_text(self, text: str, source: str) -> RuleSet:
        """Validate and apply; raises ValueError (ConfigError with file:line) and keeps the running set."""
        try:
            rules = parse_rules(text, source)
            self.line.apply_rules(rules)
        except ValueError as exc:
            self.state.refused += 1
            self.state.last_error = str(exc)
            raise
        self.state.applied += 1
        self.state.last_error = None
        self.state.history.append(AppliedRules(rules, text, datetime.now(timezone.utc)))
        return rules

    def rollback(self, index: int, write_file: bool = True) -> RuleSet:
        """Apply history entry `index` again (it becomes the newest); also writes it to the watched file
        when asked, so the file on disk and the running set agree."""
        entry = self.state.history[index]
        if entry.text is None:
            raise ValueError(f"version {entry.rules.version} was not read from a file; there is no text to restore")
        if write_file and self.path is not None:
            self.save(entry.text)
        return self.apply_text(entry.text, entry.rules.source)

    def save(self, text: str) -> None:
        """Write the watched file without the poller taking it as a new edit (the caller applies it)."""
        assert self.path is not None
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(self.path)
        self._mtime = self.path.stat().st_mtime_ns

    def check(self) -> bool:
        """Apply the watched file if it changed since the last look; True when a new set was applied."""
        if self.path is None:
            return False
        try:
            mtime = self.path.stat().st_mtime_ns
            if mtime == self._mtime:
                return False
            self._mtime = mtime
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            self.state.last_error = f"{self.path}: cannot read the rule file ({exc.strerror}); the running set stays"
            return False
        try:
            rules = self.apply_text(text, str(self.path))
        except ValueError as exc:
            self.say(f"rule file refused, still running {self.line.rules.recipe} {self.line.rules.version}: {exc}")
            return False
        self.say(f"rules applied: {rules.recipe} {rules.version} from {self.path}")
        return True

    def start(self) -> None:
        if self.path is None:
            return
        self._thread = threading.Thread(target=self._loop, name="rules-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.check()


def _text_of(rules: RuleSet) -> str | None:
    try:
        text = Path(rules.source).read_text(encoding="utf-8")
        return text if parse_rules(text, rules.source).version == rules.version else None
    except (OSError, ValueError):
        return None
