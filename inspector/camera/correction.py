"""A camera's correction file and the source that applies it: lens undistortion, then flat field, per frame.

One JSON file per camera holds what `inspector camera calibrate` measured (the
lens) and what `inspector camera reference` measured (white balance and flat
field); either may be absent. Frames pass through `CorrectedSource` before the
board gate and the line, so registration, the serial's code and every crop see
the corrected frame. The latest frame's exposure advice is kept for /camera.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..ingest.sources import Frame, Source, WrappedSource
from ..runtime.diskio import write_atomically
from .flatfield import FlatField, exposure_advice
from .lens import LensCalibration

FORMAT = 1


@dataclass
class CameraCorrection:
    lens: LensCalibration | None = None
    flat: FlatField | None = None

    def apply(self, image: np.ndarray) -> np.ndarray:
        if self.lens is not None:
            image = self.lens.undistort(image)
        if self.flat is not None:
            image = self.flat.apply(image)
        return image

    def describe(self) -> str:
        parts = []
        if self.lens is not None:
            k1 = self.lens.distortion[0]
            parts.append(f"lens k1 {k1:+.4f} ({self.lens.views} views, {self.lens.rms_px:.2f} px rms)")
        if self.flat is not None:
            parts.append(f"flat field at level {self.flat.level:.0f}")
        return ", ".join(parts) or "none"

    def save(self, path: Path) -> None:
        doc = {"format": FORMAT, "lens": self.lens.to_json() if self.lens else None,
               "flat_field": self.flat.to_json() if self.flat else None}
        write_atomically(Path(path), json.dumps(doc, indent=1).encode("utf-8"))

    @classmethod
    def load(cls, path: Path | str) -> CameraCorrection:
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"{path}: no camera correction file; make one with `inspector camera calibrate` and/or "
                             "`inspector camera reference`") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a camera correction file (bad JSON at line {exc.lineno}); make it again "
                             "with `inspector camera calibrate`") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"{path}: not a camera correction file of format {FORMAT}; make it again with "
                             "`inspector camera calibrate`")
        try:
            return cls(LensCalibration.from_json(doc["lens"]) if doc.get("lens") else None,
                       FlatField.from_json(doc["flat_field"]) if doc.get("flat_field") else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def load_or_new(cls, path: Path) -> CameraCorrection:
        return cls.load(path) if Path(path).exists() else cls()


class CorrectedSource(WrappedSource):
    """A camera's frames corrected (lens, light) before anything looks at them."""

    def __init__(self, inner: Source, correction: CameraCorrection) -> None:
        super().__init__(inner)
        self.correction = correction
        self.exposure: str | None = None  # the latest frame's exposure advice (None: fine)

    def __iter__(self) -> Iterator[Frame]:
        for frame in self.inner:
            if frame.image is not None and frame.error is None:
                self.exposure = exposure_advice(frame.image)
                try:
                    frame.image = self.correction.apply(frame.image)
                except ValueError as exc:  # a frame of another size: the line refuses it with the reason
                    frame.error = f"camera correction: {exc}"
            yield frame
            if self._stop:
                return


def correction_in(source: Source) -> CameraCorrection | None:
    """The correction a source's frames pass through (a CorrectedSource anywhere among its wrappers), or None."""
    while True:
        if isinstance(source, CorrectedSource):
            return source.correction
        inner = getattr(source, "inner", None)
        if inner is None:
            return None
        source = inner
