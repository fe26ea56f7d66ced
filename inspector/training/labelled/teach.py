"""`inspector zoo train --new EXPERT --from DIR`: a new classifier taught from a labelled folder, added to a zoo.

The folder is split by identity (folder.py), or by its own split folders (own_split.py), the input sized from the
training crops (sizing.py), the classifier trained with its own classes (trainer.py) and its epoch chosen on a share
of the training identities set aside for that (epoch_split.py; an epoch still draws as many crops as the whole
training side holds), and its operating threshold chosen on the held-out crops under a false-call budget. So the
held-out crops chose the threshold alone, and the cross-fitted line says what that choice is worth on crops it was
not made on. The expert enters the zoo (made here when there is none) serving that version, its record naming the
folder, the split, what chose the epoch, the threshold and the held-out scores; a rule set routes parts to it by
name.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ...experts.resnet import ResNetClassifier
from ...experts.zoo import MANIFEST, ExpertEntry, Zoo, ZooMissing, report_dir, write_expert, write_manifest
from ...ingest.photometric import INPUT_VERSION
from ...runtime.diskio import write_atomically
from ..provenance import trained_with
from .classifier_margin import cross_fitted_calls
from .epoch_split import EPOCH_SHARE, EpochSides, divide
from .folder import FolderError, LabelledCrop, LabelledFolder, image_size, load, read_folder
from .golden_tree import check_same_window, golden_paths
from .metrics import logodds, table
from .own_split import Sides, teaching_sides
from .plots import write_plots
from .schedule import MIN_EPOCH
from .sizing import InputFit, choose_input
from .trainer import FALSE_CALL_BUDGET, Crops, Taught, train

ZOO_KEY = "labelled"  # the build key of a zoo made by teaching (nothing rebuilds it)
TAUGHT = "taught from labelled crops"  # the origin teaching records in an expert's first version


@dataclass
class TeachPlan:
    expert: str
    source: Path
    zoo: Path
    good: str | None = None
    depth: int = 10
    input_size: int | None = None  # None: from the data
    heldout_share: float | None = None  # None: the folder's own split, else a fifth by identity (own_split.py)
    epochs: int = 30
    patience: int = 6
    seed: int = 0
    augment: float = 1.0
    false_call_budget: float = FALSE_CALL_BUDGET
    epoch_size: int | None = None
    reference: Path | None = None  # golden crops, the folder's tree mirrored: a golden-comparison expert
    any_orientation: bool = False  # the classes do not depend on a crop's orientation: train on it turned too
    reference_kind: str = "composite"  # how it compares (experts/base.py REFERENCES): colour keeps colour
    heldout: frozenset[str] | None = None  # the identities to hold out, chosen by the caller; None: the hash split
    kinds: dict[str, str] | None = None  # each identity's kind (board teaching: a part's type), kept for retraining
    # of each kind's training identities, set aside to choose the epoch by (epoch_split.py); 0: the held-out crops
    # choose it (a caller whose held-out crops are themselves a validation split, its scores made elsewhere)
    epoch_share: float = EPOCH_SHARE


@dataclass
class TaughtExpert:
    plan: TeachPlan
    classes: tuple[str, ...]
    counts: dict[str, dict[str, int]]  # split -> class -> crops
    fit: InputFit
    taught: Taught
    entry: ExpertEntry
    split_how: str = ""  # how the folder was split, said to the engineer
    cross_fitted: dict[str, Any] | None = None  # the threshold rule scored on crops it was not chosen on (or why not)
    epoch_chosen: str = ""  # what chose the epoch, said to the engineer

    @property
    def epoch_set_aside(self) -> bool:
        """Training crops set aside chose the epoch (else the whole course ran, or the held-out crops chose it)."""
        return sum(self.counts.get("epoch", {}).values()) > 0

    @property
    def heldout_chose_epoch(self) -> bool:
        return self.plan.epoch_share <= 0

    def to_json(self) -> dict[str, Any]:
        return {"expert": self.plan.expert, "zoo": str(self.plan.zoo), "source": str(self.plan.source),
                "classes": list(self.classes), "counts": self.counts, "input": asdict(self.fit),
                "threshold": self.taught.threshold, "best_epoch": self.taught.best_epoch,
                "epochs_run": self.taught.epochs_run, "seconds": round(self.taught.seconds, 1),
                "weights_sha256": self.entry.weights_sha256, "heldout": self.taught.heldout.to_json(),
                "history": self.taught.history, "seed": self.plan.seed, "heldout_cross_fitted": self.cross_fitted,
                "epoch_chosen": self.epoch_chosen}

    def summary(self) -> str:
        c = self.counts
        golden = f", beside the golden crops of {self.plan.reference}" if self.plan.reference else ""
        lines = [f"{self.plan.expert}: {len(self.classes)} classes ({', '.join(self.classes)}; good: "
                 f"{self.classes[0]}), input {self.fit.describe()}{golden}",
                 f"{sum(c['train'].values())} crops to train on, {sum(c['heldout'].values())} held out "
                 f"({', '.join(f'{k} {v}' for k, v in c['heldout'].items())}): {self.split_how}",
                 self.epoch_chosen,
                 f"kept epoch {self.taught.best_epoch} of {self.taught.epochs_run} run "
                 f"({self.taught.seconds:.0f} s); operating threshold: log-odds of good >= {self.taught.threshold:.3f} "
                 f"(false calls within {100 * self.plan.false_call_budget:.1f}% on the held-out good crops for 95% of "
                 "the resamples of their identities)",
                 "", "held-out crops (" + ("they chose the epoch and the threshold, so read these as optimistic"
                                           if self.heldout_chose_epoch else "they chose the threshold, not the epoch: "
                                           "the cross-fitted line below says what choosing it on them is worth")
                 + "; `inspector zoo evaluate` on crops the expert never met gives the figures to trust):",
                 table(self.taught.heldout)]
        if self.cross_fitted is not None:
            lines.append(cross_fit_line(self.cross_fitted, self.heldout_chose_epoch))
        return "\n".join(lines)


def threshold_cross_fitted(odds: np.ndarray, heldout: Crops, budget: float, seed: int) -> dict[str, Any]:
    """The served threshold's rule scored on crops it was not chosen on: each held-out crop called at the threshold
    the rule chooses on the other half of the identities (classifier_margin.py); why not, with too few."""
    fitted = cross_fitted_calls(odds, heldout, budget, seed)
    if fitted is None:
        return {"why_not": "a half of the held-out identities holds no good crop or no defect"}
    flags, chosen = fitted
    bad = heldout.labels != 0
    return {"thresholds": list(chosen), "found": int(flags[bad].sum()), "defects": int(bad.sum()),
            "false_calls": int(flags[~bad].sum()), "good": int((~bad).sum())}


def cross_fit_line(fit: dict[str, Any], heldout_chose_epoch: bool = False) -> str:
    """The cross-fitted figures as the summary says them (`heldout_chose_epoch`: as well as the threshold)."""
    if "why_not" in fit:
        return f"cross-fitted: not scored ({fit['why_not']}): the table above is all there is"
    a, b = fit["thresholds"]
    epoch = "; the epoch was still chosen on them all" if heldout_chose_epoch else ""
    return (f"cross-fitted (each held-out crop called at the threshold the rule chose on the other half of the "
            f"identities, {a:.3f} and {b:.3f}{epoch}): defect recall "
            f"{100 * fit['found'] / fit['defects']:.1f}% ({fit['found']}/{fit['defects']}), false calls "
            f"{100 * fit['false_calls'] / fit['good']:.1f}% ({fit['false_calls']}/{fit['good']})")


def split(folder: LabelledFolder, share: float | None,
          heldout: frozenset[str] | None = None) -> Sides[LabelledCrop]:
    """The folder's crops by side: the identities `heldout` names held out, or without it the folder's own split
    or the hash split at `share` (own_split.py); a test split's crops are never taught."""
    out = teaching_sides(folder.crops, share, "crops", heldout)
    for side, items in (("train", out.train), ("heldout", out.heldout)):
        labels = {c.label for c in items}
        if folder.good not in labels or len(labels) < 2:
            raise FolderError(f"the {side} side of the split of {folder.root} has "
                              f"{', '.join(sorted(labels)) or 'no crops'}: it needs good crops and defects. "
                              f"{len({c.identity for c in folder.crops})} identities in all: add crops of more parts "
                              "or boards (file names up to `__` name the part or board), or change --heldout")
    return out


