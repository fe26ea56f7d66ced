"""Another photo's light brought to the golden board's: a per-channel gain and offset fitted on the board itself.

Two photos of the same design differ in exposure, white balance and the camera's tone curve long before they differ
in any part, and an expert that compares a crop with the golden board's window sees that difference everywhere.
Once a board is registered its pixels correspond to the golden board's, so the map from one photo's values to the
other's can be fitted on the board's own pixels: most of them (solder mask, copper, silkscreen, parts in place)
show the same thing in both. The fit is between the two photos' quantiles per channel, not pixel to pixel: a pixel
or two of misregistration would bias a pixel-wise gain towards zero, and the quantiles of a board do not move when
a few parts differ, so a missing part or a bridge stays different.
"""
from __future__ import annotations

import numpy as np

MIN_GAIN, MAX_GAIN = 0.4, 2.5  # a gain outside this is not the light: the fit is refused and the image kept
SAMPLE = 100_000  # pixels the quantiles are taken over at most (a regular grid of them: a line's frame costs ms)


def light_map(image: np.ndarray, reference: np.ndarray) -> list[tuple[float, float]] | None:
    """Per channel (gain, offset) taking `image`'s values to `reference`'s (same frame and size), or None where
    a channel's fit is not a plausible change of light (the photos show different things)."""
    if image.shape != reference.shape:
        raise ValueError(f"image {image.shape} and reference {reference.shape} differ: register the board first")
    step = max(1, int(np.ceil(np.sqrt(image.shape[0] * image.shape[1] / SAMPLE))))
    image, reference = image[::step, ::step], reference[::step, ::step]
    levels = np.linspace(2, 98, 49)
    fits = []
    for c in range(image.shape[-1]):
        x = np.percentile(image[..., c], levels)
        y = np.percentile(reference[..., c], levels)
        gain, offset = (float(v) for v in np.polyfit(x, y, 1))
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
