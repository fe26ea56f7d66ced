"""Labelled crops from rendered boards: the same renderer and cropper the line uses.

Training boards carry defects far more often than the line (so every class is
seen); held-out boards use other serials. Half the boards are seen through a
wide training camera (placement, light, lens, sensor, JPEG) and cut through
their true placement plus a registration error of a fraction of a pixel, the
way the line cuts a registered board; the other half are clean renders. Crops
are cut by `cut_board`, exactly as at inspection time.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..ingest.camera_model import CameraModel
from ..ingest.crops import cut_board
from ..ingest.registration import Registration
from ..ingest.synthetic import DEFECTS, render_board
from ..routing.rules import RuleSet

TRAINING_RATES = {d: 0.07 for d in DEFECTS}  # ~40% of parts defective, each class alike
# Wider than any camera the line should meet, so the experts have seen worse than the accuracy suite's conditions.
TRAINING_CAMERA = CameraModel(shift_px=4, rotation_deg=0.6, scale=0.006, gain=(0.55, 1.45), contrast=(0.65, 1.1),
                              gradient=0.3, blur_sigma=(0.0, 1.4), noise_sigma=(0.0, 7.0), jpeg_quality=(50, 98),
                              motion_px=(0.0, 3.0), cast=(-0.05, 0.05))
REGISTRATION_ERROR_PX = 0.25  # what registration leaves at a part, each axis (measured: ~0.15 px at worst)


@dataclass
class PartSample:
    crop: np.ndarray  # HxWx3 BGR, rotation undone
    defect: str
    offset: tuple[float, float]  # body shift at rotation 0, board px
    size: tuple[int, int]  # body w, h at rotation 0
    margin: int
    body: tuple[float, float] | None = None  # the drawn body's w, h (ComponentRule.body_geometry); None: 0.78 w, h


@dataclass
class SampleSet:
    """Crops by classifier expert and by detector expert."""

    by_classifier: dict[str, list[PartSample]] = field(default_factory=lambda: defaultdict(list))
    by_detector: dict[str, list[PartSample]] = field(default_factory=lambda: defaultdict(list))


def boards_for(rules: RuleSet, per_type: int, most: int = 600, types: set[str] | None = None) -> int:
    """Boards to render so that the rarest component type (of `types`, default all) has about `per_type` crops."""
    rarest = min(len(c.placements) for c in rules.components if types is None or c.name in types)
    return min(most, -(-per_type // rarest))


def collect(rule_sets: list[RuleSet], per_type: int, seed: int, rates: dict[str, float] | None = None,
            cap: int | None = None, camera: CameraModel | None = TRAINING_CAMERA,
            detector_cap: int | None = None, types: set[str] | None = None) -> SampleSet:
    """Render boards of each rule set until every type has ~`per_type` crops; keep at most `cap` per classifier
    and `detector_cap` (default: `cap`) per detector. Every other board is seen through `camera` (None: all clean).
    `types`: only these component types (retraining one expert), else all."""
    out = SampleSet()
    rates = TRAINING_RATES if rates is None else rates
    for rules in rule_sets:
        if types is not None and not any(c.name in types for c in rules.components):
            continue
        rng = np.random.default_rng([seed, rules.seed])
        for i in range(boards_for(rules, per_type, types=types)):
            board = render_board(rules, f"{rules.recipe}-{seed}-{i}", rng, rates)
            image, registration = board.image, None
            if camera is not None and i % 2:
                image, placement = camera.view(board.image, rng)
                registration = _registered(placement, rng)
            for crop in cut_board(image, rules, registration):
                comp = crop.component
                if types is not None and comp.name not in types:
                    continue
                sample = PartSample(crop.image, board.truth[crop.ref], board.offsets[crop.ref], comp.size,
                                    rules.crop_margin, comp.body_geometry[2:])
                out.by_classifier[comp.classifier].append(sample)
                if comp.detector and sample.defect in ("ok", "polarity", "shifted"):
                    out.by_detector[comp.detector].append(sample)
    pick = np.random.default_rng(seed)
    for table, most in ((out.by_classifier, cap), (out.by_detector, cap if detector_cap is None else detector_cap)):
        for name, items in table.items():
            if most is not None and len(items) > most:
                keep = pick.choice(len(items), most, replace=False)
                table[name] = [items[i] for i in sorted(keep)]
    return out


def body_label(sample: PartSample) -> tuple[float, float, float, float]:
    """The body's box in the crop, normalised x-centre, y-centre, width, height (YOLO's format)."""
    w, h = sample.size
    cw, ch = w + 2 * sample.margin, h + 2 * sample.margin
    cx = (w // 2 + sample.margin + sample.offset[0]) / cw
    cy = (h // 2 + sample.margin + sample.offset[1]) / ch
    bw, bh = sample.body or (0.78 * w, h)
    return cx, cy, bw / cw, bh / ch


def _registered(placement: np.ndarray, rng: np.random.Generator) -> Registration:
    """The true placement as registration would find it: off by a small shift and rotation."""
    m = placement.copy()  # 3x3
    m[:2, 2] += rng.uniform(-REGISTRATION_ERROR_PX, REGISTRATION_ERROR_PX, 2)
    a = rng.uniform(-1, 1) * 2e-4  # radians: ~0.06 px at the board's far corner
    m[:2, :2] = m[:2, :2] @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return Registration(tuple(float(v) for v in m.reshape(-1)), 0.0)
