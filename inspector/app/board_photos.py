"""Photos of a plant's board brought into its rule set's frame: registered, warped, and drawn over for a person.

Shared by teaching (golden photos) and checking (photos of boards to inspect). A photo is registered on picked
points when the recipe has them (`RULES.points.yaml`: a fixed camera over a fixture sees every board alike), else
on each board's outline (inspector/board/register.py), or, where no outline registers, on the recipe's fiducials
found anywhere in the photo (inspector/board/mark_search.py); with a golden board at hand, the registration is
refined on its content. A photo may hold several boards (a tray): each board-sized blob is tried, and one that does not
register is kept with the reason.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..board.geometry import BoardGeometry, read_geometry, read_geometry_file
from ..board.light import match_light
from ..board.mark_search import boards_on_marks
from ..board.outline import Candidate, candidates
from ..board.register import (
    Registration,
    RegistrationError,
    refine_on_reference,
    register_on_reference,
    register_points,
)
from ..board.tilt import untilted
from ..routing.rules import RuleSet, body_box
from ..yamlio import load_yaml

POINTS_SUFFIX = ".points.yaml"
OVERLAY_SIDE = 1600  # px: the longer side of an overlay PNG


@dataclass
class PhotoBoard:
    """One board of a photo: its registration and the board in the rule set's frame, or why it has none."""
    photo: Path
    index: int  # the board's place in the photo (largest blob first)
    centre: tuple[int, int]  # in the photo, px
    registration: Registration | None
    image: np.ndarray | None  # the board warped to the rule set's frame
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.photo.stem}#{self.index}"


def points_path(rules: Path) -> Path:
    return rules.with_name(rules.stem + POINTS_SUFFIX)


def read_points(path: Path) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Picked points: `points: [[photo_x, photo_y, board_x, board_y], ...]`, the board in the rule set's pixels."""
    doc = load_yaml(path.read_text(encoding="utf-8"), str(path))
    rows = doc.get("points") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 4 and
                                             all(isinstance(v, (int, float)) for v in r) for r in rows):
        raise ValueError(f"{path}: write `points: [[photo_x, photo_y, board_x, board_y], ...]` (3 or more rows; "
                         "board x, y in the rule set's pixels)")
    return [((float(a), float(b)), (float(c), float(d))) for a, b, c, d in rows]


def write_points(path: Path, pairs: list[tuple[tuple[float, float], tuple[float, float]]]) -> Path:
    rows = "\n".join(f"  - [{p[0]:.1f}, {p[1]:.1f}, {q[0]:.1f}, {q[1]:.1f}]" for p, q in pairs)
    path.write_text("# picked once: a photo's pixel and the same spot in the rule set's pixels (board teach)\n"
                    f"points:\n{rows}\n", encoding="utf-8")
    return path


def registration_inputs(rules_path: Path, rules: RuleSet | None = None) -> tuple[BoardGeometry | None, list | None]:
    """The board geometry and picked points a rule set registers photos on: those its `photo_registration` names
    (what the line reads, whatever the rule file is called), else those written beside it (either may be missing)."""
    if rules is not None and rules.photo is not None and rules.photo.using != "golden":
        return photo_registration_of(rules)
    picked = points_path(rules_path)
    return read_geometry(rules_path), read_points(picked) if picked.is_file() else None


def read_photo(path: Path) -> np.ndarray:
    photo = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if photo is None:
        raise ValueError(f"{path} is not an image OpenCV can read")
    return photo


def marks_of(rules: RuleSet, geometry: BoardGeometry | None) -> list[tuple[float, float, float, float]]:
    """Where the CAD expects edges: every inspected part's pads, or its window where the geometry is unknown."""
    if geometry is not None and any(geometry.pads.values()):
        return [p for pads in geometry.pads.values() for p in pads]
    return [body_box(c, p, 0) for c, p in rules.placements()]


def outline_of(rules: RuleSet, geometry: BoardGeometry | None) -> tuple[float, float, float, float]:
    return geometry.outline if geometry is not None else (0.0, 0.0, *map(float, rules.board_size))


def to_recipe_frame(photo: np.ndarray, registration: Registration, rules: RuleSet,
                    light_of: np.ndarray | None, warped: np.ndarray | None = None) -> np.ndarray:
    """The registered board warped to the rule set's frame (or `warped`, where the registration already did it)
    and, given the golden board `light_of`, brought to its light (said in the registration's note)."""
    image = warped if warped is not None else registration.warp(photo, rules.board_size)
    if light_of is not None:
        image, note = match_light(image, light_of)
        registration.note += f"; {note}"
    return image


