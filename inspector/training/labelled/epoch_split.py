"""The training items teaching or a retraining sets aside to choose the epoch by, so that the held-out items chose
nothing but the threshold.

Why: training keeps the epoch its validation prefers and is then judged on held-out items: teaching's table, a
retraining's gate. When both are the same items the gate reads an epoch picked to score well on them
(docs/pages/ml/labelled-images.md: an epoch chosen by the line's own measure on the held-out images passed versions
that flag fewer narrow voids on fresh panels than the old weights, and Ultralytics' box fitness on them kept an
early epoch in two of four detector retrainings, both refused). So a share of the training side is set aside by
identity (an item's near-copies go with it), each stratum on its own: where the item came from (the reviews, the set
it was taught from) and whether it holds a defect, so that the reviewed defects, the look the retraining is for, are
among them. A stratum with too few identities to spare one gives none; where the teacher recorded each identity's
kind (board teaching: a part's type), each kind is a stratum of its own, so a type with a part or two keeps them to
train on. The items set aside are neither trained on nor scored.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .folder import stratified_heldout
from .splits import EPOCH_SHARE

MIN_STRATUM = 4  # identities a stratum needs before it gives any up: fewer are all taught
PURPOSE = "epoch choice"  # its own hash: independent of the held-out split's

T = TypeVar("T")


@dataclass(frozen=True)
class Origin:
    """Where a training item came from, what it is, and whether it holds a defect: what it is stratified by."""
    source: str  # "reviewed" | "taught"
    identity: str
    defective: bool
    kind: str = ""  # what else it is stratified by where known (board teaching: the part's type)


def set_aside(items: Sequence[Origin], share: float = EPOCH_SHARE) -> list[bool]:
    """Per item, whether it is set aside to choose the epoch by. An identity holding any defect counts as
    defective (its items go together); fixed by the identities, whatever order they come in."""
    defective: dict[tuple[str, str], bool] = {}
    kinds: dict[tuple[str, str], str] = {}
    for item in items:
        key = (item.source, item.identity)
        defective[key] = defective.get(key, False) or item.defective
        kinds[key] = item.kind
    strata: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for (source, identity), bad in defective.items():
        stratum = f"{source}/{kinds[(source, identity)]}/{'defective' if bad else 'clean'}"
        strata[f"{source}\0{identity}"] = stratum
        sizes[stratum] = sizes.get(stratum, 0) + 1
    chosen = stratified_heldout({k: s for k, s in strata.items() if sizes[s] >= MIN_STRATUM}, share, PURPOSE)
    return [f"{item.source}\0{item.identity}" in chosen for item in items]


@dataclass
class EpochSides(Generic[T]):
    """A teaching's or a retraining's training side divided: what it trains on (the taught set's, the reviews') and
    what it chooses its epoch by."""
    train_own: list[T]
    train_reviewed: list[T]
    epoch: list[T]
    counts: dict[str, int] = field(default_factory=dict)  # set aside: items, reviewed, defective (the version's)
    what: str = "images"
    reader: str = "the gate reads"  # who reads the held-out items, as said
    share: float = EPOCH_SHARE  # 0: none asked for, the held-out items choose the epoch

    @property
    def says(self) -> str:
        """What was set aside, said to the engineer."""
        if self.share <= 0:
            return (f"no training {self.what} set aside to choose the epoch by (--epoch-share 0): the held-out "
                    f"{self.what} choose it")
        if not self.epoch:
            return (f"no training {self.what} set aside to choose the epoch by (too few to spare: each kind, reviewed "
                    f"or taught, with a defect or not, of a type where its teacher recorded one, needs {MIN_STRATUM} "
                    "identities to give one up): the whole course is run and its last epoch kept")
        n = self.counts
        reviewed = f"{n['reviewed']} reviewed, " if self.train_reviewed or n["reviewed"] else ""
        return (f"{n['items']} training {self.what} set aside to choose the epoch by ({reviewed}{n['defective']} "
                f"with a defect), trained on none: the held-out {self.what}{' ' + self.reader if self.reader else ''} "
                "chose nothing but the threshold")


def divide(own: Sequence[T], reviewed: Sequence[T], identity: Callable[[T], str], defective: Callable[[T], bool],
           enough: Callable[[list[T]], bool], what: str = "images", share: float = EPOCH_SHARE,
           kind: Callable[[T], str] = lambda _x: "", reader: str = "the gate reads") -> EpochSides[T]:
    """The training side of a teaching or a retraining (`own`: the set taught from; `reviewed`: the reviews', none
    when teaching) divided into what it trains on and what chooses its epoch; where what would be set aside
    cannot choose one (`enough` says: a detector's fitness needs boxes, a classifier's recall good crops and
    defects), everything is trained on. `kind`: each taught item's kind where its teacher recorded one (a type
    with one part keeps it to train on). `reader`: who reads the held-out items, as `says` names them. A `share` of
    0 sets nothing aside: the held-out items choose the epoch (said)."""
    if share <= 0:
        return EpochSides(list(own), list(reviewed), [], {}, what, reader, share)
    origins = [Origin("taught", identity(x), defective(x), kind(x)) for x in own] + \
              [Origin("reviewed", identity(x), defective(x)) for x in reviewed]
    aside = set_aside(origins, share)
    epoch = [x for x, a in zip([*own, *reviewed], aside) if a]
    if not enough(epoch):
        return EpochSides(list(own), list(reviewed), [], {}, what, reader, share)
    n = len(own)
    picked = [o for o, a in zip(origins, aside) if a]
    return EpochSides([x for x, a in zip(own, aside[:n]) if not a], [x for x, a in zip(reviewed, aside[n:]) if not a],
                      epoch, {"items": len(picked), "reviewed": sum(o.source == "reviewed" for o in picked),
                              "defective": sum(o.defective for o in picked)}, what, reader, share)
