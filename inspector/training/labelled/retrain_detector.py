"""Reviews retrain a detector taught from labelled images, the loop a taught classifier has (retrain_taught.py).

`inspector zoo train --expert DET --from DATASET` on a detector taught by `zoo train --new --kind detector`: the
dataset's crops of it (`dataset export --zoo`, results/detector_labels.py: for one that finds, a false call a clean
crop, a defect the box the reviewer drew or else the detector; for one that verifies, every crop its body's box under
the class it really is) join the labelled set it was taught from (split as its teaching split it, tiled as it was
tiled), reviewed crops repeated to about a third of the images it sees (each at most retrain_taught.MAX_REPEATS
times); Ultralytics' trainer goes on from the weights in service at a quarter of the teaching's step, keeping the
epoch its fitness prefers on training images set aside for that (epoch_split.py: never the held-out ones the gate
reads; with too few to spare, the last epoch). The new weights' box scores sit on their own scale, so their threshold
is chosen again on both held-out sets together, the set's and the reviewed one, as teaching chose it
(detector_threshold.py, the false-call budget teaching was given), moved as far in log-odds as the plant moved the
served one off teaching's (`zoo operate`: kept, as a taught classifier's margin keeps its move), and the version
carries it (experts/operating.py: activation serves it there). Both versions are scored by the line at the threshold
that rule chooses for each on the other half of the held-out images (cross-fitted, detector_threshold.py: one scored
on the images it was chosen on flatters itself, and the served threshold was chosen on the taught held-out images:
scored at it there the old weights would be scored in-sample); too few to halve, the old at its served threshold, the
new at its own. The new ones are added as a version, not served, refused by the gate where any held-out set's defect
recall falls (a verifier's images counted by its calls: a defect found when the best box is not a confident good body,
detection.py). The reviewed crops the export kept without a box (an escape nobody boxed: results/dataset.py UNBOXED)
teach nothing, but both versions' calls of them are scored, a third set the gate reads: it is what the served weights
missed, and no threshold was chosen on it. A detector that compares with the golden board reads each image beside its
golden image: the windows the export cut from the rule set's golden board (results/golden_windows.py) and the golden
folder it was taught beside.
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ...experts.versions import add_version
from ...experts.yolo import YoloDetector
from ...experts.zoo import Zoo
from ...results.dataset import GOLDEN, UNBOXED
from ...runtime.safetensors_io import parse
from ..detector import ultralytics_train
from ..provenance import trained_with
from ..retrain import Retrained, Score
from .box_sets import read_boxes
from .boxes import BoxedImage
from .detection import DetectionScore, Found, defective, detect, ignored_only, is_flagged, score
from .detector_set import read_pair, write_split
from .detector_sizing import taught_scale
from .detector_threshold import (
    FALSE_CALL_BUDGET,
    CrossFit,
    choose_detector_threshold,
    cross_fit,
    cross_fitted,
    moved,
    offset_of,
)
from .epoch_split import divide
from .folder import FolderError
from .golden_tree import golden_paths
from .own_split import teaching_sides
from .point_move import NONE, kept_says, left_says, other_way_says
from .recall_gate import Disagreement, at_served_says, lines_said, recall_kept
from .retrain_taught import golden_mirror, repeats
from .teach_detector import TAUGHT_BOXES
from .tiles import Tiling

LR = 0.004 / 4  # a quarter of the teaching's step: from weights that already work
# epochs at most (early-stopped after a third of them without a better fitness on the images set aside): a detector at
# a quarter of its teaching's step moves slower than a classifier's fine-tune (10). On the loop demo, one run each, 10
# epochs left 57% of the new look's clean windows flagged and 20 none (docs/pages/ml/labelled-images.md)
DETECTOR_EPOCHS = 20
NO_BOX = "reviewed unboxed"  # the scored set of reviewed crops that carry no box (scored by the call, not trained)


def taught_detector_version(zoo: Zoo, expert: str) -> dict[str, Any] | None:
    """The version detector teaching recorded, when `expert` was taught from labelled boxes (else None)."""
    entry = zoo.entries[expert]
    if entry.role != "detector" or not entry.classes:
        return None
    return next((v for v in entry.versions if v.get("origin") == TAUGHT_BOXES), None)


def reviewed_boxes(dataset: Path, expert: str, classes: tuple[str, ...]) -> dict[str, list[BoxedImage]]:
    """The dataset's crops of `expert` by side (train, heldout), labelled in its classes."""
    tree = Path(dataset) / "detectors" / expert
    if not (Path(dataset) / "manifest.json").is_file():
        raise ValueError(f"{dataset} holds no dataset manifest; write one with `inspector dataset export --zoo ZOO`")
    if not (tree / "data.yaml").is_file():
        raise ValueError(f"the dataset {dataset} has no crops of {expert} (review its parts, then export again "
                         "with --zoo naming its zoo: a false call is a clean crop to it, a confirmed defect the box it "
                         "drew)")
    boxes = read_boxes(tree)
    if boxes.classes != classes:
        raise ValueError(f"{tree} is labelled in {', '.join(boxes.classes)}, not {expert}'s classes "
                         f"({', '.join(classes)}): export the dataset again with --zoo naming its zoo")
    sides = {"train": [im for im in boxes.images if im.split == "train"],
             "heldout": [im for im in boxes.images if im.split == "val"]}
    if not sides["train"]:
        raise ValueError(f"the dataset {dataset} has no training crops of {expert} (review more of its parts, export "
                         "again with --zoo)")
    return sides


