"""The results database: any SQLAlchemy URL; SQLite in WAL mode by default. Its schema: results/revisions.py.

Writes are idempotent by inspection id: a batch whose commit acknowledgement was lost, or a spool replayed
after a crash, stores each board once. Errors are sorted into two kinds the writer treats differently:
`StoreUnavailable` (the database cannot be reached or written now: keep the results and retry) and
`StoreRejected` (the database refuses these rows: set them aside with the reason, store the rest).
"""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import Engine, create_engine, delete, event, exists, func, insert, inspect, or_, select, union
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, aliased, selectinload, undefer

from .errors import SchemaNotReady, SchemaTooNew, StoreRejected, StoreUnavailable
from .filters import Filters  # noqa: F401 - where callers have always found it
from .records import BoardRecord, PartRecord
from .revisions import check, current_revision, head_revision
from .rule_texts import PartNumbers, TextOf, store_texts
from .schema import ComponentResult, DeadLetter, Inspection, Review, UnitSerial
from .scope import PLANT, Scope
from .units import positions_text, serials_text

DEFAULT_DB = "results.sqlite"
CONNECT_TIMEOUT_S = 5
COUNT_CAP = 10_000  # a history search counts its matches this far (ResultStore.count_components)
# inspections columns later than the oldest schema this release runs on (revisions.NEEDS): each written and read only
# where the database has it (board_id: 0008, the Hermes BoardId; panel_*: 0009, a panel's boards; panel_serials:
# 0010, their own serials)
LATER = ("board_id", "panel_boards", "panel_failed", "panel_skipped", "panel_serials")
# component_results columns alike (alternate: 0011, the approved make a part was compared with)
LATER_PARTS = ("alternate",)
# reviews columns alike (box_*: 0012, the box a reviewer drew where the defect is; boxes: 0013, all the boxes drawn
# and their classes, results/review_boxes.py)
BOX_COLUMNS = ("box_x0", "box_y0", "box_x1", "box_y1")
LATER_REVIEWS = (*BOX_COLUMNS, "boxes")


