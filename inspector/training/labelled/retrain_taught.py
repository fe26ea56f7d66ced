"""Reviews retrain an expert taught from labelled images, through the same loop as the demo's experts.

`inspector zoo train --expert NAME --from DATASET` on a taught expert: the dataset's reviewed crops of it (exported
under its own classes, `dataset export --zoo`) join the labelled folder it was taught from (still where its first
version says, when it is), reviewed crops repeated to about a third of what it sees (each at most MAX_REPEATS times);
it trains on from the weights in service at a quarter of the teaching's step, keeps the epoch preferred by training
crops set aside for that (epoch_split.py: never the held-out crops the gate reads, the folder's held-out side and the
reviewed held-out split; with too few to spare, the last epoch). A fine-tune moves the scale of the log-odds, so the
new weights get a margin of their own, chosen again by teaching's rule on the held-out crops (moved as far as the
type's served margin sits from teaching's) and carried by the version as its operating point, scored cross-fitted
(classifier_margin.py), and the served weights scored beside them by the same rule on the same halves (their served
margin was chosen on the taught held-out crops: scored there they would be scored in-sample). No synthetic crops: the
renderer never drew this expert's parts. The old and the new weights are scored on both held-out sets and the new ones
added as a version, not served (`zoo activate`, or the kiosk's swap). An expert that compares with the golden board
(board teaching's) reads each crop beside its golden window: the reviewed crops' the export cut from the rule set's
golden board (results/golden_windows.py), its folder's from the golden crops it was taught beside.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from ...experts.resnet import ResNetClassifier
from ...experts.versions import add_version
from ...experts.zoo import Zoo
from ...runtime.safetensors_io import parse
from ..provenance import trained_with
from ..retrain import Retrained, Score
from .classifier_margin import NewMargin, crop_identities, new_margin, old_calls
from .epoch_split import EpochSides, divide
from .folder import identity_of, read_folder
from .metrics import logodds
from .point_move import NONE, left_says, other_way_says
from .recall_gate import EVERY_SET, Disagreement, at_served_says, lines_said, recall_kept
from .teach import TAUGHT, read_crops, split
from .trainer import FALSE_CALL_BUDGET, LR, Crops, logits_of, train

REVIEWED_SHARE = 1 / 3
MAX_REPEATS = 20  # a reviewed crop weighs at most as much as this many of the folder's


def taught_version(zoo: Zoo, expert: str) -> dict[str, Any] | None:
    """The version teaching recorded, when the expert was taught from labelled images (else None)."""
    entry = zoo.entries[expert]
    if not entry.classes:
        return None
    return next((v for v in entry.versions if v.get("origin") == TAUGHT), None)


def served_type(origin: dict[str, Any], expert: str) -> str | None:
    """The one component type `expert` serves, where its teacher says (board teaching's per-type entries, each
    sharing one classifier: its version's `component_type`, or for a zoo taught before that was recorded its name,
    cls-<type>, among the types the teacher recorded); None: an expert of every part its folder holds."""
    if origin.get("component_type"):
        return str(origin["component_type"])
    types = set((origin.get("identity_kinds") or {}).values())
    return next((t for t in sorted(types) if expert == f"cls-{t}"), None)


def heldout_sets(own_heldout: Crops, total: int, serves: str | None,
                 kinds: dict[str, str]) -> tuple[dict[str, np.ndarray], list[str], str | None]:
    """The held-out crops' sets, as indices into them (the taught set's first, then the reviewed), the names the
    gate reads, and why, where it reads a stand-in. An expert that serves one type of a board (`serves`) has its
    taught held-out crops parted into that type's and the other types': its new weights will call only its own, so
    the gate reads its own type's and the reviewed ones; where its own type holds no held-out defect (a type of one
    part, none held out) the other types' parts stand in, said."""
    own_n = len(own_heldout)
    sets = {"reviewed held-out": np.arange(own_n, total)}
    if serves is None:
        sets["taught held-out"] = np.arange(own_n)
        return sets, list(sets), None
    mine = np.array([kinds.get(i) == serves for i in crop_identities(own_heldout)], dtype=bool)
    own_name = f"taught held-out, {serves}"
    sets[own_name] = np.flatnonzero(mine)
    sets["taught held-out, other types"] = np.flatnonzero(~mine)
    if (own_heldout.labels[mine] != 0).any():
        return sets, ["reviewed held-out", own_name], None
    return sets, list(sets), (f"{serves} holds no held-out defect of its own (a type of few parts: none was held "
                              "out), so the gate reads the other types' held-out parts as a stand-in: these weights "
                              f"will call only {serves}")