def unboxed_crops(dataset: Path, expert: str, classes: tuple[str, ...]) -> list[tuple[Path, str]]:
    """The dataset's crops of `expert` kept without a box, each with its class, both sides (none is trained on)."""
    out = []
    for path in sorted((Path(dataset) / "detectors" / expert / UNBOXED).glob("*/*/*.png")):
        if path.parent.name not in classes:
            raise ValueError(f"{path} is a crop of the class {path.parent.name!r}, not one of {expert}'s "
                             f"({', '.join(classes)}): export the dataset again with --zoo naming its zoo")
        out.append((path, path.parent.name))
    return out


def call_score(found: list[list[Found]], labels: list[str], threshold: float, good: str | None,
               good_kind: int | None) -> Score:
    """The line's calls of whole crops whose class is known and whose box is not: a defect found when the crop is
    flagged, a good part (a verifier's `good` class) called when it is."""
    return Score.of([is_flagged(f, threshold, good_kind) for f in found], [label != good for label in labels])


def unboxed_scores(arch: YoloDetector, classes: tuple[str, ...], modules: list[torch.nn.Module],
                   unboxed: list[tuple[Path, str]], goldens: dict[Path, Path],
                   thresholds: tuple[float, float]) -> tuple[Score, Score]:
    """The old and new weights' (`modules`) calls of the crops without a box, each at its own threshold."""
    crops = [read_pair(path, goldens.get(path)) for path, _ in unboxed]
    labels, good = [label for _, label in unboxed], arch.good_class
    named = None if good is None else classes[good]
    out = [call_score(detect(arch, module, [p for p, _ in crops], [g for _, g in crops] if goldens else None),
                      labels, threshold, named, good) for module, threshold in zip(modules, thresholds)]
    return out[0], out[1]


def taught_boxes(origin: dict[str, Any], classes: tuple[str, ...],
                 say: Callable[[str], None]) -> dict[str, list[BoxedImage]]:
    """The labelled set the detector was taught from, split as its teaching split it, in the expert's classes;
    empty where the set is gone (said)."""
    source = Path(origin.get("dataset") or "")
    if not source.is_dir():
        say(f"its teaching set {source} is gone: training on the reviewed crops alone")
        return {"train": [], "heldout": []}
    boxes = read_boxes(source)
    if set(boxes.classes) != set(classes):
        raise FolderError(f"{source}, the set it was taught from, now has the classes {', '.join(boxes.classes)}, "
                          f"not {', '.join(classes)}: retrain from a copy of the set as it was taught")
    order = [classes.index(c) for c in boxes.classes]
    share = origin.get("heldout_share")
    sides = teaching_sides(boxes.images, None if share is None else float(share))
    return {k: [replace(im, boxes=tuple(replace(b, kind=order[b.kind]) for b in im.boxes)) for im in side]
            for k, side in (("train", sides.train), ("heldout", sides.heldout))}


def golden_windows(compares: bool, origin: dict[str, Any], expert: str, dataset: Path, images: list[Path],
                   own: dict[str, list[BoxedImage]]) -> dict[Path, Path]:
    """Each image's golden image, for a detector that compares (else none): the reviewed crops' (`images`) golden
    windows the export wrote (golden/ mirroring its tree), the taught set's under the golden folder it was taught
    beside."""
    if not compares:
        return {}
    tree = dataset / "detectors" / expert
    mirror = dataset / GOLDEN / "detectors" / expert
    if not mirror.is_dir():
        raise ValueError(f"{expert} compares each image with the golden board's, but {dataset} has no golden windows "
                         f"beside its crops ({mirror}): export again with the rule set (and its golden board) the "
                         "parts were inspected under")
    out = dict(zip(images, golden_paths(tree, images, mirror)))
    taught = [im.path for side in own.values() for im in side]
    if taught:
        source = Path(origin["dataset"])
        out.update(zip(taught, golden_paths(source, taught, golden_mirror(origin, expert))))
    return out


