"""Labelled crops from rendered boards: the same renderer and cropper the line uses.

Training boards carry defects far more often than the line (so every class is
seen); held-out boards use other serials. Crops are cut by `cut_board`, exactly
as at inspection time, so training and serving see the same pixels.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..ingest.crops import cut_board
from ..ingest.synthetic import DEFECTS, render_board
from ..routing.rules import RuleSet

TRAINING_RATES = {d: 0.07 for d in DEFECTS}  # ~40% of parts defective, each class alike


@dataclass
class PartSample:
    crop: np.ndarray  # HxWx3 BGR, rotation undone
    defect: str
    offset: tuple[float, float]  # body shift at rotation 0, board px
    size: tuple[int, int]  # body w, h at rotation 0
    margin: int


@dataclass
class SampleSet:
    """Crops by classifier expert and by detector expert."""

    by_classifier: dict[str, list[PartSample]] = field(default_factory=lambda: defaultdict(list))
    by_detector: dict[str, list[PartSample]] = field(default_factory=lambda: defaultdict(list))


def boards_for(rules: RuleSet, per_type: int, most: int = 600) -> int:
    """Boards to render so that the rarest component type has about `per_type` crops."""
    rarest = min(len(c.placements) for c in rules.components)
    return min(most, -(-per_type // rarest))


def collect(rule_sets: list[RuleSet], per_type: int, seed: int, rates: dict[str, float] | None = None,
            cap: int | None = None) -> SampleSet:
    """Render boards of each rule set until every type has ~`per_type` crops; keep at most `cap` per expert."""
    out = SampleSet()
    rates = TRAINING_RATES if rates is None else rates
    for rules in rule_sets:
        rng = np.random.default_rng([seed, rules.seed])
        for i in range(boards_for(rules, per_type)):
            board = render_board(rules, f"{rules.recipe}-{seed}-{i}", rng, rates)
            for crop in cut_board(board.image, rules):
                comp = crop.component
                sample = PartSample(crop.image, board.truth[crop.ref], board.offsets[crop.ref], comp.size,
                                    rules.crop_margin)
                out.by_classifier[comp.classifier].append(sample)
                if comp.detector and sample.defect in ("ok", "polarity", "shifted"):
                    out.by_detector[comp.detector].append(sample)
    if cap is not None:
        pick = np.random.default_rng(seed)
        for table in (out.by_classifier, out.by_detector):
            for name, items in table.items():
                if len(items) > cap:
                    keep = pick.choice(len(items), cap, replace=False)
                    table[name] = [items[i] for i in sorted(keep)]
    return out


def body_label(sample: PartSample) -> tuple[float, float, float, float]:
    """The body's box in the crop, normalised x-centre, y-centre, width, height (YOLO's format)."""
    w, h = sample.size
    cw, ch = w + 2 * sample.margin, h + 2 * sample.margin
    cx = (w // 2 + sample.margin + sample.offset[0]) / cw
    cy = (h // 2 + sample.margin + sample.offset[1]) / ch
    return cx, cy, 0.78 * w / cw, h / ch
