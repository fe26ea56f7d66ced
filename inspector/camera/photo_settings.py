"""A photo from the line's camera that says the settings it was taken with.

A golden photo is the image the experts learn good parts from; a board inspected at another exposure or gain looks
different to them before any part differs. So a photo the product takes through the line's camera (`inspector
camera photos`, camera/photos.py) carries, inside its PNG (an iTXt chunk: it travels with the file, copied or
zipped), the camera's image-making features as read back from the camera (what it ran at, its increments applied),
which camera took it and when. Teaching writes them into the taught rule set's `camera:` (taken at the product's
changeover, app/camera_changeover.py), and `board check` says where a photo was taken at other settings than its
rule set asks. A photo from elsewhere (a phone, another tool) says nothing, and nothing is guessed for it.
"""
from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PIL import Image, PngImagePlugin, UnidentifiedImageError

from ..runtime.diskio import write_atomically
from ..yamlio import ConfigError, Fields
from .settings import IMAGING, features_said, given_settings, sfnc_format

TEXT_KEY = "inspector-camera"  # the PNG iTXt keyword
# what makes the image, in the order a camera takes them: the frame rate does not (it is the station's pace), the
# frames' scale to the recipe's pixels (ours) does
IMAGE_KEYS = (*(k for k in IMAGING if k != "AcquisitionFrameRate"), "Scale")
CLOSE = 0.01  # relative: a camera's increments round what it was asked (an exposure of 805 µs runs at 800)


@dataclass(frozen=True)
class TakenWith:
    """The settings a photo was taken with (IMAGE_KEYS the camera has, in that order), by which camera, when, and
    the camera's correction applied to it (the line's lens and flat field: the photo as the line sees its frames)."""
    settings: tuple[tuple[str, Any], ...]
    camera: tuple[tuple[str, str], ...] = ()  # serial, model, vendor
    taken_at: str = ""  # ISO 8601, UTC
    corrected: str = ""  # camera/correction.py's describe() of what was applied ("": nothing)

    @classmethod
    def now(cls, settings: Mapping[str, Any], camera: Mapping[str, str], corrected: str = "") -> TakenWith:
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        said = {**settings, "PixelFormat": sfnc_format(settings.get("PixelFormat"))}
        return cls(tuple((k, said[k]) for k in IMAGE_KEYS if said.get(k) is not None),
                   tuple((k, str(v)) for k, v in camera.items()), at, corrected)

    def values(self) -> dict[str, Any]:
        return dict(self.settings)

    def by(self) -> str:
        """`camera 40012345 (acA1920-40gc)`: who took it, for a person."""
        cam = dict(self.camera)
        model = f" ({cam['model']})" if cam.get("model") else ""
        return f"camera {cam.get('serial', '?')}{model}"

    def said(self) -> str:
        return features_said(self.settings)

    def told(self) -> str:
        """`taken by camera 40012345 (acA1920) at ExposureTime 800, ..., corrected (...)`: the whole of it."""
        return f"taken by {self.by()} at {self.said()}" + (f", corrected ({self.corrected})" if self.corrected else "")

    def differs(self, asked: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
        """(feature, taken at, asked) for each feature both name where they differ beyond a camera's rounding."""
        return [(k, v, asked[k]) for k, v in self.settings if k in asked and not _same(v, asked[k])]

    def to_json(self) -> dict[str, Any]:
        return {"settings": dict(self.settings), "camera": dict(self.camera), "taken_at": self.taken_at,
                "corrected": self.corrected}

    @classmethod
    def from_json(cls, doc: Any, source: str) -> TakenWith:
        """Checked as a settings file is (camera/settings.py): ConfigError naming the photo and the feature."""
        if not isinstance(doc, dict) or not isinstance(doc.get("settings"), dict):
            raise ConfigError(source, None, f"its {TEXT_KEY} text is not the settings a photo was taken with")
        f = Fields(doc["settings"], source)
        f.unknown(IMAGE_KEYS)
        given = given_settings(f)
        camera = doc.get("camera") or {}
        return cls(tuple((k, given[k]) for k in IMAGE_KEYS if k in given),
                   tuple((str(k), str(v)) for k, v in camera.items()) if isinstance(camera, dict) else (),
                   str(doc.get("taken_at") or ""), str(doc.get("corrected") or ""))


def photo_png(image: np.ndarray, taken: TakenWith | None) -> bytes:
    """`image` (BGR) as a lossless PNG saying `taken` inside it."""
    rgb = Image.fromarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
    info = PngImagePlugin.PngInfo()
    if taken is not None:
        info.add_itxt(TEXT_KEY, json.dumps(taken.to_json(), sort_keys=False))
    buf = io.BytesIO()
    rgb.save(buf, format="PNG", pnginfo=info, compress_level=3)
    return buf.getvalue()


def save_photo(path: Path, image: np.ndarray, taken: TakenWith | None) -> Path:
    """`image` (BGR) as a lossless PNG at `path`, saying `taken` inside it; written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, photo_png(image, taken))
    return path


def taken_with(path: Path) -> TakenWith | None:
    """What `path` says it was taken with; None for a photo that says nothing (not ours, not a PNG, unreadable:
    reading the photo itself says why). ConfigError for a text that is ours and damaged."""
    try:
        with Image.open(path) as im:
            text = im.info.get(TEXT_KEY)  # written before the pixels: read without decoding them
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError):
        return None  # Pillow's size guard on a panel photo of hundreds of megapixels: it says nothing either
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(str(path), None, f"its {TEXT_KEY} text cannot be read ({exc}): take the photo again") \
            from None
    return TakenWith.from_json(doc, str(path))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=CLOSE, abs_tol=1e-9)
    return sfnc_format(a) == sfnc_format(b)