def line_score(s: DetectionScore) -> Score:
    """The line's count of a DetectionScore: an image flagged when a box reaches the threshold."""
    return Score.counted(s.flagged_with_defects, s.with_defects, s.flagged_clean, s.clean)


@dataclass(frozen=True)
class HeldOutScores:
    scores: dict[str, tuple[Score, Score]]  # each held-out set's (old, new) line, as the gate reads them
    detail: dict[str, dict[str, Any]]  # what the version records of each
    disagree: dict[str, Disagreement]  # the defective images the two call differently
    at_served: dict[str, Score]  # the old weights' line at their served threshold (what the line does now)


@dataclass(frozen=True)
class Judged:
    """The new weights at one threshold, scored beside the old: what a retraining serves, or would the other way."""
    threshold: float
    fit: CrossFit | str | None  # the new weights' cross-fit (a str: why not; None: no threshold chosen)
    fits: tuple[CrossFit, CrossFit] | None  # (old, new), where both were cross-fitted
    held_out: HeldOutScores
    gate: dict[str, Any]


def held_out_scores(arch: YoloDetector, classes: tuple[str, ...], held: dict[str, list[BoxedImage]],
                    found: dict[str, list[list[list[Found]]]], served: float, threshold: float,
                    fits: tuple[CrossFit, CrossFit] | None) -> HeldOutScores:
    """Each held-out set's (old, new) line scores, their detail, the defective images the two call differently and
    the old weights' line at the `served` threshold. Where `fits` (the old weights', the new weights') cross-fitted
    the threshold, each version calls every image at the one its rule chose on the other half: the served threshold
    was chosen on the taught held-out images, so scored at it there the old weights would be scored in-sample beside
    the new ones' out-of-sample figure. Else the old at the `served` threshold, the new at `threshold`. The detail
    keeps both versions' boxes and AP (at `served` and `threshold`) and the old weights' line at `served`. `found`:
    each set's (old, new) boxes; the sets in order, as `fits` number them."""
    scores: dict[str, tuple[Score, Score]] = {}
    detail: dict[str, dict[str, Any]] = {}
    disagree: dict[str, Disagreement] = {}
    at_served: dict[str, Score] = {}
    start = 0
    good = arch.good_class
    for name, (old_found, new_found) in found.items():
        truth = [im.boxes for im in held[name]]
        old = score(classes, truth, old_found, served, good=good)
        new = score(classes, truth, new_found, threshold, good=good)
        lines = (line_score(old), line_score(new))
        cuts = [(served, threshold)] * len(truth)
        if fits is not None:
            lines = (Score.counted(*cross_fitted(classes, truth, old_found, fits[0], start, good)),
                     Score.counted(*cross_fitted(classes, truth, new_found, fits[1], start, good)))
            cuts = [(fits[0].chosen[1 - fits[0].halves[start + i]], fits[1].chosen[1 - fits[1].halves[start + i]])
                    for i in range(len(truth))]
        scored = [i for i, boxes in enumerate(truth) if not ignored_only(boxes)]
        disagree[name] = Disagreement.of([is_flagged(old_found[i], cuts[i][0], good) for i in scored],
                                         [is_flagged(new_found[i], cuts[i][1], good) for i in scored],
                                         [defective(truth[i], good) for i in scored])
        start += len(truth)
        scores[name] = lines
        at_served[name] = line_score(old)
        detail[name] = {"old": old.to_json(), "new": new.to_json(), "old_at_served": at_served[name].to_json(),
                        **({"old_cross_fitted": lines[0].to_json(), "new_cross_fitted": lines[1].to_json()}
                           if fits is not None else {})}
    return HeldOutScores(scores, detail, disagree, at_served)


