"""Another photo's light brought to the golden board's: a per-channel gain and offset fitted on the board itself.

Two photos of the same design differ in exposure, white balance and the camera's tone curve long before they differ
in any part, and an expert that compares a crop with the golden board's window sees that difference everywhere.
Once a board is registered its pixels correspond to the golden board's, so the map from one photo's values to the
other's can be fitted on the board's own pixels: most of them (solder mask, copper, silkscreen, parts in place)
show the same thing in both. The fit is between the two photos' quantiles per channel, not pixel to pixel: a pixel
or two of misregistration would bias a pixel-wise gain towards zero, and the quantiles of a board do not move when
a few parts differ, so a missing part or a bridge stays different.

The quantiles are taken of both photos low-passed alike: a camera sharper or blurrier than the golden board's
spreads or squeezes a board's fine detail (silkscreen, edges of lands) and with it the quantiles, which a fit on the
sharp values reads as a change of contrast: a blurrier camera's board came out over-exposed and off-colour (pink
lands where the golden board's are grey), and the presence check no longer saw a missing part. A change of light
(gain and offset) commutes with a blur, so fitting on the low-passed boards finds the same light.
"""
from __future__ import annotations

import cv2
import numpy as np

MIN_GAIN, MAX_GAIN = 0.4, 2.5  # a gain outside this is not the light: the fit is refused and the image kept
SAMPLE = 100_000  # pixels the quantiles are taken over at most (an area-averaged copy: a line's frame costs ms)
LOWPASS_PX = 3.0  # Gaussian sigma, in board pixels, both boards are low-passed by: above a camera's own blur


def light_map(image: np.ndarray, reference: np.ndarray) -> list[tuple[float, float]] | None:
    """Per channel (gain, offset) taking `image`'s values to `reference`'s (same frame and size), or None where
    a channel's fit is not a plausible change of light (the photos show different things)."""
    if image.shape != reference.shape:
        raise ValueError(f"image {image.shape} and reference {reference.shape} differ: register the board first")
    x_all, y_all = _quantiles(image), _reference_quantiles(reference)
    fits = []
    for x, y in zip(x_all, y_all):
        gain, offset = (float(v) for v in np.polyfit(x, y, 1))
        if not MIN_GAIN <= gain <= MAX_GAIN:
            return None
        fits.append((gain, offset))
    return fits


LEVELS = np.linspace(2, 98, 49)  # the percentiles the fit is taken between
_REFERENCE: list = []  # [the golden image, its quantiles]: the same for every board of a line, taken once


def _quantiles(image: np.ndarray) -> np.ndarray:
    """Per channel, the low-passed image's LEVELS percentiles (channels x levels)."""
    small = _lowpassed(image)
    return np.stack([np.percentile(small[..., c], LEVELS) for c in range(small.shape[-1])])


def _reference_quantiles(reference: np.ndarray) -> np.ndarray:
    """The golden board's quantiles, kept while the same image object is handed in (the line's golden image is
    loaded once per rule set): low-passing it again for every board was work the line repeated."""
    if not _REFERENCE or _REFERENCE[0] is not reference:
        _REFERENCE[:] = [reference, _quantiles(reference)]
    return _REFERENCE[1]


def _lowpassed(image: np.ndarray) -> np.ndarray:
    """`image` area-averaged to at most SAMPLE pixels and blurred to LOWPASS_PX board pixels in all."""
    h, w = image.shape[:2]
    step = max(1.0, float(np.sqrt(h * w / SAMPLE)))
    small = image if step == 1.0 else cv2.resize(image, (max(1, round(w / step)), max(1, round(h / step))),
                                                 interpolation=cv2.INTER_AREA)
    sigma = np.sqrt(max(0.0, LOWPASS_PX ** 2 - step ** 2 / 12)) / step  # what the averaging (a box of step) left
    return cv2.GaussianBlur(small, (0, 0), sigma) if sigma >= 0.3 else small


def match_light(image: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, str]:
    """`image` (uint8, registered to `reference`) in `reference`'s light, and a note saying what was done."""
    fits = light_map(image, reference)
    if fits is None:
        return image, "light not matched (the fit was no change of light)"
    out = image.astype(np.float32)
    for c, (gain, offset) in enumerate(fits):
        out[..., c] = out[..., c] * gain + offset
    gains = ", ".join(f"{g:.2f}" for g, _ in fits)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8), f"light matched to the golden board (gains {gains})"
