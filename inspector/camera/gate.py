"""The board gate: one inspection per board from a free-running stream, and no board from an empty conveyor.

A camera over a conveyor delivers frames whether a board is under it or not, and many frames of each board.
A frame is a board only when the view has settled (the rule set's `gate.settle_frames` frames in a row barely
change) and the recipe's fiducials register on it (or, for a recipe without fiducials, its code reads). That
board is inspected once; the gate re-arms when the board leaves the view (its fiducials no longer register),
or a settled board lies elsewhere (`rearm_shift_px`) or carries another serial. Empty, moving and repeated
frames are counted, never stored. The registration and code read of the frame let through travel with it,
so the line does not do them again. Triggered cameras (one frame per board) need no gate.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from ..ingest.identity import CodeRead, read_code
from ..ingest.registration import Registration, RegistrationFailed, register
from ..ingest.sources import Frame, Source, WrappedSource
from ..routing.rules import RuleSet

THUMB = 8  # the thumbnail a frame's change is measured on is this many times smaller per side


@dataclass
class GateCounters:
    frames: int = 0
    boards: int = 0  # frames let through: one per board
    moving: int = 0  # frames while the view changes (a board arriving or leaving)
    empty: int = 0  # settled frames with no board (fiducials not found: the conveyor between boards)
    held: int = 0  # further frames of a board already inspected
    last_empty: str | None = None  # why the last empty frame was not a board

    def to_json(self) -> dict:
        return dict(vars(self))


@dataclass
class _Inspected:
    thumb: np.ndarray
    shift: tuple[float, float] | None
    serial: str | None


def thumbnail(image: np.ndarray) -> np.ndarray:
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    h, w = gray.shape
    return cv2.resize(gray, (max(1, w // THUMB), max(1, h // THUMB)), interpolation=cv2.INTER_AREA).astype(np.float32)


def change(a: np.ndarray | None, b: np.ndarray) -> float:
    """Mean absolute difference of two thumbnails in grey levels; infinite when there is nothing to compare."""
    if a is None or a.shape != b.shape:
        return math.inf
    return float(np.mean(np.abs(a - b)))


class BoardGate:
    """Decides frame by frame; `rules` gives the rule set in force (it may change at a recipe changeover)."""

    def __init__(self, rules: Callable[[], RuleSet]) -> None:
        self.rules = rules
        self.counters = GateCounters()
        self._prev: np.ndarray | None = None
        self._still = 0
        self._inspected: _Inspected | None = None
        self._lock = threading.Lock()
        check_gate(rules())

    def offer(self, frame: Frame) -> Frame | None:
        """The frame as a board to inspect (its registration and code attached), or None."""
        if frame.image is None:
            return frame  # an unreadable frame is the source's report: it goes through as a board-level error
        rules = self.rules()
        gate = rules.gate
        thumb = thumbnail(frame.image)
        with self._lock:
            self.counters.frames += 1
            moved = change(self._prev, thumb)
            self._prev = thumb
            self._still = self._still + 1 if moved < gate.still_level else 0
            settled = self._still >= gate.settle_frames
            inspected = self._inspected
            if inspected is not None and change(inspected.thumb, thumb) < gate.still_level:
                self.counters.held += 1  # the board inspected, still lying there
                return None
            if inspected is None and not settled:
                self.counters.moving += 1
                return None
        look = _look(frame.image, rules, settled)
        with self._lock:
            if isinstance(look, str):
                self._inspected = None  # no board in view: the next one is new
                if settled:
                    self.counters.empty += 1
                    self.counters.last_empty = look
                else:
                    self.counters.moving += 1
                return None
            registration, code = look
            if not settled:
                self.counters.moving += 1
                return None
            shift = registration.shift if registration is not None else None
            serial = code.text if code is not None else None
            if inspected is not None and not _another(inspected, shift, serial, gate.rearm_shift_px):
                inspected.thumb = thumb  # the same board (light flickered, a hand passed): compare with it now
                self.counters.held += 1
                return None
            self._inspected = _Inspected(thumb, shift, serial)
            self.counters.boards += 1
        frame.registration, frame.code, frame.rules_version = registration, code, rules.version
        return frame


def _another(inspected: _Inspected, shift: tuple[float, float] | None, serial: str | None, rearm_px: float) -> bool:
    if serial is not None and inspected.serial is not None and serial != inspected.serial:
        return True
    if shift is not None and inspected.shift is not None:
        return math.dist(shift, inspected.shift) > rearm_px
    return False


def check_gate(rules: RuleSet) -> None:
    """ValueError when the rule set gives the gate nothing to see a board by."""
    if rules.fiducials is None and (rules.serial_code is None or rules.serial_code.at is None):
        raise ValueError(f"rule set {rules.recipe} has no fiducials and no placed serial code, so a free-running "
                         "camera's frames cannot be told from an empty conveyor; add fiducials (docs/pages/"
                         "reference/rule-sets.md) or trigger the camera once per board (--gate off)")


def _look(image: np.ndarray, rules: RuleSet, settled: bool) -> tuple[Registration | None, CodeRead | None] | str:
    """(registration, code read) of a board in view, or why there is none. A moving board's code is not read
    (its registration alone says whether a board is still there), unless the code is how a board is seen."""
    registration = None
    if rules.fiducials is not None:
        try:
            registration = register(image, rules.fiducials)
        except RegistrationFailed as exc:
            return str(exc)
    code = None
    if rules.serial_code is not None and (settled or registration is None):
        code = read_code(image, rules.serial_code, registration.homography if registration is not None else None)
        if registration is None and not code.ok:
            return code.reason
    return registration, code


class GatedSource(WrappedSource):
    """A free-running source seen through a board gate: only boards come out."""

    def __init__(self, inner: Source, rules: RuleSet | Callable[[], RuleSet]) -> None:
        super().__init__(inner)
        self.gate = BoardGate(rules if callable(rules) else (lambda: rules))

    def follow(self, rules: Callable[[], RuleSet]) -> None:
        """Take the rule set in force from `rules` (the running line's, which a recipe changeover switches)."""
        check_gate(rules())
        self.gate.rules = rules

    def __iter__(self) -> Iterator[Frame]:
        for frame in self.inner:
            board = self.gate.offer(frame)
            if board is not None:
                yield board
            if self._stop:
                return
