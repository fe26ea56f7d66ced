"""Approved alternates: another make of a part that a placement may carry, known by its window as the line cuts it.

A plant buys most parts from two sources, and a second source's part looks different (another body colour, another
marking, another outline): a golden comparison flags it, as an AOI must until an engineer approves it. Approving
it (`inspector board approve`) keeps its window, cut from a photo of a board that carries it, as a second golden
window of that placement: the rule set names them, and the line compares each crop with whichever of the golden
window and the approved ones it is nearest (ingest/golden.py). A missing, shifted or bridged alternate still differs
from every one of them, so it is still called; an unapproved make is nearest none.

    alternates:
      SAW1: [board.alternates/SAW1__murata.png]
      U4: [board.alternates/U4__blank.png, board.alternates/U4__st.png]

Each file is relative to the rule file's folder; the images themselves are read when the rule set is applied.
"""
from __future__ import annotations

from ..yamlio import Fields, beside


def parse_alternates(f: Fields, refs: set[str]) -> dict[str, tuple[str, ...]]:
    """`alternates: {REF: [FILE, ...]}` -> REF -> absolute paths, every error at its line."""
    out: dict[str, tuple[str, ...]] = {}
    for ref, files in f.data.items():
        if str(ref) not in refs:
            raise f.error(ref, "is no inspected part of this board: an approved alternate names a placement's "
                               "reference (REF under a component type's `at:`)")
        names = files if isinstance(files, list) else [files]
        if not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise f.error(ref, f"must be a list of image files (its approved makes' windows), got {files!r}")
        if len(set(names)) != len(names):
            raise f.error(ref, "names one image twice")
        out[str(ref)] = tuple(beside(f.source, n.strip()) for n in names)
    return out
