"""Synthetic boards: OpenCV renders a rule set's layout with defects at known rates.

The demo has no camera and no dataset to download, so boards are drawn:
green solder mask, traces, silkscreen outlines, copper pads, solder, and each
component body by its shape (routing/shapes.py), with lighting and noise that
vary per board. Every part carries its true defect class, so the demo zoo
trains on these boards and the line's detection rate is measured on held-out ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

from ..routing.identity import SerialCode
from ..routing.rules import CLASSIFIER_CLASSES, ComponentRule, Placement, RuleSet
from ..routing.shapes import SHAPES
from .identity import code_image
from .lands import bridge_lands, exposed, footprint_pads, inside
from .silkscreen import SILKSCREEN_BGR, draw_silkscreen

DEFECTS = ("missing", "shifted", "rotated", "polarity", "bridge", "damaged")
# Per-part rates on the demo line (polarity only on polarized parts): ~6% of parts are defective.
DEFAULT_RATES = {"missing": 0.01, "shifted": 0.012, "rotated": 0.01, "polarity": 0.012, "bridge": 0.01,
                 "damaged": 0.01}
MASK_BGR = (38, 96, 30)
FIDUCIAL_BGR = (170, 190, 200)
# What a zoo's weights depend on in the drawing, beside the rule set: 2, a part's outline is kept out of the other
# parts' windows (silkscreen.py; the demo boards' parts are far enough apart that nothing changed for them).
RENDER_VERSION = 2


def rates_for(total: float) -> dict[str, float]:
    """DEFAULT_RATES' mix of defect classes scaled so that `total` of all parts are defective."""
    if not 0.0 <= total <= 0.5:
        raise ValueError(f"defect rate {total} is outside 0..0.5 (a fraction of parts, e.g. 0.005 for 0.5%)")
    scale = total / sum(DEFAULT_RATES.values())
    return {d: r * scale for d, r in DEFAULT_RATES.items()}


@dataclass
class Board:
    """One rendered board: its BGR image and the true defect ("ok" or a DEFECTS name) per designator."""

    serial: str
    image: np.ndarray
    truth: dict[str, str] = field(default_factory=dict)
    offsets: dict[str, tuple[float, float]] = field(default_factory=dict)  # body shift at rotation 0, px


def draw_defect(rng: np.random.Generator, component: ComponentRule, rates: dict[str, float]) -> str:
    """A part's defect drawn at the line's rates; polarity needs a polarized part."""
    u = rng.random()
    for defect in DEFECTS:
        if defect == "polarity" and not component.polarized:
            continue
        u -= rates.get(defect, 0.0)
        if u < 0:
            return defect
    return "ok"


def render_board(rules: RuleSet, serial: str, rng: np.random.Generator,
                 rates: dict[str, float] | None = None, forced: dict[str, str] | None = None) -> Board:
    """Draw one board; `forced` sets the defect of given designators (training data, tests)."""
    if rules.compare is not None:
        raise ValueError(f"rule set {rules.recipe} inspects a bare board against its golden image; the synthetic "
                         "renderer draws assembled boards only: feed it photographed boards (--source folder:DIR)")
    rates = DEFAULT_RATES if rates is None else rates
    width, height = rules.board_size
    image = _background(rng, width, height)
    draw_fiducials(image, rules)
    board = Board(serial, image)
    draw_silkscreen(image, rules)
    for comp, place in rules.placements():
        defect = (forced or {}).get(place.ref) or draw_defect(rng, comp, rates)
        board.offsets[place.ref] = draw_part(image, comp, place, defect, rng)
        board.truth[place.ref] = defect
    if rules.serial_code is not None and rules.serial_code.at is not None:
        draw_code(image, rules.serial_code, serial)
    for k, code in (rules.panel.codes or {}).items() if rules.panel is not None else ():
        draw_code(image, code, unit_code_text(serial, k))  # each board of a panel its own
    gain = rng.uniform(0.85, 1.15)
    noisy = image.astype(np.float32) * gain + rng.normal(0, 4.0, image.shape)
    board.image = np.clip(noisy, 0, 255).astype(np.uint8)
    return board


def unit_code_text(serial: str, position: int) -> str:
    """What the renderer prints on a panel's board `position` of the panel `serial`."""
    return f"{serial}-{position}"


def draw_code(image: np.ndarray, code: SerialCode, serial: str) -> None:
    """The board's serial as its code, in white silkscreen on the mask, centred where the rule set puts it."""
    modules = code_image(serial, code) < 128  # dark modules of the symbol: printed as silkscreen
    h, w = modules.shape
    if max(h, w) > code.size:
        raise ValueError(f"serial {serial!r} needs a {w}x{h} px code at {code.module_px} px per module, larger "
                         f"than the rule set's code region of {code.size} px; make the code's size larger or "
                         "module_px smaller")
    x0, y0 = code.at[0] - w // 2, code.at[1] - h // 2  # type: ignore[index]
    patch = image[y0:y0 + h, x0:x0 + w]
    patch[:] = MASK_BGR
    patch[modules] = SILKSCREEN_BGR


