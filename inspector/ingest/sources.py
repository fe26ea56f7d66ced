"""Where board images come from: synthetic boards, a folder (watched or not), a replay list.

Every source yields `Frame`s; cameras live in their own room (inspector/camera/: OpenCV streams, GenICam
cameras, the board gate). A file that is not a whole, readable image of a sane size becomes a frame with an
`error` (stored as a board-level error, so the operator sees every file that came in).

Every frame carries its inspection id. A file's id comes from its name, its
modification time and its content, so a watched file inspected again after a
crash (its result stored, the kill came before it was moved away) is the same
inspection and the database keeps one result.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..routing.rules import RuleSet
from .camera_model import CameraModel
from .glare import Glare
from .identity import CodeRead
from .images import DEFAULT_MAX_PIXELS, BadImage, read_image
from .registration import Registration
from .synthetic import DEFAULT_RATES, render_board

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff"}
FILE_IDS = uuid.UUID("6f1c2b7e-3d52-4c1a-9a57-1f0e5b8d2c40")  # the namespace of content-derived inspection ids


@dataclass
class Frame:
    image: np.ndarray | None  # HxWx3 BGR uint8; None when the file was not a usable image (see `error`)
    serial: str
    source: str
    truth: dict[str, str] | None = None  # synthetic boards know their defects
    placement: np.ndarray | None = None  # ... and, seen through a camera model, where the camera put them
    inspection_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    error: str | None = None  # why this file is not inspected (empty, truncated, not an image, too large)
    on_stored: Callable[[], None] | None = None  # called once its result is stored or spooled (archive the file)
    # where `serial` came from: sidecar / filename (the source vouches for it: kept), file (an image's name),
    # synthetic (the renderer's truth: the line still reads the printed code), none (a camera frame: no identity)
    serial_origin: str = "synthetic"
    # what a board gate already worked out for this frame under rule set `rules_version` (camera/gate.py)
    registration: Registration | None = None
    code: CodeRead | None = None
    rules_version: str | None = None
    triggered_at: float | None = None  # time.monotonic() of the trigger that took this frame (a triggered camera)
    acquired_at: float = field(default_factory=time.monotonic)  # when the source made this frame
    handoff: object | None = None  # what the machine before the box said of this board (a Hermes BoardAvailable)
    skip_boards: frozenset[int] = frozenset()  # a panel's boards not to inspect: x-outs upstream marked skip or missing
    unit_serials: dict[int, str] = field(default_factory=dict)  # a panel's boards' serials the machine before gave


@dataclass
class SourceCounters:
    frames: int = 0
    unreadable: int = 0
    last_frame_at: float | None = None  # time.monotonic() of the last image delivered (good or not)
    reconnects: int = 0
    last_error: str | None = None
    last_error_at: float | None = None  # time.monotonic() of the last error
    gave_up: str | None = None  # why the source ended for good (a camera out of reconnects)
    errors: list[str] = field(default_factory=list)

    def delivered(self, good: bool = True) -> None:
        self.last_frame_at = time.monotonic()
        if good:
            self.frames += 1
        else:
            self.unreadable += 1

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

    @property
    def origin(self) -> Source:
        """The source that makes the frames: itself, or the camera behind a board gate (camera/gate.py)."""
        return self

    def __iter__(self) -> Iterator[Frame]:
        raise NotImplementedError


class WrappedSource(Source):
    """A source that passes another's frames on, changed or judged (a board gate, a camera's correction, a Hermes
    lane's identities): the name, counters and camera are the inner source's, and stopping stops it too."""

    def __init__(self, inner: Source) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.counters = inner.counters

    @property
    def origin(self) -> Source:
        return self.inner.origin  # through any wrapper between to the camera itself

    def stop(self) -> None:
        super().stop()
        self.inner.stop()


class SyntheticSource(Source):
    """Rendered boards of a rule set, with their true defects (the built-in demo stream), optionally as a
    camera sees them (placement, light, lens, sensor, JPEG: ingest/camera_model.py)."""

    def __init__(self, rules: RuleSet, boards: int, seed: int = 1000, rates: dict[str, float] | None = None,
                 interval_s: float = 0.0, camera: CameraModel | None = None,
                 forced: Callable[[int, np.random.Generator], dict[str, str]] | None = None,
                 glare: Glare | None = None) -> None:
        """`boards` 0 renders boards until `stop`; `interval_s` paces them like a conveyor (one board every
        interval, rendering included); `forced(i, rng)` sets defects of board i by designator (the accuracy
        suite places an exact number of defects); `glare` lights one component type's bodies (ingest/glare.py)."""
        if glare is not None:
            glare.check(rules)
        self.rules, self.boards, self.seed, self.interval_s, self.glare = rules, boards, seed, interval_s, glare
        self.rates = DEFAULT_RATES if rates is None else rates
        self.camera = camera if camera is not None and not camera.is_identity else None
        self.forced = forced
        super().__init__(f"synthetic:{rules.recipe}")

    def __iter__(self) -> Iterator[Frame]:
        rng = np.random.default_rng([self.seed, self.rules.seed])
        start = time.monotonic()
        for i in itertools.count() if self.boards == 0 else range(self.boards):
            if self._stop:
                return
            if self.interval_s:  # a conveyor: board i arrives at start + i x interval, however long rendering took
                time.sleep(max(0.0, start + i * self.interval_s - time.monotonic()))
            forced = self.forced(i, rng) if self.forced else None
            board = render_board(self.rules, f"{self.rules.recipe.upper()}-{self.seed}-{i:05d}", rng, self.rates,
                                 forced)
            image, placement = board.image, None
            if self.glare is not None:
                image = self.glare.apply(image, self.rules, rng)
            if self.camera is not None:
                image, placement = self.camera.view(board.image, rng)
            self.counters.delivered()
            yield Frame(image, board.serial, self.name, board.truth, placement)


