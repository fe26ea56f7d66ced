"""A board found in a photo by its fiducials where its outline is not (a cluttered bench, a cable across an edge,
another board touching it): the constellation of marks its CAD places, looked for at every scale the board could
have been photographed at.

Each mark is looked for as the line looks for it (ingest/registration.py: a bright dot in its bare ring, normalised
cross-correlation), but over the whole photo and at a range of scales, from the board spanning the photo's
diagonal down to 0.15 of its longer side (a tray's boards each span a third of it or less). Two candidates and two
marks fix a similarity (scale, turn, shift); it is kept where the other marks land on candidates as well and every
candidate was found at about that scale.
Each constellation kept is fitted (an affine map on three marks, a homography on four or more) and checked against
where the CAD puts edges, the pads' rims, as the outline's turn is chosen (outline.py). Fits that overlap lie on
one place, the best of them its board; the places whose boards stand clear of every other place (a tray's boards
agree about alike, at one scale; clutter fits everywhere about as well as its best) are the photo's boards, and one
that another pose on its own place matches nearly as well is refused, never registered by guess. Three marks at
least: two fit any pair of bright dots. Each board's mark centres are then found as the line finds them (the dot's
centroid over its ring) and the map fitted again on them; a board found on three takes the camera's tilt, which an
affine map cannot follow, from the CAD's edges (tilt.py).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import combinations

import cv2
import numpy as np

from ..ingest.registration import mark_centre, mark_template
from ..routing.fiducials import Fiducial
from .edge_check import EdgeCheck
from .geometry import PxRect
from .outline import Candidate
from .register import Registration, RegistrationError, register_points
from .tilt import untilted

MIN_MARKS = 3  # marks a constellation must show: two fit any pair of bright dots
SEARCH_SIDE = 1600  # px: the photo's longer side while searching (a finer photo is reduced to it)
LEAST_BOARD = 0.15  # of the photo's longer side: the smallest a board is looked for at (at 0.25, a tray of three
#                     boards side by side was not looked for, and a wrong fit stood clear of nothing)
LEAST_DOT_PX = 5  # a mark smaller than this in the photo cannot be told from noise
SCALE_STEP = 1.15  # between the scales searched (a mark matches within about half a step either way)
SCALE_AGREEMENT = 1.2  # a constellation's scale lies within this factor of the scales a candidate matched at
PEAKS = 80  # candidates kept per mark kind and scale, the best first
LEAST_SCORE = 0.45  # a candidate's correlation at least: under the line's MIN_SCORE, since a mark photographed
#                     small and at a scale between two searched is softer than the template; the constellation and
#                     the CAD's edges, not one score, decide
FIT_SHARE = 0.05  # of the two marks' span: how far another mark may lie from where their similarity puts it (a
#                   photo not square-on bends the similarity that far)
MAX_CONSTELLATIONS = 4000  # the best-supported constellations checked against the CAD's edges, at most
MIN_MARKS_AGREEMENT = 0.2  # the best constellation's agreement with the CAD's edges at least, and ...
MARKS_RATIO = 1.6  # ... this many times the best of another pose: hundreds of wrong constellations are checked, and
#                    the best of them agrees 0.13-0.25 with a board's edges on a busy photo (the outline's
#                    MIN_AGREEMENT and turn margin, chosen among four turns, would take one of them)
SAME_POSE = 0.1  # of the board's diagonal: two fits whose corners lie this near are of one board
CHECK_SIDE = 400  # px: the longer side of the reduced frame each constellation's board is checked on
MORE_MARKS = 1.2  # a fit's support is its agreement times this for each mark over MIN_MARKS: a fit on fewer marks
#                  takes a place or outranks a rival only where it agrees this many times as well (three marks of
#                  a board and a dot fit more poses than four marks do); within one fit's own marks TRIMS decides
TRIMS = 1.02  # a board's fit on all but one of its marks that agrees this many times as well leaves that mark out:
#               a fit on its true marks agrees at least 0.999 times as well as each fit on three of them (0.996 on
#               the real stm32 photo; better where the camera is tilted), a fit bent by a dot beside a covered mark
#               1.03-1.31 times worse than the fit without it (rendered trays, the stm32 photo)
OVERLAP_SHARE = 0.1  # of the smaller board in the photo: two fits overlapping more lie on one place (a tray's
#                      boards touch, they do not overlap)


@dataclass(frozen=True)
class _Found:
    """Every candidate of every mark kind: photo px (of the reduced photo), the scales it matched at, its kind."""
    xy: np.ndarray  # K x 2
    low: np.ndarray  # K: the least scale it matched at
    high: np.ndarray  # K: the greatest
    kind: np.ndarray  # K
    score: np.ndarray  # K: its best score


def _kinds(marks: tuple[Fiducial, ...]) -> tuple[list[tuple[str, int, float]], np.ndarray]:
    """The distinct looks (shape, size, reach) among the marks, and each mark's look's index."""
    looks = sorted({(m.shape, m.size, m.reach) for m in marks})
    return looks, np.array([looks.index((m.shape, m.size, m.reach)) for m in marks])


def _scales(photo_shape: tuple[int, ...], board_size: tuple[int, int], dot: int) -> list[float]:
    """Photo px per rule-set px worth searching: the board from LEAST_BOARD of the photo's longer side to its
    diagonal, the mark LEAST_DOT_PX wide at least."""
    h, w = photo_shape[:2]
    longest = max(board_size)
    low = max(LEAST_BOARD * max(w, h) / longest, LEAST_DOT_PX / dot)
    high = math.hypot(w, h) / longest
    if low > high:
        return []
    steps = int(math.floor(math.log(high / low) / math.log(SCALE_STEP))) + 1
    return [low * SCALE_STEP ** i for i in range(steps)]


def _peaks(scores: np.ndarray, radius: int, limit: int) -> list[tuple[float, float, float]]:
    """(x, y, score) of the correlation map's local maxima over LEAST_SCORE, the best `limit`, each refined to a
    fraction of a pixel by a parabola through its neighbours."""
    local = scores >= cv2.dilate(scores, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1,) * 2))
    ys, xs = np.nonzero(local & (scores >= LEAST_SCORE))
    order = np.argsort(-scores[ys, xs])[:limit]
    out = []
    for y, x in zip(ys[order], xs[order]):
        dx = dy = 0.0
        if 0 < x < scores.shape[1] - 1:
            a, b, c = scores[y, x - 1], scores[y, x], scores[y, x + 1]
            dx = 0.5 * (a - c) / (a - 2 * b + c) if a - 2 * b + c < 0 else 0.0
        if 0 < y < scores.shape[0] - 1:
            a, b, c = scores[y - 1, x], scores[y, x], scores[y + 1, x]
            dy = 0.5 * (a - c) / (a - 2 * b + c) if a - 2 * b + c < 0 else 0.0
        out.append((x + dx, y + dy, float(scores[y, x])))
    return out


def _candidates(grey: np.ndarray, looks: list[tuple[str, int, float]], board_size: tuple[int, int]) -> _Found:
    """Every look's candidates over the scales searched; a spot found at several scales is kept once, at the scale
    it matched best."""
    xy, scale, kind, score = [], [], [], []
    for k, (shape, size, reach) in enumerate(looks):
        for s in _scales(grey.shape, board_size, size):
            dot = max(3, int(round(size * s)))
            template = mark_template(shape, dot, round(reach * s, 1))
            if template.shape[0] >= min(grey.shape):
                continue
            half = template.shape[0] // 2
            scores = cv2.matchTemplate(grey, template, cv2.TM_CCOEFF_NORMED)
            for x, y, sc in _peaks(np.nan_to_num(scores, nan=-1.0), max(1, dot // 2), PEAKS):
                xy.append((x + half, y + half))
                scale.append(s)
                kind.append(k)
                score.append(sc)
    return _once(np.array(xy, np.float64).reshape(-1, 2), np.array(scale), np.array(kind, int), np.array(score),
                 looks)


def _once(xy: np.ndarray, scale: np.ndarray, kind: np.ndarray, score: np.ndarray,
          looks: list[tuple[str, int, float]]) -> _Found:
    """Each spot of each look once: where it scored best, with every scale it matched at within half a dot (a
    mark with its ring matches a range of scales, not always best at its own)."""
    keep: list[int] = []
    low, high = scale.copy(), scale.copy()
    for i in np.argsort(-score):
        near = max(1.5, looks[kind[i]][1] * scale[i] / 2)
        held = next((k for k in keep if kind[k] == kind[i] and math.dist(xy[k], xy[i]) <= near), None)
        if held is None:
            keep.append(int(i))
        else:
            low[held], high[held] = min(low[held], scale[i]), max(high[held], scale[i])
    idx = np.array(keep, int)
    return _Found(xy[idx].reshape(-1, 2), low[idx], high[idx], kind[idx], score[idx])


def _fits(scale: np.ndarray | float, low: np.ndarray | float, high: np.ndarray | float) -> np.ndarray:
    """Whether a constellation's scale lies within SCALE_AGREEMENT of the scales a candidate matched at."""
    return (np.asarray(scale) >= np.asarray(low) / SCALE_AGREEMENT) & (np.asarray(scale) <= np.asarray(high) *
                                                                       SCALE_AGREEMENT)