def _background(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    image = np.empty((height, width, 3), np.uint8)
    image[:] = MASK_BGR
    for _ in range(width * height // 4000):  # traces under the mask
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        dx, dy = (int(rng.integers(20, 120)), 0) if rng.random() < 0.5 else (0, int(rng.integers(20, 120)))
        cv2.line(image, (x, y), (x + dx, y + dy), (30, 118, 40), int(rng.integers(1, 3)))
    return image


def draw_fiducials(image: np.ndarray, rules: RuleSet) -> None:
    """The recipe's fiducial marks, bare copper in a ring of bare mask; a recipe without any gets the two
    corner dots boards always carry (nothing registers on them)."""
    if rules.fiducials is None:
        height, width = image.shape[:2]
        for cx, cy in ((8, 8), (width - 9, height - 9)):
            cv2.circle(image, (cx, cy), 4, FIDUCIAL_BGR, -1)
        return
    for m in rules.fiducials.marks:
        cv2.circle(image, (m.x, m.y), int(round(m.reach)), MASK_BGR, -1)
        if m.shape == "circle":
            cv2.circle(image, (m.x, m.y), m.size // 2, FIDUCIAL_BGR, -1)  # symmetric: its centroid is (x, y)
        else:
            half = (m.size - 1) / 2
            cv2.rectangle(image, (int(m.x - half), int(m.y - half)), (int(m.x + half), int(m.y + half)),
                          FIDUCIAL_BGR, -1)


def draw_part(image: np.ndarray, comp: ComponentRule, place: Placement, defect: str,
              rng: np.random.Generator) -> tuple[float, float]:
    """Draw a part at rotation 0 on a local patch, turn the patch to the placement, paste it.

    Returns the body's shift from its place at rotation 0 (the crop's frame), in pixels.
    """
    w, h = comp.size
    side = 2 * max(w, h) + 16
    patch = np.zeros((side, side, 3), np.uint8)
    mask = np.zeros((side, side), np.uint8)
    c = side // 2
    shape = SHAPES[comp.shape]
    pads = footprint_pads(c, comp.pads) if comp.pads else _pads(c, w, h, shape.leads)
    bx, by, bw, bh = comp.body_geometry  # the body's centre about the window's, its size
    # a land the body covers whole is a pin through it (a header's posts, seen from above): drawn over the body;
    # so is every land of a footprint that draws no body (the shape's stand-in body would hide them)
    body_rect = (c + bx - bw / 2, c + by - bh / 2, c + bx + bw / 2, c + by + bh / 2)
    pins = [p for p in pads if comp.pads and (comp.body is None or inside(p, body_rect))]
    for x0, y0, x1, y1 in pads:
        _rect(patch, mask, (x0, y0, x1, y1), (150, 160, 165))
    bridge = None
    if defect == "bridge":
        if comp.pads:
            # the solder lies where it shows: on the lands' ends out from under the body, not between their centres
            # (a SOT-23's lands run under its body: a bar there is drawn over, and labelled a bridge unseen)
            pinned = set(pins)
            seen = [p if p in pinned else exposed(p, body_rect) for p in pads]
            bridge = bridge_lands(seen, rng, c + (w + 1) // 2, None if pins else body_rect)
            if not set(bridge[1:]) & pinned:  # between lands in view: under the body, as the lands are
                _rect(patch, mask, bridge[0], (195, 200, 205))
                bridge = None
        else:
            _bridge(patch, mask, pads, shape.leads, rng)
    angle, dx, dy = 0.0, 0.0, 0.0
    if defect != "missing":
        if defect == "rotated":
            angle = float(rng.uniform(18, 35)) * (1 if rng.random() < 0.5 else -1)
        if defect == "shifted":
            if rng.random() < 0.5:
                dx = max(3.0, float(rng.uniform(0.3, 0.45)) * w) * (1 if rng.random() < 0.5 else -1)
            else:
                dy = max(3.0, float(rng.uniform(0.35, 0.55)) * h) * (1 if rng.random() < 0.5 else -1)
        cx, cy = c + bx + dx, c + by + dy
        _body(patch, mask, cx, cy, bw, bh, angle, shape.body_bgr, rng)
        # the mark's and the damage's factors were set on the window, of which the shape's body is 0.78 wide
        mw, mh = comp.size if comp.body is None else (bw / 0.78, int(round(bh)))
        if comp.polarized:
            flip = defect == "polarity"
            _mark(patch, cx, cy, mw, mh, angle, comp.shape, flip)
        if defect == "damaged":
            _damage(patch, mask, cx, cy, mw, mh, rng)
    for x0, y0, x1, y1 in pins:
        _rect(patch, mask, (x0, y0, x1, y1), (150, 160, 165))
    if bridge is not None:
        _rect(patch, mask, bridge[0], (195, 200, 205))
    k = place.rotation // 90
    patch, mask = np.rot90(patch, k), np.rot90(mask, k)  # counter-clockwise, as the cropper undoes it
    y0, x0 = place.y - side // 2, place.x - side // 2
    ys, xs = slice(max(0, y0), min(image.shape[0], y0 + side)), slice(max(0, x0), min(image.shape[1], x0 + side))
    sub_patch = patch[ys.start - y0:ys.stop - y0, xs.start - x0:xs.stop - x0]
    sub_mask = mask[ys.start - y0:ys.stop - y0, xs.start - x0:xs.stop - x0] > 0
    image[ys, xs][sub_mask] = sub_patch[sub_mask]
    return bx + dx, by + dy


def _rect(patch: np.ndarray, mask: np.ndarray, box: tuple[int, int, int, int], bgr: tuple[int, int, int]) -> None:
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    cv2.rectangle(patch, (x0, y0), (x1, y1), bgr, -1)
    cv2.rectangle(mask, (x0, y0), (x1, y1), 255, -1)


def _pads(c: int, w: int, h: int, leads: int) -> list[tuple[int, int, int, int]]:
    if leads == 0:  # two end terminations
        pw = max(3, w // 4)
        return [(c - w // 2 - pw // 2, c - h // 2 - 1, c - w // 2 + pw // 2, c + h // 2 + 1),
                (c + w // 2 - pw // 2, c - h // 2 - 1, c + w // 2 + pw // 2, c + h // 2 + 1)]
    pitch = w / leads
    lw = max(1, int(pitch * 0.45))
    ll = max(2, h // 5)
    pads = []
    for i in range(leads):
        x = int(c - w / 2 + pitch * (i + 0.5))
        pads.append((x - lw // 2, c - h // 2 - ll, x + lw // 2, c - h // 2 + 1))
        pads.append((x - lw // 2, c + h // 2 - 1, x + lw // 2, c + h // 2 + ll))
    return pads


def _body(patch: np.ndarray, mask: np.ndarray, cx: float, cy: float, w: float, h: float, angle: float,
          bgr: tuple[int, int, int], rng: np.random.Generator) -> None:
    tone = tuple(int(np.clip(v + rng.normal(0, 6), 0, 255)) for v in bgr)
    box = cv2.boxPoints(((cx, cy), (w, h), angle)).astype(np.int32)
    cv2.fillPoly(patch, [box], tone)
    cv2.fillPoly(mask, [box], 255)


def _mark(patch: np.ndarray, cx: float, cy: float, w: float, h: int, angle: float, shape: str, flip: bool) -> None:
    """The polarity mark on the left end of the body (cathode band, pin-1 dot); `flip` puts it on the right."""
    side = 1 if flip else -1
    a = math.radians(angle)
    ox, oy = side * w * 0.28, 0.0
    if shape in ("sot23", "soic", "qfp"):
        ox, oy = side * w * 0.25, -h * 0.2
    px, py = cx + ox * math.cos(a) - oy * math.sin(a), cy + ox * math.sin(a) + oy * math.cos(a)
    if shape in ("sot23", "soic", "qfp"):
        cv2.circle(patch, (int(round(px)), int(round(py))), max(1, h // 8), (210, 210, 210), -1)
    else:
        band = cv2.boxPoints(((px, py), (max(2.0, w * 0.12), h * 0.95), angle)).astype(np.int32)
        cv2.fillPoly(patch, [band], (220, 225, 230) if shape != "led" else (40, 160, 40))


def _bridge(patch: np.ndarray, mask: np.ndarray, pads: list[tuple[int, int, int, int]], leads: int,
            rng: np.random.Generator) -> None:
    """Solder joining two terminals that must not touch."""
    if leads == 0:
        (ax0, ay0, ax1, _), (bx0, _, bx1, by1) = pads
        y = int(rng.choice([ay0 - 2, by1 + 1]))
        _rect(patch, mask, (ax0, y, bx1, y + 2), (195, 200, 205))
    else:
        i = int(rng.integers(0, len(pads) - 2)) // 2 * 2
        a, b = pads[i], pads[i + 2]
        _rect(patch, mask, (a[0], a[1], b[2], a[3]), (195, 200, 205))


def _damage(patch: np.ndarray, mask: np.ndarray, cx: float, cy: float, w: float, h: int,
            rng: np.random.Generator) -> None:
    """A chipped corner and a crack across the body."""
    x0, y0 = int(cx - w * 0.39), int(cy - h / 2)
    corner = rng.integers(0, 2)
    chip = np.array([[x0 + (0 if corner else int(w * 0.78)), y0], [x0 + int(w * 0.35), y0],
                     [x0 + (0 if corner else int(w * 0.78)), y0 + int(h * 0.6)]], np.int32)
    cv2.fillPoly(patch, [chip], MASK_BGR)
    cv2.line(patch, (int(cx - w * 0.3), int(cy + h * 0.4)), (int(cx + w * 0.25), int(cy - h * 0.3)),
             (200, 200, 200), 1)


def classifier_label(defect: str) -> int:
    """The classifier's class for a part: polarity is the detector's to find, so it reads "ok" here."""
    return CLASSIFIER_CLASSES.index("ok" if defect == "polarity" else defect)
