"""Reviews retrain an expert taught from labelled images, through the same loop as the demo's experts.

`inspector zoo train --expert NAME --from DATASET` on a taught expert: the dataset's reviewed crops of it (exported
under its own classes, `dataset export --zoo`) join the labelled folder it was taught from (still where its first
version says, when it is), reviewed crops repeated to about a third of what it sees; it trains on from the weights
in service at a quarter of the teaching's step, keeps the epoch its held-out crops prefer (the folder's held-out
side and the reviewed held-out split). It keeps the operating margin in its spec (a version swap changes weights,
not the spec), and records the one its held-out crops would choose beside it. No synthetic
crops: the renderer never drew this expert's parts. The old and the new weights are scored on both held-out sets
and the new ones added as a version, not served (`zoo activate`, or the kiosk's swap).
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
from ..retrain import Retrained, Score
from .folder import read_folder
from .metrics import calls
from .teach import TAUGHT, read_crops, split
from .trainer import LR, Crops, logits_of, train

REVIEWED_SHARE = 1 / 3


def taught_version(zoo: Zoo, expert: str) -> dict[str, Any] | None:
    """The version teaching recorded, when the expert was taught from labelled images (else None)."""
    entry = zoo.entries[expert]
    if not entry.classes:
        return None
    return next((v for v in entry.versions if v.get("origin") == TAUGHT), None)


def reviewed_crops(dataset: Path, expert: str, classes: tuple[str, ...]) -> dict[str, Crops]:
    """The dataset's crops of `expert` by split, labelled by the expert's own classes."""
    manifest = Path(dataset) / "manifest.json"
    if not manifest.is_file():
        raise ValueError(f"{dataset} holds no dataset manifest; write one with `inspector dataset export --zoo ZOO`")
    images: dict[str, list[np.ndarray]] = {"train": [], "heldout": []}
    labels: dict[str, list[int]] = {"train": [], "heldout": []}
    for item in json.loads(manifest.read_text(encoding="utf-8"))["items"]:
        if item["expert"] != expert or item["role"] != "classifier":
            continue
        if item["label"] not in classes:
            raise ValueError(f"{item['file']} is labelled {item['label']!r}, not one of {expert}'s classes "
                             f"({', '.join(classes)}): export the dataset again with --zoo naming its zoo")
        image = cv2.imread(str(Path(dataset) / item["file"]), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError(f"{Path(dataset) / item['file']} is listed in the manifest but cannot be read")
        images[item["split"]].append(image)
        labels[item["split"]].append(classes.index(item["label"]))
    if not images["train"]:
        raise ValueError(f"the dataset {dataset} has no training crops of {expert} (review more of its parts, "
                         "export again with --zoo)")
    return {k: Crops(images[k], np.array(labels[k], dtype=np.int64)) for k in images}


def joined(*parts: Crops) -> Crops:
    return Crops([im for p in parts for im in p.images], np.concatenate([p.labels for p in parts]))


def repeated(crops: Crops, times: int) -> Crops:
    return Crops(crops.images * times, np.tile(crops.labels, times))


def score_of(arch: ResNetClassifier, state: dict[str, torch.Tensor], crops: Crops, threshold: float) -> Score:
    """The demo loop's Score (crops, defects, found, good, false calls) at a threshold, as the line calls."""
    if not len(crops):
        return Score(0, 0, 0, 0, 0)
    logits, _ = logits_of(arch, arch.materialize(state, torch.device("cpu")), crops)
    flagged = calls(logits, threshold) != 0
    defective = crops.labels != 0
    return Score(len(crops), int(defective.sum()), int((flagged & defective).sum()), int((~defective).sum()),
                 int((flagged & ~defective).sum()))


def refuse_golden(expert: str, reference: str | None, kept_in: str) -> None:
    """ValueError for an expert that compares with the golden board: the dataset export keeps the live crop only."""
    if reference is not None:
        raise ValueError(f"{expert} compares each crop with the golden board's; the dataset export keeps the live "
                         "crop only, so its reviews cannot retrain it yet: teach it again (zoo train --new) with "
                         f"the reviewed parts added to its {kept_in} and their golden windows")


