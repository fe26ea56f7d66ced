"""Photos of boards taken through the line's own camera, each saying the settings it was taken with.

Golden photos from the line's camera teach what the line will see: its lens, its light, its exposure. `inspector
camera photos` opens the camera with the station's settings (and a rule set's `camera:` over them: the product's
exposure), takes each photo as the line would take a board (a software trigger fired, a board passing a triggered
camera's sensor, or a free-running camera's next frame after the ask), and writes lossless PNGs that carry the
settings read back from the camera (camera/photo_settings.py). Numbering goes on after the photos already in the
folder: a second round adds, it never overwrites. Where a kiosk's line holds the camera, the photos are its newest
frames asked of the kiosk (GET /camera/photo), each one taken after it was asked for.
"""
from __future__ import annotations

import base64
import queue
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..ingest.sources import Frame
from ..runtime.diskio import write_atomically
from .correction import CameraCorrection, correction_in
from .last_frame import LastFrame
from .photo_settings import TakenWith, save_photo
from .settings import features_said

if TYPE_CHECKING:  # pypylon's transport layers are loaded by whoever opens a camera, not by a kiosk's photo route
    from .genicam import GenICamSource

OPEN_S = 30.0  # how long the camera may take to open before the photos are given up
KIOSK_POLL_S = 0.2  # how often a kiosk is asked for its camera's newest frame while a photo waits for one


def take_photos(source: GenICamSource, count: int, out: Path, name: str = "golden", timeout: float = 30.0,
                ask: Callable[[int], None] | None = None, say: Callable[[str], None] = lambda _m: None,
                correction: CameraCorrection | None = None) -> list[Path]:
    """`count` photos from `source` written to `out` as NAME-NN.png, each through the line's `correction` where it
    has one (the photo as the line sees its frames); `ask(i)` (given) is called before photo i and returns when the
    board is in place. RuntimeError naming the camera's trouble when it gives no photo in time."""
    _check(count, name)
    out.mkdir(parents=True, exist_ok=True)
    frames: queue.Queue[tuple[Frame, tuple[int, int]]] = queue.Queue(maxsize=4)
    grabbing = threading.Thread(target=_grab, args=(source, frames), name="camera-photos", daemon=True)
    grabbing.start()
    written: list[Path] = []
    try:
        _wait_open(source, grabbing)
        taken = TakenWith.now(source.image_settings(), source.info, _described(correction))
        say(f"{taken.by()} at {taken.said()}" + (f", corrected: {taken.corrected}" if taken.corrected else ""))
        for i in range(count):
            if ask is not None:
                ask(i)
            frame = _fresh(source, frames, grabbing, timeout)
            image = frame.image if correction is None else correction.apply(frame.image)
            path = save_photo(next_photo(out, name), image, taken)
            written.append(path)
            say(f"{path} ({frame.image.shape[1]}x{frame.image.shape[0]})")
    finally:
        source.stop()
        grabbing.join(10)
    return written


def photos_from_kiosk(newest: Callable[[], dict[str, Any]], count: int, out: Path, name: str = "golden",
                      timeout: float = 30.0, ask: Callable[[int], None] | None = None,
                      say: Callable[[str], None] = lambda _m: None) -> list[Path]:
    """`count` photos from the camera a kiosk's line holds (`newest()`: its GET /camera/photo answer), each the
    first frame it took after the photo was asked for (after `ask(i)` returned, or after the photo before): a
    triggered camera's next board, a free-running camera's next frame. RuntimeError saying why when none comes."""
    _check(count, name)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for i in range(count):
        if ask is not None:
            ask(i)
        asked = time.monotonic()
        doc = _taken_after(newest, asked, timeout)
        path = next_photo(out, name)
        write_atomically(path, base64.b64decode(doc["png_base64"]))
        written.append(path)
        taken = doc.get("taken_with")
        said = "" if not taken else " at " + features_said(taken["settings"].items())
        say(f"{path} ({doc['width']}x{doc['height']}){said}")
    return written


def _taken_after(newest: Callable[[], dict[str, Any]], asked: float, timeout: float) -> dict[str, Any]:
    deadline = asked + timeout
    while True:
        doc = newest()
        age = doc.get("age_s")
        fresh = "png_base64" in doc and age is not None and age <= time.monotonic() - asked
        if fresh and not doc.get("settings_unsure"):
            return doc
        if time.monotonic() > deadline:
            if fresh:
                raise RuntimeError(f"{UNSURE}; no frame after it came within {timeout:g} s of the ask: ask again "
                                   "once the camera has taken the next")
            why = f" ({doc['error']})" if doc.get("error") else ""
            raise RuntimeError(f"the kiosk's camera took no frame within {timeout:g} s of the ask{why}: a triggered "
                               "camera takes one when a board passes its sensor or the PLC triggers it")
        time.sleep(KIOSK_POLL_S)


