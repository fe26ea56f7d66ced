"""A detector's boxes on labelled images, scored the way detection benchmarks score them.

Every box the expert gives above a low floor is kept (per-class non-maximum suppression), mapped back from the
expert's input to the image's pixels through the same fitting the line uses (letterbox or squash). A box is a hit
when it overlaps an unmatched labelled box of its class by more than the IoU the protocol asks (0.5 by default;
DeepPCB's 0.33), the most confident first. Per class: average precision (the area under the precision envelope,
VOC's all-point form), and precision, recall and F1 at the operating threshold; mAP is the mean over the classes
that have labelled boxes. An ignored labelled box (difficult, crowd: boxes.py) is neither found nor missed: a box
given that lies on it (over the IoU asked, of the given box's own area, as COCO treats a crowd) and matches no
other counts for nothing, and an image whose boxes are all ignored is left out of the image counts. Image by image,
the line's question: was an image with a defect flagged, was a clean one left alone. A detector that finds flags an
image with any box over the threshold; one that verifies (`good`: its good class) flags an image unless its best box
reaches the threshold and is of the good class, and an image is defective unless every box in it is good (one
without a box shows no body at all): the line's call of a part by its class, its alignment aside.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torchvision.ops import batched_nms

from ...experts.yolo import YoloDetector
from .boxes import Box
from .trainer import to_inputs

FLOOR = 0.001  # boxes kept for the precision-recall curve
NMS_IOU = 0.6
MAX_BOXES = 300


@dataclass(frozen=True)
class Found:
    kind: int
    score: float
    x1: float
    y1: float
    x2: float
    y2: float


def boxes_of(arch: YoloDetector, raw: torch.Tensor, sizes: list[tuple[int, int]]) -> list[list[Found]]:
    """Every box of each image of a raw output (N x (4 + classes) x anchors), in image pixels."""
    out = []
    for i, size in enumerate(sizes):
        pred = raw[i].float()
        xywh, scores = pred[:4].T, pred[4:].T
        best, kind = scores.max(dim=1)
        keep = best >= FLOOR
        xywh, best, kind = xywh[keep], best[keep], kind[keep]
        corners = torch.cat([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], dim=1)
        order = batched_nms(corners, best, kind, NMS_IOU)[:MAX_BOXES]
        sx, sy, ox, oy = arch.unfit(size)
        out.append([Found(int(kind[j]), float(best[j]), float(corners[j, 0]) * sx + ox, float(corners[j, 1]) * sy + oy,
                          float(corners[j, 2]) * sx + ox, float(corners[j, 3]) * sy + oy) for j in order.tolist()])
    return out


def _intersection(a: Found | Box, b: Found | Box) -> float:
    return max(0.0, min(a.x2, b.x2) - max(a.x1, b.x1)) * max(0.0, min(a.y2, b.y2) - max(a.y1, b.y1))


def iou(a: Found | Box, b: Found | Box) -> float:
    inter = _intersection(a, b)
    union = (a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter
    return inter / union if union > 0 else 0.0


def average_precision(hits: np.ndarray, scores: np.ndarray, labelled: int) -> float:
    """VOC all-point AP of boxes (hit or not, score) against `labelled` boxes."""
    if labelled == 0:
        return float("nan")
    if len(hits) == 0:
        return 0.0
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(hits[order])
    recall = tp / labelled
    precision = tp / np.arange(1, len(tp) + 1)
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    return float(np.sum(np.diff(np.concatenate([[0.0], recall])) * envelope))


@dataclass
class DetectionScore:
    classes: tuple[str, ...]
    threshold: float
    iou: float
    per_class: dict[str, dict[str, Any]]
    images: int
    flagged_with_defects: int
    with_defects: int
    flagged_clean: int
    clean: int
    ignored_images: int = 0  # images whose labelled boxes are all ignored: in neither count
    good: int | None = None  # a verifier's good class: `clean` counts good bodies, `flagged` what it did not pass

    @property
    def map(self) -> float:
        aps = [c["ap"] for c in self.per_class.values() if c["labelled"]]
        return float(np.mean(aps)) if aps else float("nan")

    def totals(self) -> tuple[int, int, int]:
        """(hits, boxes given, labelled boxes) at the threshold, all classes."""
        c = self.per_class.values()
        return sum(x["hits"] for x in c), sum(x["given"] for x in c), sum(x["labelled"] for x in c)

    @property
    def precision(self) -> float:
        hits, given, _ = self.totals()
        return hits / given if given else float("nan")

    @property
    def recall(self) -> float:
        hits, _, labelled = self.totals()
        return hits / labelled if labelled else float("nan")

    @property
    def f_score(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "threshold": self.threshold, "iou": self.iou, "map": self.map,
                "precision": self.precision, "recall": self.recall, "f_score": self.f_score,
                "per_class": self.per_class, "images": self.images,
                "defect_recall": self.flagged_with_defects / self.with_defects if self.with_defects else None,
                "false_call_rate": self.flagged_clean / self.clean if self.clean else None,
                "ignored_images": self.ignored_images}


def score(classes: tuple[str, ...], truth: list[tuple[Box, ...]], found: list[list[Found]], threshold: float,
          iou_match: float = 0.5, good: int | None = None) -> DetectionScore:
    """`good`: the good class of a detector that verifies (image counts by its calls: the module's docstring)."""
    per: dict[int, list[tuple[float, bool]]] = {k: [] for k in range(len(classes))}
    labelled = {k: 0 for k in range(len(classes))}
    flagged_d = with_d = flagged_c = clean = ignored_images = 0
    for boxes, given in zip(truth, found):
        for b in boxes:
            labelled[b.kind] += not b.ignore
        taken: set[int] = set()
        for f in sorted(given, key=lambda g: -g.score):
            best, at = iou_match, None
            for j, b in enumerate(boxes):
                if j not in taken and b.kind == f.kind and not b.ignore:
                    o = iou(f, b)
                    if o > best:
                        best, at = o, j
            if at is not None:
                taken.add(at)
            elif _on_ignored(f, boxes, iou_match):
                continue
            per[f.kind].append((f.score, at is not None))
        flagged = is_flagged(given, threshold, good)
        if ignored_only(boxes):
            ignored_images += 1
        elif defective(boxes, good):
            with_d += 1
            flagged_d += flagged
        else:
            clean += 1
            flagged_c += flagged
    per_class = {}
    for k, name in enumerate(classes):
        s = np.array([x[0] for x in per[k]])
        h = np.array([x[1] for x in per[k]], dtype=np.float64)
        at = s >= threshold
        hits, given = int(h[at].sum()), int(at.sum())
        p = hits / given if given else None
        r = hits / labelled[k] if labelled[k] else None
        per_class[name] = {"labelled": labelled[k], "given": given, "hits": hits,
                           "ap": average_precision(h, s, labelled[k]), "precision": p, "recall": r,
                           "f1": 2 * p * r / (p + r) if p and r else (0.0 if p is not None and r is not None else None)}
    return DetectionScore(classes, threshold, iou_match, per_class, len(truth), flagged_d, with_d, flagged_c, clean,
                          ignored_images, good)


def ignored_only(boxes: Sequence[Box]) -> bool:
    """An image whose labelled boxes are all ignored (difficult, crowd): in neither image count."""
    return bool(boxes) and all(b.ignore for b in boxes)


def defective(boxes: Sequence[Box], good: int | None = None) -> bool:
    """Whether a labelled image shows a defect: for a finder any box; for a verifier (`good`: its good class)
    unless every body in it is good (one without a box shows no body at all)."""
    if good is None:
        return bool(boxes)
    return not boxes or any(b.kind != good for b in boxes if not b.ignore)


def good_body(given: Sequence[Found], good: int) -> Found | None:
    """A verifier's best box when it is of the good class (None: no box, or a body of another class)."""
    best = max(given, key=lambda g: g.score, default=None)
    return best if best is not None and best.kind == good else None


def is_flagged(given: Sequence[Found], threshold: float, good: int | None = None) -> bool:
    """The line's call of an image: a finder flags any box at or above the threshold; a verifier passes only a
    good body reaching it."""
    if good is None:
        return any(g.score >= threshold for g in given)
    body = good_body(given, good)
    return body is None or body.score < threshold


def _on_ignored(f: Found, boxes: tuple[Box, ...], overlap: float) -> bool:
    """A given box lying on an ignored labelled box of its class (its own area's share over `overlap`)."""
    area = (f.x2 - f.x1) * (f.y2 - f.y1)
    return area > 0 and any(b.ignore and b.kind == f.kind and _intersection(f, b) / area > overlap for b in boxes)


def table(s: DetectionScore) -> str:
    def pct(v: float | None) -> str:
        return "-" if v is None or v != v else f"{100 * v:.1f}%"

    width = max(12, *(len(c) for c in s.classes))
    rows = [f"{'class':{width}} {'boxes':>6} {'AP':>7} {'precision':>10} {'recall':>8} {'F1':>7}", "-" * (width + 43)]
    for name, c in s.per_class.items():
        rows.append(f"{name:{width}} {c['labelled']:>6} {pct(c['ap']):>7} {pct(c['precision']):>10} "
                    f"{pct(c['recall']):>8} {pct(c['f1']):>7}")
    j = s.to_json()
    rows += ["", f"IoU > {s.iou:g} to count, operating threshold {s.threshold:.3f}: mAP {pct(s.map)}, precision "
                 f"{pct(s.precision)}, recall {pct(s.recall)}, F-score {pct(s.f_score)}",
             f"images: {s.flagged_with_defects}/{s.with_defects} with defects flagged ({pct(j['defect_recall'])}), "
             f"{s.flagged_clean}/{s.clean} {'clean' if s.good is None else 'good'} ones flagged "
             f"({pct(j['false_call_rate'])})"
             + (f"; {s.ignored_images} with ignored boxes only (difficult, crowd) left out" if s.ignored_images
                else "")]
    return "\n".join(rows)


def detect(arch: YoloDetector, module: torch.nn.Module, images: list[np.ndarray],
           references: list[np.ndarray] | None = None, batch: int | None = None) -> list[list[Found]]:
    """Every box on each HxWx3 BGR image, through the line's normalisation and the expert's own fitting; with
    `references` (a golden-comparison detector), each image composed with its golden image first."""
    out: list[list[Found]] = []
    batch = batch or max(1, round(32 * (640 / max(640, arch.input_size)) ** 2))  # a large input: fewer at a time
    for i in range(0, len(images), batch):
        part = images[i:i + batch]
        x = to_inputs(arch, part, references=None if references is None else references[i:i + batch])
        out += boxes_of(arch, arch.forward(module, x), [(im.shape[1], im.shape[0]) for im in part])
    return out
