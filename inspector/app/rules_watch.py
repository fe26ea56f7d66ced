"""Applying an edited rule file to the running line, keeping the running set when the edit is bad.

The kiosk polls the file's modification time; the dashboard calls `apply_text`
after its editor validates. Either way a malformed file or one naming experts
the zoo lacks is refused with file:line, counted, and the line goes on with the
set it had. Each applied version is remembered (the newest `MAX_HISTORY`,
newest last) for rollback. The watcher's thread outlives any file: whatever
it reads (not UTF-8, YAML of any shape, a file that vanishes) is refused with
the reason, and the running set stays.

The kiosk's API edits through `submit`: validate first, then write the file
atomically, then apply, so a refused edit never reaches the disk (where it
would be what the next start reads). A submit and the watcher's look at the
file take one lock, so the watcher never takes the file a submit is writing
for an edit of its own and applies it a second time.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..coserve.online.profile import DeviceProfile
from ..experts.zoo import Zoo
from ..routing.rules import RuleSet, decode_rules, parse_rules
from ..runtime.diskio import write_atomically
from .line import Line

MAX_HISTORY = 20


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
        self._writing = threading.RLock()  # a submit's write and apply, or the watcher's check: one at a time
        # told of a change nobody signed for here: (kind, who, where from, old set, new set); the kiosk records it
        self.witness: Callable[[str, str, str, RuleSet, RuleSet], None] | None = None

    @property
    def alive(self) -> bool:
        """The polling thread runs (True too when there is no file to watch)."""
        return self.path is None or (self._thread is not None and self._thread.is_alive()) or self._stop.is_set()

    def validate(self, text: str, source: str) -> RuleSet:
        """Parse and check against the zoo without applying; ValueError (file:line) when refused (counted)."""
        try:
            rules = parse_rules(text, source)
            self.line.check_rules(rules)
        except ValueError as exc:
            self.state.refused += 1
            self.state.last_error = str(exc)
            raise
        return rules

    def apply_text(self, text: str, source: str) -> RuleSet:
        """Validate and apply; raises ValueError (ConfigError with file:line) and keeps the running set."""
        rules = self.validate(text, source)
        self._apply(rules, text)
        return rules

    def submit(self, text: str) -> RuleSet:
        """An edit from the API: validate, write the watched file atomically, apply. A refused edit touches
        nothing on disk."""
        rules = self.validate(text, str(self.path) if self.path else "edit")
        with self._writing:
            if self.path is not None:
                self.save(text)
            self._apply(rules, text)
        return rules

    def _apply(self, rules: RuleSet, text: str | None) -> None:
        self.line.apply_rules(rules)
        self._remember(rules, text)

    def change_board(self, path: Path, rules: RuleSet, zoo: Zoo, profiles: Callable[[], dict[str, DeviceProfile]],
                     timeout: float = 60.0) -> None:
        """The line serves another board, `rules` from `path` with its own `zoo` (Line.change_board: ValueError or
        TimeoutError and nothing changes); no edit of the old board's file applies meanwhile, and the watcher
        watches the new board's file from here, the set the newest of its history."""
        with self._writing:
            self.line.change_board(rules, zoo, profiles, timeout)
            self.path = Path(path)
            self.mark_read()
            self._remember(rules, rules.text or None)

    def _remember(self, rules: RuleSet, text: str | None) -> None:
        self.state.applied += 1
        self.state.last_error = None
        self.state.history.append(AppliedRules(rules, text, datetime.now(timezone.utc)))
        del self.state.history[:-MAX_HISTORY]

    def rollback(self, index: int, write_file: bool = True) -> RuleSet:
        """Apply history entry `index` again (it becomes the newest); also writes it to the watched file
        when asked, so the file on disk and the running set agree."""
        if not -len(self.state.history) <= index < len(self.state.history):
            raise ValueError(f"there is no version {index}: the history holds {len(self.state.history)}")
        entry = self.state.history[index]
        if entry.text is None:
            raise ValueError(f"version {entry.rules.version} was not read from a file; there is no text to restore")
        if write_file and self.path is not None:
            return self.submit(entry.text)
        return self.apply_text(entry.text, entry.rules.source)

    @property
    def writing(self):  # noqa: ANN201 - the lock an edit holds while it writes and applies a file
        return self._writing

    def mark_read(self) -> None:
        """The watched file as it is now counts as applied (a caller applied it itself)."""
        try:
            self._mtime = self.path.stat().st_mtime_ns if self.path else None
        except OSError:
            self._mtime = None

    def save(self, text: str) -> None:
        """Write the watched file atomically (fsynced, then renamed over it) without the poller taking it as a
        new edit (the caller applies it)."""
        assert self.path is not None
        with self._writing:
            write_atomically(self.path, text.encode("utf-8"))
            self._mtime = self.path.stat().st_mtime_ns

    def check(self) -> bool:
        """Apply the watched file if it changed since the last look; True when a new set was applied."""
        if self.path is None:
            return False
        with self._writing:
            return self._check()

    def _check(self) -> bool:
        assert self.path is not None
        try:
            mtime = self.path.stat().st_mtime_ns
            if mtime == self._mtime:
                return False
            self._mtime = mtime
            data = self.path.read_bytes()
        except OSError as exc:
            self.state.last_error = f"{self.path}: cannot read the rule file ({exc.strerror}); the running set stays"
            return False
        old = self.line.rules
        try:
            rules = self.apply_text(self._decode(data), str(self.path))
        except ValueError as exc:
            self.say(f"warning: rule file refused, still running {self.line.rules.recipe} "
                     f"{self.line.rules.version}: {exc}")
            return False
        self.say(f"rules applied: {rules.recipe} {rules.version} from {self.path}")
        self.witnessed("rules.file", "rule file", f"{self.path} edited on disk", old, rules)
        return True

    def witnessed(self, kind: str, who: str, origin: str, old: RuleSet, new: RuleSet) -> None:
        if self.witness is not None and old.version != new.version:
            try:
                self.witness(kind, who, origin, old, new)
            except Exception as exc:  # noqa: BLE001 - the record's failure is said by the recorder; the line runs on
                self.say(f"error: the rules change was not recorded: {exc}")

    def reload(self, path: Path | None = None) -> bool:
        """Read the rule file now, changed or not (SIGHUP); `path` points the watcher at another file first."""
        if path is not None:
            self.path = Path(path)
        self._mtime = None
        return self.check()

    def _decode(self, data: bytes) -> str:
        try:
            return decode_rules(data, str(self.path))
        except ValueError as exc:
            self.state.refused += 1
            self.state.last_error = str(exc)
            raise

    def start(self) -> None:
        if self.path is None:
            return
        self._thread = threading.Thread(target=self._loop, name="rules-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.check()
            except Exception as exc:  # noqa: BLE001 - whatever the file holds, the watcher keeps watching
                self.state.refused += 1
                self.state.last_error = f"{self.path}: refused ({type(exc).__name__}: {exc}); the running set stays"
                self.say(f"warning: {self.state.last_error}")


def _text_of(rules: RuleSet) -> str | None:
    try:
        text = Path(rules.source).read_text(encoding="utf-8")
        return text if parse_rules(text, rules.source).version == rules.version else None
    except (OSError, ValueError):
        return None
