"""Is the part there at all: its body's colour against the board's, measured on the golden board and on the live one.

A bare land looks much like a soldered chip in grey (bright ends, a dark middle), and a classifier taught from one
golden board can learn the made defects' look rather than the change. What the classic AOI presence window reads
instead is colour: a part's body (black, tan, white, metal) stands out from the solder mask around it, and where the
part is missing the body's window shows the mask itself. Measured inside one crop (the body between the lands
against the crop's rim, in Lab chroma, over the rim's own saturation), the figure does not care how bright the
photo is or how its camera balances white, and the golden board says per part how much of it there should be.

`share` is the live crop's contrast over the golden crop's: near 1 for a part that is there, near 0 for a bare
footprint. It applies only where it can tell: the board is coloured (a grey or black mask has no chroma to lose),
the golden body stands out from it by at least half the mask's own saturation, and enough body shows between the
lands. `board teach` sets the least share a part must keep (`body_contrast:` per type) from the good crops as other
photos would show them, at the teaching's false-call budget; the line calls a part under it `missing`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import cv2
import numpy as np

from ..ingest.alternates import alternate_windows
from ..ingest.crops import Crop, crop_part
from ..ingest.golden import golden_image
from ..results.records import PartRecord
from ..routing.rules import ComponentRule, RuleSet

MIN_SATURATION = 10.0  # Lab chroma units of the rim: under it the board is grey and colour cannot tell
MIN_GOLDEN = 0.5  # the golden body's contrast, in the mask's saturation: under it body and board look alike
MIN_PIXELS = 6  # of body between the lands
EXPERT = "body-contrast"  # the name a part's record gives the presence check when the check decided it


def masks(comp: ComponentRule, shape: tuple[int, ...], margin: int) -> tuple[np.ndarray, np.ndarray]:
    """(the body between the lands, the rim outside the window's margin) as boolean masks of a crop of `shape`
    (the crop in the part's own orientation, as the line cuts it)."""
    h, w = shape[:2]
    cx, cy = w / 2, h / 2
    bx, by, bw, bh = comp.body_geometry
    inner = np.zeros((h, w), np.uint8)
    x0, y0 = int(np.ceil(cx + bx - bw / 2)) + 1, int(np.ceil(cy + by - bh / 2)) + 1
    x1, y1 = int(np.floor(cx + bx + bw / 2)) - 1, int(np.floor(cy + by + bh / 2)) - 1
    inner[max(0, y0):max(0, y1), max(0, x0):max(0, x1)] = 1
    lands = np.zeros((h, w), np.uint8)
    for a, b, c, d in comp.pads:
        lands[max(0, int(np.floor(cy + b)) - 1):int(np.ceil(cy + d)) + 1,
              max(0, int(np.floor(cx + a)) - 1):int(np.ceil(cx + c)) + 1] = 1
    rim = np.ones((h, w), bool)
    m = max(1, min(margin, (min(h, w) - 2) // 2))
    rim[m:h - m, m:w - m] = False
    return (inner > 0) & (lands == 0), rim


def contrast(crop: np.ndarray, inner: np.ndarray, rim: np.ndarray) -> float | None:
    """The body's chroma against the rim's, over the rim's own saturation; None where the rim is grey or too little
    body shows."""
    if int(inner.sum()) < MIN_PIXELS or not rim.any():
        return None
    chroma = cv2.cvtColor(crop, cv2.COLOR_BGR2LAB)[..., 1:].astype(np.float32) - 128.0
    board = np.median(chroma[rim], axis=0)
    saturation = float(np.hypot(*board))
    if saturation < MIN_SATURATION:
        return None
    return float(np.hypot(*(np.median(chroma[inner], axis=0) - board))) / saturation


@dataclass(frozen=True)
class Reference:
    """One part's golden side of the check: where its body and the board's rim lie in its crop, and how far the
    golden body's colour stands from the board's. The same for every board: measured once."""
    inner: np.ndarray
    rim: np.ndarray
    contrast: float


def reference(golden: np.ndarray, comp: ComponentRule, margin: int) -> Reference | None:
    """The part's reference from its golden crop, or None where the check cannot tell for it (see the module)."""
    inner, rim = masks(comp, golden.shape, margin)
    gold = contrast(golden, inner, rim)
    return None if gold is None or gold < MIN_GOLDEN else Reference(inner, rim, gold)


def kept(live: np.ndarray, ref: Reference | None) -> float | None:
    """How much of the golden body's contrast the live crop keeps (about 1: the part is there; about 0: bare)."""
    if ref is None:
        return None
    now = contrast(live, ref.inner, ref.rim)
    return None if now is None else now / ref.contrast


def share(live: np.ndarray, golden: np.ndarray, comp: ComponentRule, margin: int) -> float | None:
    """`kept` against the golden crop `golden`; None where the check cannot tell for this part."""
    return kept(live, reference(golden, comp, margin))


_REFERENCES: list = []  # [rule set version, golden image, {ref: Reference | None}]: the rule set in force


def references(rules: RuleSet) -> dict[str, Reference | None]:
    """Every checked part's reference on the rule set's golden board, measured once per rule set and golden image
    (the line asks for every board)."""
    golden = golden_image(rules)
    if not _REFERENCES or _REFERENCES[0] != rules.version or _REFERENCES[1] is not golden:
        refs = {p.ref: reference(crop_part(golden, c, p, rules.crop_margin), c, rules.crop_margin)
                for c, p in rules.placements() if c.body_contrast is not None}
        _REFERENCES[:] = [rules.version, golden, refs]
    return _REFERENCES[2]


def crop_shares(crops: list[Crop], rules: RuleSet, matched: dict[str, int] | None = None) -> list[float | None]:
    """Each crop's share (None: its type has no `body_contrast`, or the check cannot tell for it), measured against
    the rule set's golden board, or for a part `matched` to an approved alternate (REF -> which, from 1) against
    that make's window: another make's body may stand from the board by another colour."""
    if rules.golden is None or not any(c.component.body_contrast is not None for c in crops):
        return [None] * len(crops)
    refs = references(rules)
    if matched:
        approved = alternate_windows(rules)
        refs = {**refs, **{c.ref: reference(approved[c.ref][matched[c.ref] - 1], c.component, rules.crop_margin)
                           for c in crops if c.ref in matched and c.component.body_contrast is not None}}
    return [kept(c.image, refs.get(c.ref)) for c in crops]


def least_share(shares: list[float], budget: float) -> float | None:
    """The share under which a part is called missing: the `budget` quantile of good crops' shares (other photos of
    good parts). None where too few good crops can be measured to set it."""
    if len(shares) < round(1 / max(budget, 1e-3)):
        return None
    return float(np.quantile(np.asarray(shares, np.float64), budget))


def body_gone(measured: float | None, least: float | None) -> bool:
    """The presence check's own call: the part keeps less than `least` of its golden body's contrast."""
    return measured is not None and least is not None and measured < least


def overrule(part: PartRecord, measured: float | None, least: float | None) -> PartRecord:
    """The part called missing where the presence check finds its body gone and the experts passed it; otherwise
    the experts' verdict stands (a defect they named is more specific than "missing")."""
    if part.verdict != "pass" or not body_gone(measured, least):
        return part
    return replace(part, expert=EXPERT, weights_sha256=None, verdict="fail", defect_class="missing",
                   score=round(measured, 4), box=None)


@dataclass
class PresenceTaught:
    """What teaching made of the presence check: the least share, where it applies, and what it alone did on the
    held-out parts' crops (good ones it called, made defects it caught)."""
    least: float | None
    parts: int  # parts the check can tell for
    of: int  # inspected parts
    types: tuple[str, ...]  # the types given `body_contrast:` (at least one part the check can tell for)
    heldout_good: int = 0
    good_called: int = 0
    heldout_defects: int = 0
    defects_caught: int = 0

    def to_json(self) -> dict:
        return {"least_share": self.least, "parts": self.parts, "of": self.of, "types": list(self.types),
                "heldout_good": self.heldout_good, "good_called": self.good_called,
                "heldout_defects": self.heldout_defects, "defects_caught": self.defects_caught}

    def summary(self) -> str:
        if self.least is None:
            return (f"presence check (body colour against the board's): can tell for {self.parts} of {self.of} "
                    "parts, too few good crops to set it: not served")
        return (f"presence check (body colour against the board's): can tell for {self.parts} of {self.of} parts "
                f"({len(self.types)} types), missing under {self.least:.2f} of the golden body's contrast; alone on "
                f"held-out parts it calls {self.good_called} of {self.heldout_good} good crops and catches "
                f"{self.defects_caught} of {self.heldout_defects} made defects")


def teach_presence(rules: RuleSet, images: list[np.ndarray], refs: list[np.ndarray], types: np.ndarray,
                   idents: list[str], labels: np.ndarray, heldout: np.ndarray,
                   budget: float) -> tuple[PresenceTaught, np.ndarray]:
    """The least share from the good crops teaching trains on (labels 0, not held out) at the false-call `budget`,
    and which crops it calls missing (for the validation table: served beside the experts, it adds to their
    calls)."""
    comp = {c.name: c for c in rules.components}
    golden: dict[str, Reference | None] = {}  # per part: its golden crop is the same for all its crops
    for i, ref, t in zip(idents, refs, types):
        if i not in golden:
            golden[i] = reference(ref, comp[t], rules.crop_margin)
    measured = [kept(im, golden[i]) for im, i in zip(images, idents)]
    tells = {i for i, r in golden.items() if r is not None}
    least = least_share([s for s, y, h in zip(measured, labels, heldout) if s is not None and y == 0 and not h],
                        budget)
    called = np.array([least is not None and s is not None and s < least for s in measured], bool)
    kinds = tuple(sorted({t for i, t in zip(idents, types) if i in tells})) if least is not None else ()
    good, bad = heldout & (labels == 0), heldout & (labels == 1)
    taught = PresenceTaught(least, len(tells), len(rules.placements()), kinds, int(good.sum()),
                            int((called & good).sum()), int(bad.sum()), int((called & bad).sum()))
    return taught, called
