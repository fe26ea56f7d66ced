"""`zoo train --new` and `zoo evaluate`: experts from a plant's own labelled crops (training/labelled/)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..training.labelled.schedule import HALF_DOWN, MIN_EPOCH
from ..training.labelled.splits import DEFAULT_HELDOUT, EPOCH_SHARE, SCORED_SPLITS
from .common import models_of, say
from .exits import FAILED, USAGE


def _zoo_root(args: argparse.Namespace) -> Path:
    return Path(args.zoo) if args.zoo else models_of(args) / "demo"


def cmd_train_new(args: argparse.Namespace) -> int:
    import torch

    from ..training.labelled.teach import TeachPlan, check_input, prepare, teach

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.heldout is not None and not 0 < args.heldout < 1:
        say(f"error: --heldout {args.heldout:g} is a share of the identities: above 0, below 1 (0.2 holds out a fifth)")
        return USAGE
    if not 0 <= args.epoch_share < 1:
        say(f"error: --epoch-share {args.epoch_share:g} is a share of the training identities: 0 (the held-out ones "
            "choose the epoch) or more, below 1 (0.15 sets about a seventh aside)")
        return USAGE
    if args.kind == "detector":
        return _train_detector(args)
    if args.tile:
        say("error: --tile teaches a detector in tiles (--kind detector); a classifier is taught on whole crops")
        return USAGE
    if not args.arch.startswith("resnet") or not args.arch.removeprefix("resnet").isdigit():
        say(f"error: a classifier is a ResNet (resnet10, resnet18, ...), not {args.arch!r}")
        return USAGE
    depth = int(args.arch.removeprefix("resnet"))
    plan = TeachPlan(args.new, Path(args.from_dataset), _zoo_root(args), args.good, depth, args.input_size,
                     args.heldout, args.epochs or 30, args.patience, args.seed, args.augment, args.false_calls,
                     args.epoch_size, Path(args.reference) if args.reference else None, args.any_orientation,
                     epoch_share=args.epoch_share)
    if args.check:
        return _checked(lambda: say(f"input: {check_input(plan, prepare(plan, say)[3]).describe()}"), plan.expert)
    return _taught(lambda: teach(plan, say), args, "; route parts to it by naming it as a component type's "
                                                    "classifier in the rule set")


def _refused(run) -> tuple[bool, Any]:  # noqa: ANN001 - a call that may raise FolderError
    """(False, what `run` returns), or (True, None) with the FolderError said: a set that cannot be used as it is."""
    from ..training.labelled.folder import FolderError

    try:
        return False, run()
    except FolderError as exc:
        say(f"error: {exc}")
        return True, None


def _checked(run, expert: str) -> int:  # noqa: ANN001 - () -> None, saying what teaching would do
    """`--check`: what teaching would read and do, said; nothing trained or written."""
    if _refused(run)[0]:
        return FAILED
    print(f"checked: {expert} would be taught as said above; nothing was trained or written (drop --check to teach)")
    return 0


def _taught(run, args: argparse.Namespace, hint: str = "") -> int:  # noqa: ANN001 - () -> TaughtExpert | ...Detector
    """Teach (FolderError: exit 1 with the reason), print the report and where the expert now serves, write --json."""
    refused, done = _refused(run)
    if refused:
        return FAILED
    print(done.summary())
    print(f"\n{done.plan.expert} serves {done.entry.weights_sha256[:12]} in the zoo at {done.plan.zoo}{hint}")
    if args.json:
        Path(args.json).write_text(json.dumps(done.to_json(), indent=1), encoding="utf-8")
    return 0


def _train_detector(args: argparse.Namespace) -> int:
    from ..training.labelled.teach_detector import DetectorPlan, prepare_detector, teach_detector

    plan = DetectorPlan(args.new, Path(args.from_dataset), _zoo_root(args), args.good,
                        args.arch if args.arch.endswith((".yaml", ".yml")) else "yolov8n.yaml", args.input_size,
                        args.heldout, args.epochs or 30, args.patience, args.seed, args.false_calls, args.iou,
                        any_orientation=args.any_orientation,
                        reference=Path(args.reference) if args.reference else None, tile=args.tile,
                        epoch_share=args.epoch_share)
    if args.check:
        return _checked(lambda: prepare_detector(plan, say), plan.expert)
    return _taught(lambda: teach_detector(plan, say), args)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..experts.zoo import Zoo
    from ..training.labelled.evaluate import evaluate_detector, evaluate_expert
    from ..training.labelled.folder import FolderError
    from ..training.labelled.metrics import table

    zoo = Zoo.load(_zoo_root(args))
    if args.expert in zoo.entries and zoo.entries[args.expert].role == "detector":
        from ..training.labelled.detection import table as detection_table

        try:
            scored = evaluate_detector(zoo, args.expert, Path(args.on), args.iou,
                                       Path(args.reference) if args.reference else None, args.split, say)
        except FolderError as exc:
            say(f"error: {exc}")
            return FAILED
        which = f" ({args.split} images)" if args.split else ""
        print(f"{args.expert} ({(zoo.entries[args.expert].weights_sha256 or '-')[:12]}) on {args.on}{which}")
        print(detection_table(scored))
        if args.json:
            Path(args.json).write_text(json.dumps(scored.to_json(), indent=1), encoding="utf-8")
        return 0
    try:
        result = evaluate_expert(zoo, args.expert, Path(args.on), args.good,
                                 Path(args.reference) if args.reference else None, args.split)
    except FolderError as exc:
        say(f"error: {exc}")
        return FAILED
    which = f" ({args.split} crops)" if args.split else ""
    print(f"{args.expert} ({(result.weights_sha256 or '-')[:12]}) on {args.on}{which}")
    print(table(result.evaluation))
    print("defect recall at a false-call budget chosen on these crops: " + ", ".join(
        f"{100 * b:g}% -> {100 * r:.1f}%" for b, r in result.recall_at.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
    if args.plots:
        from ..training.labelled.plots import write_plots

        for path in write_plots(result.evaluation, result.truth, result.logits, Path(args.plots), args.expert):
            print(f"wrote {path}")
    return 0


def add_new_flags(tr: argparse.ArgumentParser) -> None:
    """The options of `zoo train --new` (beside the retraining's, which share --from, --zoo, --epochs, --seed)."""
    from ..experts.resnet import DEPTHS

    tr.add_argument("--kind", choices=["classifier", "detector"], default="classifier",
                    help="classifier: from an ImageFolder (class = folder name); detector: from a YOLO set (data.yaml, "
                         "images/, labels/), a COCO set (one .json beside its images) or a Pascal VOC set (an .xml "
                         "per image)")
    tr.add_argument("--good", help="classifier: the folder of good parts (default: the one named good or ok); "
                                   "detector: the class meaning in place (it then verifies; without, it finds defects)")
    tr.add_argument("--arch", default="resnet10", help=f"classifier: one of {', '.join(f'resnet{d}' for d in DEPTHS)}"
                                                       " (default resnet10); detector: a YOLO model yaml "
                                                       "(default yolov8n.yaml)")
    tr.add_argument("--iou", type=float, default=0.5, help="detector: IoU a box must exceed to count (default 0.5)")
    tr.add_argument("--input-size", type=int, help="input side in px (default: from the crops' sizes)")
    tr.add_argument("--heldout", type=float,
                    help="share of identities held out to choose the threshold on and to score (default "
                         f"{DEFAULT_HELDOUT:g}; a set with its own train/val split uses that split unless this is "
                         "given)")
    tr.add_argument("--epoch-share", type=float, default=EPOCH_SHARE,
                    help="share of the training identities (of each kind, defective or clean) set aside to choose "
                         f"the epoch by, never trained on (default {EPOCH_SHARE:g}); 0: the held-out ones choose it "
                         "too, and their scores are optimistic")
    tr.add_argument("--patience", type=int, default=6, help="epochs without a better recall on the crops set aside "
                    f"before stopping, counted from {round(100 * HALF_DOWN)}%% of --epochs at the earliest "
                    "(default 6)")
    tr.add_argument("--augment", type=float, default=1.0, help="camera augmentation strength, 0 for none")
    tr.add_argument("--false-calls", type=float, default=0.01,
                    help="false-call budget the operating threshold is chosen for (default 0.01)")
    tr.add_argument("--epoch-size", type=int, help="crops drawn an epoch (default: the training set's size, "
                    f"at least {MIN_EPOCH})")
    tr.add_argument("--reference", metavar="DIR", help="golden comparison: the golden board's crop (or image) of "
                                                       "every crop (image), at the same path under DIR, the same "
                                                       "window; the expert reads both")
    tr.add_argument("--tile", type=int, metavar="PX",
                    help="detector: serve whole images at the size their boxes call for (up to 2048 px) and teach "
                         "on tiles of PX a side of them (a multiple of 32): for images too large for one input with "
                         "their defects still visible")
    tr.add_argument("--any-orientation", action="store_true",
                    help="the classes do not depend on how a crop or image is turned or mirrored (a short is a "
                         "short either way; a reversed diode is not), so training also sees each turned and mirrored "
                         "(a detector's boxes with its images)")
    tr.add_argument("--check", action="store_true",
                    help="read the set and say what teaching would do (its layout, classes, split, input, tiles, "
                         "warnings), then stop: nothing is trained or written")
    tr.add_argument("--json", help="also write the report as JSON here")


def add_evaluate(zoo_sub: argparse._SubParsersAction) -> None:
    ev = zoo_sub.add_parser("evaluate", help="score a taught classifier or detector on labelled images it never saw")
    ev.add_argument("--expert", required=True, help="the zoo's expert to score (cls-trace)")
    ev.add_argument("--on", required=True, metavar="DIR", help="a classifier: an ImageFolder (one sub-folder a class); "
                                                               "a detector: a YOLO, COCO or Pascal VOC set")
    ev.add_argument("--good", help="the folder's name for the expert's good class, when it differs")
    ev.add_argument("--reference", metavar="DIR", help="the golden crops or images (a golden-comparison expert), the "
                                                       "set's tree mirrored")
    ev.add_argument("--split", choices=SCORED_SPLITS, help="which part of a set with its own split (split folders, "
                                                           "data.yaml's train/val/test) to score; such a set must "
                                                           "say")
    ev.add_argument("--iou", type=float, default=0.5, help="detector: IoU a box must exceed to count (default 0.5; "
                                                           "DeepPCB's protocol: 0.33)")
    ev.add_argument("--zoo", help="zoo directory (default: the demo zoo)")
    ev.add_argument("--json", help="also write the scores as JSON here")
    ev.add_argument("--plots", metavar="DIR", help="also draw the confusion matrix and precision-recall curves "
                                                   "(confusion.png, pr.png) into DIR")
    ev.set_defaults(func=cmd_evaluate)


def cmd_dataset_windows(args: argparse.Namespace) -> int:
    import numpy as np
    from tqdm import tqdm

    from ..training.deeppcb import CLASSES, DatasetError, read_pairs
    from ..training.labelled.windows import WindowCounts, write_windows

    missing: list[str] = []
    try:
        pairs = read_pairs(Path(args.deeppcb), Path(args.list) if args.list else None, missing)
    except DatasetError as exc:
        say(f"error: {exc}")
        return FAILED
    for line in missing:
        say(f"left out: {line}")
    only = set(args.groups.split(",")) if args.groups else None
    leave = set(args.exclude_groups.split(",")) if args.exclude_groups else set()
    pairs = [p for p in pairs if (only is None or p.group in only) and p.group not in leave]
    if not pairs:
        say("error: no pairs left after --groups / --exclude-groups")
        return USAGE
    from ..training.labelled.folder import split_of

    rng = np.random.default_rng(args.seed)
    # the held-out side a split folder by its usual name: zoo train keeps `test` back, zoo evaluate scores it
    sides = {"": pairs} if not args.heldout else {
        folder: [p for p in pairs if split_of(p.name, args.heldout, "test") == side]
        for folder, side in (("train", "train"), ("test", "heldout"))}
    counts = {side: WindowCounts() for side in sides}
    where = {p.name: side for side, members in sides.items() for p in members}
    from ..ingest.difference import align

    aligned = bool(args.golden_out) and not args.raw_template
    for pair in tqdm(pairs, desc="cutting windows", unit="pair", disable=None):
        test, template = pair.images()
        if aligned:
            template = align(test, template)  # the pairs sit up to a few px apart: every edge would differ
        side = where[pair.name]
        write_windows(Path(args.out) / side, pair.name, test, [(d.box, CLASSES[d.kind]) for d in pair.defects],
                      args.window, counts[side], args.keep_good, rng, CLASSES,
                      golden=(Path(args.golden_out) / side, template) if args.golden_out else None)
    for side, members in sides.items():
        c = counts[side]
        defects = sum(v for k, v in c.written.items() if k != "good")
        print(f"{Path(args.out) / side}: {len(members)} pairs of groups {', '.join(sorted({p.group for p in members}))}"
              f": {c.line()}; good to defect windows {c.written['good'] / max(1, defects):.1f} to 1")
        if side == "test":
            print(f"  held-out pairs: {' '.join(sorted(p.name for p in members))}")
    return 0


def add_dataset_windows(ds_sub: argparse._SubParsersAction) -> None:
    w = ds_sub.add_parser("windows", help="a labelled folder of grid windows cut from DeepPCB's tested images "
                                          "(class: the defect whose box is centred in it, or good)")
    w.add_argument("--deeppcb", required=True, metavar="DIR", help="the dataset's folder (with trainval.txt)")
    w.add_argument("--list", help="the list of pairs (default DIR/trainval.txt)")
    w.add_argument("--out", required=True, help="the folder to write: OUT/<class>/<pair>__x<i>y<j>.png")
    w.add_argument("--window", type=int, default=64, help="window side in px (default 64)")
    w.add_argument("--groups", help="only these board groups (comma-separated, e.g. 20085,44000)")
    w.add_argument("--exclude-groups", help="all but these board groups")
    w.add_argument("--heldout", type=float, default=0.0,
                   help="also split: OUT/train and OUT/test, this share of the pairs held out (by the pair's name): "
                        "`zoo train --from OUT` teaches from train and keeps test back, `zoo evaluate --on OUT --split "
                        "test` scores it")
    w.add_argument("--golden-out", metavar="DIR", help="also write each window of the template (the golden board) "
                                                       "here, the labelled tree mirrored (zoo train --reference DIR)")
    w.add_argument("--raw-template", action="store_true",
                   help="cut the golden windows from the template as it is (default: aligned onto the tested image "
                        "first, as the line registers a board before comparing it with its golden one)")
    w.add_argument("--keep-good", type=float, default=1.0, help="share of good windows written (default all)")
    w.add_argument("--seed", type=int, default=0, help="the seed choosing which good windows --keep-good writes")
    w.set_defaults(func=cmd_dataset_windows)