def file_id(path: Path, data: bytes, mtime_ns: int) -> str:
    """The inspection id of an image file: the same file (name, time, bytes) is the same inspection."""
    digest = hashlib.sha256(data).hexdigest()
    return str(uuid.uuid5(FILE_IDS, f"{path.name}\0{mtime_ns}\0{digest}"))


def sidecar_of(path: Path) -> Path:
    """The JSON beside an image that may carry its board's serial (`{"serial": "..."}`), from an upstream reader."""
    return path.with_suffix(".json")


def given_serial(path: Path, pattern: re.Pattern[str] | None) -> tuple[str, str]:
    """(serial, origin) of an image file: its sidecar JSON's `serial`, else the file name's `serial` group (or its
    first group) under `pattern`, else the file's name (origin "file": the line reads the board's code if it has
    one). A sidecar that is not JSON with a `serial` string is ignored with no guess made."""
    side = sidecar_of(path)
    if side.is_file():
        try:
            serial = json.loads(side.read_text(encoding="utf-8")).get("serial")
        except (OSError, ValueError, AttributeError):
            serial = None
        if isinstance(serial, str) and serial.strip():
            return serial.strip(), "sidecar"
    if pattern is not None:
        m = pattern.search(path.name)
        if m:
            serial = m.groupdict().get("serial") or (m.group(1) if m.groups() else m.group(0))
            if serial:
                return serial, "filename"
    return path.stem, "file"


def serial_pattern(text: str | None) -> re.Pattern[str] | None:
    """A file-name pattern (a regular expression with a `serial` group, or one group); ValueError when malformed."""
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise ValueError(f"--serial-pattern {text!r} is not a regular expression ({exc}); e.g. "
                         r"'(?P<serial>SN\d+)_' takes SN12345 from SN12345_top.png") from None


def _read_frame(path: Path, counters: SourceCounters, source: str, max_pixels: int,
                pattern: re.Pattern[str] | None = None) -> Frame:
    """A frame of one file; a bad file becomes a frame with the reason, never an exception."""
    try:
        data = path.read_bytes()
        mtime = path.stat().st_mtime_ns
    except OSError as exc:
        data, mtime = b"", 0
        error: str | None = f"{path}: cannot read the file ({exc.strerror})"
        image = None
    else:
        try:
            image, error = read_image(data, path.name, max_pixels), None
        except BadImage as exc:
            image, error = None, f"{path.name}: {exc}"
    fid = file_id(path, data, mtime)
    counters.delivered(error is None)
    if error is not None:
        counters.fail(error)
    serial, origin = given_serial(path, pattern)
    return Frame(image, serial, f"{source}:{path}", inspection_id=fid, error=error, serial_origin=origin)


