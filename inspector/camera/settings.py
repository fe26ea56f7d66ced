"""An industrial camera's settings under GenICam SFNC names, validated once, with the line of every error.

A controls engineer reads `ExposureTime: 800` (µs), `Gain: 6` (dB), `PixelFormat: BayerRG8`,
`TriggerMode: On`, `TriggerSource: Line1` here exactly as in the vendor's viewer. Three keys are ours, not the
camera's: `FrameTimeoutMs` (how long a grab waits for a frame), `Scale` (frame pixels per recipe pixel, when
the camera's view is not at the recipe's resolution: frames are mapped by it, not refused) and
`ImageFilename` (the camera emulator's image folder, for tests and demos). The settings file is YAML:
`inspector run --source genicam:SERIAL --camera-settings camera.yaml`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..yamlio import ConfigError, Fields, load_yaml

PIXEL_FORMATS = ("Mono8", "BayerRG8", "BayerGR8", "BayerGB8", "BayerBG8", "BGR8", "RGB8", "BGR8Packed", "RGB8Packed")
# a format's SFNC name and the older spelling some cameras have instead (GigE Vision ones, pylon's emulator)
PACKED = {"BGR8": "BGR8Packed", "RGB8": "RGB8Packed"}
TRIGGER_SOURCES = ("Software", "Line1", "Line2", "Line3")
TRIGGER_ACTIVATIONS = ("RisingEdge", "FallingEdge", "AnyEdge", "LevelHigh", "LevelLow")
ON_OFF = ("On", "Off")
# the features that make the image, in the order a camera takes them (format before size, size before offset)
IMAGING = ("PixelFormat", "BinningHorizontal", "BinningVertical", "Width", "Height", "OffsetX", "OffsetY",
           "ExposureTime", "Gain", "AcquisitionFrameRate")
TRIGGER = ("TriggerSelector", "TriggerMode", "TriggerSource", "TriggerActivation")
REGION = ("Width", "Height", "OffsetX", "OffsetY")


@dataclass(frozen=True)
class CameraSettings:
    """None: leave the camera's own value (what its user set saved)."""

    ExposureTime: float | None = None  # µs
    Gain: float | None = None  # dB
    PixelFormat: str | None = None
    Width: int | None = None
    Height: int | None = None
    OffsetX: int | None = None
    OffsetY: int | None = None
    BinningHorizontal: int | None = None
    BinningVertical: int | None = None
    AcquisitionFrameRate: float | None = None  # frames/s when free running
    TriggerSelector: str = "FrameStart"
    TriggerMode: str = "Off"  # On: one frame per trigger (a board-present pulse on Line1, or Software)
    TriggerSource: str = "Software"
    TriggerActivation: str | None = None
    FrameTimeoutMs: int = 5000  # ours: a grab that waits longer is no frame (free running: the camera is lost)
    Scale: float = 1.0  # ours: frame px per recipe px
    ImageFilename: str | None = None  # ours: the emulator's folder of test images

    @property
    def triggered(self) -> bool:
        return self.TriggerMode == "On"

    @property
    def software_trigger(self) -> bool:
        return self.triggered and self.TriggerSource == "Software"

    def camera_features(self, fill: Mapping[str, Any] | None = None) -> list[tuple[str, Any]]:
        """(SFNC feature, value) in the order a camera takes them (size before offset, format before size); a
        feature left None takes its value from `fill` where that has one (the camera's own, to go back to)."""
        fill = fill or {}
        values = ((name, getattr(self, name) if getattr(self, name) is not None else fill.get(name))
                  for name in (*IMAGING, *TRIGGER))
        return [(name, value) for name, value in values if value is not None]

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def sfnc_format(value: Any) -> Any:
    """A pixel format by its SFNC name (BGR8Packed, as some cameras read it back, is BGR8)."""
    return next((name for name, older in PACKED.items() if value == older), value)


def other_spelling(value: Any) -> Any:
    """The same pixel format as the other spelling names it (BGR8 <-> BGR8Packed); others as they are."""
    return PACKED.get(value, sfnc_format(value))


def features_said(pairs: Iterable[tuple[str, Any]]) -> str:
    """`ExposureTime 1200, Gain 3`: settings for a person."""
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in pairs)


def parse_settings(data: dict[str, Any], source: str) -> CameraSettings:
    """Settings from a mapping (a YAML document, the dashboard's form); ConfigError naming the key otherwise."""
    f = Fields(data, source)
    f.unknown({x.name for x in fields(CameraSettings)})
    return CameraSettings(**given_settings(f))


def given_settings(f: Fields) -> dict[str, Any]:
    """The settings `f` names, each checked (ConfigError naming the key and its line), the others left out: a
    settings file's, or a rule set's `camera:` (routing/camera.py)."""
    data = f.data
    out: dict[str, Any] = {}
    for name, minimum in (("ExposureTime", 1.0), ("Gain", 0.0), ("AcquisitionFrameRate", 0.1), ("Scale", 0.05)):
        if f.has(name):
            out[name] = float(f.number(name, minimum=minimum))
    for name, minimum in (("Width", 16), ("Height", 16), ("OffsetX", 0), ("OffsetY", 0), ("BinningHorizontal", 1),
                          ("BinningVertical", 1), ("FrameTimeoutMs", 10)):
        if f.has(name):
            out[name] = f.number(name, minimum=minimum, integer=True)
    for name, choices in (("PixelFormat", PIXEL_FORMATS), ("TriggerMode", ON_OFF), ("TriggerSource", TRIGGER_SOURCES),
                          ("TriggerActivation", TRIGGER_ACTIVATIONS), ("TriggerSelector", ("FrameStart",))):
        if f.has(name):
            value = data[name]
            value = {True: "On", False: "Off"}.get(value, value) if name == "TriggerMode" else value  # YAML's On
            if value not in choices:
                raise f.error(name, f"must be one of {', '.join(choices)}, got {value!r}")
            out[name] = value
    if f.has("ImageFilename"):
        out["ImageFilename"] = f.text("ImageFilename")
    return out


def load_settings(path: str | Path) -> CameraSettings:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), None, f"cannot read the camera settings: {exc}") from None
    data = load_yaml(text, str(path)) or {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), None, "camera settings must be a mapping of SFNC feature names to values")
    return parse_settings(data, str(path))
