"""The approved alternates' windows (routing/alternates.py), read once per rule set and checked against the crop
the line cuts of their part, so a file that went missing or was cut another way is named when the rule set is
applied, not found out board by board."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..routing.rules import RuleSet
from .crops import crop_window

_LOADED: dict[tuple, dict[str, list[np.ndarray]]] = {}


class AlternateMissing(ValueError):
    """An approved alternate's window cannot be used; the message names the file and what to do."""


def alternate_windows(rules: RuleSet) -> dict[str, list[np.ndarray]]:
    """REF -> its approved makes' windows (HxWx3 BGR, the part's crop size), read once per rule set: every board asks
    (the comparison and the presence check), and an approval is a new file under a new text, so nothing is looked
    up on disk again until the rule set changes."""
    if not rules.alternates:
        return {}
    key = (rules.version, tuple((ref, files) for ref, files in rules.alternates.items()))
    if key not in _LOADED:
        loaded = _read(rules)
        _LOADED.clear()  # the rule set in force only: memory stays flat across changeovers
        _LOADED[key] = loaded
    return _LOADED[key]


def _read(rules: RuleSet) -> dict[str, list[np.ndarray]]:
    place = {p.ref: (c, p) for c, p in rules.placements()}
    out: dict[str, list[np.ndarray]] = {}
    for ref, files in rules.alternates.items():
        comp, p = place[ref]
        _, (w, h) = crop_window(comp, p, rules.crop_margin)
        for name in files:
            if not Path(name).is_file():
                raise AlternateMissing(f"rule set {rules.recipe}: {ref}'s approved alternate {name} cannot be read "
                                       "(no such file); approve it again (`inspector board approve`) or remove it "
                                       "from `alternates:`")
            image = cv2.imread(name, cv2.IMREAD_COLOR)
            if image is None:
                raise AlternateMissing(f"rule set {rules.recipe}: {ref}'s approved alternate {name} is not an image "
                                       "OpenCV can read")
            if (image.shape[1], image.shape[0]) != (w, h):
                raise AlternateMissing(f"rule set {rules.recipe}: {ref}'s approved alternate {name} is "
                                       f"{image.shape[1]}x{image.shape[0]} px but {ref}'s window is {w}x{h}: the part "
                                       "moved or its margin changed since it was approved; approve it again")
            out.setdefault(ref, []).append(image)
    return out
