"""`inspector zoo evaluate --expert E --on DIR`: an expert's calls on a labelled folder, scored (metrics.py).

The folder's classes must be among the expert's (it may lack some); `good`: the folder's name for the expert's
good class, when it differs. The crops go through the line's normalisation and the expert's own preprocessing
and operating threshold: the calls are the ones the line would make.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...experts.resnet import ResNetClassifier
from ...experts.yolo import YoloDetector
from ...experts.zoo import Zoo
from ...runtime.safetensors_io import parse
from .box_sets import read_boxes
from .detection import DetectionScore, detect, score
from .detector_set import read_pair
from .folder import FolderError, LabelledFolder, read_folder
from .golden_tree import golden_paths
from .metrics import Evaluation, evaluate, recall_at_false_calls
from .own_split import to_score
from .teach import read_crops
from .trainer import logits_of

BUDGETS = (0.001, 0.005, 0.01, 0.02, 0.05)


@dataclass
class ExpertEvaluation:
    expert: str
    weights_sha256: str | None
    evaluation: Evaluation
    recall_at: dict[float, float]  # false-call budget -> the defect recall it allows on this folder
    logits: np.ndarray
    truth: np.ndarray

    def to_json(self) -> dict:
        return {"expert": self.expert, "weights_sha256": self.weights_sha256, **self.evaluation.to_json(),
                "recall_at_false_calls": {str(k): v for k, v in self.recall_at.items()}}


def evaluate_expert(zoo: Zoo, expert: str, source: Path, good: str | None = None,
                    reference: Path | None = None, split: str | None = None) -> ExpertEvaluation:
    """`reference`: the golden crops, `source`'s tree mirrored (an expert taught with a golden comparison needs them,
    any other refuses them); `split`: which of a folder's own split (own_split.py; a folder with one must say)."""
    if expert not in zoo.entries:
        raise ValueError(f"the zoo at {zoo.root} has no expert {expert!r}; its experts: "
                         f"{', '.join(sorted(zoo.entries))}")
    if expert in zoo.unavailable:
        raise ValueError(f"{expert} cannot be loaded: {zoo.unavailable[expert]}")
    entry, arch = zoo.entries[expert], zoo.architecture(expert)
    if not isinstance(arch, ResNetClassifier) or not entry.classes:
        raise ValueError(f"{expert} is a {entry.role} without class names; zoo evaluate scores trained classifiers")
    classes = tuple(entry.classes)
    check_reference(expert, arch.reference, reference)
    folder = read_folder(source, classes=classes if good is None else _renamed(classes, good))
    folder = LabelledFolder(folder.root, folder.classes, to_score(folder.root, folder.crops, split))
    if good is not None and good != classes[0]:
        folder = LabelledFolder(folder.root, classes, [replace(c, label=classes[0] if c.label == good else c.label)
                                                       for c in folder.crops])
    crops = read_crops(folder, folder.crops, "reading crops", reference)
    _, model = served_module(zoo, expert)
    logits, _ = logits_of(arch, model, crops)
    ev = evaluate(classes, crops.labels, logits, arch.good_margin)
    return ExpertEvaluation(expert, entry.weights_sha256, ev, recall_at_false_calls(crops.labels, logits, BUDGETS),
                            logits, crops.labels)


def served_module(zoo: Zoo, expert: str) -> tuple[Any, torch.nn.Module]:
    """(architecture, module) of the expert's served weights on the CPU (in eval mode): what is scored."""
    arch = zoo.architecture(expert)
    return arch, arch.materialize(parse(zoo.path_of(expert).read_bytes()), torch.device("cpu"))


def _renamed(classes: tuple[str, ...], good: str) -> tuple[str, ...]:
    if good in classes[1:]:
        raise FolderError(f"--good {good} names one of the expert's defect classes ({', '.join(classes[1:])})")
    return (good, *classes[1:])


def check_reference(expert: str, taught: str | None, reference: Path | None, what: str = "crop") -> None:
    """An expert taught with a golden comparison is scored with one, any other without; `what` it reads (a
    classifier a crop, a detector an image)."""
    if taught is not None and reference is None:
        raise FolderError(f"{expert} compares each {what} with the golden board's: pass the golden {what}s "
                          "(--reference DIR, the labelled set's tree mirrored)")
    if taught is None and reference is not None:
        raise FolderError(f"{expert} reads the live {what} alone; it was not taught with golden {what}s "
                          "(drop --reference)")


def evaluate_detector(zoo: Zoo, expert: str, source: Path, iou: float = 0.5,
                      reference: Path | None = None, split: str | None = None,
                      say: Callable[[str], None] = lambda _m: None) -> DetectionScore:
    """A detector's boxes on a YOLO, COCO or VOC set, scored at its own threshold (detection.py); `reference`: the
    golden images, the set's tree mirrored (a golden-comparison detector needs them, any other refuses them);
    `split`: which of a set's own split (own_split.py; a set with one must say)."""
    entry, arch = zoo.entries[expert], zoo.architecture(expert)
    if not isinstance(arch, YoloDetector) or not entry.classes:
        raise ValueError(f"{expert} is not a detector with class names")
    check_reference(expert, arch.reference, reference, "image")
    boxes = read_boxes(source)
    if boxes.note:
        say(f"note: {boxes.note}")
    unknown = [c for c in boxes.classes if c not in entry.classes]
    if unknown:
        raise FolderError(f"{source} labels classes the expert does not know: {', '.join(unknown)}; its classes are "
                          f"{', '.join(entry.classes)}")
    order = [entry.classes.index(c) for c in boxes.classes]
    images = to_score(boxes.root, boxes.images, split)
    truth = [tuple(replace(b, kind=order[b.kind]) for b in im.boxes) for im in images]
    _, model = served_module(zoo, expert)
    goldens = None if reference is None else golden_paths(boxes.root, [im.path for im in images], reference)
    pairs = [read_pair(im.path, None if goldens is None else goldens[n]) for n, im in enumerate(images)]
    references = None if reference is None else [golden for _, golden in pairs]
    return score(tuple(entry.classes), truth, detect(arch, model, [p for p, _ in pairs], references), arch.threshold,
                 iou, good=arch.good_class)
