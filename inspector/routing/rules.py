"""The rule-set schema: a board recipe's component types, their experts, thresholds and layout.

A plant engineer writes one YAML file per board recipe (routing_rules/*.yaml,
documented in docs/pages/reference/rule-sets.md). It is validated once, here, into a
`RuleSet`; every error names the file and line and what to write instead.
The rule set's version is the hash of its text, stored with every result.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..coserve.online.components import ComponentType, DetectorSpec
from ..coserve.online.request import Route
from ..coserve.online.usage import ExpertUsage, RouteUse
from ..experts.spec import UnknownArchitecture, check_spec
from ..yamlio import ConfigError, Fields, LinedDict, beside, line_of, load_yaml
from .alternates import parse_alternates
from .camera import CameraRules, parse_camera
from .compare import WINDOW, CompareRules, parse_compare
from .fiducials import FiducialRules, parse_fiducials
from .gate import GateRules, parse_gate
from .identity import SerialCode, parse_serial_code
from .panel import PanelRules, parse_panel, stray_refs
from .part_numbers import parse_part_numbers
from .photo import PhotoRegistration, parse_photo_registration
from .shapes import SHAPES

CLASSIFIER_CLASSES = ("ok", "missing", "shifted", "rotated", "bridge", "damaged")
DETECTOR_CLASSES = ("in_place", "reversed")
ROTATIONS = (0, 90, 180, 270)


@dataclass(frozen=True)
class Placement:
    """One reference designator: the centre of its body on the board and its rotation."""

    ref: str
    x: int
    y: int
    rotation: int = 0


@dataclass(frozen=True)
class ComponentRule:
    name: str
    shape: str
    size: tuple[int, int]  # body width, height in board pixels at rotation 0
    detector: str | None
    align_tolerance_px: float
    expected_pass_rate: float
    placements: tuple[Placement, ...]
    # `polarized:` in the rule set, where the type's package says otherwise than its drawn shape (a pin header drawn
    # as a SOIC has no polarity); None: the shape's. Kept out of repr so the demo zoos' training versions stand.
    polarity: bool | None = field(default=None, repr=False)
    # the footprint's own lands and body (`pads:`, `body:`), px boxes (x0, y0, x1, y1) about the window's centre at
    # rotation 0, as `board import` writes them: what the renderer draws instead of the shape's made-up leads.
    # Out of repr, like polarity: a rule set without them keeps its training version.
    pads: tuple[tuple[int, int, int, int], ...] = field(default=(), repr=False)
    body: tuple[int, int, int, int] | None = field(default=None, repr=False)
    # `body_contrast:` (set by `board teach`): the least share of the golden board's body-against-board colour a
    # live crop must keep, under which the line calls the part missing (board/presence.py). None: no such check.
    body_contrast: float | None = field(default=None, repr=False)
    # `input_size:`: this type's classifier input (px a side) where the rule set's is too coarse for it (a large
    # package's fine-pitch leads); None: the rule set's `classifier:` input. Out of repr, like pads.
    input_size: int | None = field(default=None, repr=False)

    @property
    def kind(self) -> ComponentType:
        """This type as the engine's workload sees it: count per board, route, pass rate."""
        return ComponentType(self.name, len(self.placements), self.detector, self.expected_pass_rate)

    @property
    def classifier(self) -> str:
        return self.kind.classifier

    @property
    def route(self) -> Route:
        return self.kind.route

    @property
    def polarized(self) -> bool:
        """Whether the part can be placed the wrong way round: what the renderer marks and turns, and a polarity
        defect needs."""
        if self.shape == WINDOW:
            return False
        return self.polarity if self.polarity is not None else SHAPES[self.shape].polarized

    @property
    def body_geometry(self) -> tuple[float, float, float, float]:
        """The body as drawn and as a detector should find it: its centre's offset from the window's centre, its
        width and height (rotation 0, px). The footprint's body where the rule set gives it (`body:`), else the
        shape's: the window's height and 0.78 of its width (a chip's end caps show beside it)."""
        if self.body is None:
            return 0.0, 0.0, self.size[0] * 0.78, float(self.size[1])
        x0, y0, x1, y1 = self.body
        return (x0 + x1) / 2, (y0 + y1) / 2, float(x1 - x0), float(y1 - y0)

    @property
    def window(self) -> bool:
        """A bare-board window (routing/compare.py): its parts are the differences from the golden board in it."""
        return self.shape == WINDOW


