"""Where the dashboard's data comes from: a line it runs itself, or a kiosk it is attached to.

The tabs never touch the engine directly; they read plain snapshots (see
inspector/app/snapshot.py) and call the few verbs here. `LocalBackend`
drives a LineController in this process; `AttachedBackend` polls a running
kiosk's /status on a thread of its own (the GUI thread never waits on the
network) and reads its results database; it runs no inference and cannot
start, pause or stop the kiosk (systemd does that).
"""
from __future__ import annotations

import json
import math
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from inspector.app.allocation import Allocation
from inspector.app.controller import LineController, LineSetup
from inspector.results.store import ResultStore, StoreUnavailable
from inspector.routing.rules import RuleSet, body_box, load_rules, parse_rules


@dataclass(frozen=True)
class PartBox:
    ref: str
    component: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 on the board
    verdict: str
    defect: str


@dataclass(frozen=True)
class FiducialMark:
    name: str
    at: tuple[float, float]  # where it was found (image px), or its nominal place when it was not
    found: bool


@dataclass(frozen=True)
class BoardRegistration:
    """How the board was registered, as stored with it: what the line view draws."""

    transform: tuple[float, ...] | None = None  # 2x3 row-major, recipe px -> image px
    residual_px: float | None = None
    fiducials: dict[str, tuple[float, float]] = field(default_factory=dict)  # found, image px
    error: str | None = None  # board-level: registration failed ...


@dataclass
class BoardPicture:
    """The newest board as the line view draws it: the image when this process has it, else a schematic."""

    serial: str
    verdict: str
    size: tuple[int, int]
    image: np.ndarray | None
    boxes: list[PartBox] = field(default_factory=list)
    marks: list[FiducialMark] = field(default_factory=list)
    registration: BoardRegistration = BoardRegistration()

    def to_view(self, x: float, y: float) -> tuple[float, float]:
        """A recipe point where the picture shows it: through the registration on a camera image, else as is."""
        t = self.registration.transform
        if self.image is None or t is None:
            return x, y
        return t[0] * x + t[1] * y + t[2], t[3] * x + t[4] * y + t[5]

    def describe_registration(self) -> str:
        reg = self.registration
        if reg.error:
            return reg.error
        if reg.transform is None:
            return "not registered (the recipe has no fiducials, or registration is off)"
        t = reg.transform
        return (f"registered on {len(reg.fiducials)} fiducials: residual {reg.residual_px:.2f} px, shift "
                f"({t[2]:+.1f}, {t[5]:+.1f}) px, rotation {math.degrees(math.atan2(t[3], t[0])):+.2f} deg")


def board_picture(rules: RuleSet | None, serial: str, verdict: str, parts: list[tuple[str, str, str]],
                  image: np.ndarray | None, registration: BoardRegistration | None = None) -> BoardPicture:
    """Boxes at the rule set's placements, coloured later by each part's (ref, verdict, defect), and the fiducials."""
    size = (image.shape[1], image.shape[0]) if image is not None else (rules.board_size if rules else (640, 400))
    pic = BoardPicture(serial, verdict, size, image, registration=registration or BoardRegistration())
    if rules is None:
        return pic
    where = {p.ref: (c, p) for c, p in rules.placements()}
    for ref, part_verdict, defect in parts:
        if ref in where:
            c, p = where[ref]
            pic.boxes.append(PartBox(ref, c.name, body_box(c, p, 2), part_verdict, defect))
    found = pic.registration.fiducials
    for m in rules.fiducials.marks if rules.fiducials else ():
        if m.name in found:
            at = found[m.name] if image is not None else (float(m.x), float(m.y))
            pic.marks.append(FiducialMark(m.name, at, True))
        else:
            pic.marks.append(FiducialMark(m.name, (float(m.x), float(m.y)), False))
    return pic


class LocalBackend:
    """A line run by this process (the dashboard's Start button)."""

    can_control = True

    def __init__(self, controller: LineController, setup: LineSetup) -> None:
        self.controller, self.setup = controller, setup
        self._store: ResultStore | None = None

    @property
    def label(self) -> str:
        return f"local line, results in {self.controller.db_url}"

    def snapshot(self) -> dict[str, Any]:
        return self.controller.snapshot()

    def store(self) -> ResultStore:
        if self._store is None:
            self._store = ResultStore(self.controller.db_url)
        return self._store

    def start(self, source: str | None = None) -> None:
        if source:
            self.setup = replace(self.setup, source=source)
        self.controller.start(self.setup)

    def pause(self) -> None:
        self.controller.pause()

    def resume(self) -> None:
        self.controller.resume()

    def stop(self) -> None:
        self.controller.stop()

    def close(self, timeout: float | None = None) -> bool:
        done = self.controller.close(timeout)
        if self._store is not None:
            self._store.close()
        return done

    def board(self) -> BoardPicture | None:
        service = self.controller.service
        last = service.last_board if service is not None else None
        if last is None:
            return None
        image, record = last
        reg = BoardRegistration(record.transform, record.residual_px, record.fiducials, record.error)
        return board_picture(service.line.rules, record.board_serial, record.verdict,
                             [(p.ref, p.verdict, p.defect_class) for p in record.parts], image, reg)

    # rules
    def rules_path(self) -> Path:
        return self.setup.rules_path

    def apply_rules(self, text: str) -> str:
        rules = self.controller.apply_rules(text)
        return f"applied {rules.recipe} {rules.version} to the running line and saved it to {self.setup.rules_path}"

    def rollback(self, index: int) -> str:
        rules = self.controller.rollback(index)
        return f"rolled back to {rules.recipe} {rules.version} (applied and saved)"

    def rules_history(self) -> list[tuple[str, str, str]]:
        """(applied at, recipe, version) of each version the running line has had, oldest first."""
        watcher = self.controller.rules
        if watcher is None:
            return []
        return [(h.at.strftime("%H:%M:%S"), h.rules.recipe, h.rules.version) for h in watcher.state.history]

    # memory
    def apply_allocation(self, allocation: Allocation) -> str:
        return self.controller.apply_allocation(allocation)


