"""A labelled set's own split (its train, val and test images or crops), as teaching and scoring use it.

Teaching: a set with its own split is taught from its train items and chooses its epoch and threshold on its val
items, as the tool that made the split meant; without val, a share of the train items is held out by identity
(folder.py). Its test items are never taught: they are kept for `zoo evaluate --split test`. `--heldout SHARE`
sets the own split aside: every item but the test ones is split by identity. A set without a split of its own is
split by identity, a fifth held out by default. Scoring a set with its own split asks which items: scoring what an
expert was taught from would look better than it is, and guessing which ones the engineer meant is not ours to do.
An item is a labelled image (boxes.py) or crop (folder.py): anything with an `identity` and a `split`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from .folder import FolderError, split_of
from .splits import DEFAULT_HELDOUT, SCORED_SPLITS


class Item(Protocol):
    @property
    def identity(self) -> str: ...

    @property
    def split(self) -> str | None: ...


T = TypeVar("T", bound=Item)


@dataclass
class Sides(Generic[T]):
    train: list[T]
    heldout: list[T]
    kept_back: list[T]  # the set's test items: not taught
    how: str  # said to the engineer
    warning: str | None = None


def own_splits(items: Sequence[Item]) -> dict[str, int]:
    """The set's own split: side -> items ({} when it has none)."""
    out: dict[str, int] = {}
    for item in items:
        if item.split is not None:
            out[item.split] = out.get(item.split, 0) + 1
    return out


def _by_identity(items: Sequence[T], share: float) -> tuple[list[T], list[T]]:
    train, held = [], []
    for item in items:
        (held if split_of(item.identity, share) == "heldout" else train).append(item)
    return train, held


def teaching_sides(items: Sequence[T], heldout_share: float | None = None, what: str = "images",
                   named: frozenset[str] | None = None) -> Sides[T]:
    """The items to train on, to hold out, and to keep back; `heldout_share` given sets the own split aside;
    `named`, the identities a caller chose to hold out (board teaching's split by type), sets both aside."""
    own = own_splits(items)
    kept = [item for item in items if item.split == "test"]
    pool = [item for item in items if item.split != "test"]
    back = f"; {len(kept)} test {what} kept back for `zoo evaluate --split test`" if kept else ""
    if named is not None:
        return Sides([i for i in pool if i.identity not in named], [i for i in pool if i.identity in named], kept,
                     f"the identities its teacher chose held out{back}")
    if not own or heldout_share is not None:
        share = DEFAULT_HELDOUT if heldout_share is None else heldout_share
        train, held = _by_identity(pool, share)
        aside = " (the set's own train/val split set aside by --heldout)" if own else ""
        return Sides(train, held, kept, f"a share of {share:g} of the identities held out{aside}{back}")
    train = [item for item in pool if item.split == "train"]
    held = [item for item in pool if item.split == "val"]
    if not held:
        train, held = _by_identity(train, DEFAULT_HELDOUT)
        return Sides(train, held, kept, f"the set's own split has no val {what}: a share of {DEFAULT_HELDOUT:g} of "
                                         f"its train identities held out{back}")
    both = sorted({item.identity for item in train} & {item.identity for item in held})
    warning = None
    if both:
        warning = (f"{len(both)} identities (file names up to `__`, e.g. {both[0]!r}) have {what} on both sides of "
                   "the set's own train/val split: held-out figures on near-copies of taught ones look better than "
                   "they are; split the set by board, or pass --heldout to split it by identity")
    return Sides(train, held, kept, f"the set's own split: {len(train)} train, {len(held)} val {what}{back}", warning)


def to_score(root: Path, items: Sequence[T], split: str | None) -> list[T]:
    """What `zoo evaluate --split` scores: every item of a set without its own split; of one with it, those named."""
    own = own_splits(items)
    said = ", ".join(f"{k} {v}" for k, v in sorted(own.items()))
    if split is not None and split not in SCORED_SPLITS:
        raise FolderError(f"--split {split!r}: say one of {', '.join(SCORED_SPLITS)}")
    if split is None:
        if own:
            raise FolderError(f"{root} has its own split ({said}): say which to score with --split test, val, train "
                              "or all (what an expert was taught from scores better than what is new to it)")
        return list(items)
    if split == "all":
        return list(items)
    if not own:
        raise FolderError(f"{root} has no split of its own (split folders, or data.yaml's train/val/test); drop "
                          "--split to score everything")
    chosen = [item for item in items if item.split == split]
    if not chosen:
        raise FolderError(f"{root} has no {split} items; its own split: {said}")
    return chosen