def _constellations(found: _Found, marks: tuple[Fiducial, ...], kind_of: np.ndarray) -> list[dict[int, int]]:
    """Every assignment of marks to candidates (mark index -> candidate index) that two marks' similarity predicts
    for MIN_MARKS marks or more; one that a larger assignment holds is left out. Most marks first, then the best
    supported (mean score)."""
    nominal = np.array([(m.x, m.y) for m in marks], np.float64)
    seen: dict[frozenset, float] = {}
    for i in range(len(marks)):
        for j in range(i + 1, len(marks)):
            for a in np.flatnonzero(found.kind == kind_of[i]):
                for row in _picks(found, nominal, kind_of, i, j, int(a)):
                    chosen = {m: int(cand) for m, cand in enumerate(row) if cand >= 0}
                    if len(set(chosen.values())) == len(chosen):  # one candidate is one mark
                        seen[frozenset(chosen.items())] = float(found.score[list(chosen.values())].mean())
    held = {frozenset(part) for big in seen for n in range(MIN_MARKS, len(big)) for part in combinations(big, n)}
    kept = [k for k in seen if k not in held]
    kept.sort(key=lambda k: (-len(k), -seen[k]))
    return [dict(k) for k in kept[:MAX_CONSTELLATIONS]]


def _picks(found: _Found, nominal: np.ndarray, kind_of: np.ndarray, i: int, j: int, a: int) -> np.ndarray:
    """For mark i at candidate `a` and mark j at each candidate of its kind found at a scale that fits: the
    candidate each mark lands on under that pair's similarity (-1: none within FIT_SHARE), the rows where
    MIN_MARKS marks or more land."""
    span = nominal[j] - nominal[i]
    length = math.hypot(*span)
    seconds = np.flatnonzero(found.kind == kind_of[j])
    if length <= 0 or not len(seconds):
        return np.empty((0, len(nominal)), int)
    d = found.xy[seconds] - found.xy[a]
    s = np.hypot(d[:, 0], d[:, 1]) / length
    ok = _fits(s, found.low[a], found.high[a]) & _fits(s, found.low[seconds], found.high[seconds]) & (seconds != a)
    bs, scale, d = seconds[ok], s[ok], d[ok]
    turn = np.arctan2(d[:, 1], d[:, 0]) - math.atan2(span[1], span[0])
    c, sn = scale * np.cos(turn), scale * np.sin(turn)  # each pair's similarity
    tolerance = np.maximum(2.0, FIT_SHARE * scale * length)
    picks = np.full((len(bs), len(nominal)), -1, int)
    picks[:, i], picks[:, j] = a, bs
    rel = nominal - nominal[i]
    for k in (k for k in range(len(nominal)) if k not in (i, j)):
        same = np.flatnonzero(found.kind == kind_of[k])
        if not len(same) or not len(bs):
            continue
        predicted = found.xy[a] + np.stack([c * rel[k, 0] - sn * rel[k, 1], sn * rel[k, 0] + c * rel[k, 1]], axis=1)
        gap = np.hypot(predicted[:, None, 0] - found.xy[same][None, :, 0],
                       predicted[:, None, 1] - found.xy[same][None, :, 1])  # pairs x candidates
        gap[~_fits(scale[:, None], found.low[same][None, :], found.high[same][None, :])] = np.inf
        nearest = gap.argmin(axis=1)
        hit = gap[np.arange(len(bs)), nearest] <= tolerance
        picks[hit, k] = same[nearest[hit]]
    return picks[(picks >= 0).sum(axis=1) >= MIN_MARKS]


