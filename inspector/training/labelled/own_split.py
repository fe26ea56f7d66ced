"""A labelled set's own split (its train, val and test images), as teaching and scoring use it.

Teaching: a set with its own split is taught from its train images and chooses its epoch and threshold on its val
images, as the tool that made the split meant; without val, a share of the train images is held out by identity
(folder.py). Its test images are never taught: they are kept for `zoo evaluate --split test`. `--heldout SHARE`
sets the own split aside: every image but the test ones is split by identity. A set without a split of its own
is split by identity, a fifth held out by default. Scoring a set with its own split asks which images: scoring the
images an expert was taught from would look better than it is, and guessing which ones the engineer meant is not
ours to do.
"""
from __future__ import annotations

from dataclasses import dataclass

from .boxes import BoxedImage, BoxSet
from .folder import FolderError, split_of
from .splits import DEFAULT_HELDOUT, SCORED_SPLITS


@dataclass
class Sides:
    train: list[BoxedImage]
    heldout: list[BoxedImage]
    kept_back: list[BoxedImage]  # the set's test images: not taught
    how: str  # said to the engineer
    warning: str | None = None


def _by_identity(images: list[BoxedImage], share: float) -> tuple[list[BoxedImage], list[BoxedImage]]:
    train, held = [], []
    for im in images:
        (held if split_of(im.identity, share) == "heldout" else train).append(im)
    return train, held


def teaching_sides(boxes: BoxSet, heldout_share: float | None = None) -> Sides:
    """The images to train on, to hold out, and to keep back; `heldout_share` given sets the own split aside."""
    own = boxes.splits()
    kept = [im for im in boxes.images if im.split == "test"]
    pool = [im for im in boxes.images if im.split != "test"]
    back = f"; {len(kept)} test images kept back for `zoo evaluate --split test`" if kept else ""
    if not own or heldout_share is not None:
        share = DEFAULT_HELDOUT if heldout_share is None else heldout_share
        train, held = _by_identity(pool, share)
        aside = " (the set's own train/val split set aside by --heldout)" if own else ""
        return Sides(train, held, kept, f"a share of {share:g} of the identities held out{aside}{back}")
    train = [im for im in pool if im.split == "train"]
    held = [im for im in pool if im.split == "val"]
    if not held:
        train, held = _by_identity(train, DEFAULT_HELDOUT)
        return Sides(train, held, kept, f"the set's own split has no val images: a share of {DEFAULT_HELDOUT:g} of "
                                         f"its train identities held out{back}")
    both = sorted({im.identity for im in train} & {im.identity for im in held})
    warning = None
    if both:
        warning = (f"{len(both)} identities (file names up to `__`, e.g. {both[0]!r}) have images on both sides of the "
                   "set's own train/val split: held-out figures on near-copies of taught images look better than they "
                   "are; split the set by board, or pass --heldout to split it by identity")
    return Sides(train, held, kept, f"the set's own split: {len(train)} train, {len(held)} val images{back}", warning)


def images_to_score(boxes: BoxSet, split: str | None) -> list[BoxedImage]:
    """The images `zoo evaluate --split` scores: all of a set without its own split; of one with it, those named."""
    own = boxes.splits()
    said = ", ".join(f"{k} {v}" for k, v in sorted(own.items()))
    if split is not None and split not in SCORED_SPLITS:
        raise FolderError(f"--split {split!r}: say one of {', '.join(SCORED_SPLITS)}")
    if split is None:
        if own:
            raise FolderError(f"{boxes.root} has its own split ({said} images): say which to score with --split "
                              "test, val, train or all (images an expert was taught from score better than new ones)")
        return boxes.images
    if split == "all":
        return boxes.images
    if not own:
        raise FolderError(f"{boxes.root} has no split of its own (split folders or data.yaml's train/val/test); drop "
                          "--split to score every image")
    chosen = [im for im in boxes.images if im.split == split]
    if not chosen:
        raise FolderError(f"{boxes.root} has no {split} images; its own split: {said}")
    return chosen