def boards_of(photo: np.ndarray, photo_path: Path, rules: RuleSet, geometry: BoardGeometry | None,
              points: list | None = None, reference: np.ndarray | None = None,
              light: bool = True, first: bool = False) -> Iterator[PhotoBoard]:
    """Every board of the photo (`photo_path` names it): on the picked `points` (three: the camera's tilt taken from
    the CAD's edges, board/tilt.py), else the outline's boards largest first and then those found by their marks;
    each registered (refined on `reference`, the golden board, when given, and, with `light`, brought to its light)
    and warped to the rule set's frame, or with the reason it is not. Light matching is for experts that compare a
    crop with the golden board's: an expert that reads the live crop alone was taught another photo's light, and
    matching only clips what it knows. `first`: a line's frame, whose first registered board is the board (the mark
    search does not look beside the boards it finds on their most marks)."""
    px_per_mm = geometry.px_per_mm if geometry is not None else 1.0
    if points is not None:
        by_points = register_points(points, px_per_mm)
        if len(points) == 3:  # an affine map: the camera's tilt taken from the CAD's edges
            by_points, said = untilted(photo, by_points, [q for _, q in points], rules.board_size,
                                       outline_of(rules, geometry), marks_of(rules, geometry))
            by_points.note = said
        found: Iterable[Candidate] = [Candidate(np.array([p for p, _ in points], np.float64), by_points)]
    else:
        found = _outline_then_marks(photo, rules, geometry, px_per_mm, first)
    any_found = False
    for i, c in enumerate(found):
        any_found = True
        reg, image = placed(photo, c.registration, rules, px_per_mm, reference, light) if c.registration else (None,
                                                                                                             None)
        yield PhotoBoard(photo_path, i, c.centre, reg, image, c.reason)
    if not any_found:
        centre = (photo.shape[1] // 2, photo.shape[0] // 2)
        yield PhotoBoard(photo_path, 0, centre, None, None, "nothing in it stands out from its background as a board")


def placed(photo: np.ndarray, registration: Registration, rules: RuleSet, px_per_mm: float,
           reference: np.ndarray | None, light: bool) -> tuple[Registration, np.ndarray]:
    """A registered board refined on `reference` (the golden board, where given) and warped to the rule set's frame,
    with `light` in the golden board's light."""
    warped = None
    if reference is not None:
        registration, warped = refine_on_reference(photo, registration, reference, px_per_mm)
    return registration, to_recipe_frame(photo, registration, rules, reference if light else None, warped)


def _outline_then_marks(photo: np.ndarray, rules: RuleSet, geometry: BoardGeometry | None,
                        px_per_mm: float, first: bool = False) -> Iterator[Candidate]:
    """Each board-sized blob registered on its outline, as it is found (the line stops at the first); then, where a
    blob was refused or none stood out and the rule set has fiducials, the boards found by them
    (board/mark_search.py: boards touching on a tray, a board on a cluttered bench), each the outline did not
    register, the outline's reasons kept in their notes; then the blobs they do not account for, refused, the marks'
    reason added where they found nothing."""
    outline, edges = outline_of(rules, geometry), marks_of(rules, geometry)
    refused: list[Candidate] = []
    registered: list[Candidate] = []
    for c in candidates(photo, rules.board_size, outline, edges, px_per_mm):
        if c.registration is None:
            refused.append(c)  # held back: the marks may yet find the board
            continue
        registered.append(c)
        yield c
    if rules.fiducials is None or (registered and not refused):
        yield from refused
        return
    by_marks = boards_on_marks(photo, rules.fiducials.marks, rules.board_size, outline, edges, px_per_mm,
                               every=not first)
    new = [c for c in by_marks if c.registration is not None and not any(_holds(r, c) for r in registered)]
    if new:
        outline_words = "; ".join(f"#{i}: {r.reason}" for i, r in enumerate(refused)) or "no blob stood out as a board"
        for c in new:
            c.registration.note += f"; its outline did not register ({outline_words})"
        yield from new
        yield from (r for r in refused if not any(_holds(r, c) for c in new))
        return
    if not refused:
        yield Candidate(by_marks[0].contour, None, "nothing in it stands out from its background as a board, and by "
                                                   f"its fiducials: {by_marks[0].reason}")
        return
    refused[0].reason += f"; by its fiducials: {by_marks[0].reason}"
    yield from refused


def _holds(blob: Candidate, board: Candidate) -> bool:
    """Whether the blob's outline holds the middle of a board found by its marks (the same board, or one of the
    touching boards the blob is)."""
    contour = np.round(blob.contour).astype(np.int32).reshape(-1, 1, 2)
    return cv2.pointPolygonTest(contour, tuple(float(v) for v in board.contour.mean(axis=0)), False) >= 0


_LOADED: dict[tuple, tuple[BoardGeometry | None, list | None]] = {}


def photo_registration_of(rules: RuleSet) -> tuple[BoardGeometry | None, list | None]:
    """The geometry and picked points a rule set's `photo_registration` names, read once per file version."""
    spec = rules.photo
    paths = [Path(p) for p in (spec.geometry, spec.points) if p is not None]
    try:
        key = tuple((str(p), p.stat().st_mtime_ns) for p in paths)
    except OSError as exc:
        raise ValueError(f"rule set {rules.recipe}: {exc.filename} cannot be read ({exc.strerror}); photo "
                         "registration needs the files `board import` and `board teach` wrote beside it") from None
    if key not in _LOADED:
        _LOADED.clear()
        geometry = read_geometry_file(Path(spec.geometry)) if spec.geometry is not None else None
        points = read_points(Path(spec.points)) if spec.points is not None else None
        _LOADED[key] = (geometry, points)
    return _LOADED[key]


def register_photo(photo: np.ndarray, rules: RuleSet, reference: np.ndarray | None,
                   light: bool = True) -> tuple[np.ndarray, Registration]:
    """The board of a line's frame in the recipe's pixels, registered as the rule set says (the largest board that
    registers, or the frame aligned on the golden board) and, with `light`, brought to the golden board's light;
    RegistrationError with every blob's reason when none does."""
    geometry, points = photo_registration_of(rules)
    if rules.photo.using == "golden":
        if reference is None:
            raise RegistrationError("the rule set aligns on its golden board but has no golden image")
        registration = register_on_reference(photo, reference)
        _within(registration, rules)
        return to_recipe_frame(photo, registration, rules, reference if light else None), registration
    refused = []
    for b in boards_of(photo, Path("frame"), rules, geometry, points, reference, light, first=True):  # the first
        if b.registration is not None:
            _within(b.registration, rules)
            return b.image, b.registration
        refused.append(f"#{b.index}: {b.reason}")
    raise RegistrationError("no board in the frame registers on its "
                            f"{'picked points' if points is not None else 'outline'}: " + "; ".join(refused))


def _within(registration: Registration, rules: RuleSet) -> None:
    """RegistrationError where the registration leaves more than the rule set's photo_registration.max_residual_px:
    the crops would be cut off their parts (a lens not corrected bends the board more than any alignment undoes)."""
    most = rules.photo.max_residual_px
    if most is not None and registration.residual_px > most:
        raise RegistrationError(f"registration leaves {registration.residual_px:.2f} px, over the rule set's "
                                f"photo_registration.max_residual_px {most:g} ({registration.note}): is the camera's "
                                "lens corrected (`inspector camera calibrate`, then --correction)? A board this far "
                                "off is refused, not inspected")


def overlay_scale(shape: tuple[int, ...]) -> float:
    """The overlay's size against the photo's: its longer side at most OVERLAY_SIDE px."""
    return min(1.0, OVERLAY_SIDE / max(shape[:2]))


def overlay(photo: np.ndarray, boards: list[PhotoBoard], rules: RuleSet, out: Path,
            flagged: dict[str, set[str]] | None = None) -> Path:
    """The photo with every registered board's part windows drawn where the CAD puts them (yellow; red for a part
    `flagged[board name]` holds), each board's outline, and a board that did not register crossed out with its
    reason. Written to `out` (PNG)."""
    scale = overlay_scale(photo.shape)
    canvas = cv2.resize(photo, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else photo.copy()
    thick = max(1, round(2 * scale * max(photo.shape[:2]) / OVERLAY_SIDE))
    for b in boards:
        if b.registration is None:
            x, y = (round(v * scale) for v in b.centre)
            cv2.drawMarker(canvas, (x, y), (0, 0, 255), cv2.MARKER_TILTED_CROSS, 40, thick + 1)
            cv2.putText(canvas, f"#{b.index} not registered", (x + 24, y), cv2.FONT_HERSHEY_SIMPLEX, 0.6,
                        (0, 0, 255), 2, cv2.LINE_AA)
            continue
        back = np.linalg.inv(b.registration.homography)
        red = (flagged or {}).get(b.name, set())
        for comp, place in rules.placements():
            x0, y0, x1, y1 = body_box(comp, place, 0)
            quad = cv2.perspectiveTransform(np.array([[[x0, y0]], [[x1, y0]], [[x1, y1]], [[x0, y1]]], np.float64),
                                            back).reshape(-1, 2) * scale
            colour = (0, 0, 255) if place.ref in red else (0, 220, 255)
            cv2.polylines(canvas, [np.round(quad).astype(np.int32)], True, colour, thick, cv2.LINE_AA)
        w, h = rules.board_size
        edge = cv2.perspectiveTransform(np.array([[[0, 0]], [[w, 0]], [[w, h]], [[0, h]]], np.float64),
                                        back).reshape(-1, 2) * scale
        cv2.polylines(canvas, [np.round(edge).astype(np.int32)], True, (255, 160, 0), thick, cv2.LINE_AA)
        x, y = np.round(edge[0]).astype(int)
        cv2.putText(canvas, f"#{b.index}", (int(x), max(14, int(y) - 6)), cv2.FONT_HERSHEY_SIMPLEX, 0.7,
                    (255, 160, 0), 2, cv2.LINE_AA)
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), canvas)
    return out