@dataclass
class _Fit:
    """One constellation fitted: how well it agrees with the CAD's edges, its marks -> candidates, the registration,
    the pairs it was fitted on (photo px, rule-set px) and where it puts the board's corners in the photo."""
    agreement: float
    assigned: dict[int, int]
    reg: Registration
    pairs: list
    corners: np.ndarray  # 4 x 2 photo px

    @property
    def support(self) -> float:
        """Its agreement, weighed by the marks it rests on (MORE_MARKS)."""
        return self.agreement * MORE_MARKS ** (len(self.assigned) - MIN_MARKS)


@dataclass
class _Place:
    """A place in the photo a board may lie on: the fit with the most support there, and the best other pose fitted
    on it (not the same board with a mark taken at a dot beside it): a board that another pose fits nearly as well
    is refused."""
    fit: _Fit
    rival: _Fit | None = None

    @property
    def rivalled(self) -> float:
        """The rival's support (0 where none)."""
        return self.rival.support if self.rival is not None else 0.0


def boards_on_marks(photo: np.ndarray, marks: tuple[Fiducial, ...], size: tuple[int, int], outline: PxRect,
                    edges: list[PxRect], px_per_mm: float, every: bool = True) -> list[Candidate]:
    """Every board of `photo` registered on its fiducials (`marks`, in the rule set's pixels of a `size` frame), each
    constellation checked against where the CAD puts edges (`edges`, as outline.py takes them), best first; or one
    Candidate with the reason none is. Boards of a tray lie on places of their own, about as well fitted and at one
    scale. Constellations of more marks are checked first: where boards stand clear among them, those of fewer are
    checked only where they take two of a board's marks or, with `every` (not the line's frame, where the first
    board is the board), lie off every board at their scale (_beside)."""
    centre = np.array([[photo.shape[1] / 2, photo.shape[0] / 2]])
    if len(marks) < MIN_MARKS:
        return [Candidate(centre, None, f"{len(marks)} fiducial(s) in the rule set: {MIN_MARKS} are needed to find "
                                        "the board by its marks")]
    reduce = min(1.0, SEARCH_SIDE / max(photo.shape[:2]))
    small = cv2.resize(photo, None, fx=reduce, fy=reduce, interpolation=cv2.INTER_AREA) if reduce < 1 else photo
    grey = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY).astype(np.float32)
    looks, kind_of = _kinds(marks)
    found = _candidates(grey, looks, size)
    constellations = _constellations(found, marks, kind_of)
    if not constellations:
        return [Candidate(centre, None, f"no {MIN_MARKS} of its {len(marks)} fiducials were found where the CAD "
                                        "places them (covered, out of focus, or too small in the photo)")]
    check = EdgeCheck(photo, size, outline, edges, CHECK_SIDE)

    posed: dict[frozenset, tuple[Registration, list] | None] = {}  # each constellation's registration once
    done: dict[frozenset, _Fit | None] = {}  # each constellation fitted once (trimming meets subsets again)

    def pose(assigned: dict[int, int]) -> tuple[Registration, list] | None:
        """The constellation's registration and pairs (photo px, rule-set px); None where its marks lie on a line."""
        key = frozenset(assigned.items())
        if key not in posed:
            pairs = [((found.xy[c][0] / reduce, found.xy[c][1] / reduce), (float(marks[m].x), float(marks[m].y)))
                     for m, c in sorted(assigned.items())]
            try:
                posed[key] = register_points(pairs, px_per_mm), pairs
            except RegistrationError:
                posed[key] = None
        return posed[key]

    def fitted(assigned: dict[int, int]) -> _Fit | None:
        """The constellation fitted and checked against the CAD's edges; None where its marks lie on a line."""
        key = frozenset(assigned.items())
        if key not in done:
            got = pose(assigned)
            done[key] = None if got is None else _Fit(check(got[0].homography), assigned, got[0], got[1],
                                                      _corners(got[0], size))
        return done[key]

    fits: list[_Fit] = []
    places: list[_Place] = []
    boards: list[_Place] = []
    for count in sorted({len(c) for c in constellations}, reverse=True):
        batch = [c for c in constellations if len(c) == count]
        if boards and all(_clear(p) for p in boards):  # boards clear on more marks: fewer are fitted only where
            #   they take two of a board's marks (a fit on four with a dot for a covered mark or two may be bent),
            #   or lie off every board at the boards' scale (a tray's board with a mark covered)
            scales = _scale_range(boards, size) if every else None
            batch = [c for c in batch if _beside(c, boards, pose, size, scales)]
        fits += [f for f in map(fitted, batch) if f is not None]
        fits.sort(key=lambda f: -f.support)
        places = _places(fits)
        for place in places:  # a constellation hides its own subsets: one may fit the board better
            place.fit = _trimmed(place.fit, fitted)
        places.sort(key=lambda p: -p.fit.support)
        boards = _boards(places, size)
    if not fits:
        return [Candidate(centre, None, "its fiducials' candidates lie on one line: no board fits them")]
    if not boards:
        best = places[0]
        other = max(best.rival.agreement if best.rival else 0.0, places[1].fit.agreement if len(places) > 1 else 0.0)
        return [Candidate(_photo_xy(best.fit), None, "no constellation of its fiducials agrees with the CAD's edges "
                          f"(best {best.fit.agreement:.2f} on {_names(marks, best.fit)}, {other:.2f} another way): "
                          "pick 3 points on it (--points)")]
    elsewhere = places[len(boards)].fit.agreement if len(places) > len(boards) else 0.0
    return [_registered(photo, marks, place, max(place.rival.agreement if place.rival else 0.0, elsewhere), size,
                        outline, edges, px_per_mm, check.energy) for place in boards]


