"""Which DeepPCB pairs are trained on and which scored: the folder's trainval.txt less a held-out tenth (chosen by a
hash of each pair's name), or less one whole board group, or a list, or every pair of another folder.

Apart from the benchmark (deeppcb_bench.py) and without torch, so `inspector accuracy --dataset` refuses a
folder, a group or a list that cannot be split before the seconds of importing the trainer.
"""
from __future__ import annotations

from pathlib import Path

from .deeppcb import DatasetError, Pair, read_annotations, read_pairs
from .labelled.folder import split_of

PURPOSE = "deeppcb benchmark"  # the split's hash purpose: not the teaching's own model-selection split


def scan_pairs(root: Path, missing: list[str]) -> list[Pair]:
    """Every pair under ROOT laid out as the dataset is (`group<G>/<G>/<pair>_test.jpg`, `_temp.jpg`, and
    `group<G>/<G>_not/<pair>.txt`), whatever list names it; a pair lacking its template or notes is noted."""
    pairs = []
    for test in sorted(Path(root).glob("*/*/*_test.jpg")):
        name = test.name[: -len("_test.jpg")]
        template = test.with_name(f"{name}_temp.jpg")
        notes = test.parent.with_name(f"{test.parent.name}_not") / f"{name}.txt"
        lacking = [p for p in (template, notes) if not p.is_file()]
        if lacking:
            missing.append(f"{test}: {', '.join(map(str, lacking))} missing")
            continue
        pairs.append(Pair(name, test.parent.name, test, template, read_annotations(notes)))
    return pairs


def choose_split(root: Path, list_file: Path | None, share: float, group: str | None,
                 missing: list[str], score_on: Path | None = None) -> tuple[list[Pair], list[Pair], str]:
    """(pairs to train on, pairs to score, the split in words). With `score_on`: train on every pair of ROOT's list
    (or `list_file`), score every pair under `score_on` (the dataset's held-back test pairs, say). With a list:
    train on the pairs it names, score every other pair under ROOT. Without: ROOT's own list, less a `share` drawn
    by the hash of each pair's name, or less the board group `group`."""
    if score_on is not None:
        train = read_pairs(root, list_file, missing)
        scored = scan_pairs(score_on, missing)
        if not scored:
            raise DatasetError(f"no pairs under {score_on} (group<G>/<G>/<pair>_test.jpg, _temp.jpg and "
                               "group<G>/<G>_not/<pair>.txt)")
        overlap = {p.name for p in train} & {p.name for p in scored}
        if overlap:
            raise DatasetError(f"{len(overlap)} pairs are both trained on and scored (the first: "
                               f"{sorted(overlap)[0]}); score on pairs the experts never see")
        return train, scored, (f"trained on the {len(train)} pairs of {root}, scored on the {len(scored)} under "
                               f"{score_on}")
    if list_file is not None:
        train = read_pairs(root, list_file, missing)
        named = {p.name for p in train}
        scored = [p for p in scan_pairs(root, missing) if p.name not in named]
        if not scored:
            raise DatasetError(f"every pair under {root} is named by {list_file}: nothing is left to score on")
        return train, scored, f"trained on the {len(train)} pairs of {list_file}, scored on the other {len(scored)}"
    every = read_pairs(root, None, missing)
    if group is not None:
        groups = sorted({p.group for p in every})
        if group not in groups:
            raise DatasetError(f"no board group {group!r} under {root}; its groups: {', '.join(groups)}")
        train = [p for p in every if p.group != group]
        scored = [p for p in every if p.group == group]
        return train, scored, f"board group {group} held out whole ({len(scored)} pairs), {len(train)} trained on"
    scored = [p for p in every if split_of(p.name, share, PURPOSE) == "heldout"]
    train = [p for p in every if split_of(p.name, share, PURPOSE) != "heldout"]
    return train, scored, (f"{len(scored)} pairs held out ({share:.0%} by a hash of each pair's name), "
                           f"{len(train)} trained on")