class NewestPhoto(NamedTuple):
    """A running line's camera's newest frame as a golden photo."""
    image: np.ndarray  # through the correction the line applies to its frames
    taken: TakenWith | None  # what it was exposed with, where the camera says (None: a camera that reads none back)
    age: float  # seconds since it came
    unsure: bool  # it was under way while exposure or gain changed (a changeover): its settings are not known


def newest_photo(source: Any) -> NewestPhoto | None:
    """A running line's camera's newest frame (board or not) as a golden photo, saying the settings the camera
    exposed it with (not the ones it runs at now: a frame from before a changeover says the old product's); None
    before the first frame."""
    camera = getattr(source, "origin", None)
    last: LastFrame | None = getattr(camera, "last", None)
    if last is None:
        return None
    correction = correction_in(source)
    taken = None if last.exposed is None else TakenWith.now(last.exposed, camera.info, _described(correction))
    image = last.image if correction is None else correction.apply(last.image)
    return NewestPhoto(image, taken, time.monotonic() - last.at, last.unsure)


UNSURE = ("the newest frame was under way while the camera's exposure or gain changed (a changeover), so what it "
          "was exposed with is not known")
RETAKE = f"{UNSURE}: take the photo again once the camera has taken its next frame"  # a dashboard's refusal


def newest_frame(camera: Any) -> tuple[np.ndarray, float] | None:
    """A camera's newest frame as it delivered it, board or not, and its age in seconds; None before the first."""
    last: LastFrame | None = getattr(camera, "last", None)
    return None if last is None else (last.image, time.monotonic() - last.at)


def _described(correction: CameraCorrection | None) -> str:
    said = correction.describe() if correction is not None else "none"
    return "" if said == "none" else said


def next_photo(out: Path, name: str) -> Path:
    """NAME-NN.png in `out`, one past the highest there (01 in an empty folder)."""
    return out / f"{name}-{_next_number(out, name):02d}.png"


def _check(count: int, name: str) -> None:
    if count < 1:
        raise ValueError(f"photos to take must be 1 or more, got {count}")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ValueError(f"photo name {name!r}: letters, digits, '.', '_' and '-' only")


def _grab(source: GenICamSource, frames: queue.Queue[tuple[Frame, tuple[int, int]]]) -> None:
    """The camera's frames with their (open, number), the newest kept (an old one dropped for it): a photo is never
    of a board gone by."""
    for frame in source:
        numbered = (frame, source.newest())  # the frame loop waits at this frame meanwhile: its own number
        while True:
            try:
                frames.put_nowait(numbered)
                break
            except queue.Full:
                try:
                    frames.get_nowait()
                except queue.Empty:
                    pass


def _wait_open(source: GenICamSource, grabbing: threading.Thread) -> None:
    deadline = time.monotonic() + OPEN_S
    while source.camera is None:
        if not grabbing.is_alive() or time.monotonic() > deadline:
            why = source.counters.last_error or f"camera {source.device} not open within {OPEN_S:g} s"
            raise RuntimeError(f"{why}. Where a kiosk's line holds it, take the photos through the kiosk "
                               "(`inspector camera photos --kiosk URL`, the dashboard's New board tab) or stop its "
                               "line first")
        time.sleep(0.02)


def _fresh(source: GenICamSource, frames: queue.Queue[tuple[Frame, tuple[int, int]]], grabbing: threading.Thread,
           timeout: float) -> Frame:
    """The first frame exposed after now: a software trigger fired for it, a triggered camera's next board, or (free
    running) the first frame numbered past those that may be under way now (pylon's queue, the one being read out,
    the one being exposed: GenICamSource.under_way)."""
    _drain(frames)
    settings = source.settings
    after = None if settings.triggered else source.under_way()
    if settings.software_trigger and source.trigger() is None:
        why = source.counters.last_error or "not ready"
        raise RuntimeError(f"camera {source.device} took no software trigger: {why}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            frame, (opened, number) = frames.get(timeout=0.1)
        except queue.Empty:
            if not grabbing.is_alive():
                raise RuntimeError(f"camera {source.device}: "
                                   f"{source.counters.gave_up or source.counters.last_error or 'stopped'}") from None
            if time.monotonic() > deadline:
                wait = (f"triggered by {settings.TriggerSource}: no board passed its sensor" if settings.triggered
                        and not settings.software_trigger else "no frame came")
                raise RuntimeError(f"camera {source.device}: {wait} within {timeout:g} s") from None
            continue
        if after is not None and opened == after[0] and number <= after[1]:
            continue  # under way when the photo was asked for (a camera reopened since numbers its frames anew)
        return frame


def _drain(frames: queue.Queue[tuple[Frame, tuple[int, int]]]) -> None:
    while True:
        try:
            frames.get_nowait()
        except queue.Empty:
            return


def _next_number(out: Path, name: str) -> int:
    """One past the highest NAME-NN.png in `out` (1 in an empty folder)."""
    numbers = [int(m.group(1)) for p in out.glob(f"{name}-*.png")
               if (m := re.fullmatch(re.escape(name) + r"-(\d+)\.png", p.name))]
    return max(numbers, default=0) + 1
