"""Where board images come from: synthetic boards, a folder (watched or not), a replay list, a camera.

Every source yields `Frame`s; a camera is whatever OpenCV's VideoCapture
opens (device index, RTSP/HTTP URL, video file), so a video file exercises
the camera's code path. Unreadable images are counted and skipped with the
reason; a camera that stops delivering is reopened with backoff, counted.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from ..routing.rules import RuleSet
from .camera_model import CameraModel
from .synthetic import DEFAULT_RATES, render_board

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff"}


@dataclass
class Frame:
    image: np.ndarray  # HxWx3 BGR uint8
    serial: str
    source: str
    truth: dict[str, str] | None = None  # synthetic boards know their defects
    placement: np.ndarray | None = None  # ... and, seen through a camera model, where the camera put them


@dataclass
class SourceCounters:
    frames: int = 0
    unreadable: int = 0
    reconnects: int = 0
    last_error: str | None = None
    last_error_at: float | None = None  # time.monotonic() of the last error
    gave_up: str | None = None  # why the source ended for good (a camera out of reconnects)
    errors: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.last_error = message
        self.last_error_at = time.monotonic()
        self.errors = (self.errors + [message])[-20:]


class Source:
    """What every source has: a name for the records, counters for the operator, and a way to stop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counters = SourceCounters()
        self._stop = False

    def stop(self) -> None:
        """Stop delivering after the current image (SIGTERM, the Stop button)."""
        self._stop = True

    def __iter__(self) -> Iterator[Frame]:
        raise NotImplementedError


class SyntheticSource(Source):
    """Rendered boards of a rule set, with their true defects (the built-in demo stream), optionally as a
    camera sees them (placement, light, lens, sensor, JPEG: ingest/camera_model.py)."""

    def __init__(self, rules: RuleSet, boards: int, seed: int = 1000, rates: dict[str, float] | None = None,
                 interval_s: float = 0.0, camera: CameraModel | None = None,
                 forced: Callable[[int, np.random.Generator], dict[str, str]] | None = None) -> None:
        """`boards` 0 renders boards until `stop`; `interval_s` paces them like a conveyor; `forced(i, rng)` sets
        defects of board i by designator (the accuracy suite places an exact number of defects)."""
        self.rules, self.boards, self.seed, self.interval_s = rules, boards, seed, interval_s
        self.rates = DEFAULT_RATES if rates is None else rates
        self.camera = camera if camera is not None and not camera.is_identity else None
        self.forced = forced
        super().__init__(f"synthetic:{rules.recipe}")

    def __iter__(self) -> Iterator[Frame]:
        rng = np.random.default_rng([self.seed, self.rules.seed])
        for i in itertools.count() if self.boards == 0 else range(self.boards):
            if self._stop:
                return
            if i and self.interval_s:
                time.sleep(self.interval_s)
            forced = self.forced(i, rng) if self.forced else None
            board = render_board(self.rules, f"{self.rules.recipe.upper()}-{self.seed}-{i:05d}", rng, self.rates,
                                 forced)
            image, placement = board.image, None
            if self.camera is not None:
                image, placement = self.camera.view(board.image, rng)
            self.counters.frames += 1
            yield Frame(image, board.serial, self.name, board.truth, placement)


def _read(path: Path, counters: SourceCounters) -> np.ndarray | None:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        counters.unreadable += 1
        counters.fail(f"{path}: not a readable image (skipped); check the file or remove it")
    return image