def _registered(photo: np.ndarray, marks: tuple[Fiducial, ...], place: _Place, next_best: float,
                size: tuple[int, int], outline: PxRect, edges: list[PxRect], px_per_mm: float,
                energy: np.ndarray) -> Candidate:
    """The board on `place` registered on its marks' centres (three: the camera's tilt taken from the CAD's edges,
    tilt.py), or refused where another pose fits it nearly as well (`next_best`: the best fit on its place that is
    not it, or on no board's place; `energy`: the photo's edge energy, found once)."""
    fit, names = place.fit, _names(marks, place.fit)
    if not _clear(place):
        return Candidate(_photo_xy(fit), None, f"its fiducials ({names}) agree with the CAD's edges "
                                               f"{fit.agreement:.2f} here, and turned or shifted on the same place "
                                               f"{place.rival.agreement if place.rival else 0.0:.2f}: pick 3 "
                                               "points on it (--points)")
    reg = _refined(photo, marks, fit.assigned, fit.pairs, fit.reg, size, px_per_mm)
    reg.method = "marks"
    reg.evidence = f"{len(fit.assigned)} of its {len(marks)} fiducials, edges agree {fit.agreement:.2f}"
    reg.note = (f"{len(fit.assigned)} of its {len(marks)} fiducials found in the photo ({names}); edges agree with "
                f"the CAD's {fit.agreement:.2f} ({next_best:.2f} the next way)")
    if len(fit.assigned) == 3:
        reg, said = untilted(photo, reg, [q for _, q in fit.pairs], size, outline, edges, energy)
        reg.note += f"; {said}"
    return Candidate(_photo_xy(fit), reg)