@dataclass(frozen=True)
class RuleSet:
    recipe: str
    seed: int
    board_size: tuple[int, int]  # width, height
    crop_margin: int
    classifier_spec: dict[str, Any]
    detectors: tuple[DetectorSpec, ...]
    components: tuple[ComponentRule, ...]
    version: str  # sha256 of the file's text, first 12 hex digits
    source: str = "<memory>"
    fiducials: FiducialRules | None = None  # None: boards are cut at their nominal positions (no registration)
    serial_code: SerialCode | None = None  # None: the board carries no code; its serial comes from the source
    golden: str | None = None  # the golden board's image in recipe pixels (absolute path): golden-comparison experts
    gate: GateRules = GateRules()  # when a frame of a free-running camera is a board (camera/gate.py)
    camera: CameraRules = CameraRules()  # the camera settings its product needs, taken at its changeover
    compare: CompareRules | None = None  # a bare board: its parts are its differences from the golden board
    photo: PhotoRegistration | None = None  # boards photographed whole: registered on their outline or picked points
    panel: PanelRules | None = None  # copies of one board carried as one, each with its own verdict (routing/panel.py)
    alternates: dict[str, tuple[str, ...]] = field(default_factory=dict)  # REF -> approved makes' windows (files)
    part_numbers: dict[str, str] = field(default_factory=dict)  # REF -> the BOM's part number (routing/part_numbers.py)
    text: str = field(default="", repr=False, compare=False)  # what it was parsed from: kept by `version` with results

    def component(self, name: str) -> ComponentRule:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(f"component type {name!r} is not in rule set {self.recipe}")

    def placements(self) -> tuple[tuple[ComponentRule, Placement], ...]:
        """Every part on the board in scan order (top to bottom, left to right)."""
        return self._scan_order

    @cached_property
    def _scan_order(self) -> tuple[tuple[ComponentRule, Placement], ...]:  # cut_board asks once per board
        parts = [(c, p) for c in self.components for p in c.placements]
        return tuple(sorted(parts, key=lambda cp: (cp[1].y, cp[1].x)))

    @cached_property
    def _scan_index(self) -> dict[str, int]:
        return {p.ref: i for i, (_, p) in enumerate(self._scan_order)}

    def scan_index(self) -> dict[str, int]:
        """Reference designator -> its place in scan order (to list a board's parts the same way every time)."""
        return self._scan_index

    def usage(self) -> ExpertUsage:
        """Usage probabilities from the per-board counts and expected pass rates (paper §4.5)."""
        kinds = [c.kind for c in self.components]
        return ExpertUsage.from_routes(RouteUse(k.route, k.count, k.pass_rate) for k in kinds)

    @cached_property
    def training_version(self) -> str:
        """The hash of what a trained expert depends on: the recipe's boards, parts and experts, not how its boards
        are gated or identified (`serial_code` and `gate` change no crop: the validator keeps codes out of them),
        nor the camera settings it asks for (`camera`: the photos taught on carry what they did to the crops)."""
        fid = self.fiducials
        payload = {"seed": self.seed, "board": self.board_size, "crop_margin": self.crop_margin,
                   "classifier": self.classifier_spec, "detectors": [(d.name, d.spec) for d in self.detectors],
                   "components": [repr(c) for c in self.components],
                   "fiducials": None if fid is None else [repr(m) for m in fid.marks]}
        if self.compare is not None:  # only then: the demo zoos' cache keys stay what they were
            payload["compare"] = repr(self.compare)
        polarity = {c.name: c.polarity for c in self.components if c.polarity is not None}
        if polarity:  # likewise
            payload["polarized"] = polarity
        lands = {c.name: [c.pads, c.body] for c in self.components if c.pads or c.body is not None}
        if lands:  # likewise
            payload["lands"] = lands
        sizes = {c.name: c.input_size for c in self.components if c.input_size is not None}
        if sizes:  # likewise (body_contrast is not here: it changes verdicts, not what an expert is trained on)
            payload["input_sizes"] = sizes
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]

    def named_files(self) -> tuple[str, ...]:
        """The files the set names (absolute paths, in the order written): what travels with its rule file to another
        box (app/board_package.py) besides the zoo that serves it."""
        named = [self.golden] if self.golden else []
        if self.photo is not None:
            named += [f for f in (self.photo.geometry, self.photo.points) if f]
        named += [f for files in self.alternates.values() for f in files]
        return tuple(dict.fromkeys(named))

    def expert_specs(self) -> dict[str, dict[str, Any]]:
        """Each expert's architecture: the rule set's classifier, at a type's own `input_size:` where it has one."""
        specs = {c.classifier: self.classifier_spec if c.input_size is None
                 else {**self.classifier_spec, "input_size": c.input_size} for c in self.components}
        specs.update({d.name: d.spec for d in self.detectors})
        return specs


