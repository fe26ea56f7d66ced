"""Another photo's light brought to the golden board's: a per-channel gain and offset fitted on the board itself.

Two photos of the same design differ in exposure, white balance and the camera's tone curve long before they differ
in any part, and an expert that compares a crop with the golden board's window sees that difference everywhere.
Once a board is registered its pixels correspond to the golden board's, so the map from one photo's values to the
other's can be fitted on the board's own pixels: most of them (solder mask, copper, silkscreen, parts in place)
show the same thing in both. The fit is between the two photos' quantiles per channel, not pixel to pixel: a pixel
or two of misregistration would bias a pixel-wise gain towards zero.

The quantiles are those of the pixels where the two boards agree. Taken over the whole board, they moved with what
the board carries: a board with half its parts missing was brought to a light 15 grey levels off at mid-grey, a bare
one 30 (the red channel: its empty lands pink), where a good board's was within 1 (a drawn board of known light,
tests/test_board_light.py), and the presence check then saw colour where parts had gone. So the fit is taken again
over the pixels that the first fit brings within a few noise levels of the golden board's (the same pixels of both
boards: their quantiles still correspond), three times: a missing part, a bridge or another make stays out of it
and stays different, and the board's light is fitted on everything else (within 2 grey levels, good, half or bare).
A fit over only the board outside the parts' windows was tried and was worse (up to 17 grey levels off): the bare
mask between parts spans too few values to tell a gain from an offset.

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
AGREE_ROUNDS = 3  # fits again over the pixels the last fit brought close
AGREE_SIGMAS = 3.0  # a pixel agrees when its worst channel is within this many robust sigmas of the golden board's,
AGREE_FLOOR = 6.0  # or within this many grey levels (a board that agrees almost everywhere: its noise)
MIN_AGREEING = 0.3  # with fewer of the board's pixels agreeing the photos show different things: no fit


def light_map(image: np.ndarray, reference: np.ndarray) -> list[tuple[float, float]] | None:
    """Per channel (gain, offset) taking `image`'s values to `reference`'s (same frame and size), or None where
    a channel's fit is not a plausible change of light (the photos show different things)."""
    if image.shape != reference.shape:
        raise ValueError(f"image {image.shape} and reference {reference.shape} differ: register the board first")
    x = _pixels(image)
    y = _reference_pixels(reference)
    fits = _quantile_fit(x, y)
    for _ in range(AGREE_ROUNDS):
        if fits is None:
            return None
        worst = _worst_distance(x, y, fits)
        agree = worst < max(AGREE_SIGMAS * 1.4826 * float(_percentiles(worst, 50.0)), AGREE_FLOOR)
        if agree.mean() < MIN_AGREEING:
            return None
        fits = _quantile_fit(np.compress(agree, x, axis=1), np.compress(agree, y, axis=1))  # 5x a mask index
    return fits


LEVELS = np.linspace(2, 98, 49)  # the percentiles the fit is taken between
_REFERENCE: list = []  # [the golden image, its low-passed pixels]: the same for every board of a line, taken once


def _quantile_fit(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float]] | None:
    """Per channel, the line through the two pixel sets' (channels x pixels) LEVELS percentiles, or None where a
    gain is not a plausible change of light."""
    fits = []
    for xc, yc in zip(x, y):
        gain, offset = (float(v) for v in np.polyfit(_percentiles(xc), _percentiles(yc), 1))
        if not MIN_GAIN <= gain <= MAX_GAIN:
            return None
        fits.append((gain, offset))
    return fits


def _worst_distance(x: np.ndarray, y: np.ndarray, fits: list[tuple[float, float]]) -> np.ndarray:
    """Per pixel, how far its worst channel lands from the golden board's once mapped by `fits` (uint8: whole grey
    levels, through a lookup table: the agreement is redrawn three times a board)."""
    worst = np.zeros(x.shape[1], np.uint8)
    for xc, yc, fit in zip(x, y, fits):
        worst = np.maximum(worst, cv2.absdiff(cv2.LUT(xc, _table(*fit)), yc).reshape(-1))
    return worst


def _table(gain: float, offset: float) -> np.ndarray:
    """A channel's gain and offset as a 256-entry lookup table, rounded and clipped to uint8."""
    return np.clip(np.arange(256) * gain + offset + 0.5, 0, 255).astype(np.uint8)


def _percentiles(values: np.ndarray, levels: np.ndarray | float = LEVELS) -> np.ndarray:
    """np.percentile(values, levels) of uint8 values, read off their histogram: the fit takes them four times a board,
    and sorting 100,000 pixels each time made it ten times slower."""
    cdf = np.cumsum(np.bincount(values, minlength=256))
    h = (len(values) - 1) * np.asarray(levels, np.float64) / 100.0
    lo = np.floor(h).astype(np.int64)
    below = np.searchsorted(cdf, lo, side="right")
    above = np.searchsorted(cdf, np.minimum(lo + 1, len(values) - 1), side="right")
    return below + (h - lo) * (above - below)


def _pixels(image: np.ndarray) -> np.ndarray:
    """The low-passed image's pixels (channels x pixels, uint8: each channel's contiguous)."""
    small = _lowpassed(image)
    return np.ascontiguousarray(small.reshape(-1, small.shape[-1]).T)


def _reference_pixels(reference: np.ndarray) -> np.ndarray:
    """The golden board's low-passed pixels, kept while the same image object is handed in (the line's golden image
    is loaded once per rule set): low-passing it again for every board was work the line repeated."""
    if not _REFERENCE or _REFERENCE[0] is not reference:
        _REFERENCE[:] = [reference, _pixels(reference)]
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
    tables = np.stack([_table(*fit) for fit in fits], axis=1)[:, None, :]  # 256 x 1 x channels: one per channel
    gains = ", ".join(f"{g:.2f}" for g, _ in fits)
    return cv2.LUT(image, tables), f"light matched to the golden board (gains {gains})"
