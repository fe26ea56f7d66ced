"""Defects made from a golden board's own crops, so one good board can teach what a bad one looks like.

Each defect is cut from the real crop, in the photo's own colours, never drawn from nothing: `missing` is the
window emptied to the board's colour (the crop's rim: solder mask as this camera sees it) with the part's own
pads (CAD geometry) laid on it in the brightest metal the crop shows; `shifted`, `rotated`, `tombstone` and
`reversed` move the part's real body over that empty window; `bridge` lays a band of the crop's own solder
between two neighbouring pads, over the board (beside a two-terminal part's body, not across it). A crop is in
the part's own orientation (the line undoes its rotation), its window inside a margin of board.

`reversed` is made only for polarised types (a chip resistor turned round looks the same: a made label would be
wrong); `bridge` only where a part has two pads or more.
"""
from __future__ import annotations

import cv2
import numpy as np

from .geometry import PxRect, rect_mask

KINDS = ("missing", "shifted", "rotated", "tombstone", "reversed", "bridge")


def _interior(crop: np.ndarray, margin: int) -> tuple[int, int, int, int]:
    h, w = crop.shape[:2]
    m = max(0, min(margin, (min(h, w) - 2) // 2))
    return m, m, w - m, h - m


def board_colour(crop: np.ndarray, margin: int) -> tuple[np.ndarray, float]:
    """(median colour of the crop's rim, its spread): the bare board round the part as this photo shows it."""
    x0, y0, x1, y1 = _interior(crop, max(2, margin))
    rim = np.concatenate([crop[:y0].reshape(-1, 3), crop[y1:].reshape(-1, 3),
                          crop[y0:y1, :x0].reshape(-1, 3), crop[y0:y1, x1:].reshape(-1, 3)])
    if len(rim) == 0:
        rim = crop.reshape(-1, 3)
    return np.median(rim, axis=0), float(np.std(rim.astype(np.float32)))


def metal_colour(crop: np.ndarray, pads: list[PxRect]) -> np.ndarray:
    """The brightest tenth of the pads' pixels (tinned copper, solder), or of the crop where no pad shows."""
    mask = rect_mask(crop.shape[:2], pads)
    pixels = crop[mask > 0] if mask.any() else crop.reshape(-1, 3)
    grey = pixels.astype(np.float32).mean(axis=1)
    return np.median(pixels[grey >= np.quantile(grey, 0.9)], axis=0)


def ends_as_pads(crop: np.ndarray, margin: int) -> list[PxRect]:
    """Two pads at the ends of the window's longer side: where a part without CAD pads has its joints."""
    x0, y0, x1, y1 = _interior(crop, margin)
    if x1 - x0 >= y1 - y0:
        d = max(1, (x1 - x0) // 4)
        return [(x0, y0, x0 + d, y1), (x1 - d, y0, x1, y1)]
    d = max(1, (y1 - y0) // 4)
    return [(x0, y0, x1, y0 + d), (x0, y1 - d, x1, y1)]


def missing(crop: np.ndarray, pads: list[PxRect], margin: int, rng: np.random.Generator) -> np.ndarray:
    """The window emptied to bare board, the part's pads left bare in the crop's own metal."""
    colour, spread = board_colour(crop, margin)
    out = crop.copy()
    x0, y0, x1, y1 = _interior(crop, margin)
    noise = rng.normal(0, max(1.0, spread / 3), (y1 - y0, x1 - x0, 1))
    out[y0:y1, x0:x1] = np.clip(colour + noise, 0, 255).astype(np.uint8)
    mask = rect_mask(crop.shape[:2], pads)
    out[mask > 0] = np.clip(metal_colour(crop, pads) * rng.uniform(0.85, 1.05), 0, 255).astype(np.uint8)
    return cv2.GaussianBlur(out, (3, 3), 0.6)


def _paste(base: np.ndarray, body: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """`body` (the window's pixels) warped by the 2x3 `matrix` onto `base`, where it lands."""
    h, w = base.shape[:2]
    moved = cv2.warpAffine(body, matrix, (w, h), flags=cv2.INTER_LINEAR)
    mask = cv2.warpAffine(np.full(body.shape[:2], 255, np.uint8), matrix, (w, h), flags=cv2.INTER_NEAREST)
    out = base.copy()
    out[mask > 0] = moved[mask > 0]
    return out


def shifted(crop: np.ndarray, pads: list[PxRect], margin: int, rng: np.random.Generator) -> np.ndarray:
    x0, y0, x1, y1 = _interior(crop, margin)
    angle = rng.uniform(0, 2 * np.pi)
    step = rng.uniform(0.2, 0.4) * min(x1 - x0, y1 - y0) + 1.5
    m = np.float32([[1, 0, x0 + step * np.cos(angle)], [0, 1, y0 + step * np.sin(angle)]])
    return _paste(missing(crop, pads, margin, rng), crop[y0:y1, x0:x1], m)


def rotated(crop: np.ndarray, pads: list[PxRect], margin: int, rng: np.random.Generator) -> np.ndarray:
    x0, y0, x1, y1 = _interior(crop, margin)
    angle = rng.choice([-1, 1]) * rng.uniform(12, 30)
    centre = ((x1 - x0) / 2, (y1 - y0) / 2)
    m = cv2.getRotationMatrix2D(centre, angle, 1.0)
    m[:, 2] += (x0, y0)
    return _paste(missing(crop, pads, margin, rng), crop[y0:y1, x0:x1], m)


def tombstone(crop: np.ndarray, pads: list[PxRect], margin: int, rng: np.random.Generator) -> np.ndarray:
    """One end lifted: seen from above the body shortens towards the joint it still stands on."""
    x0, y0, x1, y1 = _interior(crop, margin)
    body = crop[y0:y1, x0:x1]
    k = rng.uniform(0.35, 0.6)
    far = rng.random() < 0.5
    if x1 - x0 >= y1 - y0:
        m = np.float32([[k, 0, x0 + (1 - k) * (x1 - x0) * far], [0, 1, y0]])
    else:
        m = np.float32([[1, 0, x0], [0, k, y0 + (1 - k) * (y1 - y0) * far]])
    return _paste(missing(crop, pads, margin, rng), body, m)


def reversed_(crop: np.ndarray, pads: list[PxRect], margin: int, rng: np.random.Generator) -> np.ndarray:
    """The body turned round on its own pads: its polarity mark at the other end."""
    x0, y0, x1, y1 = _interior(crop, margin)
    out = crop.copy()
    out[y0:y1, x0:x1] = np.ascontiguousarray(np.rot90(crop[y0:y1, x0:x1], 2))
    return out


def bridge(crop: np.ndarray, pads: list[PxRect], margin: int, rng: np.random.Generator) -> np.ndarray | None:
    """A band of the crop's own solder joining two neighbouring pads (None: fewer than two pads).

    Solder bridges over the board, never over a body: between two pins of a row the straight band crosses bare
    board, but a two-terminal part's body lies between its two lands, so its band runs along one of the lands'
    outer edges (solder beside the body shorting its ends), where a straight one would paint the body's top."""
    if len(pads) < 2:
        return None
    centres = np.array([((a + c) / 2, (b + d) / 2) for a, b, c, d in pads])
    i = int(rng.integers(len(pads)))
    dist = np.hypot(*(centres - centres[i]).T)
    dist[i] = np.inf
    j = int(np.argmin(dist))
    sizes = [min(c - a, d - b) for a, b, c, d in (pads[i], pads[j])]
    width = max(2, round(rng.uniform(0.4, 0.8) * min(sizes)))
    p, q = centres[i].copy(), centres[j].copy()
    if len(pads) == 2:
        across = 1 if abs(q[0] - p[0]) >= abs(q[1] - p[1]) else 0  # the axis the band is moved along: y, else x
        low = min(pads[i][across], pads[j][across])
        high = max(pads[i][across + 2], pads[j][across + 2]) - 1
        p[across] = q[across] = low if rng.random() < 0.5 else high
    out = crop.copy()
    ends = tuple(int(v) for v in np.round(p)), tuple(int(v) for v in np.round(q))
    cv2.line(out, ends[0], ends[1], tuple(float(v) for v in metal_colour(crop, pads)), width, cv2.LINE_AA)
    return cv2.GaussianBlur(out, (3, 3), 0.5)


MAKERS = {"missing": missing, "shifted": shifted, "rotated": rotated, "tombstone": tombstone,
          "reversed": reversed_, "bridge": bridge}


def made_defects(crop: np.ndarray, pads: list[PxRect], margin: int, polarised: bool, rng: np.random.Generator,
                 kinds: tuple[str, ...] = KINDS) -> dict[str, np.ndarray]:
    """Every kind of defect this part can carry, made from its crop: kind -> image (same size as the crop)."""
    pads = pads or ends_as_pads(crop, margin)
    out = {}
    for kind in kinds:
        if kind == "reversed" and not polarised:
            continue
        image = MAKERS[kind](crop, pads, margin, rng)
        if image is not None:
            out[kind] = image
    return out


def photo_variant(crop: np.ndarray, rng: np.random.Generator, shift_px: float = 3.0,
                  turn_deg: float = 2.0) -> np.ndarray:
    """The crop as another photo of another good board would show it: registered a little off (shift, turn,
    scale), at another resolution and sharpness, under another light (gamma, colour balance) and compression.
    One golden photo has none of this variation, and an expert that never saw it calls every new photo bad."""
    h, w = crop.shape[:2]
    m = cv2.getRotationMatrix2D((w / 2, h / 2), rng.uniform(-turn_deg, turn_deg), rng.uniform(0.97, 1.03))
    m[:, 2] += rng.uniform(-shift_px, shift_px, 2)
    out = cv2.warpAffine(crop, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    scale = rng.uniform(0.5, 1.0)
    if scale < 0.95:
        small = cv2.resize(out, (max(2, round(w * scale)), max(2, round(h * scale))), interpolation=cv2.INTER_AREA)
        out = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    if rng.random() < 0.5:
        out = cv2.GaussianBlur(out, (0, 0), rng.uniform(0.3, 1.2))
    x = out.astype(np.float32) / 255.0
    x = np.power(np.clip(x, 0, 1), rng.uniform(0.6, 1.6)) * rng.uniform(0.8, 1.2, 3) + rng.uniform(-0.08, 0.08)
    out = np.clip(x * 255, 0, 255).astype(np.uint8)
    if rng.random() < 0.5:
        ok, data = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(35, 95))])
        if ok:
            out = cv2.imdecode(data, cv2.IMREAD_COLOR)
    return out