def data_hash(folder: LabelledFolder) -> str:
    """What the expert was taught from: every crop's class, name and size (a crop changed or added changes it)."""
    h = hashlib.sha256()
    for c in folder.crops:
        h.update(f"{c.label}/{c.path.relative_to(folder.root)}:{c.path.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def read_crops(folder: LabelledFolder, items: list, desc: str, reference: Path | None = None) -> Crops:
    """The crops in memory; with `reference`, each one's golden crop too, at the same path under that folder."""
    images = [load(c) for c in tqdm(items, desc=desc, unit="crop", disable=None, leave=False)]
    refs = None
    if reference is not None:
        paths = golden_paths(folder.root, [c.path for c in items], reference)
        refs = [load(LabelledCrop(p, c.label, c.identity)) for p, c in zip(paths, items)]
        for p, image, ref in zip(paths, images, refs):
            check_same_window(p, image, ref)
    return Crops(images, np.array([folder.index(c.label) for c in items], dtype=np.int64), refs,
                 [c.identity for c in items])


def prepare(plan: TeachPlan, say: Callable[[str], None] = lambda _m: None) -> tuple[
        Zoo | None, LabelledFolder, Sides[LabelledCrop], EpochSides[LabelledCrop]]:
    """The zoo (None: none yet), the folder read and split, its training side divided (what trains, what chooses
    the epoch), all of it said; nothing trained or written (`zoo train --new --check` stops here)."""
    zoo = open_zoo(plan.zoo)
    if zoo is not None and plan.expert in zoo.entries:
        raise ValueError(f"the zoo at {plan.zoo} already has an expert {plan.expert!r}; teach under a new name and "
                         "route its parts to it in the rule set (its old results keep naming the old one)")
    folder = read_folder(plan.source, plan.good)
    sides = split(folder, plan.heldout_share, plan.heldout)
    say(f"{plan.source}: classes {', '.join(f'{k} {v}' for k, v in folder.counts().items())}; "
        f"{len(sides.train)} crops to train on, {len(sides.heldout)} held out ({sides.how})")
    if sides.warning:
        say(f"warning: {sides.warning}")
    aside = epoch_sides(plan, folder, sides.train)
    say(aside.says)
    return zoo, folder, sides, aside


def check_input(plan: TeachPlan, aside: EpochSides[LabelledCrop]) -> InputFit:
    """The input teaching would choose, from the file headers of the crops it trains on (nothing decoded)."""
    return choose_input([image_size(c.path)[::-1] for c in aside.train_own], plan.input_size)


def epoch_sides(plan: TeachPlan, folder: LabelledFolder, train: list[LabelledCrop]) -> EpochSides[LabelledCrop]:
    """The training crops divided into what is trained on and what chooses the epoch (epoch_split.py: by identity,
    each kind, defective or clean, on its own); with the plan's share 0, nothing set aside."""
    kinds = plan.kinds or {}
    return divide(train, [], lambda c: c.identity, lambda c: c.label != folder.good,
                  lambda epoch: len({c.label == folder.good for c in epoch}) == 2, "crops", plan.epoch_share,
                  kind=lambda c: kinds.get(c.identity, ""), reader="")


def teach(plan: TeachPlan, say: Callable[[str], None] = lambda _m: None) -> TaughtExpert:
    zoo, folder, sides, aside = prepare(plan, say)
    counts = {side: {k: sum(1 for c in items if c.label == k) for k in folder.classes}
              for side, items in (("train", aside.train_own), ("epoch", aside.epoch), ("heldout", sides.heldout))}
    train_set = read_crops(folder, aside.train_own, "reading training crops", plan.reference)
    epoch_set = read_crops(folder, aside.epoch, "reading crops set aside", plan.reference) if aside.epoch else None
    heldout = read_crops(folder, sides.heldout, "reading held-out crops", plan.reference)
    reference = plan.reference_kind if plan.reference is not None else None
    fit = choose_input([im.shape[:2] for im in train_set.images], plan.input_size)
    say(f"input: {fit.describe()}")
    arch = ResNetClassifier(plan.depth, fit.input_size, len(folder.classes), fit.fit, reference=reference)
    # the crops set aside choose the epoch; where too few could be spared, the whole course is run and the last
    # epoch kept (the held-out crops only watched), unless the caller asked for the held-out crops to choose (0)
    # an epoch draws as many crops as the whole training side holds (at least MIN_EPOCH): setting crops aside to
    # choose the epoch by does not shorten the schedule
    per_epoch = plan.epoch_size or max(len(sides.train), MIN_EPOCH)
    taught = train(arch, folder.classes, train_set, heldout, plan.epochs, plan.patience, plan.seed, plan.augment,
                   plan.false_call_budget, per_epoch, say, any_orientation=plan.any_orientation,
                   keep_last=plan.epoch_share > 0 and not aside.epoch, choose_on=epoch_set)
    served = ResNetClassifier(plan.depth, fit.input_size, len(folder.classes), fit.fit, taught.threshold, reference)
    plan.zoo.mkdir(parents=True, exist_ok=True)
    entry = write_expert(plan.zoo, plan.expert, "classifier", served.spec(), taught.state, digest=True,
                         classes=folder.classes, data_hash=data_hash(folder), val_accuracy=taught.heldout.accuracy,
                         train_samples=len(train_set), train_seed=plan.seed)
    version = {"weights_sha256": entry.weights_sha256, "file": entry.file, "origin": TAUGHT,
               "dataset": str(plan.source), "reference": None if plan.reference is None else str(plan.reference),
               "threshold": taught.threshold, "heldout_share": plan.heldout_share, "split": sides.how,
               "heldout_identities": None if plan.heldout is None else sorted(plan.heldout),
               "identity_kinds": None if plan.kinds is None else dict(sorted(plan.kinds.items())),
               "false_call_budget": plan.false_call_budget, "epoch_share": plan.epoch_share,
               "epoch_chosen_on": aside.counts or None, "any_orientation": plan.any_orientation,
               "trained_with": trained_with(), "eval": {"heldout": taught.heldout.to_json()}}
    entry = ExpertEntry(**{**asdict(entry), "versions": (version,), "served": (entry.weights_sha256,)})
    add_entry(plan.zoo, zoo, entry, plan.seed)
    write_plots(taught.heldout, heldout.labels, taught.heldout_logits,
                report_dir(plan.zoo, plan.expert, entry.weights_sha256),
                f"{plan.expert} (held out)")
    assert taught.heldout_logits is not None
    checked = threshold_cross_fitted(logodds(taught.heldout_logits), heldout, plan.false_call_budget, plan.seed)
    return TaughtExpert(plan, folder.classes, counts, fit, taught, entry, sides.how, checked, aside.says)


def open_zoo(root: Path) -> Zoo | None:
    try:
        zoo = Zoo.load(root)
    except ZooMissing:
        return None
    if zoo.input_version not in (None, INPUT_VERSION):
        raise ValueError(f"the zoo at {root} holds experts of crops of input version {zoo.input_version}; this "
                         f"release teaches input version {INPUT_VERSION}: teach into another zoo (--zoo)")
    return zoo


def add_entry(root: Path, zoo: Zoo | None, entry: ExpertEntry, seed: int) -> None:
    if zoo is None:
        write_manifest(root, ZOO_KEY, seed, [entry], input_version=INPUT_VERSION)
        return
    path = root / MANIFEST
    doc = json.loads(path.read_text(encoding="utf-8"))  # fresh: another process may have changed another entry
    doc["experts"].append(asdict(entry))
    doc.setdefault("input_version", INPUT_VERSION)
    write_atomically(path, json.dumps(doc, indent=1).encode())
