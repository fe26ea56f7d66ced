"""Another photo's light brought to the golden board's: a per-channel gain and offset fitted on the board itself.

Two photos of the same design differ in exposure, white balance and the camera's tone curve long before they differ
in any part, and an expert that compares a crop with the golden board's window sees that difference everywhere.
Once a board is registered its pixels correspond to the golden board's, so the map from one photo's values to the
other's can be fitted on the board's own pixels: most of them (solder mask, copper, silkscreen, parts in place)
show the same thing in both. Pixels that differ for a reason (a missing part, a bridge, a marking) are outliers of
that fit, so it is fitted robustly (least squares, then again without the pixels it explains worst) and the parts
that differ stay different.
"""
from __future__ import annotations

import numpy as np

KEEP_SHARE = 0.7  # of the pixels the second fit keeps (those the first explains best)
MIN_GAIN, MAX_GAIN = 0.4, 2.5  # a gain outside this is not the light: the fit is refused and the image kept
SAMPLE = 200_000  # pixels the fit samples at most


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    a = np.vstack([x, np.ones_like(x)]).T
    (gain, offset), *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(gain), float(offset)


def light_map(image: np.ndarray, reference: np.ndarray) -> list[tuple[float, float]] | None:
    """Per channel (gain, offset) taking `image`'s values to `reference`'s (same frame and size), or None where
    a channel's fit is not a plausible change of light (the photos show different things)."""
    if image.shape != reference.shape:
        raise ValueError(f"image {image.shape} and reference {reference.shape} differ: register the board first")
    levels = np.linspace(2, 98, 49)
    fits = []
    for c in range(image.shape[-1]):
        x = np.percentile(image[..., c], levels)
        y = np.percentile(reference[..., c], levels)
        gain, offset = _fit(x, y)
        if not MIN_GAIN <= gain <= MAX_GAIN:
            return None
        fits.append((gain, offset))
    return fits


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