def reviewed_crops(dataset: Path, expert: str, classes: tuple[str, ...], golden: bool = False) -> dict[str, Crops]:
    """The dataset's crops of `expert` by split, labelled by the expert's own classes; with `golden`, each one's
    golden window beside it (results/golden_windows.py)."""
    manifest = Path(dataset) / "manifest.json"
    if not manifest.is_file():
        raise ValueError(f"{dataset} holds no dataset manifest; write one with `inspector dataset export --zoo ZOO`")
    images: dict[str, list[np.ndarray]] = {"train": [], "heldout": []}
    windows: dict[str, list[np.ndarray]] = {"train": [], "heldout": []}
    labels: dict[str, list[int]] = {"train": [], "heldout": []}
    identities: dict[str, list[str]] = {"train": [], "heldout": []}
    for item in json.loads(manifest.read_text(encoding="utf-8"))["items"]:
        if item["expert"] != expert or item["role"] != "classifier":
            continue
        if item["label"] not in classes:
            raise ValueError(f"{item['file']} is labelled {item['label']!r}, not one of {expert}'s classes "
                             f"({', '.join(classes)}): export the dataset again with --zoo naming its zoo")
        images[item["split"]].append(read_listed(dataset, item["file"]))
        if golden:
            windows[item["split"]].append(read_listed(dataset, golden_of(item, expert)))
        labels[item["split"]].append(classes.index(item["label"]))
        identities[item["split"]].append(identity_of(Path(item["file"])))
    if not images["train"]:
        raise ValueError(f"the dataset {dataset} has no training crops of {expert} (review more of its parts, "
                         "export again with --zoo)")
    return {k: Crops(images[k], np.array(labels[k], dtype=np.int64), windows[k] if golden else None, identities[k])
            for k in images}


def golden_of(item: dict[str, Any], expert: str) -> str:
    """The golden window the export wrote beside an item (ValueError saying why there is none)."""
    if item.get("golden"):
        return str(item["golden"])
    why = item.get("golden_missing") or ("the dataset was exported without golden windows (a rule set without "
                                         "`golden:`, or an export before they were written)")
    raise ValueError(f"{expert} compares each crop with the golden board's, but {item['file']} has no golden window "
                     f"beside it: {why}; export again with the rule set the parts were inspected under")


