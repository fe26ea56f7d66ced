"""A camera's newest frame, board or not, held as one value: the live view shows it, a golden photo is taken of it.

One value, replaced whole at each frame, so whoever reads it from another thread (the kiosk's photo route, the
dashboard) never pairs one frame's pixels with another's age or settings.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class LastFrame(NamedTuple):
    image: np.ndarray  # as the camera delivered it (BGR)
    at: float  # time.monotonic() when it came
    exposed: dict[str, Any] | None = None  # the image settings it was taken with (camera/photo_settings.py IMAGE_KEYS)
    unsure: bool = False  # it was under way while exposure or gain changed: what it was exposed with is not known