def recall_kept(scores: dict[str, tuple[Score, Score]], unit: str) -> dict[str, Any]:
    """The gate of an expert retrained from its own data and reviews: recall (of defects found, at the served
    operating point) on no held-out set below the served weights'."""
    reasons = [f"recall on the {name} {unit} fell from {100 * o.recall:.1f}% to {100 * n.recall:.1f}%"
               for name, (o, n) in scores.items() if o.recall is not None and n.recall is not None
               and n.recall < o.recall]
    return {"passed": not reasons, "reasons": reasons,
            "rule": "recall on either held-out set not below the served weights'"}


def retrain_taught(zoo: Zoo, expert: str, dataset: Path, epochs: int, seed: int,
                   say: Callable[[str], None]) -> Retrained:
    t0 = time.perf_counter()
    origin = taught_version(zoo, expert)
    entry, arch = zoo.entries[expert], zoo.architecture(expert)
    assert origin is not None and isinstance(arch, ResNetClassifier)
    refuse_golden(expert, arch.reference, "folder")
    classes = tuple(entry.classes)
    reviewed = reviewed_crops(dataset, expert, classes)
    folder_path = Path(origin.get("dataset") or "")
    if folder_path.is_dir():
        folder = read_folder(folder_path, classes=classes)
        named = origin.get("heldout_identities")  # a split its teacher chose (board teaching: by type)
        share = origin.get("heldout_share")  # None: the folder's own split (own_split.py)
        sides = split(folder, None if share is None else float(share), None if named is None else frozenset(named))
        own = {k: read_crops(folder, v, f"reading {k} crops") for k, v in (("train", sides.train),
                                                                            ("heldout", sides.heldout))}
        say(f"{expert}: {len(reviewed['train'])} reviewed crops to train on, {len(reviewed['heldout'])} held out; "
            f"with the {len(own['train'])} + {len(own['heldout'])} crops of {folder_path} it was taught from")
    else:
        own = {k: Crops([], np.zeros(0, dtype=np.int64)) for k in ("train", "heldout")}
        say(f"{expert}: its teaching folder {folder_path} is gone; training on the {len(reviewed['train'])} "
            "reviewed crops alone")
    times = max(1, round(REVIEWED_SHARE / (1 - REVIEWED_SHARE) * len(own["train"]) / len(reviewed["train"])))
    train_set = joined(own["train"], repeated(reviewed["train"], times))
    heldout = joined(own["heldout"], reviewed["heldout"])
    if not len(heldout) or not (heldout.labels == 0).any() or not (heldout.labels != 0).any():
        raise ValueError(f"the held-out crops of {expert} need good parts and defects to choose its threshold on; "
                         "review more parts (a share of them is held out)")
    old = parse(zoo.path_of(expert).read_bytes())
    turn = bool(origin.get("any_orientation"))  # what its teacher declared of its classes holds for its reviews
    taught = train(arch, classes, train_set, heldout, epochs, max(2, epochs // 3), seed, say=say, init=old,
                   lr=LR / 4, any_orientation=turn)
    # the line calls with the margin in the expert's spec, which a version swap keeps: both weights scored there
    cut = float(arch.good_margin if arch.good_margin is not None else origin.get("threshold") or 0.0)
    scores = {"reviewed held-out": (score_of(arch, old, reviewed["heldout"], cut),
                                    score_of(arch, taught.state, reviewed["heldout"], cut)),
              "taught held-out": (score_of(arch, old, own["heldout"], cut),
                                  score_of(arch, taught.state, own["heldout"], cut))}
    gate = recall_kept(scores, "crops")
    seconds = time.perf_counter() - t0
    version = add_version(zoo, expert, taught.state, origin="retrained from reviews", dataset=str(dataset),
                          trained_from=entry.weights_sha256, seconds=round(seconds, 1), threshold=cut,
                          heldout_threshold=taught.threshold, any_orientation=turn,
                          reviewed_train=len(reviewed["train"]), synthetic_train=0, gate=gate,
                          eval={k: {"old": a.to_json(), "new": b.to_json()} for k, (a, b) in scores.items()})
    return Retrained(expert, version, scores, len(reviewed["train"]), 0, seconds, 0, gate)
