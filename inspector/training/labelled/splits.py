"""The names of a labelled set's own split, and the defaults of splitting one without it (no imports: the CLI's
flags read them at start-up)."""
from __future__ import annotations

SPLIT_NAMES = {"train": "train", "training": "train", "val": "val", "valid": "val", "validation": "val",
               "test": "test", "testing": "test"}  # a split folder's name (any case) -> its side
DEFAULT_HELDOUT = 0.2  # the share of identities held out where a set has no split of its own
EPOCH_SHARE = 0.15  # of each kind's training identities set aside to choose the epoch by (epoch_split.py)
SCORED_SPLITS = ("train", "val", "test", "all")  # what `zoo evaluate --split` may name