class FolderSource(Source):
    """Images in a folder in name order; with `watch`, keeps waiting for new ones (a scanner's drop folder).

    Watching, each image is moved into `archive` (a subfolder, default `inspected/`) once its result is
    stored or spooled (`Frame.on_stored`), never before: a kiosk killed at any moment finds every image
    whose result is not safe still in the folder, and inspects it again under the same inspection id.
    """

    def __init__(self, folder: str | Path, watch: bool = False, poll_s: float = 0.5,
                 idle_stop_s: float | None = None, archive: str | None = "inspected",
                 max_pixels: int = DEFAULT_MAX_PIXELS, empty_grace_s: float = 5.0,
                 pattern: re.Pattern[str] | None = None) -> None:
        self.folder = Path(folder)
        self.pattern = pattern
        if not self.folder.is_dir():
            raise FileNotFoundError(f"image folder {self.folder} does not exist; create it or pass another")
        self.watch, self.poll_s, self.idle_stop_s = watch, poll_s, idle_stop_s
        self.max_pixels, self.empty_grace_s = max_pixels, empty_grace_s
        self.archive = self.folder / archive if watch and archive else None
        self._lock = threading.Lock()
        self._pending: set[Path] = set()  # handed to the line; in the folder until their result is safe
        self._sizes: dict[Path, tuple[int, float]] = {}  # watching: last size seen and since when
        self._seen: set[Path] = set()  # watching without an archive: read already (pruned to what is present)
        super().__init__(f"folder:{self.folder}")

    def _listing(self) -> list[Path]:
        try:
            return sorted(p for p in self.folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        except OSError as exc:
            self.counters.fail(f"cannot list {self.folder}: {exc.strerror}")
            return []

    def _ready(self, present: list[Path]) -> list[Path]:
        """New images in name order; watching, only those whose size held still since the last poll (so a
        file the scanner is still writing is not read half-written; an empty one after `empty_grace_s`)."""
        with self._lock:
            busy = self._pending | self._seen
        new = [p for p in present if p not in busy]
        if not self.watch:
            return new
        now, ready = time.monotonic(), []
        keep = set(present)
        self._sizes = {p: v for p, v in self._sizes.items() if p in keep}
        self._seen &= keep
        for path in new:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            last = self._sizes.get(path)
            if last is not None and last[0] == size and (size or now - last[1] >= self.empty_grace_s):
                ready.append(path)
            if last is None or last[0] != size:
                self._sizes[path] = (size, now)
        return ready

    def __iter__(self) -> Iterator[Frame]:
        idle_since = time.monotonic()
        while not self._stop:
            present = self._listing()
            new = self._ready(present)
            for path in new:
                if self._stop:
                    return
                frame = _read_frame(path, self.counters, "folder", self.max_pixels, self.pattern)
                self._sizes.pop(path, None)
                if self.archive is not None:
                    with self._lock:
                        self._pending.add(path)
                    frame.on_stored = functools.partial(self._archive, path)
                elif self.watch:
                    self._seen.add(path)
                yield frame
            if not self.watch:
                return
            if new or self._sizes:  # something arrived or is still arriving
                idle_since = time.monotonic()
            elif self.idle_stop_s is not None and time.monotonic() - idle_since > self.idle_stop_s:
                return
            time.sleep(self.poll_s)

    @property
    def unarchived(self) -> int:
        """Images handed to the line whose results are not stored or spooled yet."""
        with self._lock:
            return len(self._pending)

    def _archive(self, path: Path) -> None:
        """Move an image whose result is safe; on failure it stays (and is not read again this run)."""
        assert self.archive is not None
        try:
            self.archive.mkdir(exist_ok=True)
            side = sidecar_of(path)
            if side.is_file():
                side.replace(self.archive / side.name)
            path.replace(self.archive / path.name)
        except OSError as exc:
            self.counters.fail(f"cannot move {path} to {self.archive}: {exc.strerror}; it stays in the folder")
            return
        with self._lock:
            self._pending.discard(path)


class ReplaySource(Source):
    """A text file listing image paths, one per line (relative to the list), replayed in order."""

    def __init__(self, listing: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS,
                 pattern: re.Pattern[str] | None = None) -> None:
        self.listing = Path(listing)
        self.pattern = pattern
        if not self.listing.is_file():
            raise FileNotFoundError(f"replay list {self.listing} does not exist")
        self.max_pixels = max_pixels
        super().__init__(f"replay:{self.listing}")

    def __iter__(self) -> Iterator[Frame]:
        for line in self.listing.read_text(encoding="utf-8").splitlines():
            if self._stop:
                return
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            path = Path(line.strip())
            path = path if path.is_absolute() else self.listing.parent / path
            frame = _read_frame(path, self.counters, "replay", self.max_pixels, self.pattern)
            frame.inspection_id = str(uuid.uuid4())  # a replay is a deliberate re-inspection: a new one each time
            yield frame