def _trimmed(fit: _Fit, fitted: Callable[[dict[int, int]], _Fit | None]) -> _Fit:
    """The board's fit less each mark that bends it: a covered mark's place taken by a dot beside it (on a bench, a
    round pad near it, or the next board's mark on a tray) is fitted exactly by a homography on four, and the board
    comes out bent. Where the fit on the other marks agrees TRIMS times as well with the CAD's edges, the mark is
    left out, down to MIN_MARKS (three marks then take the camera's tilt from the pads' rims)."""
    while len(fit.assigned) > MIN_MARKS:
        fewer = [f for f in (fitted({k: c for k, c in fit.assigned.items() if k != m}) for m in fit.assigned) if f]
        best = max(fewer, key=lambda f: f.agreement, default=None)
        if best is None or best.agreement <= TRIMS * fit.agreement:
            return fit
        fit = best
    return fit


def _beside(assigned: dict[int, int], boards: list[_Place],
            pose: Callable[[dict[int, int]], tuple[Registration, list] | None], size: tuple[int, int],
            scales: tuple[float, float] | None) -> bool:
    """Whether a constellation of fewer marks is worth fitting beside boards found on more: it takes two of a
    board's marks (that board fitted without a bent mark), or, given the boards' `scales` (the range a tray's board
    lies at), its pose lies off every board at such a scale (a tray's board with a mark covered or out of focus)."""
    items = set(assigned.items())
    if any(len(items & set(b.fit.assigned.items())) >= 2 for b in boards):
        return True
    got = pose(assigned) if scales is not None else None
    if got is None or not scales[0] <= got[0].photo_scale(size) <= scales[1]:
        return False
    corners = _corners(got[0], size)
    return not any(_overlap(b.fit.corners, corners) for b in boards)


