"""`inspector zoo train --expert NAME --from DATASET`: fine-tune one classifier on reviewed crops, check it.

The expert in service is the starting point. Its training set is the dataset's reviewed crops of the `train`
split, repeated so that they are about a third of what it sees each epoch, plus freshly rendered synthetic
crops of its component types (so it keeps what it knew: the reviewed crops are few and mostly of one kind of
mistake), all through the camera augmentation, drawn afresh every epoch. The old and the new expert are then
scored on crops neither was trained on: the dataset's `heldout` split (the plant's own parts, labelled by its
operators) and held-out synthetic boards (every defect class, the renderer's truth). The new weights are added
to the zoo as a version, not served: `inspector zoo activate` or the kiosk's POST /experts/swap does that.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from ..experts.resnet import ResNetClassifier
from ..experts.versions import add_version
from ..experts.zoo import Zoo
from ..routing.rules import RuleSet
from ..runtime.safetensors_io import parse
from .classifier import LR, to_batch, train_classifier
from .labelled.teach import TAUGHT
from .new_look import new_look_defects
from .provenance import trained_with
from .samples import TRAINING_RATES, PartSample, collect

FINE_TUNE_LR = LR / 4  # from weights that already work: a smaller step keeps what they knew
REVIEWED_SHARE = 1 / 3
NEW_LOOK_PER_CROP = 3  # defects made from each reviewed good crop (new_look.py), the classes in turn
RECALL_FLOOR = 0.95  # the recall gate: the new version's recall on held-out new-look defects must reach this
FEW_DEFECTS = 30  # held-out defects in a set under which a taught expert's passed gate says what it cannot see
NEW_LOOK = "new-look defects"  # the held-out set of defects made from held-out reviewed crops


@dataclass(frozen=True)
class Score:
    crops: int
    defects: int
    found: int  # defective crops flagged
    good: int
    false_calls: int  # good crops flagged

    @classmethod
    def counted(cls, found: int, defects: int, false_calls: int, good: int) -> Score:
        """From the counts of each kind, flagged and in all."""
        return cls(defects + good, defects, found, good, false_calls)

    @classmethod
    def of(cls, flagged: Sequence[bool], defective: Sequence[bool]) -> Score:
        """From each crop's call (flagged or not) and what it is (a defect or not)."""
        pairs = list(zip((bool(f) for f in flagged), (bool(d) for d in defective)))
        return cls.counted(sum(f and d for f, d in pairs), sum(d for _, d in pairs),
                           sum(f and not d for f, d in pairs), sum(not d for _, d in pairs))

    @property
    def recall(self) -> float | None:
        return self.found / self.defects if self.defects else None

    @property
    def false_call_rate(self) -> float | None:
        return self.false_calls / self.good if self.good else None

    def to_json(self) -> dict[str, Any]:
        return {"crops": self.crops, "recall": self.recall, "false_call_rate": self.false_call_rate,
                "false_calls": self.false_calls, "good": self.good, "found": self.found, "defects": self.defects}


@dataclass
class Retrained:
    expert: str
    version: dict[str, Any]
    scores: dict[str, tuple[Score, Score]]  # held-out set -> (old, new)
    reviewed_train: int
    synthetic_train: int
    seconds: float
    new_look_train: int = 0  # defects made from reviewed good crops and trained on
    gate: dict[str, Any] | None = None  # {"passed": bool, "reasons": [...]}: whether this version may be served
    says: tuple[str, ...] = ()  # printed above the table (where each version is scored: its operating point)