class AttachedBackend:
    """A kiosk's state over HTTP, and its results database; no inference here."""

    can_control = False

    def __init__(self, url: str, db_url: str | None = None, poll_s: float = 0.5) -> None:
        self.url, self._db_url, self.poll_s = url.rstrip("/"), db_url, poll_s
        self._latest: dict[str, Any] = {"state": "connecting", "controller": {"phase": "attaching", "log": []}}
        self._store: ResultStore | None = None
        self._rules: tuple[str, RuleSet | None] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="attach-poll", daemon=True)
        self._thread.start()

    @property
    def label(self) -> str:
        return f"attached to {self.url} (read-only: the kiosk runs the line)"

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url + "/status", timeout=2) as r:
                    snap = json.loads(r.read())
                snap["controller"] = {"phase": snap.get("state", "?"), "error": None, "log": [],
                                      "source": (snap.get("ingest") or {}).get("source", {}).get("name")}
            except (OSError, ValueError, urllib.error.URLError) as exc:
                snap = {"state": "unreachable", "controller": {
                    "phase": "unreachable", "log": [],
                    "error": f"cannot read {self.url}/status ({exc}); is the kiosk running and listening there?"}}
            self._latest = snap
            self._stop.wait(self.poll_s)

    def snapshot(self) -> dict[str, Any]:
        return self._latest

    def store(self) -> ResultStore | None:
        if self._store is None:
            url = self._db_url or (self._latest.get("results") or {}).get("database")
            if not url:
                return None
            try:
                self._store = ResultStore(url)
            except StoreUnavailable:
                return None
        return self._store

    def close(self, timeout: float | None = None) -> bool:
        self._stop.set()
        self._thread.join(timeout)
        if self._store is not None:
            self._store.close()
        return True

    def _rule_set(self) -> RuleSet | None:
        source = (self._latest.get("line") or {}).get("rules_source")
        if not source:
            return None
        if self._rules is None or self._rules[0] != source:
            try:
                self._rules = (source, load_rules(source))
            except ValueError:
                self._rules = (source, None)
        return self._rules[1]

    def board(self) -> BoardPicture | None:
        store = self.store()
        latest = store.latest() if store is not None else None
        if latest is None:
            return None
        reg = BoardRegistration(
            tuple(json.loads(latest.reg_transform)) if latest.reg_transform else None, latest.reg_residual_px,
            {k: tuple(v) for k, v in json.loads(latest.reg_fiducials).items()} if latest.reg_fiducials else {},
            latest.error)
        return board_picture(self._rule_set(), latest.board_serial, latest.verdict,
                             [(p.ref, p.verdict, p.defect_class) for p in latest.parts], None, reg)

    def rules_path(self) -> Path | None:
        watching = (self._latest.get("rules") or {}).get("watching")
        return Path(watching) if watching else None

    def apply_rules(self, text: str) -> str:
        """The kiosk re-reads its rule file on change: validate here, write the file, and it applies it."""
        path = self.rules_path()
        if path is None:
            raise RuntimeError("the kiosk reports no rule file it watches; edit its --rules file on the box")
        rules = parse_rules(text, str(path))
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return (f"saved {rules.recipe} {rules.version} to {path}; the kiosk applies it at its next look "
                f"(within seconds; its applied and refused counts are below)")

    def rules_history(self) -> list[tuple[str, str, str]]:
        hist = (self._latest.get("rules") or {}).get("history") or []
        return [(h["at"][11:19], h["recipe"], h["version"]) for h in hist]

    def rollback(self, index: int) -> str:
        raise RuntimeError("rollback of an attached kiosk: open the version's file and save it; the kiosk keeps "
                           "no texts of its earlier versions")

    def apply_allocation(self, allocation: Allocation) -> str:
        raise RuntimeError("an attached kiosk's memory is set by its flags (--device-mb in INSPECTOR_ARGS of "
                           "/etc/inspector/kiosk.env) and applies when the service restarts")