def _scale_range(boards: list[_Place], size: tuple[int, int]) -> tuple[float, float]:
    """The scales a board beside `boards` may lie at: theirs, within SCALE_AGREEMENT (one camera sees a tray)."""
    scales = [p.fit.reg.photo_scale(size) for p in boards]
    return min(scales) / SCALE_AGREEMENT, max(scales) * SCALE_AGREEMENT


def _photo_xy(fit: _Fit) -> np.ndarray:
    """The fit's marks in the photo (px): a Candidate's contour, whose mean places its board in the photo."""
    return np.array([p for p, _ in fit.pairs])


def _names(marks: tuple[Fiducial, ...], fit: _Fit) -> str:
    return ", ".join(marks[m].name for m in sorted(fit.assigned))


def _refined(photo: np.ndarray, marks: tuple[Fiducial, ...], assigned: dict[int, int], pairs: list,
             reg: Registration, size: tuple[int, int], px_per_mm: float) -> Registration:
    """The registration fitted again on each mark's centre found as the line finds it (ingest/registration.py's
    centroid of the dot over its ring), at the photo's own resolution and the board's scale in it; a mark whose
    centre is not found so keeps its correlation peak."""
    grey = cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY)
    scale = reg.photo_scale(size)
    refined = []
    for (xy, target), m in zip(pairs, sorted(assigned)):
        mark = marks[m]
        seen = replace(mark, x=int(round(xy[0])), y=int(round(xy[1])), size=max(3, int(round(mark.size * scale))),
                       ring=int(round(2 * mark.reach * scale)))
        centre = mark_centre(grey, seen.x, seen.y, seen)
        refined.append((centre if not isinstance(centre, str) else xy, target))
    try:
        return register_points(refined, px_per_mm)
    except RegistrationError:
        return reg


