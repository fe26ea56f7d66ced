"""A footprint's own lands as the renderer draws them (a rule set's `pads:`), and where a bridge between them shows.

Boxes are inclusive px boxes on the part's patch at rotation 0; the body's box is the drawn body's.
"""
from __future__ import annotations

import numpy as np

Box = tuple[int, int, int, int]


def footprint_pads(c: int, lands: tuple[Box, ...]) -> list[Box]:
    """The rule set's lands (px edges about the window's centre) as inclusive boxes on the patch."""
    return [(c + x0, c + y0, c + x1 - 1, c + y1 - 1) for x0, y0, x1, y1 in lands]


def inside(box: tuple[float, float, float, float], outer: tuple[float, float, float, float]) -> bool:
    return box[0] >= outer[0] and box[1] >= outer[1] and box[2] <= outer[2] and box[3] <= outer[3]


def exposed(land: Box, body: tuple[float, float, float, float]) -> Box:
    """The largest part of a land (inclusive px box) that the body's box leaves in view; the land where the body
    does not reach it, or covers it whole."""
    x0, y0, x1, y1 = land
    bx0, by0, bx1, by1 = (int(np.floor(body[0])), int(np.floor(body[1])), int(np.ceil(body[2])), int(np.ceil(body[3])))
    if x1 < bx0 or x0 > bx1 or y1 < by0 or y0 > by1:
        return land
    pieces = [(x0, y0, x1, by0 - 1), (x0, by1 + 1, x1, y1), (x0, y0, bx0 - 1, y1), (bx1 + 1, y0, x1, y1)]
    pieces = [p for p in pieces if p[2] >= p[0] and p[3] >= p[1]]
    if not pieces:
        return land
    return max(pieces, key=lambda p: (p[2] - p[0] + 1) * (p[3] - p[1] + 1))


def bridge_lands(pads: list[Box], rng: np.random.Generator, reach: int,
                 body: tuple[float, float, float, float] | None = None) -> tuple[Box, Box, Box]:
    """Solder joining a footprint's land to its nearest neighbour: (the solder's box, the two lands), a pair whose
    solder does not run under the `body` where there is one (a SOT-23's lone pin is nearest to a pin across the
    body: a bridge joins the two on one side). A chip's two terminals are joined along one side of the body,
    outside it, as synthetic._bridge draws them; a lone land's solder runs out to `reach` (x, the window's right edge:
    towards whatever lies beside it)."""
    if len(pads) == 1:
        a = pads[0]
        half = max(1, int((a[3] - a[1]) * 0.3))
        ym = (a[1] + a[3]) // 2
        return (a[2], ym - half, max(a[2] + 2, reach), ym + half), a, a
    centres = np.array([((x0 + x1) / 2, (y0 + y1) / 2) for x0, y0, x1, y1 in pads])
    pairs = []
    for i in range(len(pads)):
        gaps = np.hypot(*(centres - centres[i]).T)
        gaps[i] = np.inf
        pairs.append(_solder(pads, centres, i, int(np.argmin(gaps)), rng))
    clear = [p for p in pairs if body is None or len(pads) == 2 or not _overlaps(p[0], body)]
    return (clear or pairs)[int(rng.integers(0, len(clear or pairs)))]


def _overlaps(box: Box, other: tuple[float, float, float, float]) -> bool:
    return box[0] <= other[2] and box[2] >= other[0] and box[1] <= other[3] and box[3] >= other[1]


def _solder(pads: list[Box], centres: np.ndarray, i: int, j: int, rng: np.random.Generator) -> tuple[Box, Box, Box]:
    """The solder joining lands i and j: (its box, land i, land j)."""
    a, b = pads[i], pads[j]
    (ax, ay), (bx, by) = centres[i], centres[j]
    across = abs(bx - ax) >= abs(by - ay)  # the lands sit side by side along x
    if len(pads) == 2:
        if across:
            y = int(rng.choice([min(a[1], b[1]) - 2, max(a[3], b[3]) + 1]))
            return (min(a[0], b[0]), y, max(a[2], b[2]), y + 2), a, b
        x = int(rng.choice([min(a[0], b[0]) - 2, max(a[2], b[2]) + 1]))
        return (x, min(a[1], b[1]), x + 2, max(a[3], b[3])), a, b
    # a bar over the gap where the two lands face each other, as thick as 0.6 of the thinner land
    if across:
        lo, hi = max(a[1], b[1]), min(a[3], b[3])
        ym = int(round((lo + hi) / 2 if hi >= lo else (ay + by) / 2))
        half = max(1, int(min(a[3] - a[1], b[3] - b[1]) * 0.3))
        return (min(a[2], b[2]), ym - half, max(a[0], b[0]), ym + half), a, b
    lo, hi = max(a[0], b[0]), min(a[2], b[2])
    xm = int(round((lo + hi) / 2 if hi >= lo else (ax + bx) / 2))
    half = max(1, int(min(a[2] - a[0], b[2] - b[0]) * 0.3))
    return (xm - half, min(a[3], b[3]), xm + half, max(a[1], b[1])), a, b