def retrain_taught_detector(zoo: Zoo, expert: str, dataset: Path, epochs: int, seed: int,
                            say: Callable[[str], None], tolerance: float = 0.0, keep_move: bool = True,
                            tolerance_from: str | None = None) -> Retrained:
    t0 = time.perf_counter()
    origin = taught_detector_version(zoo, expert)
    entry, arch = zoo.entries[expert], zoo.architecture(expert)
    assert origin is not None and isinstance(arch, YoloDetector)
    classes = tuple(entry.classes)
    reviewed = reviewed_boxes(dataset, expert, classes)
    unboxed = unboxed_crops(dataset, expert, classes)
    own = taught_boxes(origin, classes, say)
    say(f"{expert}: {len(reviewed['train'])} reviewed crops to train on, {len(reviewed['heldout'])} held out"
        + (f"; with the {len(own['train'])} + {len(own['heldout'])} images of {origin.get('dataset')} it was taught "
           "from" if own["train"] else "")
        + (f"; {len(unboxed)} reviewed crops without a box, scored by its call of each and trained on none"
           if unboxed else ""))
    held = {"reviewed held-out": reviewed["heldout"], "taught held-out": own["heldout"]}
    if not any(im.scored for side in held.values() for im in side):
        raise ValueError(f"the held-out images of {expert} have no defect boxes to choose its threshold by and score "
                         "it on; review more parts (a share of them is held out)")
    aside = divide(own["train"], reviewed["train"], lambda im: im.identity,
                   lambda im: any(b.kind != arch.good_class for b in im.scored),
                   lambda epoch: any(im.scored for im in epoch))
    taught_train, reviewed_train, epoch = aside.train_own, aside.train_reviewed, aside.epoch
    say(aside.says)
    times = repeats(len(taught_train), len(reviewed_train))
    train = taught_train + reviewed_train * times
    goldens = golden_windows(arch.reference is not None, origin, expert, Path(dataset),
                             [im.path for side in reviewed.values() for im in side] + [p for p, _ in unboxed], own)
    tile = origin.get("tile")
    tiling = Tiling(int(tile[0]), int(tile[1])) if tile else None
    turned = bool(origin.get("any_orientation"))
    pairs = {name: [read_pair(im.path, goldens.get(im.path)) for im in side]
             for name, side in held.items()}  # read once
    identity = list(range(len(classes)))
    old = parse(zoo.path_of(expert).read_bytes())
    with tempfile.TemporaryDirectory(prefix="inspector-retrain-") as tmp:
        root = Path(tmp)
        written = write_split(root, "train", arch, train, identity, turned,
                              [goldens[im.path] for im in train] if goldens else None, tiling)
        # the trainer's validation: the images set aside to choose the epoch by; with none that hold a box, the
        # held-out ones, read at the last epoch only (validate=False keeps the last: nothing is chosen on them)
        chooses = bool(epoch)
        if chooses:
            val, val_pairs = epoch, [read_pair(im.path, goldens.get(im.path)) for im in epoch]
        else:
            val, val_pairs = [im for side in held.values() for im in side], [p for side in pairs.values() for p in side]
        write_split(root, "val", arch, val, identity, tiling=tiling, pairs=val_pairs)
        say(f"fine-tuning {expert} for " + (f"up to {epochs} epochs" if chooses else f"{epochs} epochs, the last kept")
            + f" on {written} " + (f"tiles of {tiling.size} px" if tiling else "images")
            + f" (the reviewed crops x{times})")
        torch.manual_seed(seed)
        state = ultralytics_train(arch, root, classes, epochs, seed, 16, max(2, epochs // 3) if chooses else 0,
                                  chooses, flips=turned, imgsz=None if tiling is None else tiling.size, init=old,
                                  lr=LR, say=say)
    served = arch.threshold
    modules = [arch.materialize(weights, torch.device("cpu")) for weights in (old, state)]
    found = {name: [detect(arch, module, [picture for picture, _ in pairs[name]],
                           [golden for _, golden in pairs[name]] if goldens else None) for module in modules]
             for name, side in held.items() if side}
    budget = float(origin.get("false_call_budget") or FALSE_CALL_BUDGET)
    images = [im for name in found for im in held[name]]
    new_found = [f for name in found for f in found[name][1]]
    chosen = choose_detector_threshold(new_found, [im.boxes for im in images], arch.mode, budget, served)
    # a move the plant made off teaching's threshold is kept, in log-odds, unless left behind (point_move.py)
    taught_at = origin.get("threshold")
    move = offset_of(served, None if taught_at is None else float(taught_at)) if chosen.chosen else 0.0
    truth, identities = [im.boxes for im in images], [im.identity for im in images]
    old_found = [f for name in found for f in found[name][0]]

    def judged(offset: float) -> Judged:
        """The new weights at teaching's rule moved by `offset`, cross-fitted where the images allow, and the old by
        the same rule on the same halves (the halves follow the images alone: their served threshold was chosen on
        the taught held-out images, scored at it there they would be in-sample); each held-out set scored, the
        reviewed escapes nobody boxed too, and the gate."""
        threshold = moved(chosen.threshold, offset)
        fit = cross_fit(new_found, truth, arch.mode, budget, identities, offset) if chosen.chosen else None
        old_fit = cross_fit(old_found, truth, arch.mode, budget, identities, offset) \
            if isinstance(fit, CrossFit) else None
        fits = (old_fit, fit) if isinstance(old_fit, CrossFit) and isinstance(fit, CrossFit) else None
        held_out = held_out_scores(arch, classes, held, found, served, threshold, fits)
        if unboxed:
            held_out.scores[NO_BOX] = unboxed_scores(arch, classes, modules, unboxed, goldens, (served, threshold))
            held_out.detail[NO_BOX] = {"old": held_out.scores[NO_BOX][0].to_json(),
                                       "new": held_out.scores[NO_BOX][1].to_json()}
        gate = recall_kept(held_out.scores, "images", held_out.disagree, tolerance=tolerance,
                           tolerance_from=tolerance_from)
        return Judged(threshold, fit, fits, held_out, gate)

    offset = move if keep_move else 0.0  # --taught-point leaves it behind (point_move.py)
    mine = judged(offset)
    threshold, fit, fits, held_out, gate = mine.threshold, mine.fit, mine.fits, mine.held_out, mine.gate
    says = (f"old weights: served at threshold {served:.3f}"
            + ("" if fits is None else
               ", chosen on held-out images among these (a figure there is in-sample, unlike the new weights'), so "
               "scored as the new are: at the thresholds the rule chooses on the other half "
               f"({fits[0].chosen[0]:.3f}, {fits[0].chosen[1]:.3f})")
            + f"; new weights: threshold {chosen.why}"
            + ("" if abs(move) <= NONE else
               f"; {(kept_says if keep_move else left_says)(move, 'the served threshold (in log-odds)')}: threshold "
               f"{threshold:.3f}")
            + ("" if fit is None else
               f"; scored on the images it was chosen on ({fit}): optimistic" if isinstance(fit, str) else
               f"; each held-out image scored at the threshold chosen on the other half of them ({fit.chosen[0]:.3f}, "
               f"{fit.chosen[1]:.3f}): what the rule does on images it was not chosen on"),)
    say(says[0])
    scores, detail = held_out.scores, held_out.detail
    if fits is not None:  # the table scores them by the rule: what they do as served, said beside it
        says += (at_served_says(f"threshold {served:.3f}", held_out.at_served, "images", abs(move) > NONE),)
        say(says[-1])
    if unboxed:
        new = scores[NO_BOX][1]
        if new.defects:  # what the gate's "not below the old" hides: the old missed these by definition, mostly
            says += (f"the new weights find {new.found} of the {new.defects} reviewed defects nobody boxed (trained on "
                     "none of them: draw their boxes in the review, dashboard history tab or the review's \"box\", to "
                     "teach them)",)
            say(says[-1])
    other_way = None
    if abs(move) > NONE:  # the plant moved the threshold: the same weights the other way round, to choose by
        other = judged(0.0 if keep_move else move)
        other_way = {"threshold": other.threshold, "move_kept": not keep_move, "gate_passed": other.gate["passed"],
                     "eval": other.held_out.detail}
        says += (other_way_says(not keep_move, other.threshold, other.gate["passed"],
                                lines_said(other.held_out.scores), "threshold"),)
        say(says[-1])
    seconds = time.perf_counter() - t0
    version = add_version(zoo, expert, state, origin="retrained from reviews", dataset=str(dataset),
                          trained_from=entry.weights_sha256, seconds=round(seconds, 1), threshold=threshold,
                          operating={"threshold": threshold}, threshold_chosen=chosen.why, threshold_offset=offset,
                          move_left_behind=None if keep_move else round(move, 6), other_way=other_way,
                          served_threshold=served, false_call_budget=budget, any_orientation=turned, tile=tile,
                          taught_on=taught_scale(train),
                          reviewed_train=len(reviewed_train), reviewed_unboxed=len(unboxed), synthetic_train=0,
                          epoch_chosen_on=aside.counts or None,
                          gate=gate, trained_with=trained_with(), eval=detail)
    return Retrained(expert, version, scores, len(reviewed_train), 0, seconds, 0, gate, (aside.says,) + says)
