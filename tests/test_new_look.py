"""Defects made from a good crop's own body (training/new_look.py) and the recall gate that judges a retrained
expert on them (training/retrain.py). Real rendered crops, fixed seeds."""
from __future__ import annotations

import numpy as np
import pytest

from inspector.ingest.crops import cut_board
from inspector.ingest.glare import Glare
from inspector.ingest.synthetic import render_board
from inspector.routing.rules import load_rules
from inspector.training.new_look import NEW_LOOK_DEFECTS, body_region, new_look_defects, synthesize
from inspector.training.retrain import NEW_LOOK, Score, recall_gate
from inspector.training.samples import PartSample

from .test_routing_rules import RULES

BOARD_A = load_rules(RULES / "board_a.yaml")


def _glared_crops(component: str, n: int) -> list:
    rng = np.random.default_rng(3)
    out = []
    while len(out) < n:
        board = render_board(BOARD_A, f"g{len(out)}", rng, forced={p.ref: "ok" for _, p in BOARD_A.placements()})
        image = Glare(component, 0.45).apply(board.image, BOARD_A, rng)
        out += [c for c in cut_board(image, BOARD_A) if c.component.name == component]
    return out[:n]


def test_each_defect_changes_the_body_and_missing_leaves_the_board_colour() -> None:
    crop = _glared_crops("L0805", 1)[0]
    size, margin = crop.component.size, BOARD_A.crop_margin
    x0, y0, x1, y1 = body_region(crop.image, size, margin)
    body = crop.image[y0:y1, x0:x1].astype(float)
    rng = np.random.default_rng(0)
    for defect in NEW_LOOK_DEFECTS:
        made = synthesize(crop.image, defect, size, margin, rng)
        assert made.shape == crop.image.shape and made.dtype == np.uint8
        assert np.abs(made.astype(float) - crop.image).mean() > 2, defect  # visibly different
    missing = synthesize(crop.image, "missing", size, margin, rng)[y0:y1, x0:x1].astype(float)
    border = np.concatenate([crop.image[0], crop.image[-1]]).astype(float)
    assert np.abs(missing.mean((0, 1)) - np.median(border, 0)).max() < 12  # the board where the body was
    assert np.abs(body.mean((0, 1)) - missing.mean((0, 1))).max() > 20
    with pytest.raises(ValueError, match="cannot make a 'polarity' defect"):
        synthesize(crop.image, "polarity", size, margin, rng)


def test_defects_come_in_turn_and_carry_their_class() -> None:
    crops = _glared_crops("L0805", 3)
    goods = [PartSample(c.image, "ok", (0.0, 0.0), (0, 0), 0) for c in crops]
    made = new_look_defects(goods, crops[0].component.size, BOARD_A.crop_margin, 2, np.random.default_rng(1))
    assert [m.defect for m in made] == [NEW_LOOK_DEFECTS[i % len(NEW_LOOK_DEFECTS)] for i in range(6)]


def _scores(look_new: Score, synth_old: Score, synth_new: Score) -> dict:
    return {NEW_LOOK: (look_new, look_new), "synthetic held-out": (synth_old, synth_new)}


def test_the_recall_gate_refuses_lost_recall_and_says_by_how_much() -> None:
    good = Score(60, 40, 39, 20, 0)
    assert recall_gate(_scores(good, Score(100, 50, 50, 50, 1), Score(100, 50, 50, 50, 0))) == {"passed": True,
                                                                                                 "reasons": []}
    low = recall_gate(_scores(Score(60, 40, 30, 20, 0), Score(100, 50, 50, 50, 1), Score(100, 50, 48, 50, 0)))
    assert not low["passed"]
    assert "recall on 40 held-out defects under the new look is 75.0%, under the floor of 95%" in low["reasons"]
    assert "recall on the renderer's held-out defects fell from 100.0% to 96.0%" in low["reasons"]
    none = recall_gate(_scores(Score(0, 0, 0, 0, 0), Score(100, 50, 50, 50, 1), Score(100, 50, 50, 50, 0)))
    assert not none["passed"] and "no held-out defects under the new look" in none["reasons"][0]
