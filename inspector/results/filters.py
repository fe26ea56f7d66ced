"""What exports and queries select: the one filter shape the store, its exports and the dashboard share (its own
module, so the exports need not import the store)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .scope import PLANT, Scope


@dataclass(frozen=True)
class Filters:
    """What `export` and queries select: a line (and station), a time range, a board serial or Hermes BoardId, a
    part verdict, a component type, parts reviewed or not. The scope defaults to the whole plant here; the commands
    pass the box's own line."""

    since: datetime | None = None
    until: datetime | None = None
    board: str | None = None
    verdict: str | None = None  # of the component result
    component: str | None = None  # component type (R0402, ...)
    stored_upto: int | None = None  # boards stored up to this row id: what a search saw, for its export
    scope: Scope = PLANT
    uuid: str | None = None  # one board by its inspection id
    board_id: str | None = None  # one board by the Hermes BoardId the line gave it (schema revision 0008)
    # `board` also finds the panel one of whose boards has that serial of its own (the store sets it where the schema
    # has them, revision 0010)
    units: bool = False
    # parts an operator reviewed (True) or not yet (False: the review queue, a flagged part nobody has judged); None
    # either
    reviewed: bool | None = None


def reviewed_text(reviewed: bool | None) -> str | None:
    """The review filter as the query says it, and as an answer echoes it (a dashboard can tell a kiosk that read
    it from one of a release before it, which answers every row)."""
    return None if reviewed is None else ("yes" if reviewed else "no")


def reviewed_of(text: str | None) -> bool | None:
    """The `reviewed` query parameter: yes (parts with a review), no (without: the review queue), absent either."""
    if text in (None, ""):
        return None
    if text not in ("yes", "no"):
        raise ValueError(f"reviewed is yes or no, not {text!r}")
    return text == "yes"