_TOP = {"recipe", "seed", "board", "crop_margin", "classifier", "detectors", "components", "fiducials", "serial_code",
        "gate", "golden", "compare", "photo_registration", "panel", "alternates", "part_numbers",
        "camera"}
_COMPONENT = {"shape", "size", "detector", "align_tolerance_px", "expected_pass_rate", "polarized", "pads", "body",
              "body_contrast", "input_size", "at"}


def load_rules(path: str | Path) -> RuleSet:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read the rule file: {exc.strerror}") from None
    return parse_rules(decode_rules(data, str(path)), str(path))


def decode_rules(data: bytes, source: str) -> str:
    """UTF-8 text, or a ConfigError naming the line of the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(source, line, f"not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8") from None


def parse_rules(text: str, source: str) -> RuleSet:
    """A rule set from YAML text; any malformed file gives ConfigError with file:line, never another error."""
    try:
        return _parse_rules(text, source)
    except ConfigError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError) as exc:
        raise ConfigError(source, None, f"a value of an unexpected shape ({type(exc).__name__}: {exc}); compare "
                          f"the file with docs/pages/reference/rule-sets.md") from None


def _parse_rules(text: str, source: str) -> RuleSet:
    doc = Fields(load_yaml(text, source), source)
    doc.unknown(_TOP)
    board = doc.sub("board")
    board.unknown({"width", "height"})
    width, height = board.number("width", integer=True, minimum=32), board.number("height", integer=True, minimum=32)
    classifier = _classifier(doc.sub("classifier"))
    detectors = _detectors(doc, source)
    comps = doc.get("components")
    if not isinstance(comps, dict) or not comps:
        raise doc.error("components", "must map component type names to their rules (at least one)")
    names = {d.name for d in detectors}
    seen: dict[str, str] = {}
    components = tuple(_component(Fields(body, source, f"components.{name}"), str(name), names, (width, height), seen)
                       for name, body in comps.items())
    ruleset = RuleSet(
        recipe=doc.text("recipe"), seed=doc.number("seed", 0, integer=True),
        board_size=(width, height), crop_margin=doc.number("crop_margin", 4, minimum=0, integer=True),
        classifier_spec=classifier, detectors=detectors, components=components,
        version=hashlib.sha256(text.encode()).hexdigest()[:12], source=source,
        fiducials=parse_fiducials(doc.sub("fiducials"), (width, height)) if doc.has("fiducials") else None,
        serial_code=parse_serial_code(doc.sub("serial_code"), (width, height)) if doc.has("serial_code") else None,
        gate=parse_gate(doc.sub("gate")), camera=parse_camera(doc.sub("camera")), text=text,
        golden=_golden(doc, source) if doc.has("golden") else None,
        compare=parse_compare(doc.sub("compare")) if doc.has("compare") else None,
        photo=parse_photo_registration(doc.sub("photo_registration"), source) if doc.has("photo_registration")
        else None,
        panel=parse_panel(doc.sub("panel"), (width, height)) if doc.has("panel") else None,
        alternates=parse_alternates(doc.sub("alternates"), set(seen)) if doc.has("alternates") else {},
        part_numbers=parse_part_numbers(doc.sub("part_numbers"), set(seen)) if doc.has("part_numbers") else {},
    )
    if ruleset.photo is not None and ruleset.compare is not None:
        raise doc.error("photo_registration", "a bare-board comparison aligns each board on its golden image: leave "
                                              "out `photo_registration`")
    if ruleset.photo is not None and ruleset.photo.using == "golden" and ruleset.golden is None:
        raise doc.error("photo_registration", "`using: golden` aligns each frame to the golden board: name its image "
                                              "(golden: FILE; `inspector board golden` draws one for a board taken "
                                              "from CAD alone)")
    checked = [c.name for c in ruleset.components if c.body_contrast is not None]
    if checked and ruleset.golden is None:
        raise doc.error("components", f"{', '.join(checked)} set body_contrast, which compares each crop with the "
                                      "golden board's: name its image (golden: FILE; `board teach` writes both)")
    if ruleset.alternates and (ruleset.golden is None or ruleset.compare is not None):
        raise doc.error("alternates", "an approved alternate is a second golden window of its part: it needs the "
                                      "golden board of an assembled board (golden: FILE, written by `board teach`)")
    _check_compare(ruleset, doc, comps)
    if ruleset.panel is not None and (stray := stray_refs(ruleset.panel, seen)):
        raise doc.error("panel", f"{len(stray)} references name a copy the panel of {ruleset.panel.boards} boards "
                                 f"does not have ({', '.join(stray[:5])}{' ...' if len(stray) > 5 else ''}): a "
                                 "copy's parts are k-REF with k from 1 to `boards`; raise `boards` or fix the names")
    _check_overlaps(ruleset, comps)
    _check_fiducials_clear(ruleset, doc)
    _check_code_clear(ruleset, doc)
    return ruleset


def _golden(doc: Fields, source: str) -> str:
    """`golden: FILE`, relative to the rule file's folder: the golden board photographed square-on and cut to the
    recipe's pixels (ingest/golden.py reads it when an expert needs it)."""
    return beside(source, doc.text("golden"))


