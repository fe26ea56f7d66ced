"""A bare board cut into its differences from the golden board: the parts of a `compare:` rule set.

The golden board is aligned onto the live one (difference.align: a board never lies to the pixel, and a
line-scan frame starts where it starts), every place they differ becomes a box (difference.candidates, boxed as
the rule set's `compare:` says), and each box whose centre lies in one of the rule set's windows becomes a part of
that window: its designator the window's and a count (`W2-3.1`), its crop the square around the box, and beside it
the same square of the aligned golden board. A difference outside every window is not inspected (the windows say
where to look). The experts read the pair composed as they were taught (golden.compose), so the line feeds them
exactly what training did.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..routing.rules import RuleSet, body_box
from .crops import Crop, check_board, crop_tensor
from .difference import Boxing, align, candidates, window
from .golden import composite_tensor, golden_image
from .photometric import normalize_crop


def boxing_of(rules: RuleSet) -> Boxing:
    c = rules.compare
    if c is None:
        raise ValueError(f"rule set {rules.recipe} has no `compare:` section")
    return Boxing(c.opening, c.margin, c.least_side)


def cut_differences(image: np.ndarray, rules: RuleSet) -> list[Crop]:
    """Every difference of `image` from the rule set's golden board that lies in a window, in scan order of the
    windows, then of the differences (top to bottom, left to right)."""
    check_board(image, rules)
    boxing = boxing_of(rules)
    least = int(rules.compare.context * boxing.least_side)  # type: ignore[union-attr]
    aligned = align(image, golden_image(rules))
    windows = [(c, p, body_box(c, p)) for c, p in rules.placements()]
    found: dict[str, list[tuple[float, float, float, float]]] = {}
    for box in sorted(candidates(image, aligned, boxing), key=lambda b: (b[1] + b[3], b[0] + b[2])):
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        for _c, p, (x0, y0, x1, y1) in windows:
            if x0 <= cx < x1 and y0 <= cy < y1:
                found.setdefault(p.ref, []).append(box)
                break
    crops = []
    for c, p, _ in windows:
        for k, box in enumerate(found.get(p.ref, ()), start=1):
            crops.append(Crop(f"{p.ref}.{k}", c, window(image, box, least), at=box,
                              golden=window(aligned, box, least)))
    return crops


def difference_tensors(crops: Sequence[Crop], composite: dict[str, str]) -> list[torch.Tensor]:
    """What the engine's experts take: each difference beside its golden window (composite types: type -> the
    composite's kind), else alone."""
    return [composite_tensor(c.image, c.golden, composite[c.component.name])
            if c.component.name in composite and c.golden is not None
            else normalize_crop(crop_tensor(c.image)) for c in crops]


def box_in_crop(crop: Crop) -> tuple[float, float, float, float] | None:
    """A difference's box in its crop's pixels (x0, y0, x1, y1): the crop is the square centred on it."""
    if crop.at is None:
        return None
    x0, y0, x1, y1 = crop.at
    h, w = crop.image.shape[:2]
    left, top = (x0 + x1) / 2 - w / 2, (y0 + y1) / 2 - h / 2
    return x0 - left, y0 - top, x1 - left, y1 - top
