"""Operators' reviews of the line's calls, and the rates they give per component type.

A review says what a part really was: the line's `fail` was a **confirmed** defect or a **false call** (the part
was good), or its `pass` was an **escape** (a missed defect). The class is optional: a confirmed defect may be
of another class than the one called, an escape names the defect it had when the operator knows it. So is a
**box**: where the defect is on the part's kept crop, drawn by the reviewer (crop pixels, the frame of the part's
own box). A detector that finds defects learns an escape only from such a box (results/detector_labels.py), and a
confirmed defect's box where the detector drew it wrong; a false call has no defect to box. Reviews
are what the retraining loop learns from (results/dataset.py), so a review that contradicts the stored call
(an escape of a failed part) is refused with the reason instead of stored.

Rates are over the parts stored of each type in a line's last boards (RATE_BOARDS): false calls per part
inspected and escapes per part inspected, so a type that is reviewed more is not made to look worse per review.
"""
from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ..routing.rules import CLASSIFIER_CLASSES
from .errors import StoreUnavailable
from .schema import ComponentResult, Inspection, Review
from .scope import Scope
from .store import LATER_REVIEWS, ResultStore, board_range

CALLS = ("confirmed", "false_call", "escape")
CALL_COUNTS = {"confirmed": "confirmed", "false_call": "false_calls", "escape": "escapes"}  # call -> TypeRates field
# what a part can really be: the classifier's classes and the detector's (polarity is a reversed part)
PART_CLASSES = (*CLASSIFIER_CLASSES, "polarity")
PART_DEFECTS = tuple(c for c in PART_CLASSES if c != "ok")  # what a review of a demo expert's call may name
REVIEWER_MAX = 64
BOX_MAX = 100_000.0  # px: a crop's side is far below it; a box beyond it is not on one
BOX_LEAST = 1.0  # px: a box narrower or lower frames nothing
CLASS_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")  # an expert taught from labelled images names its own classes
ClassesOf = Callable[[str], "tuple[str, ...] | None"]  # an expert's own class names (good first), None: the demo's


class ReviewRefused(ValueError):
    """A review that cannot be stored as asked (no such part, a call that contradicts the part's verdict)."""


@dataclass(frozen=True)
class ReviewRequest:
    inspection_id: str
    ref: str
    call: str
    correct_class: str | None = None
    reviewer: str = ""
    note: str | None = None
    box: tuple[float, float, float, float] | None = None  # x0, y0, x1, y1 on the kept crop, where the defect is

    @classmethod
    def parse(cls, body: bytes | dict[str, Any]) -> ReviewRequest:
        """From the API's JSON; ReviewRefused naming the field when it is not a review."""
        try:
            doc = json.loads(body) if isinstance(body, (bytes, str)) else body
            if not isinstance(doc, dict):
                raise TypeError("not an object")
            req = cls(str(doc["inspection_id"]), str(doc["ref"]), str(doc["call"]),
                      None if doc.get("correct_class") in (None, "") else str(doc["correct_class"]),
                      str(doc.get("reviewer") or ""), None if doc.get("note") is None else str(doc["note"]),
                      box_of(doc.get("box")))
        except (ValueError, KeyError, TypeError) as exc:
            raise ReviewRefused(
                'a review is JSON {"inspection_id": UUID, "ref": "R12", "call": "confirmed|false_call|escape", '
                '"correct_class": optional, "reviewer": optional, "note": optional, "box": optional [x0, y0, x1, y1] '
                f'on the kept crop}} ({type(exc).__name__}: {exc})'
            ) from None
        req.check()
        return req

    def audited(self) -> dict[str, Any]:
        """What the audit trail records the review changed the part's review to."""
        return {"call": self.call, "correct_class": self.correct_class, "note": self.note,
                **({"box": list(self.box)} if self.box is not None else {})}

    def check(self) -> None:
        if self.call not in CALLS:
            raise ReviewRefused(f"call {self.call!r} is not one of {', '.join(CALLS)}")
        if self.correct_class is not None and not CLASS_NAME.fullmatch(self.correct_class):
            raise ReviewRefused(f"correct_class {self.correct_class!r} is not a class name (letters, digits, _ . -, "
                                f"at most 32); the demo experts' are {', '.join(PART_CLASSES)}")
        if self.call == "false_call" and self.correct_class not in (None, "ok"):
            raise ReviewRefused("a false call says the part was good: leave correct_class out (or 'ok'); a defect "
                                "of another class than called is a confirmed defect with its correct_class")
        if self.call in ("confirmed", "escape") and self.correct_class == "ok":
            raise ReviewRefused(f"a {self.call} is a defect: its correct_class cannot be 'ok'")
        if len(self.reviewer) > REVIEWER_MAX:
            raise ReviewRefused(f"reviewer is longer than {REVIEWER_MAX} characters")
        if self.box is not None:
            check_box(self.box, self.call)