def reviewed_samples(dataset: Path, expert: str) -> dict[str, list[PartSample]]:
    """The dataset's crops of one classifier by split; ValueError when the dataset has none."""
    manifest_path = Path(dataset) / "manifest.json"
    if not manifest_path.is_file():
        raise ValueError(f"{dataset} holds no dataset manifest; write one with `inspector dataset export`")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    out: dict[str, list[PartSample]] = {"train": [], "heldout": []}
    for item in manifest["items"]:
        if item["expert"] != expert or item["role"] != "classifier":
            continue
        image = cv2.imread(str(Path(dataset) / item["file"]), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError(f"{Path(dataset) / item['file']} is listed in the manifest but cannot be read")
        out[item["split"]].append(PartSample(image, item["label"], (0.0, 0.0), (0, 0), 0))
    if not out["train"]:
        experts = sorted({i["expert"] for i in manifest["items"] if i["role"] == "classifier"})
        raise ValueError(f"the dataset {dataset} has no training crops of {expert}; it has crops of "
                         f"{', '.join(experts) or 'no classifier'} (review more parts, export again)")
    return out


def score(arch: ResNetClassifier, state: dict[str, torch.Tensor], samples: list[PartSample]) -> Score:
    if not samples:
        return Score(0, 0, 0, 0, 0)
    model = arch.materialize(state, torch.device("cpu"))
    x, y = to_batch(arch, samples)
    return Score.of([not p.passed for p in arch.run(model, x)], [int(t) != 0 for t in y.tolist()])  # 0 is "ok"


def retrain_classifier(zoo: Zoo, expert: str, dataset: Path, rule_sets: list[RuleSet], epochs: int = 10,
                       synthetic: int = 300, seed: int = 0, say: Any = lambda _m: None) -> Retrained:  # noqa: ANN401
    """Fine-tune `expert` on the dataset's reviewed crops plus synthetic ones; score old and new; add the version."""
    t0 = time.perf_counter()
    if expert not in zoo.entries:
        raise ValueError(f"the zoo at {zoo.root} has no expert {expert!r}")
    arch = zoo.architecture(expert)
    if not isinstance(arch, ResNetClassifier):
        raise ValueError(f"{expert} is a {zoo.entries[expert].role}; retraining from reviews covers classifiers and "
                         "detectors taught from labelled boxes that find (a demo detector's reviewed crops export in "
                         "YOLO and COCO form for its own training)")
    if arch.head != "classes":
        raise ValueError(f"{expert} is an anomaly expert, fitted to good crops alone (board teach --experts anomaly): "
                         "reviews do not retrain it; teach the board again with the false calls' crops added as good "
                         "ones (board teach --defects DIR, their crops under DIR/good/)")
    if any(v.get("origin") == TAUGHT for v in zoo.entries[expert].versions):
        raise ValueError(f"{expert} was taught its own classes ({', '.join(zoo.entries[expert].classes)}); it "
                         "retrains from its folder and reviews (training/labelled/retrain_taught.py), not from renders")
    types = {c.name for r in rule_sets for c in r.components if c.classifier == expert}
    if not types:
        raise ValueError(f"no component type of the rule sets given routes to {expert}; pass the rule set that "
                         "uses it (--rules)")
    reviewed = reviewed_samples(dataset, expert)
    old = parse(zoo.path_of(expert).read_bytes())
    say(f"{expert}: {len(reviewed['train'])} reviewed crops to train on, {len(reviewed['heldout'])} held out; "
        f"rendering {synthetic} synthetic crops of {', '.join(sorted(types))}")
    synth = collect(rule_sets, synthetic, seed + 7, TRAINING_RATES, cap=synthetic, types=types).by_classifier[expert]
    synth_val = collect(rule_sets, max(100, synthetic // 3), seed + 8, TRAINING_RATES, types=types,
                        cap=max(100, synthetic // 3)).by_classifier[expert]
    comp = next(c for r in rule_sets for c in r.components if c.classifier == expert)
    margin = next(r.crop_margin for r in rule_sets if comp in r.components)
    rng = np.random.default_rng(seed + 9)
    made = new_look_defects([s for s in reviewed["train"] if s.defect == "ok"], comp.size, margin,
                            NEW_LOOK_PER_CROP, rng)
    held_made = new_look_defects([s for s in reviewed["heldout"] if s.defect == "ok"], comp.size, margin,
                                 NEW_LOOK_PER_CROP, rng)
    mine = reviewed["train"] * 2 + made  # the new look good 2 to 3 defective: with fewer goods the expert flags its
    # good parts again (measured: 1:3 made 54% false calls on the demo's glare), with as many it misses its defects
    repeat = max(1, round(REVIEWED_SHARE / (1 - REVIEWED_SHARE) * len(synth) / len(mine)))
    train = synth + mine * repeat
    say(f"fine-tuning {expert} for {epochs} epochs on {len(train)} crops (the reviewed ones and {len(made)} defects "
        f"made from them, x{repeat})")
    trained = train_classifier(arch, train, synth_val, epochs, seed, init=old, lr=FINE_TUNE_LR)
    scores = {"reviewed held-out": (score(arch, old, reviewed["heldout"]), score(arch, trained.state,
                                                                                 reviewed["heldout"])),
              NEW_LOOK: (score(arch, old, held_made), score(arch, trained.state, held_made)),
              "synthetic held-out": (score(arch, old, synth_val), score(arch, trained.state, synth_val))}
    gate = recall_gate(scores)
    seconds = time.perf_counter() - t0
    version = add_version(zoo, expert, trained.state, origin="retrained from reviews", dataset=str(dataset),
                          trained_from=zoo.entries[expert].weights_sha256, seconds=round(seconds, 1),
                          reviewed_train=len(reviewed["train"]), synthetic_train=len(synth),
                          new_look_train=len(made), gate=gate, trained_with=trained_with(),
                          eval={k: {"old": o.to_json(), "new": n.to_json()} for k, (o, n) in scores.items()})
    return Retrained(expert, version, scores, len(reviewed["train"]), len(synth), seconds, len(made), gate)


def recall_gate(scores: dict[str, tuple[Score, Score]]) -> dict[str, Any]:
    """Whether the new version may be served: recall on held-out defects under the new look at RECALL_FLOOR or
    more, and recall on the renderer's held-out defects not lower than the old version's. With no held-out
    defects under the new look (no good crops held out) the gate cannot judge and says so."""
    reasons = []
    _, look = scores[NEW_LOOK]
    if look.recall is None:
        reasons.append("no held-out defects under the new look (review more parts: a quarter are held out)")
    elif look.recall < RECALL_FLOOR:
        reasons.append(f"recall on {look.defects} held-out defects under the new look is {100 * look.recall:.1f}%, "
                       f"under the floor of {100 * RECALL_FLOOR:.0f}%")
    old, new = scores["synthetic held-out"]
    if old.recall is not None and new.recall is not None and new.recall < old.recall:
        reasons.append(f"recall on the renderer's held-out defects fell from {100 * old.recall:.1f}% to "
                       f"{100 * new.recall:.1f}%")
    return {"passed": not reasons, "reasons": reasons}


def warnings(r: Retrained) -> list[str]:
    """What an engineer must read before serving the new version: recall lost or false calls gained on a held-out
    set."""
    out = []
    for name, (o, n) in r.scores.items():
        if o.recall is not None and n.recall is not None and n.recall < o.recall:
            out.append(f"warning: recall on the {name} crops fell from {100 * o.recall:.1f}% to {100 * n.recall:.1f}% "
                       f"({n.found} of {n.defects} defects found): review more defective parts of this type and "
                       "retrain before serving this version, or serve it knowing that")
        if o.false_call_rate is not None and n.false_call_rate is not None and n.false_call_rate > o.false_call_rate:
            out.append(f"warning: false calls on the {name} crops rose from {o.false_calls}/{o.good} to "
                       f"{n.false_calls}/{n.good}: the new version has drifted from what the old one got right")
    return out


def gate_caution(gate: dict[str, Any]) -> str:
    """Beside a pass of a gate that recorded its evidence: on how many held-out defects a loss could show (those the
    served weights find), and where they are few, what cannot show (a small loss, a kind of defect lost that they
    hold once or twice)."""
    seen: dict[str, int] = gate.get("losses_seen_on") or {}
    if not seen:
        return ""
    names = [f"{n} {name}" for name, n in seen.items()]
    counts = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    fewest = min(seen.values())
    return (f"; a loss could show on the {counts} defects the served weights find" + (
        f": a loss of recall under 1 in {fewest} ({100 / fewest:.0f}%), or of a kind of defect they hold once or "
        "twice, cannot show on so few; review more parts before trusting a pass" if fewest < FEW_DEFECTS else ""))


def pct(v: float | None) -> str:
    """A share as the retraining's tables print it ("-": nothing to count)."""
    return "-" if v is None else f"{100 * v:.1f}%"


def format_scores(r: Retrained) -> str:
    """The old-against-new table the command prints."""
    wide = max([20, *(len(name) for name in r.scores)])  # a board type's set names its type
    rows = [*r.says, f"{'held-out set':{wide}} {'crops':>6} {'defects':>8} {'recall old':>11} {'recall new':>11} "
            f"{'false calls old':>16} {'false calls new':>16}", "-" * (wide + 74)]
    for name, (o, n) in r.scores.items():
        rows.append(f"{name:{wide}} {n.crops:>6} {n.defects:>8} {pct(o.recall):>11} {pct(n.recall):>11} "
                    f"{f'{o.false_calls}/{o.good} {pct(o.false_call_rate)}':>16} "
                    f"{f'{n.false_calls}/{n.good} {pct(n.false_call_rate)}':>16}")
    gate = r.gate or {}
    rule = gate.get("rule") or f"recall under the new look at least {100 * RECALL_FLOOR:.0f}%"
    verdict = ([f"recall gate: passed ({rule})" + gate_caution(gate)
                + "".join(f"; tolerated: {t}" for t in gate.get("tolerated") or ())]
               if gate.get("passed") else
               [f"recall gate: REFUSED, not to be served ({'; '.join(gate.get('reasons', []))}); inspector zoo "
                "activate --force serves it anyway"] if gate else [])
    return "\n".join(rows + warnings(r) + verdict)