def sqlite_url(path: str | Path) -> str:
    return f"sqlite:///{Path(path).resolve()}"


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DB-API connection
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")  # a commit is on disk: acknowledged results survive a crash
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def open_engine(url: str, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Engine:
    """An engine whose connection attempts give up after `connect_timeout_s` (a dead server must not hang a
    thread for the kernel's TCP timeout)."""
    connect_args: dict[str, object] = {}
    if url.startswith("postgresql"):
        connect_args["connect_timeout"] = max(1, int(connect_timeout_s))
    engine = create_engine(url, pool_pre_ping=True, future=True, connect_args=connect_args, pool_timeout=30)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _unavailable(exc: BaseException) -> bool:
    """Anything but a refused value (a connection, the server, a missing table: retry later). Only the
    database's verdict on the rows themselves (DataError: too long, out of range; IntegrityError) is a
    rejection, so a schema problem never sends every result to the dead letters."""
    if isinstance(exc, (DataError, IntegrityError)):
        return isinstance(exc, DBAPIError) and exc.connection_invalidated
    return True


def parse_when(text: str) -> datetime:
    """An ISO time for a filter: with an offset (`2026-11-23T11:00+02:00`, `...Z`) as written; without one,
    in this box's local time zone (what an operator at the line means). Returned in UTC."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"time {text!r} is not ISO 8601: write e.g. 2026-11-23T11:00, 2026-11-23T11:00+02:00 "
                         "or 2026-11-23T09:00Z") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local
    return when.astimezone(timezone.utc)


class ResultStore:
    def __init__(self, url: str, connect: bool = True, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        """`connect=False` opens nothing yet: the first write connects and migrates (a line that starts while
        the database is down spools from its first board)."""
        self.url = url
        self.engine = open_engine(url, connect_timeout_s)
        self._ready = False
        self._rules_stored: set[str] = set()  # rule-set versions whose text the database has (rule_texts.py)
        self._later: frozenset[str] = frozenset()  # LATER columns the schema has (a shared database may lag behind)
        self._later_parts: frozenset[str] = frozenset()  # LATER_PARTS columns alike
        self._later_reviews: frozenset[str] = frozenset()  # LATER_REVIEWS columns alike
        self._ready_lock = threading.Lock()
        self._part_numbers = PartNumbers(self.engine)
        if connect:
            self.ready()

    @property
    def board_ids(self) -> bool:
        """The schema has inspections.board_id (revision 0008): Hermes BoardIds are stored, read and searched."""
        self.ready()
        return "board_id" in self._later

    @property
    def unit_serials(self) -> bool:
        """The schema has a panel's boards' own serials (revision 0010: `panel_serials` and the `unit_serials` index
        that came with it): stored, read and searched."""
        self.ready()
        return "panel_serials" in self._later

    @property
    def review_boxes(self) -> bool:
        """The schema has reviews.box_* (revision 0012): a reviewer's box is stored and read with the review."""
        self.ready()
        return set(BOX_COLUMNS) <= self._later_reviews

    @property
    def review_box_lists(self) -> bool:
        """The schema has reviews.boxes (revision 0013): a review's several boxes and their classes are stored."""
        self.ready()
        return "boxes" in self._later_reviews

    def reading_reviews(self, q):  # noqa: ANN001, ANN202 - a Select of reviews
        """`q` reading each review's LATER_REVIEWS columns with it where the schema has them."""
        self.ready()
        have = [undefer(getattr(Review, n)) for n in LATER_REVIEWS if n in self._later_reviews]
        return q.options(*have) if have else q

    def check_filters(self, filters: Filters | None) -> None:
        """ValueError for a search this database cannot run, saying what to do: by BoardId before schema 0008."""
        if filters is not None and filters.board_id and not self.board_ids:
            raise ValueError(f"the results database {self.safe_url} holds no Hermes BoardIds (schema before 0008): "
                             "`inspector db upgrade` adds them for the boards stored from then on")

    def _reading(self, q, filters: Filters | None = None, parts: bool = False):  # noqa: ANN001, ANN202 - a Select
        """`q` reading each board's LATER columns with it where the schema has them (deferred, so a database at
        0007 is never asked for them), and with `parts` (a query of its component results too) their LATER_PARTS;
        a search it cannot run is refused first (`check_filters`)."""
        self.check_filters(filters)
        self.ready()
        have = [undefer(getattr(Inspection, name)) for name in LATER if name in self._later]
        if parts:
            have += [undefer(getattr(ComponentResult, name)) for name in LATER_PARTS if name in self._later_parts]
        return q.options(*have) if have else q

    def _with_parts(self):  # noqa: ANN202 - a loader option
        """Each board's parts loaded with it, their LATER_PARTS columns where the schema has them."""
        self.ready()
        later = [getattr(ComponentResult, name) for name in LATER_PARTS if name in self._later_parts]
        return selectinload(Inspection.parts).undefer(*later) if later else selectinload(Inspection.parts)

    def searching(self, filters: Filters | None) -> Filters:
        """`filters` as this database can run them: a serial also finds a panel by its boards' own serials where
        the schema has them (revision 0010)."""
        filters = filters or Filters()
        return replace(filters, units=bool(filters.board) and self.unit_serials)

    @property
    def safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def owned(self) -> bool:
        """A SQLite file is the box's own and is upgraded on open; a server database is shared by the plant and
        changes only through `inspector db upgrade`."""
        return self.engine.dialect.name == "sqlite"

    def ready(self) -> None:
        """Connect and check the schema once (a SQLite file is brought to head); StoreUnavailable otherwise:
        SchemaNotReady for a shared database `inspector db upgrade` must bring on, SchemaTooNew for a newer
        release's schema this code cannot run on."""
        with self._ready_lock:
            if self._ready:
                return
            try:
                check(self.engine, owns=self.owned)
                seen = inspect(self.engine)
                columns = {c["name"] for c in seen.get_columns("inspections")}
                self._later = frozenset(name for name in LATER if name in columns)
                columns = {c["name"] for c in seen.get_columns("component_results")}
                self._later_parts = frozenset(name for name in LATER_PARTS if name in columns)
                columns = {c["name"] for c in seen.get_columns("reviews")}
                self._later_reviews = frozenset(name for name in LATER_REVIEWS if name in columns)
            except SQLAlchemyError as exc:
                raise StoreUnavailable(f"cannot open the results database {self.safe_url}: "
                                       f"{exc.__class__.__name__}: {_first_line(exc)}") from None
            self._ready = True

    def write(self, boards: Sequence[BoardRecord], rule_text: TextOf | None = None) -> int:
        """All of `boards` in one transaction, or none; boards already stored (by inspection id) are skipped.
        With `rule_text`, the text of each rule set the new boards name goes in with them (rule_texts.py).
        Returns how many were new. StoreUnavailable: try again later; StoreRejected: these rows never will go."""
        self.ready()
        try:
            with Session(self.engine) as session, session.begin():
                ids = [b.inspection_id for b in boards]
                have = set(session.scalars(select(Inspection.uuid).where(Inspection.uuid.in_(ids))))
                new = [b for b in _unique(boards) if b.inspection_id not in have]
                stored: set[str] = set()
                if new:
                    # Core inserts, not ORM objects: a board's 96 part rows through the unit of work cost ~17 ms of
                    # CPU a board (measured), the line's whole budget for a board on 2 cores is ~230 ms
                    keys = session.scalars(insert(Inspection).returning(Inspection.id, sort_by_parameter_order=True),
                                           [_board_row(b, self._later) for b in new]).all()
                    parts = [_part_row(p, key, self._later_parts) for b, key in zip(new, keys) for p in b.parts]
                    if parts:
                        session.execute(insert(ComponentResult), parts)
                    units = [dict(inspection_id=key, position=k, serial=serial) for b, key in zip(new, keys)
                             for k, serial in b.panel_serials.items()] if self.unit_serials else []
                    if units:  # what a search by a board's own serial finds its panel by
                        session.execute(insert(UnitSerial), units)
                    versions = {b.ruleset_version for b in new} - self._rules_stored
                    if rule_text is not None and versions:
                        stored = store_texts(session.connection(), versions, rule_text)
            self._rules_stored |= stored
            return len(new)
        except SQLAlchemyError as exc:
            message = f"writing {len(boards)} board(s) to {self.safe_url} failed: {_first_line(exc)}"
            raise (StoreUnavailable if _unavailable(exc) else StoreRejected)(message) from None

    def dead_letter(self, board: BoardRecord, reason: str) -> None:
        """Keep a refused board whole, with the reason, in the dead_letters table (StoreUnavailable if not)."""
        self.ready()
        try:
            with Session(self.engine) as session, session.begin():
                session.add(DeadLetter(at=datetime.now(timezone.utc), uuid=board.inspection_id[:64], reason=reason,
                                       payload=json.dumps(board.to_json())))
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"cannot set a refused board aside in {self.safe_url}: {_first_line(exc)}") from None

    def dead_letters(self) -> list[DeadLetter]:
        self.ready()
        with Session(self.engine) as s:
            return list(s.scalars(select(DeadLetter).order_by(DeadLetter.id)))

    def prune(self, older_than: datetime, scope: Scope, batch: int = 1000) -> int:
        """Delete the scope's boards (with their parts) inspected before `older_than`, in small transactions so a
        big prune never holds the line's writer off for long; returns the boards deleted. The scope is required:
        on a plant's shared database one box's retention must not delete another line's boards."""
        self.ready()
        deleted = 0
        while True:
            with Session(self.engine) as s, s.begin():
                q = scope.where(select(Inspection.id).where(Inspection.started_at < older_than))
                ids = list(s.scalars(q.order_by(Inspection.id).limit(batch)))
                if not ids:
                    return deleted
                s.execute(delete(ComponentResult).where(ComponentResult.inspection_id.in_(ids)))
                if self.unit_serials:  # the boards' own serials came with it (0010)
                    s.execute(delete(UnitSerial).where(UnitSerial.inspection_id.in_(ids)))
                s.execute(delete(Inspection).where(Inspection.id.in_(ids)))
                deleted += len(ids)

    def count_boards(self, scope: Scope, after: int | None = None, upto: int | None = None) -> int:
        """The scope's boards stored, within a row-id range (board_range)."""
        with Session(self.engine) as s:
            return s.scalar(board_range(scope.where(select(func.count()).select_from(Inspection)), after, upto)) or 0

    def count(self, scope: Scope = PLANT) -> tuple[int, int]:
        """(boards, component results) stored for the scope."""
        with Session(self.engine) as s:
            boards = scope.where(select(func.count()).select_from(Inspection))
            parts = select(func.count()).select_from(ComponentResult)
            if not scope.is_plant:
                parts = scope.where(parts.join(ComponentResult.inspection))
            return s.scalar(boards) or 0, s.scalar(parts) or 0

    def inspections(self, filters: Filters | None = None, limit: int | None = None) -> list[Inspection]:
        filters = self.searching(filters)
        with Session(self.engine) as s:
            q = select(Inspection).options(self._with_parts()).order_by(Inspection.id)
            q = board_filters(self._reading(q, filters), filters)
            if limit:
                q = q.limit(limit)
            return list(s.scalars(q))

    def component_rows(self, filters: Filters | None = None, newest: int | None = None,
                       bare_boards: bool = False) -> Iterator[tuple[Inspection, ComponentResult | None]]:
        """Matching component results in the order they were stored, or only the `newest` N, newest first.

        `bare_boards` also yields (board, None) for each matching board stored without part results (a board-level
        error such as a failed registration), so an export loses no board."""
        filters = self.searching(filters)
        with Session(self.engine) as s:
            if bare_boards:
                q = select(Inspection, ComponentResult).outerjoin(Inspection.parts)
                q = _component_filters(self._reading(q, filters, parts=True), filters, bare_boards=True)
            else:
                q = select(Inspection, ComponentResult).join(ComponentResult.inspection)
                q = _component_filters(self._reading(q, filters, parts=True), filters)
            if newest is not None:  # newest boards first: a line's index (line, station, id) walks them in order
                order = [*(filters or Filters()).scope.newest_first(), ComponentResult.id.desc()]
                yield from s.execute(q.order_by(*order).limit(newest))
            else:
                yield from s.execute(q.order_by(Inspection.id, ComponentResult.id).execution_options(yield_per=500))

    def count_components(self, filters: Filters | None = None, cap: int | None = None) -> int:
        """How many component results match; with `cap`, counted no further than cap + 1 (a history page says
        "over N" rather than count a line's years of parts on every search)."""
        self.check_filters(filters)  # it reads no BoardId, but may search by one
        filters = self.searching(filters)
        with Session(self.engine) as s:
            if cap is None:
                q = select(func.count()).select_from(ComponentResult).join(ComponentResult.inspection)
                return s.scalar(_component_filters(q, filters)) or 0
            q = _component_filters(select(ComponentResult.id).join(ComponentResult.inspection), filters)
            return s.scalar(select(func.count()).select_from(q.limit(cap + 1).subquery())) or 0

    def recent_parts(self, scope: Scope = PLANT, verdicts: tuple[str, ...] = ("fail", "error"),
                     limit: int = 20) -> list[tuple[Inspection, ComponentResult]]:
        """The scope's newest component results with any of these verdicts, newest first (the dashboard's defect
        list)."""
        with Session(self.engine) as s:
            q = scope.where(self._reading(select(Inspection, ComponentResult).join(ComponentResult.inspection),
                                          parts=True))
            q = q.where(ComponentResult.verdict.in_(verdicts))
            q = q.order_by(*scope.newest_first(), ComponentResult.id.desc()).limit(limit)
            return [tuple(r) for r in s.execute(q)]

    def last_id(self, scope: Scope = PLANT) -> int:
        """The scope's newest stored board's row id (0 when empty): a bound that makes a query repeatable."""
        with Session(self.engine) as s:
            return s.scalar(scope.where(select(func.max(Inspection.id)))) or 0

    def latest(self, scope: Scope = PLANT) -> Inspection | None:
        """The scope's newest stored board with its parts."""
        with Session(self.engine) as s:
            q = scope.where(self._reading(select(Inspection).options(self._with_parts())))
            return s.scalars(q.order_by(*scope.newest_first()).limit(1)).first()

    def component_types(self, scope: Scope = PLANT) -> list[str]:
        """The component types the scope's boards have had (the history tab's choice)."""
        with Session(self.engine) as s:
            if scope.is_plant:
                return sorted(s.scalars(select(ComponentResult.component_type).distinct()))
            q = scope.where(select(ComponentResult.component_type).join(ComponentResult.inspection).distinct())
            return sorted(s.scalars(q))

    def reviews_of(self, uuids: list[str]) -> dict[tuple[str, str], Review]:
        """(inspection id, ref) -> review, for the parts of these boards that have one (the dashboard's history;
        results/reviews.py stores them)."""
        if not uuids:
            return {}
        with Session(self.engine) as s:
            rows = s.scalars(self.reading_reviews(select(Review).where(Review.inspection_uuid.in_(uuids))))
            return {(r.inspection_uuid, r.ref): r for r in rows}

    def part_numbers(self, version: str) -> dict[str, str]:
        """REF -> the BOM's part number under a rule-set version (its `part_numbers:`; {} where it names none)."""
        return self._part_numbers(version)

    def part_numbers_stored(self, version: str) -> tuple[dict[str, str], bool]:
        """part_numbers(version), and whether the database keeps the version's text (the answer then never
        changes)."""
        return self._part_numbers.read(version)

    def export_csv(self, out, filters: Filters | None = None) -> int:  # noqa: ANN001 - a text stream
        """The matching results as CSV (results/export.py, which reads the store, never the other way round at
        import); the rows written."""
        from .export import export_csv

        return export_csv(self, out, filters)

    def close(self) -> None:
        self.engine.dispose()


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [exc.__class__.__name__])[0]


