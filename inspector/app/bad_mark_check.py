"""`inspector board marks`: a panel's bad-mark pads read on photos, as the line reads them, for setting them up.

The engineer who adds `bad_marks:` to a panel's rule set shows the box a marked panel and a clean one: each pad's
level, the clean pad's it is read against and the share the mark took, beside the rule set's `contrast`, say
whether the pads sit where the rule set says and where to set the contrast. Each photo is registered the way the
line registers a frame (on the fiducials, or found whole in the frame), so the pads are read where the line reads
them; a photo that does not register is said, with the reason.
"""
from __future__ import annotations

import numpy as np

from ..ingest.bad_marks import PadReading, read_pads
from ..ingest.crops import check_board
from ..ingest.golden import golden_image
from ..ingest.registration import register
from ..routing.rules import RuleSet
from .board_photos import register_photo


def read_panel(image: np.ndarray, rules: RuleSet) -> list[PadReading]:
    """The panel's pads in `image` (a frame of the line's camera); ValueError where the rule set has no bad-mark pads,
    or the frame is not one the line could inspect (its size, its registration)."""
    if rules.panel is None or rules.panel.bad_marks is None:
        raise ValueError(f"rule set {rules.recipe} names no bad-mark pads: add `panel: {{boards: N, bad_marks: "
                         "{at: {1: [x, y], ...}}}` (docs/pages/reference/rule-sets.md)")
    golden = golden_image(rules) if rules.golden else None
    to_image = None
    if rules.photo is not None:  # found whole in the frame and brought into the recipe's pixels
        image, _ = register_photo(image, rules, golden, light=False)
    else:
        check_board(image, rules)
    if rules.fiducials is not None:  # (then) refined on its fiducials, as the line does
        to_image = register(image, rules.fiducials).homography
    return read_pads(image, rules.panel.bad_marks, to_image, golden)
