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
from pathlib import Path

from ..routing.rules import RuleSet, parse_rules
from .line import Line


@dataclass
class RulesState:
    applied: int = 0
    refused: int = 0
    last_error: str | None = None
    history: list[RuleSet] = field(default_factory=list)


class RulesWatcher:
    def __init__(self, line: Line, path: str | Path | None = None, poll_s: float = 2.0,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        self.line, self.poll_s, self.say = line, poll_s, say
        self.path = Path(path) if path else None
        self.state = RulesState(history=[line.rules])
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
        self.state.history.append(rules)
        return rules

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