def _unique(boards: Sequence[BoardRecord]) -> list[BoardRecord]:
    """The first of each inspection id (a batch can hold a board twice only if a replay overlapped it)."""
    seen: set[str] = set()
    return [b for b in boards if not (b.inspection_id in seen or seen.add(b.inspection_id))]


def older_than_days(days: float) -> datetime:
    return datetime.now(timezone.utc) - timedelta(days=days)


def _component_filters(q, f: Filters | None, bare_boards: bool = False):  # noqa: ANN001, ANN202 - a Select
    """Part filters; with `bare_boards` a board without parts matches a verdict filter by its board verdict."""
    f = f or Filters()
    q = board_filters(q, f)
    bare = ComponentResult.id.is_(None)
    if f.verdict:
        match = ComponentResult.verdict == f.verdict
        q = q.where(or_(match, bare & (Inspection.verdict == f.verdict)) if bare_boards else match)
    if f.component:
        q = q.where(ComponentResult.component_type == f.component)
    if f.reviewed is not None:  # by the part's review row (reviews.component_result_id is unique: its index)
        has = exists().where(Review.component_result_id == ComponentResult.id)
        q = q.where(has if f.reviewed else ~has)
    return q


def board_filters(q, f: Filters):  # noqa: ANN001, ANN202 - a Select of any shape
    """A query narrowed to the boards `f` selects (scope, time, serial, stored-up-to): shared by exports and
    datasets."""
    q = f.scope.where(q)
    if f.since:
        q = q.where(Inspection.started_at >= f.since)
    if f.until:
        q = q.where(Inspection.started_at < f.until)
    if f.board:
        if f.units:  # the board's serial, or a panel board's own: both by their index (an OR of the two would have
            # the planner walk the line's boards instead: ~10x slower at 100,000 boards, growing with them)
            board = aliased(Inspection)
            q = q.where(Inspection.id.in_(union(select(board.id).where(board.board_serial == f.board),
                                                select(UnitSerial.inspection_id).where(UnitSerial.serial == f.board))))
        else:
            q = q.where(Inspection.board_serial == f.board)
    if f.uuid:
        q = q.where(Inspection.uuid == f.uuid)
    if f.board_id:
        q = q.where(Inspection.board_id == f.board_id)
    if f.stored_upto is not None:
        q = q.where(Inspection.id <= f.stored_upto)
    return q


