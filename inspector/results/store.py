"""The results database: any SQLAlchemy URL, migrated to head on open; SQLite in WAL mode by default."""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, func, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, selectinload

from .records import BoardRecord
from .schema import ComponentResult, Inspection

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
DEFAULT_DB = "results.sqlite"


class StoreUnavailable(RuntimeError):
    """The database cannot be reached or written now; the writer keeps results and retries."""


def sqlite_url(path: str | Path) -> str:
    return f"sqlite:///{Path(path).resolve()}"


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DB-API connection
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")  # a commit is on disk: acknowledged results survive a crash
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def open_engine(url: str) -> Engine:
    engine = create_engine(url, pool_pre_ping=True, future=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` with Alembic (creates it on an empty database)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@dataclass(frozen=True)
class Filters:
    """What `export` and queries select: a time range, a board serial, a part verdict, a component type."""

    since: datetime | None = None
    until: datetime | None = None
    board: str | None = None
    verdict: str | None = None  # of the component result
    component: str | None = None  # component type (R0402, ...)
    stored_upto: int | None = None  # boards stored up to this row id: what a search saw, for its export


class ResultStore:
    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.engine = open_engine(url)
            migrate(self.engine)
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"cannot open the results database {self.safe_url}: {exc.__class__.__name__}: "
                                   f"{str(exc).splitlines()[0]}") from None

    @property
    def safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True) if hasattr(self, "engine") else self.url

    def write(self, boards: Sequence[BoardRecord]) -> None:
        """All of `boards` in one transaction, or none (StoreUnavailable)."""
        try:
            with Session(self.engine) as session, session.begin():
                session.add_all(_row(b) for b in boards)
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"writing {len(boards)} board(s) to {self.safe_url} failed: "
                                   f"{str(exc).splitlines()[0]}") from None

    def count(self) -> tuple[int, int]:
        """(boards, component results) stored."""
        with Session(self.engine) as s:
            return (s.scalar(select(func.count()).select_from(Inspection)) or 0,
                    s.scalar(select(func.count()).select_from(ComponentResult)) or 0)

    def inspections(self, filters: Filters | None = None, limit: int | None = None) -> list[Inspection]:
        filters = filters or Filters()
        with Session(self.engine) as s:
            q = select(Inspection).options(selectinload(Inspection.parts)).order_by(Inspection.id)
            q = _board_filters(q, filters)
            if limit:
                q = q.limit(limit)
            return list(s.scalars(q))

    def component_rows(self, filters: Filters | None = None, newest: int | None = None,
                       bare_boards: bool = False) -> Iterator[tuple[Inspection, ComponentResult | None]]:
        """Matching component results in the order they were stored, or only the `newest` N, newest first.

        `bare_boards` also yields (board, None) for each matching board stored without part results (a board-level
        error such as a failed registration), so an export loses no board."""
        with Session(self.engine) as s:
            if bare_boards:
                q = select(Inspection, ComponentResult).outerjoin(Inspection.parts)
                q = _component_filters(q, filters, bare_boards=True)
            else:
                q = _component_filters(select(Inspection, ComponentResult).join(ComponentResult.inspection), filters)
            if newest is not None:
                yield from s.execute(q.order_by(ComponentResult.id.desc()).limit(newest))
            else:
                yield from s.execute(q.order_by(Inspection.id, ComponentResult.id).execution_options(yield_per=500))

    def count_components(self, filters: Filters | None = None) -> int:
        with Session(self.engine) as s:
            q = select(func.count()).select_from(ComponentResult).join(ComponentResult.inspection)
            return s.scalar(_component_filters(q, filters)) or 0

    def recent_parts(self, verdicts: tuple[str, ...] = ("fail", "error"),
                     limit: int = 20) -> list[tuple[Inspection, ComponentResult]]:
        """The newest component results with any of these verdicts, newest first (the dashboard's defect list)."""
        with Session(self.engine) as s:
            q = select(Inspection, ComponentResult).join(ComponentResult.inspection)
            q = q.where(ComponentResult.verdict.in_(verdicts)).order_by(ComponentResult.id.desc()).limit(limit)
            return [tuple(r) for r in s.execute(q)]

    def last_id(self) -> int:
        """The newest stored board's row id (0 when empty): a bound that makes a query repeatable."""
        with Session(self.engine) as s:
            return s.scalar(select(func.max(Inspection.id))) or 0

    def latest(self) -> Inspection | None:
        """The newest stored board with its parts."""
        with Session(self.engine) as s:
            q = select(Inspection).options(selectinload(Inspection.parts)).order_by(Inspection.id.desc()).limit(1)
            return s.scalars(q).first()

    def component_types(self) -> list[str]:
        with Session(self.engine) as s:
            return sorted(s.scalars(select(ComponentResult.component_type).distinct()))

    def close(self) -> None:
        self.engine.dispose()


def _component_filters(q, f: Filters | None, bare_boards: bool = False):  # noqa: ANN001, ANN202 - a Select
    """Part filters; with `bare_boards` a board without parts matches a verdict filter by its board verdict."""
    f = f or Filters()
    q = _board_filters(q, f)
    bare = ComponentResult.id.is_(None)
    if f.verdict:
        match = ComponentResult.verdict == f.verdict
        q = q.where(or_(match, bare & (Inspection.verdict == f.verdict)) if bare_boards else match)
    if f.component:
        q = q.where(ComponentResult.component_type == f.component)
    return q


def _board_filters(q, f: Filters):  # noqa: ANN001, ANN202 - a Select of any shape
    if f.since:
        q = q.where(Inspection.started_at >= f.since)
    if f.until:
        q = q.where(Inspection.started_at < f.until)
    if f.board:
        q = q.where(Inspection.board_serial == f.board)
    if f.stored_upto is not None:
        q = q.where(Inspection.id <= f.stored_upto)
    return q


def _row(b: BoardRecord) -> Inspection:
    return Inspection(
        started_at=b.started_at, finished_at=b.finished_at, line=b.line, station=b.station,
        board_serial=b.board_serial, recipe=b.recipe, ruleset_version=b.ruleset_version, verdict=b.verdict,
        source=b.source[:512], error=b.error, reg_residual_px=b.residual_px,
        reg_transform=json.dumps([round(v, 6) for v in b.transform]) if b.transform else None,
        reg_fiducials=(json.dumps({k: [round(v, 3) for v in xy] for k, xy in b.fiducials.items()})
                       if b.fiducials else None),
        parts=[ComponentResult(
            ref=p.ref, component_type=p.component_type, expert=p.expert, weights_sha256=p.weights_sha256,
            verdict=p.verdict, defect_class=p.defect_class, score=p.score,
            box_x0=p.box[0] if p.box else None, box_y0=p.box[1] if p.box else None,
            box_x1=p.box[2] if p.box else None, box_y1=p.box[3] if p.box else None,
            crop_path=p.crop_path, error=p.error) for p in b.parts],
    )