def box_of(raw: Any) -> tuple[float, float, float, float] | None:  # noqa: ANN401 - JSON
    """A review's box from JSON ([x0, y0, x1, y1]), None when absent; TypeError/ValueError when it is not four
    numbers."""
    if raw is None:
        return None
    if not isinstance(raw, (list, tuple)) or len(raw) != 4 or any(isinstance(v, bool) for v in raw):
        raise ValueError(f"box must be four numbers [x0, y0, x1, y1], not {raw!r}")
    x0, y0, x1, y1 = (float(v) for v in raw)
    return (x0, y0, x1, y1)


def check_box(box: tuple[float, float, float, float], call: str) -> None:
    """ReviewRefused unless `box` frames something on a crop: finite, from the crop's corner on, its far corner
    right of and below its near one; and only for a defect (a false call's part was good)."""
    if call == "false_call":
        raise ReviewRefused("a false call says the part was good: there is no defect to box (leave box out)")
    x0, y0, x1, y1 = box
    if not all(math.isfinite(v) for v in box) or min(box) < 0 or max(box) > BOX_MAX:
        raise ReviewRefused(f"box {list(box)} is not on a crop: each of x0, y0, x1, y1 is a pixel position from 0 to "
                            f"{BOX_MAX:g}")
    if x1 - x0 < BOX_LEAST or y1 - y0 < BOX_LEAST:
        raise ReviewRefused(f"box {list(box)} frames nothing: x1 must exceed x0 and y1 exceed y0 by at least "
                            f"{BOX_LEAST:g} px (the crop's top left corner is 0, 0)")


def known_class(req: ReviewRequest, expert: str | None, classes_of: ClassesOf | None) -> None:
    """A correct_class must be one the part's expert knows: its own classes when it was taught them ('ok' standing
    for its good class), else the demo experts'. Without `classes_of` only the demo's are known."""
    if req.correct_class is None:
        return
    own = classes_of(expert) if classes_of is not None and expert else None
    known = (*own, "ok") if own else PART_CLASSES
    if own and req.correct_class == own[0] and req.call != "false_call":
        raise ReviewRefused(f"{own[0]} is {expert}'s good class: a part that was good is a false call")
    if req.correct_class not in known:
        where = f"{expert}'s classes" if own else "the demo experts' classes"
        raise ReviewRefused(f"correct_class {req.correct_class!r} is not one of {where}: {', '.join(known)}"
                            + ("" if own or classes_of is not None else
                               " (an expert taught its own classes is checked against its zoo: review through the "
                               "kiosk, or pass --zoo)"))


def record_review(store: ResultStore, req: ReviewRequest, classes_of: ClassesOf | None = None) -> dict[str, Any]:
    """Store (or replace) the review of one part; what was stored. ReviewRefused when the part is not stored, the
    call contradicts its verdict or its class is not one the part's expert knows (`classes_of`: from the zoo);
    StoreUnavailable when the database cannot be reached."""
    req.check()
    store.ready()
    if req.box is not None and not store.review_boxes:
        raise ReviewRefused(f"the results database {store.safe_url} cannot hold a reviewer's box (schema before "
                            "0012): `inspector db upgrade` adds it; or review without the box")
    try:
        with Session(store.engine) as s, s.begin():
            part = s.execute(select(ComponentResult).join(ComponentResult.inspection)
                             .where(Inspection.uuid == req.inspection_id, ComponentResult.ref == req.ref)).scalar()
            if part is None:
                raise ReviewRefused(f"no part {req.ref} in inspection {req.inspection_id} is stored; review parts "
                                    "the line has stored (the history tab, GET /status) ")
            known_class(req, part.expert, classes_of)
            wants = "pass" if req.call == "escape" else "fail"
            if part.verdict != wants:
                raise ReviewRefused(f"part {req.ref} of inspection {req.inspection_id} was called {part.verdict}: "
                                    f"a {req.call} reviews a part called {wants}")
            review = s.scalar(store.reading_reviews(select(Review).where(Review.component_result_id == part.id)))
            before = None if review is None else {"call": review.call, "correct_class": review.correct_class,
                                                  "note": review.note, "reviewer": review.reviewer}
            if review is not None and review.drawn_box is not None:
                before["box"] = list(review.drawn_box)
            values = {"inspection_uuid": req.inspection_id, "ref": part.ref, "component_type": part.component_type,
                      "expert": part.expert, "weights_sha256": part.weights_sha256, "call": req.call,
                      "correct_class": req.correct_class, "reviewer": req.reviewer, "note": req.note,
                      "at": datetime.now(timezone.utc)}
            if store.review_boxes:  # a review again without a box clears the one drawn before
                values.update(zip(LATER_REVIEWS, req.box or (None,) * 4))
            if review is None:  # only the columns the schema has (an ORM object would name the later ones too)
                s.execute(insert(Review).values(component_result_id=part.id, **values))
            else:
                for name, value in values.items():
                    setattr(review, name, value)
            return {"stored": True, **asdict(req), "component_type": part.component_type, "verdict": part.verdict,
                    "defect_class": part.defect_class, "before": before}
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"cannot store the review in {store.safe_url}: {exc.__class__.__name__}") from None