def board_range(q, after: int | None = None, upto: int | None = None):  # noqa: ANN001, ANN202 - a Select
    """A query narrowed to boards stored after row id `after` and up to `upto` (either open): what a rollout
    compares before and after a switch, and what a rate window counts."""
    q = q.where(Inspection.id > after) if after is not None else q
    return q.where(Inspection.id <= upto) if upto is not None else q


def _board_row(b: BoardRecord, later: frozenset[str]) -> dict:
    """The inspections row of `b`; of the LATER columns, those the schema has (`later`)."""
    panel = (("panel_boards", b.panel_boards), ("panel_failed", positions_text(b.failed_boards())),
             ("panel_skipped", positions_text(b.panel_skipped)),
             ("panel_serials", serials_text(b.panel_serials))) if b.panel_boards else ()
    extra = {k: v for k, v in (("board_id", b.board_id), *panel) if k in later}
    return dict(**extra,
        uuid=b.inspection_id, started_at=b.started_at, finished_at=b.finished_at, line=b.line, station=b.station,
        board_serial=b.board_serial, serial_source=b.serial_source, recipe=b.recipe,
        ruleset_version=b.ruleset_version, verdict=b.verdict,
        source=b.source[:512], error=b.error, reg_residual_px=b.residual_px,
        reg_transform=json.dumps([round(v, 6) for v in b.transform]) if b.transform else None,
        reg_fiducials=(json.dumps({k: [round(v, 3) for v in xy] for k, xy in b.fiducials.items()})
                       if b.fiducials else None))


def _part_row(p: PartRecord, inspection_key: int, later: frozenset[str]) -> dict:
    """The component_results row of `p`; of the LATER_PARTS columns, those the schema has (`later`)."""
    box = p.box or (None, None, None, None)
    extra = {"alternate": p.alternate} if "alternate" in later else {}
    return dict(**extra, inspection_id=inspection_key, ref=p.ref, component_type=p.component_type, expert=p.expert,
                weights_sha256=p.weights_sha256, verdict=p.verdict, defect_class=p.defect_class, score=p.score,
                box_x0=box[0], box_y0=box[1], box_x1=box[2], box_y1=box[3], crop_path=p.crop_path, error=p.error)


__all__ = ["COUNT_CAP", "Filters", "ResultStore", "SchemaNotReady", "SchemaTooNew", "StoreRejected", "StoreUnavailable",
           "board_range", "current_revision", "head_revision", "open_engine", "parse_when", "sqlite_url"]