def _corners(reg: Registration, size: tuple[int, int]) -> np.ndarray:
    """Where a registration puts the board's corners in the photo (4 x 2 px)."""
    w, h = size
    corners = np.array([[[0, 0]], [[w, 0]], [[w, h]], [[0, h]]], np.float64)
    return cv2.perspectiveTransform(corners, np.linalg.inv(reg.homography)).reshape(-1, 2)


def _places(fits: list[_Fit]) -> list[_Place]:
    """The places of the photo boards are fitted on, best first (`fits` sorted so): a fit that overlaps a better
    one by more than OVERLAP_SHARE lies on its place, and is its rival unless it is the same board (the best
    rival kept, by support)."""
    places: list[_Place] = []
    boxes = np.empty((0, 4))
    for f in fits:
        lo, hi = f.corners.min(axis=0), f.corners.max(axis=0)
        near = np.flatnonzero((boxes[:, 0] < hi[0]) & (boxes[:, 2] > lo[0]) & (boxes[:, 1] < hi[1]) &
                              (boxes[:, 3] > lo[1]))
        on = [places[i] for i in near if _overlap(places[i].fit.corners, f.corners)]
        if not on:
            places.append(_Place(f))
            boxes = np.vstack([boxes, [*lo, *hi]])
        for p in on:
            if not _same_board(p.fit, f) and f.support > p.rivalled:
                p.rival = f
    return places


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two boards' corners (4 x 2 photo px) overlap by more than OVERLAP_SHARE of the smaller."""
    qa, qb = a.astype(np.float32), b.astype(np.float32)
    area, _ = cv2.intersectConvexConvex(qa, qb)
    smaller = min(abs(cv2.contourArea(qa)), abs(cv2.contourArea(qb)))
    return smaller > 0 and area > OVERLAP_SHARE * smaller


def _boards(places: list[_Place], size: tuple[int, int]) -> list[_Place]:
    """The places that hold boards (`places` sorted by support): the best few that stand clear of the rest (the last
    of them has MARKS_RATIO times the next place's support, and agrees MIN_MARKS_AGREEMENT at least) and lie at one
    scale, as a tray's boards do under one camera; none where no such few exist (clutter fits everywhere about as
    well)."""
    support = [p.fit.support for p in places] + [0.0]
    for k in range(len(places)):
        if places[k].fit.agreement < MIN_MARKS_AGREEMENT:
            return []
        if support[k] >= MARKS_RATIO * support[k + 1]:
            scales = [p.fit.reg.photo_scale(size) for p in places[:k + 1]]
            return places[:k + 1] if max(scales) <= SCALE_AGREEMENT * min(scales) else []
    return []


def _clear(place: _Place) -> bool:
    """Whether a place's board has MARKS_RATIO times the support of any other pose fitted on its place."""
    return place.fit.support >= MARKS_RATIO * place.rivalled


def _same_board(a: _Fit, b: _Fit) -> bool:
    """Whether two fits are of one board: MIN_MARKS marks at the same dots (one fitted with a mark taken at a dot
    beside it), or corners within SAME_POSE of its diagonal."""
    if len(set(a.assigned.items()) & set(b.assigned.items())) >= MIN_MARKS:
        return True
    span = math.hypot(*(a.corners[2] - a.corners[0]))
    return float(np.max(np.hypot(*(a.corners - b.corners).T))) <= SAME_POSE * span