def _classifier(f: Fields) -> dict[str, Any]:
    f.unknown({"arch", "input_size"})
    spec = {"arch": f.text("arch", "resnet10"), "input_size": f.number("input_size", 32, minimum=16, integer=True),
            "classes": len(CLASSIFIER_CLASSES)}
    if not spec["arch"].startswith("resnet"):
        raise f.error("arch", f"a classifier is a ResNet (resnet10, resnet18, ...), got {spec['arch']!r}")
    _check_arch(f, "arch", spec)
    return spec


def _detectors(doc: Fields, source: str) -> tuple[DetectorSpec, ...]:
    raw = doc.get("detectors") or LinedDict()
    if not isinstance(raw, dict):
        raise doc.error("detectors", "must map detector names to {arch, input_size, threshold}")
    out = []
    for name, body in raw.items():
        f = Fields(body, source, f"detectors.{name}")
        f.unknown({"arch", "input_size", "threshold"})
        size = f.number("input_size", 64, minimum=32, integer=True)
        if size % 32:
            raise f.error("input_size", f"must be a multiple of 32 for YOLO, got {size}")
        spec = {"arch": f.text("arch"), "input_size": size, "classes": len(DETECTOR_CLASSES),
                "threshold": f.number("threshold", 0.5, minimum=0.0, maximum=1.0)}
        _check_arch(f, "arch", spec)
        out.append(DetectorSpec(str(name), spec))
    return tuple(out)