def read_listed(dataset: Path, file: str) -> np.ndarray:
    image = cv2.imread(str(Path(dataset) / file), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError(f"{Path(dataset) / file} is listed in the manifest but cannot be read")
    return image


def joined(*parts: Crops) -> Crops:
    refs = None if any(p.references is None for p in parts) else [r for p in parts for r in p.references or []]
    names = None if any(p.identities is None for p in parts) else [n for p in parts for n in p.identities or []]
    return Crops([im for p in parts for im in p.images], np.concatenate([p.labels for p in parts]), refs, names)


def subset(crops: Crops, at: list[int]) -> Crops:
    """The crops at `at`, in that order."""
    return Crops([crops.images[i] for i in at], crops.labels[at] if at else crops.labels[:0],
                 None if crops.references is None else [crops.references[i] for i in at],
                 None if crops.identities is None else [crops.identities[i] for i in at])


def epoch_crops(own: Crops, reviewed: Crops,
                kinds: dict[str, str] | None = None) -> tuple[Crops, Crops, Crops, EpochSides[tuple[int, int]]]:
    """The taught set's and the reviews' training crops less those set aside to choose the epoch by
    (epoch_split.py), the crops set aside, and how they were divided (each crop its (source, index): 0 the taught
    set's, 1 the reviews'). `kinds`: each taught identity's kind, where its teacher recorded them (board teaching:
    a part's type)."""
    sources = (own, reviewed)
    names = [crop_identities(c) for c in sources]
    sides = divide([(0, i) for i in range(len(own))], [(1, i) for i in range(len(reviewed))],
                   lambda item: names[item[0]][item[1]], lambda item: bool(sources[item[0]].labels[item[1]] != 0),
                   lambda epoch: len({bool(sources[s].labels[i] != 0) for s, i in epoch}) == 2, "crops",
                   kind=lambda item: (kinds or {}).get(names[item[0]][item[1]], ""))
    aside = joined(*(subset(c, [i for s, i in sides.epoch if s == n]) for n, c in enumerate(sources)))
    return (subset(own, [i for _, i in sides.train_own]), subset(reviewed, [i for _, i in sides.train_reviewed]),
            aside, sides)


def repeated(crops: Crops, times: int) -> Crops:
    return Crops(crops.images * times, np.tile(crops.labels, times),
                 None if crops.references is None else crops.references * times)


def golden_mirror(origin: dict[str, Any], expert: str) -> Path:
    """The golden crops a golden-comparison expert was taught beside (its folder's tree mirrored), checked there."""
    mirror = Path(origin.get("reference") or "")
    if not origin.get("reference") or not mirror.is_dir():
        raise ValueError(f"{expert} was taught beside the golden crops of {origin.get('reference')}, which are gone "
                         "while its folder is not: put them back, or move the folder away to retrain on the reviewed "
                         "crops alone")
    return mirror


def repeats(own: int, reviewed: int) -> int:
    """How many times each reviewed crop is taught an epoch: to about REVIEWED_SHARE of what the expert sees, but
    never more than MAX_REPEATS times (a handful of reviews repeated hundreds of times pulls the weights off all
    they knew: SnapperGPS, one reviewed crop 678 times, recall 72.0% to 49.0%; docs/pages/results/boards.md)."""
    return max(1, min(MAX_REPEATS, round(REVIEWED_SHARE / (1 - REVIEWED_SHARE) * own / reviewed)))


def retrain_taught(zoo: Zoo, expert: str, dataset: Path, epochs: int, seed: int,
                   say: Callable[[str], None], tolerance: float = 0.0, keep_move: bool = True,
                   tolerance_from: str | None = None) -> Retrained:
    t0 = time.perf_counter()
    origin = taught_version(zoo, expert)
    entry, arch = zoo.entries[expert], zoo.architecture(expert)
    assert origin is not None and isinstance(arch, ResNetClassifier)
    classes = tuple(entry.classes)
    compares = arch.reference is not None
    reviewed = reviewed_crops(dataset, expert, classes, golden=compares)
    folder_path = Path(origin.get("dataset") or "")
    mirror = golden_mirror(origin, expert) if compares and folder_path.is_dir() else None
    if folder_path.is_dir():
        folder = read_folder(folder_path, classes=classes)
        named = origin.get("heldout_identities")  # a split its teacher chose (board teaching: by type)
        share = origin.get("heldout_share")  # None: the folder's own split (own_split.py)
        sides = split(folder, None if share is None else float(share), None if named is None else frozenset(named))
        own = {k: read_crops(folder, v, f"reading {k} crops", mirror) for k, v in (("train", sides.train),
                                                                                    ("heldout", sides.heldout))}
        say(f"{expert}: {len(reviewed['train'])} reviewed crops to train on, {len(reviewed['heldout'])} held out; "
            f"with the {len(own['train'])} + {len(own['heldout'])} crops of {folder_path} it was taught from")
    else:
        own = {k: Crops([], np.zeros(0, dtype=np.int64), [] if compares else None, []) for k in ("train", "heldout")}
        say(f"{expert}: its teaching folder {folder_path} is gone; training on the {len(reviewed['train'])} "
            "reviewed crops alone")
    heldout = joined(own["heldout"], reviewed["heldout"])
    if not len(heldout) or not (heldout.labels == 0).any() or not (heldout.labels != 0).any():
        raise ValueError(f"the held-out crops of {expert} need good parts and defects to choose its threshold on; "
                         "review more parts (a share of them is held out)")
    own_train, reviewed_train, set_aside, aside = epoch_crops(own["train"], reviewed["train"],
                                                              origin.get("identity_kinds"))
    say(aside.says)
    times = repeats(len(own_train), len(reviewed_train))
    train_set = joined(own_train, repeated(reviewed_train, times))
    old = parse(zoo.path_of(expert).read_bytes())
    turn = bool(origin.get("any_orientation"))  # what its teacher declared of its classes holds for its reviews
    # the trainer keeps the epoch the crops set aside prefer; with none set aside it runs the whole course and keeps
    # the last, the held-out crops only watched
    taught = train(arch, classes, train_set, heldout, epochs, max(2, epochs // 3), seed, say=say, init=old,
                   lr=LR / 4, any_orientation=turn, keep_last=not aside.epoch,
                   choose_on=set_aside if aside.epoch else None)
    assert taught.heldout_logits is not None
    new_logits = taught.heldout_logits
    # the new weights get their own margin, chosen again by teaching's rule (a fine-tune moves the scale of the
    # log-odds), scored cross-fitted (classifier_margin.py)
    cut = float(arch.good_margin if arch.good_margin is not None else origin.get("threshold") or 0.0)
    old_logits, _ = logits_of(arch, arch.materialize(old, torch.device("cpu")), heldout)
    budget = float(origin.get("false_call_budget") or FALSE_CALL_BUDGET)
    taught_at = origin.get("threshold")
    move = 0.0 if taught_at is None else cut - float(taught_at)  # the plant's move off teaching's (point_move.py)
    carried = float(taught_at) if taught_at is not None and keep_move else None  # the move kept on top of the rule
    # the held-out crops are the taught set's, then the reviewed ones (joined); one type's expert has its own parted
    serves = served_type(origin, expert)
    sides, read, stand_in = heldout_sets(own["heldout"], len(heldout), serves, origin.get("identity_kinds") or {})
    defective = heldout.labels != 0
    rule = EVERY_SET if len(read) == len(sides) else (
        f"recall on the {' and the '.join(read)} crops not below the served weights' (the other types' row is shown, "
        f"not read: these weights will call only {serves})")
    old_odds, new_odds = logodds(old_logits), logodds(new_logits)

    def judged(fit: NewMargin) -> tuple[dict[str, tuple[Score, Score]], dict[str, Any], str]:
        """The old and new weights scored on each held-out set with the new weights at `fit`'s margin, the old by
        the same rule on the same halves (classifier_margin.old_calls: at their served margin, chosen on the taught
        held-out crops, they would be scored in-sample beside the new ones' out-of-sample figure); the gate; what
        was done with the old, said."""
        old_flags, old_why = old_calls(old_odds, heldout, cut, fit, budget, seed)
        scores = {name: (Score.of(old_flags[at], defective[at]), Score.of(fit.flags[at], defective[at]))
                  for name, at in sides.items()}
        gate = recall_kept({name: scores[name] for name in read}, "crops",
                           {name: Disagreement.of(old_flags[sides[name]], fit.flags[sides[name]],
                                                  defective[sides[name]]) for name in read},
                           rule, tolerance, tolerance_from)
        return scores, gate, old_why

    fit = new_margin(new_odds, heldout, cut, carried, budget, seed)
    scores, gate, old_why = judged(fit)
    says = (f"{old_why}; new weights: {fit.why}"
            + ("" if keep_move or abs(move) <= NONE else "; " + left_says(move, "the type's margin")),)
    say(says[0])
    at_served = {name: Score.of(old_odds[at] < cut, defective[at]) for name, at in sides.items()}
    if fit.half_margins is not None:  # the table scores them by the rule: what they do as served, said beside it
        says += (at_served_says(f"margin {cut:.3f}", at_served, "crops", abs(move) > NONE),)
        say(says[-1])
    other_way = None
    if abs(move) > NONE:  # the plant moved the point: the same weights the other way round, to choose by
        other = new_margin(new_odds, heldout, cut, None if keep_move else float(taught_at), budget, seed)
        other_scores, other_gate, _ = judged(other)
        other_way = {"margin": other.margin, "move_kept": not keep_move, "gate_passed": other_gate["passed"],
                     "eval": {k: {"old": a.to_json(), "new": b.to_json()} for k, (a, b) in other_scores.items()}}
        says += (other_way_says(not keep_move, other.margin, other_gate["passed"], lines_said(other_scores)),)
        say(says[-1])
    if stand_in:
        says += (stand_in,)
        say(stand_in)
    seconds = time.perf_counter() - t0
    version = add_version(zoo, expert, taught.state, origin="retrained from reviews", dataset=str(dataset),
                          trained_from=entry.weights_sha256, seconds=round(seconds, 1), threshold=fit.margin,
                          operating={"good_margin": fit.margin}, margin_chosen=fit.why, served_margin=cut,
                          margin_offset=fit.offset, move_left_behind=None if keep_move else round(move, 6),
                          other_way=other_way,
                          false_call_budget=budget, any_orientation=turn,
                          reviewed_train=len(reviewed_train), synthetic_train=0,
                          epoch_chosen_on=aside.counts or None, gate=gate, component_type=serves,
                          trained_with=trained_with(),
                          eval={k: {"old": a.to_json(), "new": b.to_json(), "old_at_served": at_served[k].to_json()}
                                for k, (a, b) in scores.items()})
    return Retrained(expert, version, scores, len(reviewed_train), 0, seconds, 0, gate, (aside.says,) + says)
