"""`inspector accuracy --dataset deeppcb:DIR`: the pieces of the DeepPCB benchmark that are not the line.

Each pair is a board and its golden board. Here (the split is deeppcb_split.py's): how a difference becomes a box
(fitted on the training pairs: ingest/difference.py), the training pairs' differences written as a labelled folder
for the product's own trainer (`zoo train --new`, with the golden comparison), the operating point (the best F-score
on the teaching's held-out differences), one box a place, and the report. The scored pairs then go through the line
itself (app/deeppcb_line.py: a bare-board rule set a pair, the CoServe engine, one shared expert), scored as the
dataset's paper scores: a box counts when its IoU with a ground-truth box of its class is above 0.33; per-class AP,
mAP, precision, recall and F-score at the operating point, and the line's boards per second.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchvision.ops import nms
from tqdm import tqdm

from ..experts.resnet import ResNetClassifier
from ..ingest.difference import Boxing, align, candidates, difference_regions, window
from ..ingest.images import write_image
from .deeppcb import CLASSES, IOU_MATCH, Pair
from .labelled.boxes import Box
from .labelled.detection import DetectionScore, Found, iou, table
from .labelled.metrics import logodds
from .labelled.trainer import logits_of

GOOD = "good"
CONTEXT = 1.5  # a candidate's window: its box's longer side times this (the surround tells a spur from a trace)
OPENINGS = (1, 3, 5)
MARGINS = (0, 2, 4, 6, 8, 10, 12, 14, 16, 20)
SELECTION_BUDGET = 0.05  # model selection: defect recall with at most 5% of the good candidates called defects


@dataclass
class Board:
    pair: Pair
    live: np.ndarray
    aligned: np.ndarray  # the golden image warped onto the live one

    @property
    def truth(self) -> tuple[Box, ...]:
        return truth_of(self.pair)


def truth_of(pair: Pair) -> tuple[Box, ...]:
    return tuple(Box(d.kind, *map(float, d.box)) for d in pair.defects)


@dataclass
class DeepPCBResult:
    split: str
    trained_pairs: int
    scored_pairs: int
    boxing: Boxing
    proposal_recall_train: float
    proposal_recall_scored: float
    candidates_per_board: float
    score: DetectionScore
    boards_per_s: float
    teach_seconds: float
    expert: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        s = self.score.to_json()
        return {"dataset": "deeppcb", "split": self.split, "pairs_trained": self.trained_pairs,
                "pairs_scored": self.scored_pairs, "map": s["map"], "f_score": s["f_score"],
                "precision": s["precision"], "recall": s["recall"], "boards_per_s": self.boards_per_s,
                "per_class": s["per_class"], "iou": s["iou"], "threshold": s["threshold"],
                "boxing": self.boxing.__dict__, "proposal_recall": {"trained": self.proposal_recall_train,
                                                                    "scored": self.proposal_recall_scored},
                "candidates_per_board": self.candidates_per_board, "teach_seconds": self.teach_seconds,
                "expert": self.expert, "missing": self.missing}


def load_boards(pairs: list[Pair], desc: str) -> list[Board]:
    out = []
    for pair in tqdm(pairs, desc=desc, unit="pair", disable=None, leave=False):
        live, golden = pair.images()
        out.append(Board(pair, live, align(live, golden)))
    return out


def _ious(boxes: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """IoU of every candidate (rows) with every labelled box (columns), both N x 4 arrays of x1 y1 x2 y2."""
    ix = np.clip(np.minimum(boxes[:, None, 2], truth[None, :, 2]) - np.maximum(boxes[:, None, 0], truth[None, :, 0]),
                 0, None)
    iy = np.clip(np.minimum(boxes[:, None, 3], truth[None, :, 3]) - np.maximum(boxes[:, None, 1], truth[None, :, 1]),
                 0, None)
    inter = ix * iy
    area = lambda b: (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])  # noqa: E731
    return inter / np.maximum(area(boxes)[:, None] + area(truth)[None, :] - inter, 1e-9)


def proposal_recall(truths: list[tuple[Box, ...]],
                    boxes: list[list[tuple[float, float, float, float]]]) -> tuple[float, float]:
    """(share of ground-truth boxes some candidate matches at the protocol's IoU, their mean best IoU)."""
    best = []
    for truth, bs in zip(truths, boxes):
        t = np.array([[b.x1, b.y1, b.x2, b.y2] for b in truth], dtype=np.float64).reshape(-1, 4)
        if not len(t):
            continue
        best.append(_ious(np.array(bs, dtype=np.float64), t).max(axis=0) if bs else np.zeros(len(t)))
    if not best:
        return 1.0, 1.0
    every = np.concatenate(best)
    return float((every > IOU_MATCH).mean()), float(every.mean())


def fit_boxing(boards: list[Board], say: Callable[[str], None]) -> tuple[Boxing, float]:
    """The opening, margin and least side under which the candidates match the most labelled boxes (then the
    fewest candidates, then the closest boxes), searched on the training boards; the least side from the
    labelled boxes' own sides."""
    sides = [min(b.x2 - b.x1, b.y2 - b.y1) for board in boards for b in board.truth]
    leasts = sorted({0, *(int(np.percentile(sides, q)) for q in (10, 25, 50))}) if sides else [0]
    truths = [b.truth for b in boards]
    best: tuple[tuple[float, float, float], Boxing] | None = None
    for opening in OPENINGS:
        regions = [difference_regions(b.live, b.aligned, opening) for b in boards]
        count = sum(map(len, regions)) / max(1, len(boards))
        for margin in MARGINS:
            for least in leasts:
                boxing = Boxing(opening, margin, least)
                recall, overlap = proposal_recall(truths, [[boxing.box(*r) for r in rs] for rs in regions])
                key = (recall, -count, overlap)
                if best is None or key > best[0]:
                    best = (key, boxing)
    assert best is not None
    (recall, count, _), boxing = best
    say(f"candidates: opening {boxing.opening} px, margin {boxing.margin} px, least side {boxing.least_side} px: "
        f"{recall:.1%} of the training pairs' defects have a candidate, {-count:.1f} candidates a board")
    return boxing, recall


def label_of(box: tuple[float, float, float, float], truth: tuple[Box, ...]) -> str:
    """The class of the labelled box the candidate matches best above the protocol's IoU, else good."""
    best, kind = IOU_MATCH, None
    for b in truth:
        o = iou(Box(0, *box), b)
        if o > best:
            best, kind = o, b.kind
    return GOOD if kind is None else CLASSES[kind]


def write_candidates(boards: list[Board], boxing: Boxing, out: Path, golden_out: Path) -> dict[str, int]:
    """Every candidate of the boards as an ImageFolder (OUT/<class>/<pair>__c<i>.png), its golden window mirrored
    under GOLDEN_OUT: what `zoo train --new --reference` teaches from."""
    counts: dict[str, int] = {}
    (out / GOOD).mkdir(parents=True, exist_ok=True)  # the declared good class is always there
    (golden_out / GOOD).mkdir(parents=True, exist_ok=True)
    for board in tqdm(boards, desc="writing candidates", unit="pair", disable=None, leave=False):
        for i, box in enumerate(candidates(board.live, board.aligned, boxing)):
            label = label_of(box, board.truth)
            least = int(CONTEXT * boxing.least_side)
            file = f"{board.pair.name}__c{i}.png"
            if label not in counts:  # a class folder only for the classes the candidates have
                (out / label).mkdir(parents=True, exist_ok=True)
                (golden_out / label).mkdir(parents=True, exist_ok=True)
            write_image(out / label / file, window(board.live, box, least))
            write_image(golden_out / label / file, window(board.aligned, box, least))
            counts[label] = counts.get(label, 0) + 1
    return counts


def f_threshold(logits: np.ndarray, labels: np.ndarray) -> float:
    """The log-odds-of-good threshold with the best F-score over candidate crops (a candidate called with its true
    defect class is a hit; one called a defect otherwise, a false box; a defect not called its class, a miss): the
    detection's operating point, chosen on the teaching's held-out crops, never on the scored pairs."""
    lo = logodds(logits)
    named = logits[:, 1:].argmax(axis=1) + 1
    defects = int((labels != 0).sum())
    best_f, best_t = -1.0, 0.0
    for t in np.unique(np.concatenate([lo, [lo.max() + 1.0]])):
        called = lo < t
        hits = int((called & (named == labels) & (labels != 0)).sum())
        given = int(called.sum())
        f = 2 * hits / (given + defects) if given + defects else 0.0
        if f > best_f:
            best_f, best_t = f, float(t)
    return best_t


def heldout_logits(arch: ResNetClassifier, model: torch.nn.Module, folder: Path, golden: Path,
                   share: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The teaching's own held-out candidates (its split by pair), as the taught expert scores them."""
    from .labelled.folder import read_folder
    from .labelled.teach import read_crops, split

    labelled = read_folder(folder, GOOD)
    crops = read_crops(labelled, split(labelled, share).heldout, "reading held-out candidates", golden)
    logits, _ = logits_of(arch, model, crops)
    return logits, crops.labels


def one_per_place(found: list[Found]) -> list[Found]:
    """The likeliest box where boxes overlap by more than the protocol's IoU, whatever their classes: one defect
    often leaves two differences (an open's two ends), and two boxes that would both match one labelled defect
    cannot both be right. The protocol's own IoU, not one chosen on any scored pairs."""
    if len(found) < 2:
        return found
    boxes = torch.tensor([[f.x1, f.y1, f.x2, f.y2] for f in found], dtype=torch.float32)
    keep = nms(boxes, torch.tensor([f.score for f in found], dtype=torch.float32), IOU_MATCH)
    return [found[i] for i in keep.tolist()]


def report(r: DeepPCBResult) -> str:
    lines = [f"DeepPCB: {r.split}",
             f"candidates: {r.candidates_per_board:.1f} a board; a candidate for {r.proposal_recall_scored:.1%} of the "
             f"scored pairs' defects ({r.proposal_recall_train:.1%} of the trained ones')",
             table(r.score),
             f"boards/s: {r.boards_per_s:.1f} through the line (image read, golden alignment, differences, the "
             f"CoServe engine serving the shared expert, records; {torch.get_num_threads()} thread(s), this CPU); "
             f"teaching took {r.teach_seconds:.0f} s",
             "the paper (Tang et al. 2019, GPU): mAP 98.6%, F-score 98.2%, 62 boards/s"]
    return "\n".join(lines)


def write_json(r: DeepPCBResult, path: Path) -> None:
    Path(path).write_text(json.dumps(r.to_json(), indent=1, default=str), encoding="utf-8")
