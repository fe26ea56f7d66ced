"""Operators' reviews of the line's calls, and the rates they give per component type.

A review says what a part really was: the line's `fail` was a **confirmed** defect or a **false call** (the part was
good), or its `pass` was an **escape** (a missed defect). The class is optional: a confirmed defect may be of another
class than the one called, an escape names the defect it had when the operator knows it. So are **boxes**: where each
defect is on the part's kept crop, drawn by the reviewer (results/review_boxes.py: several on a part with several
defects, each of its own class where it names one). A detector that finds defects learns an escape only from such
boxes (results/detector_labels.py), and a confirmed defect's boxes where the detector drew them wrong; a false call
has no defect to box. Reviews are what the retraining loop learns from (results/dataset.py), so a review that
contradicts the stored call (an escape of a failed part) is refused with the reason instead of stored.

Rates are over the parts stored of each type in a line's last boards (RATE_BOARDS): false calls per part
inspected and escapes per part inspected, so a type that is reviewed more is not made to look worse per review.
"""
from __future__ import annotations

import json
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
from .review_boxes import (
    BoxRefused,
    ReviewBox,
    boxes_json,
    boxes_of,
    check_boxes,
    first_columns,
    one_box_only,
    stored_text,
)
from .schema import ComponentResult, Inspection, Review
from .scope import Scope
from .store import BOX_COLUMNS, ResultStore, board_range

CALLS = ("confirmed", "false_call", "escape")
CALL_COUNTS = {"confirmed": "confirmed", "false_call": "false_calls", "escape": "escapes"}  # call -> TypeRates field
# what a part can really be: the classifier's classes and the detector's (polarity is a reversed part)
PART_CLASSES = (*CLASSIFIER_CLASSES, "polarity")
PART_DEFECTS = tuple(c for c in PART_CLASSES if c != "ok")  # what a review of a demo expert's call may name
REVIEWER_MAX = 64
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
    boxes: tuple[ReviewBox, ...] = ()  # where each defect is on the kept crop (review_boxes.py)

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
                      boxes_of(doc))
        except (ValueError, KeyError, TypeError) as exc:
            raise ReviewRefused(
                'a review is JSON {"inspection_id": UUID, "ref": "R12", "call": "confirmed|false_call|escape", '
                '"correct_class": optional, "reviewer": optional, "note": optional, "boxes": optional, each box '
                '[x0, y0, x1, y1] on the kept crop or {"box": [x0, y0, x1, y1], "class": its defect}} '
                f'({type(exc).__name__}: {exc})'
            ) from None
        req.check()
        return req

    def audited(self) -> dict[str, Any]:
        """What the audit trail records the review changed the part's review to."""
        return {"call": self.call, "correct_class": self.correct_class, "note": self.note,
                **({"boxes": boxes_json(self.boxes)} if self.boxes else {})}

    def to_json(self) -> dict[str, Any]:
        """As POST /reviews takes it: one box without a class of its own as "box", which a kiosk of any release
        since boxes (0012) stores; more, or a box's class, as "boxes"."""
        boxes = ({"box": list(self.boxes[0].at)} if len(self.boxes) == 1 and one_box_only(self.boxes) else
                 {"boxes": boxes_json(self.boxes)})
        return {"inspection_id": self.inspection_id, "ref": self.ref, "call": self.call,
                "correct_class": self.correct_class, "reviewer": self.reviewer, "note": self.note, **boxes}

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
        try:
            check_boxes(self.boxes, self.call)
        except BoxRefused as exc:
            raise ReviewRefused(str(exc)) from None
        for b in self.boxes:  # a false call's boxes were refused above: these are a defect's
            if b.defect is not None and (b.defect == "ok" or not CLASS_NAME.fullmatch(b.defect)):
                raise ReviewRefused(f"box {b.says()} names {b.defect!r}, not the class of a defect (letters, digits, "
                                    "_ . -, at most 32; leave it out for the review's class)")


def known_class(req: ReviewRequest, expert: str | None, classes_of: ClassesOf | None) -> None:
    """A correct_class, and each box's class, must be one the part's expert knows: its own classes when it was taught
    them ('ok' standing for its good class), else the demo experts'. Without `classes_of` only the demo's are
    known."""
    own = classes_of(expert) if classes_of is not None and expert else None
    known = (*own, "ok") if own else PART_CLASSES
    named = [("correct_class", req.correct_class)] + [(f"box {b.says()}'s class", b.defect) for b in req.boxes]
    for field, name in named:
        if name is None:
            continue
        if own and name == own[0] and req.call != "false_call":
            raise ReviewRefused(f"{own[0]} ({field}) is {expert}'s good class: a part that was good is a false call")
        if name not in known:
            where = f"{expert}'s classes" if own else "the demo experts' classes"
            raise ReviewRefused(f"{field} {name!r} is not one of {where}: {', '.join(known)}"
                                + ("" if own or classes_of is not None else
                                   " (an expert taught its own classes is checked against its zoo: review through the "
                                   "kiosk, or pass --zoo)"))


def record_review(store: ResultStore, req: ReviewRequest, classes_of: ClassesOf | None = None) -> dict[str, Any]:
    """Store (or replace) the review of one part; what was stored. ReviewRefused when the part is not stored, the
    call contradicts its verdict or its class is not one the part's expert knows (`classes_of`: from the zoo);
    StoreUnavailable when the database cannot be reached."""
    req.check()
    store.ready()
    if req.boxes and not store.review_boxes:
        raise ReviewRefused(f"the results database {store.safe_url} cannot hold a reviewer's box (schema before "
                            "0012): `inspector db upgrade` adds it; or review without the box")
    if not one_box_only(req.boxes) and not store.review_box_lists:
        raise ReviewRefused(f"the results database {store.safe_url} holds one box a review, of the review's class "
                            "(schema before 0013): `inspector db upgrade` adds several and their classes; or send one "
                            "box without a class")
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
            if review is not None and review.drawn_boxes:
                before["boxes"] = boxes_json(review.drawn_boxes)
            values = {"inspection_uuid": req.inspection_id, "ref": part.ref, "component_type": part.component_type,
                      "expert": part.expert, "weights_sha256": part.weights_sha256, "call": req.call,
                      "correct_class": req.correct_class, "reviewer": req.reviewer, "note": req.note,
                      "at": datetime.now(timezone.utc)}
            if store.review_boxes:  # a review again without boxes clears those drawn before
                values.update(zip(BOX_COLUMNS, first_columns(req.boxes)))
            if store.review_box_lists:
                values["boxes"] = stored_text(req.boxes)
            if review is None:  # only the columns the schema has (an ORM object would name the later ones too)
                s.execute(insert(Review).values(component_result_id=part.id, **values))
            else:
                for name, value in values.items():
                    setattr(review, name, value)
            shown = {k: v for k, v in req.to_json().items() if k not in ("box", "boxes")}
            return {"stored": True, **shown, "box": list(req.boxes[0].at) if req.boxes else None,
                    "boxes": boxes_json(req.boxes), "component_type": part.component_type,
                    "verdict": part.verdict, "defect_class": part.defect_class, "before": before}
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
