"""A rule set's own camera settings: what its product needs of the camera (exposure, gain, region, scale), taken at
its changeover.

A board with a dark solder mask needs a longer exposure than a green one; a small board wants a smaller region of
interest and a higher frame rate. A rule set names those under `camera:` in GenICam SFNC names, as the station's
camera settings file does (camera/settings.py, the one place their values are checked), and they travel with its
rule file (a board package carries them). The station's file keeps what belongs to the station: its trigger wiring,
how long a grab waits, the emulator's images; a rule set naming one of those is refused, so a product cannot
rewire the station. The line's set-up (app/camera_changeover.py) applies the station's settings with these over
them before the set's first board, and the station's own again for a set without them.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..camera.settings import CameraSettings, features_said, given_settings
from ..yamlio import Fields

# what a product may ask of the camera; everything else a settings file holds is the station's
RECIPE_KEYS = ("ExposureTime", "Gain", "PixelFormat", "Width", "Height", "OffsetX", "OffsetY", "BinningHorizontal",
               "BinningVertical", "AcquisitionFrameRate", "Scale")
STATION_KEYS = tuple(f.name for f in fields(CameraSettings) if f.name not in RECIPE_KEYS)  # trigger, timeout, images


@dataclass(frozen=True)
class CameraRules:
    """The camera settings a rule set asks for, in the order written (empty: the station's own)."""
    settings: tuple[tuple[str, Any], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.settings)

    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.settings)

    def over(self, station: CameraSettings) -> CameraSettings:
        """The station's settings with this set's over them: what the camera takes while the set is in force."""
        return replace(station, **dict(self.settings))

    def said(self) -> str:
        """`ExposureTime 1200, Gain 3`: for a person."""
        return features_said(self.settings)

    def to_json(self) -> dict[str, Any]:
        return dict(self.settings)


def parse_camera(f: Fields) -> CameraRules:
    """`camera:` of a rule set; ConfigError naming the key and its line for a station's key, an unknown one or a
    value the camera settings refuse."""
    for key in f.data:
        if key in STATION_KEYS:
            raise f.error(key, "is the station's, not a product's (its wiring and timeouts): set it in the kiosk's "
                               "camera settings file (--camera-settings) and leave it out of the rule set")
    f.unknown(RECIPE_KEYS)
    given = given_settings(f)
    return CameraRules(tuple((k, given[k]) for k in f.data if k in given))