def _check_arch(f: Fields, key: str, spec: dict[str, Any]) -> None:
    try:
        check_spec(spec)
    except UnknownArchitecture as exc:
        raise f.error(key, str(exc)) from None


def _component(f: Fields, name: str, detectors: set[str], board: tuple[int, int],
               seen: dict[str, str]) -> ComponentRule:
    f.unknown(_COMPONENT)
    shape = f.text("shape")
    if shape not in SHAPES and shape != WINDOW:
        raise f.error("shape", f"unknown shape {shape!r}; known: {', '.join(sorted([*SHAPES, WINDOW]))}")
    size = f.get("size")
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v >= 4 for v in size)):
        raise f.error("size", f"must be [width, height] in board pixels, each an integer >= 4, got {size!r}")
    detector = f.get("detector")
    if detector is not None and (not isinstance(detector, str) or detector not in detectors):
        known = ", ".join(sorted(detectors)) or "none are defined under detectors"
        raise f.error("detector", f"names detector {detector!r}, which is not defined; defined: {known}")
    polarity = f.get("polarized")
    if polarity is not None and not isinstance(polarity, bool):
        raise f.error("polarized", f"must be true or false, got {polarity!r}")
    if polarity and (shape == WINDOW or not SHAPES[shape].polarized):
        raise f.error("polarized", f"shape {shape} draws no polarity mark: give the type a polarized shape "
                                   f"({', '.join(sorted(n for n, s in SHAPES.items() if s.polarized))})")
    pads, body = _lands(f, shape, (size[0], size[1]))
    body_contrast = f.get("body_contrast")
    if body_contrast is not None and (isinstance(body_contrast, bool) or not isinstance(body_contrast, (int, float))
                                      or not 0 < body_contrast < 1 or shape == WINDOW):
        raise f.error("body_contrast", "must be a share between 0 and 1 (the least of the golden body's contrast "
                                       "a part keeps; `board teach` sets it) on a type with a body, got "
                                       f"{body_contrast!r}")
    input_size = f.get("input_size")
    if input_size is not None and (isinstance(input_size, bool) or not isinstance(input_size, int)
                                   or not 16 <= input_size <= 256):
        raise f.error("input_size", f"must be the classifier's input in px a side, 16 to 256, got {input_size!r}")
    at = f.get("at")
    if not isinstance(at, dict) or not at:
        raise f.error("at", "must map reference designators to [x, y] or [x, y, rotation] (at least one)")
    placements = []
    for ref, pos in at.items():
        placements.append(_placement(f, at, str(ref), pos, tuple(size), board, shape == WINDOW))
        if str(ref) in seen:
            raise Fields(at, f.source, f"{f.where}.at").error(ref, f"designator {ref} is already used by {seen[ref]}")
        seen[str(ref)] = name
    return ComponentRule(
        name=name, shape=shape, size=(size[0], size[1]), detector=detector,
        align_tolerance_px=f.number("align_tolerance_px", 2.0, minimum=0.0),
        expected_pass_rate=f.number("expected_pass_rate", 0.93, minimum=0.0, maximum=1.0),
        placements=tuple(placements), polarity=polarity, pads=pads, body=body,
        body_contrast=float(body_contrast) if body_contrast is not None else None, input_size=input_size,
    )


