"""`inspector zoo train --new EXPERT --kind detector --from DIR`: a detector taught from a YOLO, COCO or VOC set.

Without `--good` every class is a defect and the detector **finds**: a part (or window) with a box over the
threshold fails, with that box's class. With `--good CLASS` it **verifies**, the way the demo's detectors do: the
part passes when its best box is of that class and confident. A set with its own split (split folders, data.yaml's
keys) is taught from its train images and held out on its val ones, its test images kept back; any other is split
by identity like a folder of crops (own_split.py). Ignored boxes (difficult, crowd) are not taught. The input size
comes from the images and their smallest boxes (detector_sizing.py), the fitting from the images (letterbox when
aspects differ). With `--reference DIR` each image is read beside its golden image (the set's tree
mirrored, golden_tree.py), composed as the line composes a golden-comparison crop (ingest/golden.py): what the
design itself has is in both, so what is found is what differs, on a design the detector never saw too.
With `--tile SIZE` it is served whole images at the size their boxes call for (up to 2048 px) and taught on tiles
of them (tiles.py). Ultralytics' own trainer trains it from the model yaml on images written exactly as the line
serves them (normalised, fitted; detector_set.py), keeps its best epoch by its validation fitness on a share of the
training images set aside for that (epoch_split.py: by identity, images with defects and clean ones apart) and stops
after `patience` epochs without one (an epoch as long as the training side was: `filled`); where none can be spared
(none of them would hold a box) it runs the whole course and keeps the last. So the held-out images choose the
threshold alone: it is then chosen on them
(detector_threshold.py): a finder's the lowest box score that keeps false calls on clean images within the budget, a
verifier's the highest good-body confidence that keeps them on good bodies within it, midway in the gap. The version
carries it (its `operating` point), so a retrained version can be served at its own.
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...experts.yolo import VERIFY_THRESHOLD, YoloDetector
from ...experts.zoo import ExpertEntry, Zoo, write_expert
from ..detector import ultralytics_train
from ..provenance import trained_with
from .box_sets import read_boxes
from .boxes import BoxedImage, BoxSet
from .detection import DetectionScore, detect, score, table
from .detector_set import read_pair, served_boxes, write_split
from .detector_sizing import choose_detector_input, taught_scale
from .detector_threshold import FALSE_CALL_BUDGET, CrossFit, choose_detector_threshold, cross_fit, cross_fitted
from .epoch_split import EPOCH_SHARE, EpochSides, divide
from .folder import FolderError
from .golden_tree import golden_paths
from .own_split import Sides, teaching_sides
from .teach import add_entry, open_zoo
from .tiles import Tiling, choose_tiling

TAUGHT_BOXES = "taught from labelled boxes"  # the version's origin: reviews retrain it (retrain_detector.py)


@dataclass
class DetectorPlan:
    expert: str
    source: Path
    zoo: Path
    good: str | None = None
    model: str = "yolov8n.yaml"
    input_size: int | None = None
    heldout_share: float | None = None  # None: the set's own split, else a fifth by identity (own_split.py)
    epochs: int = 30
    patience: int = 8
    seed: int = 0
    false_call_budget: float = FALSE_CALL_BUDGET
    iou: float = 0.5
    batch: int = 16
    any_orientation: bool = False  # the classes do not depend on how an image is turned or mirrored
    reference: Path | None = None  # the golden image of every image, the set's tree mirrored: it reads both
    reference_kind: str = "composite"  # how it compares (experts/spec.py REFERENCES)
    tile: int | None = None  # taught on tiles of this side of the served images (tiles.py); None: whole images
    # of the training identities, set aside to choose the epoch by (epoch_split.py); 0: the held-out images choose it
    epoch_share: float = EPOCH_SHARE


@dataclass
class TaughtDetector:
    plan: DetectorPlan
    classes: tuple[str, ...]
    mode: str
    input_size: int
    fit: str
    counts: dict[str, int]
    heldout: DetectionScore
    entry: ExpertEntry
    seconds: float
    tiling: Tiling | None = None
    # the line's image counts at thresholds chosen without each held-out image (detector_threshold.cross_fit), or
    # why there are none
    cross_fitted: dict[str, Any] | str | None = None
    epoch_chosen: str = ""  # what chose the epoch, said to the engineer

    @property
    def heldout_chose_epoch(self) -> bool:
        """As well as the threshold (--epoch-share 0)."""
        return self.plan.epoch_share <= 0

    def to_json(self) -> dict[str, Any]:
        return {"expert": self.plan.expert, "zoo": str(self.plan.zoo), "source": str(self.plan.source),
                "classes": list(self.classes), "mode": self.mode, "input_size": self.input_size, "fit": self.fit,
                "counts": self.counts, "any_orientation": self.plan.any_orientation,
                "reference": None if self.plan.reference is None else str(self.plan.reference),
                "weights_sha256": self.entry.weights_sha256, "seconds": round(self.seconds, 1),
                "tile": None if self.tiling is None else {"size": self.tiling.size, "overlap": self.tiling.overlap},
                "heldout": self.heldout.to_json(), "heldout_cross_fitted": self.cross_fitted,
                "epoch_chosen": self.epoch_chosen}

    def summary(self) -> str:
        how = (f"finds {', '.join(self.classes)}" if self.mode == "find" else
               f"verifies {self.classes[0]} against {', '.join(self.classes[1:])}")
        turned = ", taught in every orientation (mirrored and turned)" if self.plan.any_orientation else ""
        golden = f", each image beside its golden image of {self.plan.reference}" if self.plan.reference else ""
        tiles = (f", taught on tiles of {self.tiling.size} px (overlapping by {self.tiling.overlap})"
                 if self.tiling else "")
        return "\n".join([f"{self.plan.expert}: a detector that {how}; input {self.input_size}x{self.input_size} px "
                          f"({self.fit}){golden}{tiles}{turned}, trained in {self.seconds:.0f} s", self.epoch_chosen,
                          "held-out images (" + ("they chose the epoch and the threshold: optimistic"
                                                 if self.heldout_chose_epoch else
                                                 "they chose the threshold, not the epoch")
                          + "; `inspector zoo evaluate` on images it never met gives the figures to trust):",
                          table(self.heldout)]
                         + ([] if self.cross_fitted is None else [self.cross_fit_line()]))

    def cross_fit_line(self) -> str:
        """The held-out image counts at thresholds chosen without each image, or why there are none."""
        c = self.cross_fitted
        if isinstance(c, str):
            return f"cross-fitted: {c}"
        kind = "clean" if self.mode == "find" else "good"
        return (f"images at a threshold chosen without each (cross-fitted: {c['thresholds'][0]:.3f} on one half, "
                f"{c['thresholds'][1]:.3f} on the other): {c['flagged_with_defects']}/{c['with_defects']} with "
                f"defects flagged, {c['flagged_clean']}/{c['clean']} {kind} ones flagged")


def reordered(boxes: BoxSet, good: str | None) -> tuple[tuple[str, ...], list[int], str]:
    """(classes as the expert names them, the set's class index -> the expert's, mode)."""
    if good is None:
        return boxes.classes, list(range(len(boxes.classes))), "find"
    if good not in boxes.classes:
        raise FolderError(f"--good {good!r} is not a class of {boxes.root}; its classes: {', '.join(boxes.classes)}")
    classes = (good, *[c for c in boxes.classes if c != good])
    return classes, [classes.index(c) for c in boxes.classes], "verify"


@dataclass
class DetectorSetup:
    """What teaching will do, read and checked before any training (`zoo train --new --check` stops here)."""
    zoo: Zoo | None  # None: the zoo is made by this teaching
    boxes: BoxSet
    classes: tuple[str, ...]
    order: list[int]  # the set's class index -> the expert's
    mode: str
    split: Sides[BoxedImage]
    goldens: dict[str, list[Path] | None]  # side -> each image's golden image, when it compares
    arch: YoloDetector
    tiling: Tiling | None
    aside: EpochSides[BoxedImage]  # the training images divided: what trains, what chooses the epoch


def prepare_detector(plan: DetectorPlan, say: Callable[[str], None] = lambda _m: None) -> DetectorSetup:
    """The set read, split, sized and (with --tile) tiled, all of it said; nothing trained or written."""
    zoo = open_zoo(plan.zoo)
    if zoo is not None and plan.expert in zoo.entries:
        raise ValueError(f"the zoo at {plan.zoo} already has an expert {plan.expert!r}; teach under a new name")
    boxes = read_boxes(plan.source)
    classes, order, mode = reordered(boxes, plan.good)
    split = teaching_sides(boxes.images, plan.heldout_share)
    for side, items in (("train", split.train), ("heldout", split.heldout)):
        if not any(im.scored for im in items):
            raise FolderError(f"the {side} side of the split of {boxes.root} ({split.how}) has no labelled boxes; add "
                              "images of more boards (file names up to `__` name the board) or change --heldout")
    goldens = {side: None if plan.reference is None else golden_paths(boxes.root, [im.path for im in items],
                                                                      plan.reference)
               for side, items in (("train", split.train), ("heldout", split.heldout))}
    chosen = choose_detector_input(split.train, plan.input_size, tiled=plan.tile is not None)
    size, fit = chosen.input_size, chosen.fit
    kind = plan.reference_kind if plan.reference is not None else None
    arch = YoloDetector(plan.model, size, len(classes), VERIFY_THRESHOLD, mode, fit, kind)
    ignored = f" ({boxes.ignored()} more marked difficult or crowd, ignored)" if boxes.ignored() else ""
    say(f"{plan.source} ({boxes.layout}): {len(boxes.images)} images, boxes {boxes.counts()}{ignored}; "
        f"{len(split.train)} to train on, {len(split.heldout)} held out ({split.how}); input {size}x{size} "
        f"({fit}; {chosen.describe()}); mode {mode}" + (f"; each beside its golden image ({kind})" if kind else ""))
    if boxes.note:
        say(f"note: {boxes.note}")
    for warning in (split.warning, chosen.warning):
        if warning:
            say(f"warning: {warning}")
    aside = epoch_images(plan, split.train, None if plan.good is None else boxes.classes.index(plan.good))
    say(aside.says)
    return DetectorSetup(zoo, boxes, classes, order, mode, split, goldens, arch,
                         tiling_for(plan.tile, arch, split.train, order, say), aside)


def teach_detector(plan: DetectorPlan, say: Callable[[str], None] = lambda _m: None) -> TaughtDetector:
    t0 = time.perf_counter()
    setup = prepare_detector(plan, say)
    zoo = setup.zoo
    boxes, classes, order, mode, arch, tiling = (setup.boxes, setup.classes, setup.order, setup.mode, setup.arch,
                                                 setup.tiling)
    split, goldens, aside = setup.split, setup.goldens, setup.aside
    train_goldens = None if goldens["train"] is None else dict(zip([im.path for im in split.train], goldens["train"]))
    sides = {"train": aside.train_own, "heldout": split.heldout}
    size, fit, kind = arch.input_size, arch.fit, arch.reference
    held = [read_pair(im.path, None if goldens["heldout"] is None else goldens["heldout"][n])
            for n, im in enumerate(sides["heldout"])]  # read once: written for the trainer, then scored
    # the trainer's validation: the images set aside; with none that could be spared, the held-out ones, read at the
    # last epoch only (nothing chosen on them: the last kept), or choosing where the plan's share is 0
    chooses = bool(aside.epoch) or plan.epoch_share <= 0
    val, val_pairs = ((aside.epoch, [read_pair(im.path, None if train_goldens is None else train_goldens[im.path])
                                     for im in aside.epoch]) if aside.epoch else (sides["heldout"], held))
    torch.manual_seed(plan.seed)
    with tempfile.TemporaryDirectory(prefix="inspector-teach-") as tmp:
        root = Path(tmp)
        trained = filled(sides["train"], len(split.train), plan.seed)
        taught = write_split(root, "train", arch, trained, order, plan.any_orientation,
                             None if train_goldens is None else [train_goldens[im.path] for im in trained], tiling)
        write_split(root, "val", arch, val, order, tiling=tiling, pairs=val_pairs)
        if tiling is not None:
            say(f"{taught} tiles of {tiling.size} px to train on")
        state = ultralytics_train(arch, root, classes, plan.epochs, plan.seed, plan.batch,
                                  plan.patience if chooses else 0, chooses, flips=plan.any_orientation,
                                  imgsz=None if tiling is None else tiling.size, say=say)
    module = arch.materialize(state, torch.device("cpu"))
    found = detect(arch, module, [picture for picture, _ in held],
                   None if goldens["heldout"] is None else [golden for _, golden in held])
    truth = [tuple(replace(b, kind=order[b.kind]) for b in im.boxes) for im in sides["heldout"]]
    chosen = choose_detector_threshold(found, truth, mode, plan.false_call_budget, VERIFY_THRESHOLD)
    threshold = chosen.threshold
    halved = cross_fit(found, truth, mode, plan.false_call_budget, [im.identity for im in sides["heldout"]]) \
        if chosen.chosen else None  # not `fit`: that is the letterbox's here
    crossed: dict[str, Any] | str | None = halved if not isinstance(halved, CrossFit) else dict(zip(
        ("flagged_with_defects", "with_defects", "flagged_clean", "clean"),
        cross_fitted(classes, truth, found, halved, good=arch.good_class)),
        thresholds=list(halved.chosen))
    say(f"threshold {chosen.why}" if chosen.chosen else chosen.why + (" (add images without defects to the set)"
                                                                     if mode == "find" else ""))
    served = YoloDetector(plan.model, size, len(classes), threshold, mode, fit, kind)
    plan.zoo.mkdir(parents=True, exist_ok=True)
    entry = write_expert(plan.zoo, plan.expert, "detector", served.spec(), state, digest=True, classes=classes,
                         train_samples=len(sides["train"]), train_seed=plan.seed)
    heldout = score(classes, truth, found, threshold, plan.iou, good=served.good_class)
    version = {"weights_sha256": entry.weights_sha256, "file": entry.file, "origin": TAUGHT_BOXES,
               "dataset": str(plan.source), "threshold": threshold, "operating": {"threshold": threshold},
               "false_call_budget": plan.false_call_budget, "heldout_share": plan.heldout_share,
               "epoch_share": plan.epoch_share, "epoch_chosen_on": aside.counts or None,
               "split": split.how, "tile": None if tiling is None else [tiling.size, tiling.overlap],
               "taught_on": taught_scale(split.train),
               "any_orientation": plan.any_orientation, "reference": None if plan.reference is None else
               str(plan.reference), "trained_with": trained_with(), "eval": {"heldout": heldout.to_json()}}
    entry = ExpertEntry(**{**asdict(entry), "val_accuracy": heldout.map, "versions": (version,),
                           "served": (entry.weights_sha256,)})
    add_entry(plan.zoo, zoo, entry, plan.seed)
    return TaughtDetector(plan, classes, mode, size, fit, boxes.counts(), heldout, entry, time.perf_counter() - t0,
                          tiling, crossed, aside.says)


def filled(train: list[BoxedImage], size: int, seed: int) -> list[BoxedImage]:
    """The images an epoch trains on: every training image, and as many again of them (drawn by `seed`) as were set
    aside to choose the epoch by, so that an epoch is as long as the training side was. Setting images aside must not
    shorten the schedule: a detector trained from its model yaml needs its optimizer steps (a verifier of 87
    training images learned both classes in 30 epochs; of the 63 left beside an epoch set, none: tests/
    test_verifier_loop.py)."""
    extra = size - len(train)
    if extra <= 0 or not train:
        return list(train)
    picks = np.random.default_rng(seed).choice(len(train), size=extra, replace=extra > len(train))
    return list(train) + [train[int(i)] for i in sorted(picks)]


def epoch_images(plan: DetectorPlan, train: list[BoxedImage], good: int | None) -> EpochSides[BoxedImage]:
    """The training images divided into what is trained on and what chooses the epoch (epoch_split.py: by
    identity, images with a defect box and clean ones apart; `good`: the set's index of the class that is no
    defect); with the plan's share 0, nothing set aside. Those set aside must hold a box for the trainer's fitness
    to choose by."""
    return divide(train, [], lambda im: im.identity, lambda im: any(b.kind != good for b in im.scored),
                  lambda epoch: any(im.scored for im in epoch), "images", plan.epoch_share, reader="")


def tiling_for(tile: int | None, arch: YoloDetector, images: list, order: list[int],
               say: Callable[[str], None]) -> Tiling | None:
    """The tiling `--tile` asks for, overlapping by the larger boxes (tiles.py); None when the served image fits
    in one tile (said)."""
    if tile is None:
        return None
    if tile % 32 or tile < 64:
        raise FolderError(f"--tile {tile}: a tile's side is a multiple of 32 px, at least 64")
    if tile >= arch.input_size:
        say(f"note: the served image ({arch.input_size} px) fits in one tile of {tile}: taught whole")
        return None
    sides = np.array([max(x2 - x1, y2 - y1) for im in images for _k, x1, y1, x2, y2 in served_boxes(arch, im, order)])
    tiling = choose_tiling(tile, sides)
    say(f"taught in tiles of {tile} px overlapping by {tiling.overlap} ({tiling.count(arch.input_size)} an image); "
        f"served whole images at {arch.input_size} px"
        + (f", about {(arch.input_size / 640) ** 2:.1f}x the work of a 640-px image each" if arch.input_size > 640
           else ""))
    return tiling
