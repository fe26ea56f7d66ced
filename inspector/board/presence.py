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

A package with an exposed pad (QFN, DFN, a PowerPAD SOIC: its largest land, wholly under the body and under its
centre) leaves little body between its lands, and where it is missing its bare pad shows metal, as far from the
mask in colour as a black body; round fine-pitch lands the mask is often opened in one band, over pale laminate.
The ring between the lands then reads much as it does on a good board. For such a part the check also reads the
pad's own window, where the golden board shows the body that hides it, and asks how near the live window comes to
that body (1 less the distance over the golden body's own from the board), in lightness too, where metal and
epoxy differ most; each axis against the board's rim as above. The part keeps the lesser of the two shares.
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
PAD_INSET = 0.1  # of the body's shorter side: an exposed pad lies at least this far inside the body on every side
PAD_BLUR = 2  # px the pad's window keeps off its edge: the metal's blur and a registration's last pixel
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


def exposed_pad(comp: ComponentRule) -> tuple[float, float, float, float] | None:
    """The part's exposed (thermal) pad, (x0, y0, x1, y1) from the crop's centre, or None: its largest land where
    that land lies wholly under the body, `PAD_INSET` inside it on every side, and holds the body's centre. A land
    that reaches the body's edge is a termination the camera sees whether or not the part is there."""
    if len(comp.pads) < 3:
        return None
    bx, by, bw, bh = comp.body_geometry
    inset = PAD_INSET * min(bw, bh)
    area = [(c - a) * (d - b) for a, b, c, d in comp.pads]
    largest = int(np.argmax(area))
    if sorted(area)[-2] >= area[largest]:
        return None  # lands alike (a BGA's balls): none is the exposed pad
    a, b, c, d = comp.pads[largest]
    inside = (a >= bx - bw / 2 + inset and c <= bx + bw / 2 - inset and b >= by - bh / 2 + inset
              and d <= by + bh / 2 - inset)
    return (a, b, c, d) if inside and a <= bx <= c and b <= by <= d else None


def pad_window(comp: ComponentRule, shape: tuple[int, ...]) -> np.ndarray | None:
    """The exposed pad's window (`PAD_BLUR` inside its edge) as a boolean mask of a crop of `shape`; None where the
    part has no exposed pad or too little of it shows."""
    pad = exposed_pad(comp)
    if pad is None:
        return None
    h, w = shape[:2]
    a, b, c, d = pad
    window = np.zeros((h, w), bool)
    window[max(0, int(np.ceil(h / 2 + b)) + PAD_BLUR):max(0, int(np.floor(h / 2 + d)) - PAD_BLUR),
           max(0, int(np.ceil(w / 2 + a)) + PAD_BLUR):max(0, int(np.floor(w / 2 + c)) - PAD_BLUR)] = True
    return window if int(window.sum()) >= MIN_PIXELS else None


def _board(lab: np.ndarray, rim: np.ndarray) -> tuple[np.ndarray, float] | None:
    """The rim's median Lab (chroma centred on grey) and its saturation; None where the rim is grey."""
    if not rim.any():
        return None
    board = np.median(lab[rim], axis=0)
    saturation = float(np.hypot(board[1], board[2]))
    return None if saturation < MIN_SATURATION else (board, saturation)


def _lab(crop: np.ndarray) -> np.ndarray:
    lab = cv2.cvtColor(crop, cv2.COLOR_BGR2LAB).astype(np.float32)
    lab[..., 1:] -= 128.0
    return lab


def pad_colour(lab: np.ndarray, window: np.ndarray, rim: np.ndarray) -> np.ndarray | None:
    """The pad window's colour against the rim's in a crop's Lab (`_lab`): (lightness over the rim's, each chroma
    axis over the rim's saturation), so neither how bright the photo is nor its white balance moves it; None where
    the rim is grey."""
    board = _board(lab, rim)
    if board is None:
        return None
    (light, *_), saturation = board
    here = np.median(lab[window], axis=0) - board[0]
    return np.array([here[0] / max(float(light), 1.0), here[1] / saturation, here[2] / saturation])


def contrast(crop: np.ndarray, inner: np.ndarray, rim: np.ndarray) -> float | None:
    """The body's chroma against the rim's, over the rim's own saturation; None where the rim is grey or too little
    body shows."""
    return _contrast(_lab(crop), inner, rim)


def _contrast(lab: np.ndarray, inner: np.ndarray, rim: np.ndarray) -> float | None:
    if int(inner.sum()) < MIN_PIXELS:
        return None
    board = _board(lab, rim)
    if board is None:
        return None
    return float(np.hypot(*(np.median(lab[inner][:, 1:], axis=0) - board[0][1:]))) / board[1]


@dataclass(frozen=True)
class Reference:
    """One part's golden side of the check: where its body and the board's rim lie in its crop, and how far the
    golden body's colour stands from the board's (None where the body between the lands cannot tell); for a part
    with an exposed pad, the pad's window and the golden body's colour there. The same for every board: measured
    once."""
    inner: np.ndarray
    rim: np.ndarray
    contrast: float | None
    pad: np.ndarray | None = None
    pad_body: np.ndarray | None = None

    @property
    def by_pad(self) -> bool:
        """The check reads this part's exposed pad too."""
        return self.pad_body is not None


def reference(golden: np.ndarray, comp: ComponentRule, margin: int) -> Reference | None:
    """The part's reference from its golden crop, or None where the check cannot tell for it (see the module)."""
    inner, rim = masks(comp, golden.shape, margin)
    lab = _lab(golden)
    gold = _contrast(lab, inner, rim)
    gold = None if gold is None or gold < MIN_GOLDEN else gold
    pad = pad_window(comp, golden.shape)
    body = pad_colour(lab, pad, rim) if pad is not None else None
    body = None if body is None or float(np.linalg.norm(body)) < MIN_GOLDEN else body
    if gold is None and body is None:
        return None
    return Reference(inner, rim, gold, pad if body is not None else None, body)


def kept(live: np.ndarray, ref: Reference | None) -> float | None:
    """How much of the golden body's contrast the live crop keeps (about 1: the part is there; about 0: bare); for
    a part with an exposed pad, the lesser of that and how near its pad's window comes to the golden body (1 less
    the distance over the golden body's own from the board)."""
    if ref is None:
        return None
    shares, lab = [], _lab(live)
    if ref.contrast is not None:
        now = _contrast(lab, ref.inner, ref.rim)
        shares.append(None if now is None else now / ref.contrast)
    if ref.pad is not None and ref.pad_body is not None:
        now = pad_colour(lab, ref.pad, ref.rim)
        shares.append(None if now is None else
                      1.0 - float(np.linalg.norm(now - ref.pad_body)) / float(np.linalg.norm(ref.pad_body)))
    known = [s for s in shares if s is not None]
    return min(known) if known else None


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
    by_pad: int = 0  # of `parts`: those whose exposed pad the check reads too

    def to_json(self) -> dict:
        return {"least_share": self.least, "parts": self.parts, "of": self.of, "types": list(self.types),
                "heldout_good": self.heldout_good, "good_called": self.good_called,
                "heldout_defects": self.heldout_defects, "defects_caught": self.defects_caught,
                "by_exposed_pad": self.by_pad}

    def summary(self) -> str:
        tells = f"can tell for {self.parts} of {self.of} parts"
        pads = f"{self.by_pad} also by their exposed pad" if self.by_pad else ""
        if self.least is None:
            return (f"presence check (body colour against the board's): {tells}{f' ({pads})' if pads else ''}, too "
                    "few good crops to set it: not served")
        kinds = f"{len(self.types)} types" + (f"; {pads}" if pads else "")
        return (f"presence check (body colour against the board's): {tells} ({kinds}), missing under "
                f"{self.least:.2f} of the golden body's contrast; alone on "
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
    by_pad = sum(1 for r in golden.values() if r is not None and r.by_pad)
    taught = PresenceTaught(least, len(tells), len(rules.placements()), kinds, int(good.sum()),
                            int((called & good).sum()), int(bad.sum()), int((called & bad).sum()), by_pad)
    return taught, called