@dataclass
class TypeRates:
    """One component type's reviewed calls against its parts inspected."""

    component_type: str
    parts: int = 0
    flagged: int = 0
    confirmed: int = 0
    false_calls: int = 0
    escapes: int = 0

    @property
    def false_call_rate(self) -> float:
        return self.false_calls / self.parts if self.parts else 0.0

    @property
    def escape_rate(self) -> float:
        return self.escapes / self.parts if self.parts else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "false_call_rate": self.false_call_rate, "escape_rate": self.escape_rate}


RATE_BOARDS = 1000  # the rates a kiosk reports are over its line's last this many boards


def review_rates(store: ResultStore, scope: Scope, boards: int | None = RATE_BOARDS, after: int | None = None,
                 upto: int | None = None) -> dict[str, TypeRates]:
    """Per component type, over the scope's last `boards` boards (None: all stored): parts stored, flagged, and
    the reviews of each call. A kiosk reports its own line's, so a plant's sum over its kiosks counts every part
    once; a window of boards keeps the cost of a read the same after years of results, and shows a jump in the
    false-call rate where a lifetime rate would hide it. `after` and `upto` bound the boards by row id (a rollout
    compares the boards before a switch with those after it)."""
    store.ready()
    out: dict[str, TypeRates] = {}
    with Session(store.engine) as s:
        floor = _window_floor(s, board_range(scope.where(select(Inspection.id)), after, upto), scope, boards)

        def window(q):  # noqa: ANN001, ANN202 - a Select joined to inspections
            return board_range(scope.where(q).where(Inspection.id >= floor), after, upto)

        q = window(select(ComponentResult.component_type, ComponentResult.verdict, func.count())
                   .join(ComponentResult.inspection))
        for ctype, verdict, n in s.execute(q.group_by(ComponentResult.component_type, ComponentResult.verdict)):
            rates = out.setdefault(ctype, TypeRates(ctype))
            rates.parts += n
            rates.flagged += n if verdict == "fail" else 0
        # reviews by their board's inspection id (indexed): the window's boards find their few reviews
        q = window(select(Review.component_type, Review.call, func.count())
                   .join(Inspection, Review.inspection_uuid == Inspection.uuid))
        for ctype, call, n in s.execute(q.group_by(Review.component_type, Review.call)):
            rates = out.setdefault(ctype, TypeRates(ctype))
            setattr(rates, CALL_COUNTS[call], getattr(rates, CALL_COUNTS[call]) + n)
    return dict(sorted(out.items()))


def _window_floor(s: Session, ids, scope: Scope, boards: int | None) -> int:  # noqa: ANN001 - a Select of ids
    """The row id of the `boards`-th newest of these boards (0: every board), found on the line's index."""
    if boards is None:
        return 0
    if boards < 1:
        raise ValueError(f"a rate window is at least 1 board, got {boards}")
    return s.scalar(ids.order_by(*scope.newest_first()).offset(boards - 1).limit(1)) or 0


class RatesCache:
    """The review rates at most `max_age_s` old: a Prometheus scrape every few seconds must not run two
    GROUP BYs over months of results each time. A database that cannot be read gives the last rates."""

    def __init__(self, read: Callable[[], dict[str, TypeRates]], max_age_s: float = 30.0) -> None:
        self._read, self.max_age_s = read, max_age_s
        self._value: dict[str, TypeRates] = {}
        self._at = float("-inf")
        self._lock = threading.Lock()

    def get(self) -> dict[str, TypeRates]:
        with self._lock:
            if time.monotonic() - self._at >= self.max_age_s:
                try:
                    self._value = self._read()
                except (StoreUnavailable, SQLAlchemyError):
                    pass
                self._at = time.monotonic()
            return self._value

    def invalidate(self) -> None:
        with self._lock:
            self._at = float("-inf")