def _box(f: Fields, key: str, value: Any, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """One px box about the window's centre, inside the window (a land may end on its edge)."""
    w, h = size
    if not (isinstance(value, list) and len(value) == 4 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                 for v in value)):
        raise f.error(key, f"each box must be [x0, y0, x1, y1] in integer px about the window's centre, got {value!r}")
    x0, y0, x1, y1 = value
    if x1 <= x0 or y1 <= y0:
        raise f.error(key, f"box {value} is empty: x1 must exceed x0 and y1 exceed y0")
    if x0 < -(w // 2) - 1 or y0 < -(h // 2) - 1 or x1 > (w + 1) // 2 + 1 or y1 > (h + 1) // 2 + 1:
        raise f.error(key, f"box {value} reaches outside the {w}x{h} px window (x {-(w // 2)}..{(w + 1) // 2}, "
                           f"y {-(h // 2)}..{(h + 1) // 2}): grow `size` or fix the box")
    return x0, y0, x1, y1


def _lands(f: Fields, shape: str, size: tuple[int, int]) -> tuple[tuple[tuple[int, int, int, int], ...],
                                                                      tuple[int, int, int, int] | None]:
    """`pads:` and `body:` (the footprint's, from `board import`): where the renderer draws lands and body."""
    pads = f.get("pads")
    body = f.get("body")
    if (pads is not None or body is not None) and shape == WINDOW:
        raise f.error("pads" if pads is not None else "body", "a bare-board window has no lands or body to draw")
    if pads is not None and not (isinstance(pads, list) and pads):
        raise f.error("pads", f"must list the lands as [x0, y0, x1, y1] boxes (at least one), got {pads!r}")
    lands = tuple(_box(f, "pads", p, size) for p in pads or [])
    return lands, None if body is None else _box(f, "body", body, size)


def _placement(f: Fields, at: dict, ref: str, pos: Any, size: tuple[int, int], board: tuple[int, int],
               to_edge: bool = False) -> Placement:
    """`to_edge`: the body may end at the board's last pixel (a window tiling the board); a part's body keeps one
    pixel of board beyond it."""
    where = Fields(at, f.source, f"{f.where}.at")
    if not (isinstance(pos, list) and len(pos) in (2, 3) and all(isinstance(v, int) for v in pos)):
        raise where.error(ref, f"must be [x, y] or [x, y, rotation] in integer pixels, got {pos!r}")
    x, y = pos[0], pos[1]
    rotation = pos[2] if len(pos) == 3 else 0
    if rotation not in ROTATIONS:
        raise where.error(ref, f"rotation must be one of {ROTATIONS}, got {rotation}")
    w, h = size if rotation in (0, 180) else size[::-1]
    rx, ry = ((w + 1) // 2, (h + 1) // 2) if to_edge else (w // 2 + 1, h // 2 + 1)
    if x - w // 2 < 0 or y - h // 2 < 0 or x + rx > board[0] or y + ry > board[1]:
        raise where.error(ref, f"body at ({x}, {y}) of {w}x{h} px lies outside the {board[0]}x{board[1]} board")
    return Placement(ref, x, y, rotation)


def body_box(component: ComponentRule, p: Placement, margin: int = 0) -> tuple[int, int, int, int]:
    """x0, y0, x1, y1 of a part's body on the board (rotated), grown by `margin` on each side."""
    w, h = component.size if p.rotation in (0, 180) else component.size[::-1]
    return (p.x - w // 2 - margin, p.y - h // 2 - margin, p.x + (w + 1) // 2 + margin, p.y + (h + 1) // 2 + margin)


def _check_compare(rules: RuleSet, doc: Fields, comps: dict) -> None:
    """Windows only in a bare-board rule set, and a bare-board rule set only of windows, with a golden board and
    no fiducials (the golden image is what each board is aligned on) and no detector (a difference is one request
    with one image)."""
    windows = [c for c in rules.components if c.window]
    if rules.compare is None:
        if windows:
            raise Fields(comps, rules.source, "components").error(
                windows[0].name, f"shape {WINDOW} is a bare-board window: add a `compare:` section (docs/pages/"
                "reference/rule-sets.md) or give the type a part's shape")
        return
    parts = [c for c in rules.components if not c.window]
    if parts:
        raise Fields(comps, rules.source, "components").error(
            parts[0].name, f"a bare-board rule set (`compare:`) inspects windows only: give it shape {WINDOW}, or "
            "inspect the assembled board with its own rule set")
    if rules.golden is None:
        raise doc.error("compare", "compares each board with its golden board: add `golden: FILE` (the golden "
                                   "board, the recipe's size)")
    if rules.fiducials is not None:
        raise doc.error("fiducials", "a bare-board rule set aligns each board on its golden image; leave out "
                                     "`fiducials`")
    for c in rules.components:
        if c.detector:
            raise Fields(comps, rules.source, "components").error(
                c.name, "a window's differences are named by its own expert alone: leave out `detector`")


OVERLAP_SHARE = 0.25  # of the smaller body: more is two parts on one spot; less is a dense board's windows touching


def _check_overlaps(rules: RuleSet, comps: dict) -> None:
    """Two bodies on one spot would make each crop show the other: name both designators. Windows that only touch
    (a real board's body-and-joints windows, a quarter of the smaller one or less) are allowed, and a bare board's
    windows may overlap at will (a difference belongs to the first that holds it)."""
    boxes = [(c, p, body_box(c, p, 1)) for c, p in rules.placements() if not c.window]
    boxes.sort(key=lambda t: t[2][0])
    for i, (c, p, a) in enumerate(boxes):
        for d, q, b in boxes[i + 1:]:
            if b[0] >= a[2]:
                break
            ix, iy = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
            smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
            if ix > 0 and iy > 0 and ix * iy > OVERLAP_SHARE * smaller:
                at = comps[c.name]["at"] if isinstance(comps.get(c.name), dict) else None
                raise ConfigError(rules.source, line_of(at, p.ref) if at is not None else None,
                                  f"components.{c.name}.at.{p.ref} overlaps {q.ref} ({d.name}); move one of them")


def _check_fiducials_clear(rules: RuleSet, doc: Fields) -> None:
    """A mark and its bare ring must not touch a part's body, or the part would hide or mimic the mark."""
    if rules.fiducials is None:
        return
    marks = doc.sub("fiducials").sub("marks")
    for m in rules.fiducials.marks:
        r = m.reach
        for c, p in rules.placements():
            x0, y0, x1, y1 = body_box(c, p, 1)
            if x0 - r < m.x < x1 + r and y0 - r < m.y < y1 + r:
                raise marks.error(m.name, f"the mark at ({m.x}, {m.y}) and its bare ring of {r:.0f} px touch "
                                          f"{p.ref} ({c.name}); move the mark to free board space")


def _check_code_clear(rules: RuleSet, doc: Fields) -> None:
    """Each code's region (the board's, and a panel's boards' own) must lie outside every crop (a crop showing part
    of a code would look like a defect to its expert) and outside every fiducial's bare ring."""
    codes: list[tuple[SerialCode, Fields, object]] = []
    if rules.serial_code is not None and rules.serial_code.box() is not None:
        codes.append((rules.serial_code, doc.sub("serial_code"), "at"))
    if rules.panel is not None and rules.panel.codes:
        at = doc.sub("panel").sub("codes").sub("at")
        codes += [(code, at, k) for k, code in rules.panel.codes.items()]
    for i, (code, f, key) in enumerate(codes):
        box = code.box()
        x0, y0, x1, y1 = box  # type: ignore[misc]
        for other, _f, which in codes[:i]:  # two codes in one region: neither reads as one board's
            b = other.box()
            if b[0] < x1 and x0 < b[2] and b[1] < y1 and y0 < b[3]:  # type: ignore[index]
                named = "the board's serial code" if which == "at" else f"board {which}'s code"
                raise f.error(key, f"the code's region {box} overlaps {named}'s region {b}; move one of them")
        for c, p in rules.placements():
            if c.window:  # a window is no crop: the code's difference from the golden board is nil
                continue
            a = body_box(c, p, rules.crop_margin)
            if a[0] < x1 and x0 < a[2] and a[1] < y1 and y0 < a[3]:
                raise f.error(key, f"the code's region {box} overlaps the crop of {p.ref} ({c.name}); move the code "
                                   f"to free board space or make its size smaller")
        for m in rules.fiducials.marks if rules.fiducials is not None else ():
            r = m.reach
            if x0 - r < m.x < x1 + r and y0 - r < m.y < y1 + r:
                raise f.error(key, f"the code's region {box} touches fiducial {m.name}'s bare ring; move the code")