class FolderSource(Source):
    """Images in a folder in name order; with `watch`, keeps waiting for new ones (a scanner's drop folder).

    Watching, each image read is moved into `archive` (a subfolder, default
    `inspected/`), so a restarted kiosk does not inspect the same boards again.
    """

    def __init__(self, folder: str | Path, watch: bool = False, poll_s: float = 0.5,
                 idle_stop_s: float | None = None, archive: str | None = "inspected") -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"image folder {self.folder} does not exist; create it or pass another")
        self.watch, self.poll_s, self.idle_stop_s = watch, poll_s, idle_stop_s
        self.archive = self.folder / archive if watch and archive else None
        super().__init__(f"folder:{self.folder}")

    def _ready(self, seen: set[Path], sizes: dict[Path, int]) -> list[Path]:
        """New images in name order; watching, only those whose size held still since the last poll,
        so a file the scanner is still writing is not read half-written."""
        new = sorted(p for p in self.folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p not in seen)
        if not self.watch:
            return new
        ready = []
        for path in new:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size and sizes.get(path) == size:
                ready.append(path)
            sizes[path] = size
        return ready

    def __iter__(self) -> Iterator[Frame]:
        seen: set[Path] = set()
        sizes: dict[Path, int] = {}
        idle_since = time.monotonic()
        while not self._stop:
            new = self._ready(seen, sizes)
            for path in new:
                if self._stop:
                    return
                seen.add(path)
                image = _read(path, self.counters)
                if image is not None:
                    self.counters.frames += 1
                    yield Frame(image, path.stem, f"folder:{path}")
                self._archive(path)
            if not self.watch:
                return
            if new or len(sizes) > len(seen):  # something arrived or is still arriving
                idle_since = time.monotonic()
            elif self.idle_stop_s is not None and time.monotonic() - idle_since > self.idle_stop_s:
                return
            time.sleep(self.poll_s)


    def _archive(self, path: Path) -> None:
        if self.archive is None:
            return
        try:
            self.archive.mkdir(exist_ok=True)
            path.replace(self.archive / path.name)
        except OSError as exc:
            self.counters.fail(f"cannot move {path} to {self.archive}: {exc.strerror}; it stays in the folder")


class ReplaySource(Source):
    """A text file listing image paths, one per line (relative to the list), replayed in order."""

    def __init__(self, listing: str | Path) -> None:
        self.listing = Path(listing)
        if not self.listing.is_file():
            raise FileNotFoundError(f"replay list {self.listing} does not exist")
        super().__init__(f"replay:{self.listing}")

    def __iter__(self) -> Iterator[Frame]:
        for line in self.listing.read_text(encoding="utf-8").splitlines():
            if self._stop:
                return
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            path = Path(line.strip())
            path = path if path.is_absolute() else self.listing.parent / path
            image = _read(path, self.counters)
            if image is not None:
                self.counters.frames += 1
                yield Frame(image, path.stem, f"replay:{path}")


class CameraSource(Source):
    """OpenCV VideoCapture: a device index ("0"), an RTSP/HTTP URL or a video file.

    When a live camera stops delivering it is reopened with exponential backoff
    (up to `max_reconnects`, counted); a video file simply ends.
    """

    def __init__(self, uri: str, max_reconnects: int = 5, backoff_s: float = 0.5, frames: int | None = None) -> None:
        self.uri = uri
        self.max_reconnects, self.backoff_s, self.frames = max_reconnects, backoff_s, frames
        super().__init__(f"camera:{uri}")
        self.is_file = Path(uri).is_file()

    def _open(self) -> cv2.VideoCapture:
        target: int | str = int(self.uri) if self.uri.isdigit() else self.uri
        return cv2.VideoCapture(target)

    def __iter__(self) -> Iterator[Frame]:
        cap = self._open()
        failures, n = 0, 0
        try:
            while (self.frames is None or n < self.frames) and not self._stop:
                ok, image = cap.read() if cap.isOpened() else (False, None)
                if ok and image is not None:
                    failures = 0
                    n += 1
                    self.counters.frames += 1
                    yield Frame(image, f"cam-{n:06d}", self.name)
                    continue
                if self.is_file and cap.isOpened():
                    return  # end of the video file
                if failures >= self.max_reconnects:
                    self.counters.fail(f"camera {self.uri} gave no frame after {failures} reconnects; check the "
                                       "cable, the URL or the device index")
                    self.counters.gave_up = self.counters.last_error
                    return
                failures += 1
                self.counters.reconnects += 1
                self.counters.fail(f"camera {self.uri} delivered no frame; reconnect {failures}")
                cap.release()
                time.sleep(self.backoff_s * 2 ** (failures - 1))
                cap = self._open()
        finally:
            cap.release()
