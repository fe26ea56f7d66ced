"""Which schema revisions this release runs on, and who may change the schema.

A plant's boxes share one database and are upgraded one at a time while the plant runs, so:
- `inspector db upgrade` (Alembic) is the deploy step that changes a shared (server) database; kiosks and
  dashboards only check its revision, and a reader role without DDL rights can open it.
- A box's own SQLite file is upgraded when the box opens it: nobody else uses it.
- Migrations are expand/contract. An additive revision declares `runs_with`, the oldest revision whose code
  still runs on it; `db upgrade` records that in `schema_record`, so a box of the previous release, which has
  never seen the new revision, reads there that it may keep running.
- This release's code runs on any revision from `NEEDS` to its head. Code starts using what a revision added
  (the contract step) one release after that revision, and then `NEEDS` moves up to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, delete, insert, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from .errors import SchemaNotReady, SchemaTooNew
from .schema import SchemaRecord

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
NEEDS = "0007"  # the oldest schema this release's code runs on (0007: users, tokens, the audit trail)


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


@cache
def _scripts() -> ScriptDirectory:
    """This release's migration scripts, read once a process (a box opens its database often; they never change)."""
    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    return _scripts().get_current_head() or "base"


@cache
def known_revisions() -> tuple[str, ...]:
    """This release's revisions, oldest first."""
    return tuple(r.revision for r in reversed(list(_scripts().walk_revisions())))


def runs_with(revision: str) -> str:
    """The oldest revision whose code runs on `revision`'s schema (itself unless the revision says otherwise)."""
    module = _scripts().get_revision(revision).module
    return getattr(module, "runs_with", revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@dataclass(frozen=True)
class SchemaState:
    """A database's schema as this release sees it (read with SELECTs only)."""

    revision: str | None  # None: no schema yet
    head: str  # this release's newest revision
    needs: str  # the oldest revision this release's code runs on
    known: bool  # the revision is one of this release's
    runs_with: str | None = None  # from schema_record: the oldest revision whose code runs on this schema
    release: str | None = None  # the release that last upgraded it
    upgraded_at: datetime | None = None

    @property
    def runnable(self) -> bool:
        """This release's code may read and write this database."""
        order = known_revisions()
        if self.revision is None:
            return False
        if self.known:
            return order.index(self.revision) >= order.index(self.needs)
        return self.runs_with is not None and self.runs_with in order

    @property
    def behind(self) -> bool:
        """`inspector db upgrade` of this release has work to do."""
        return self.revision is None or (self.known and self.revision != self.head)

    def describe(self) -> str:
        at = self.revision or "empty (no schema)"
        out = [f"schema revision {at}; this release knows up to {self.head} and runs on {self.needs} or later"]
        if self.revision is not None and not self.known:
            out.append(f"a newer release ({self.release or 'unknown'}) upgraded it; its code runs with releases "
                       f"from revision {self.runs_with or 'unknown'}")
        if self.runnable:
            out.append("this release runs on it" + ("; `inspector db upgrade` would bring it to " + self.head
                                                    if self.behind else ""))
        elif self.revision is not None and not self.known:
            out.append("this release cannot run on it: upgrade this box to a release that knows "
                       f"revision {self.revision}")
        else:
            out.append("this release cannot run on it yet: run `inspector db upgrade` (a deploy step, with the "
                       "database owner's rights)")
        return "; ".join(out)


def read_state(engine: Engine) -> SchemaState:
    revision = current_revision(engine)
    known = revision is not None and revision in known_revisions()
    record = None
    if revision is not None and not known:
        try:
            with engine.connect() as conn:
                # a record of another revision is stale (the schema moved without `db upgrade`): not evidence
                record = conn.execute(select(SchemaRecord.runs_with, SchemaRecord.release, SchemaRecord.upgraded_at)
                                      .where(SchemaRecord.revision == revision)
                                      .order_by(SchemaRecord.id.desc()).limit(1)).first()
        except SQLAlchemyError:
            record = None  # a schema from before schema_record, or one this release cannot read
    return SchemaState(revision, head_revision(), NEEDS, known, *(tuple(record) if record else ()))


def check(engine: Engine, owns: bool) -> SchemaState:
    """Raise unless this release may run on the database; a database the box owns (its SQLite file) is brought
    to head first. SchemaTooNew: a newer release's schema this code cannot run on; SchemaNotReady: a shared
    database that `inspector db upgrade` has not brought far enough yet."""
    state = read_state(engine)
    if owns and (state.revision is None or state.known) and state.behind:
        upgrade(engine)
        state = read_state(engine)
    if state.runnable:
        return state
    if state.revision is not None and not state.known:
        raise _too_new(state.revision, state.runs_with or state.revision)
    where = "has no schema yet" if state.revision is None else f"is at schema revision {state.revision}"
    raise SchemaNotReady(f"the results database {where}; this release needs {state.needs} or later: run "
                         "`inspector db upgrade` with the database owner's rights (a deploy step: "
                         "docs/pages/plant-it/install.md, Databases)")


def upgrade(engine: Engine, to: str = "head") -> tuple[str | None, str]:
    """Bring the schema to `to` (Alembic; creates it on an empty database) and record what was done; returns
    (from, to). SchemaTooNew when the database is at a revision this release does not know."""
    from .. import __version__

    before = current_revision(engine)
    if before is not None and before not in known_revisions():
        raise _too_new(before, None)
    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, to)
        after = MigrationContext.configure(conn).get_current_revision() or "base"
        if after in known_revisions() and inspect(conn).has_table(SchemaRecord.__tablename__):
            conn.execute(delete(SchemaRecord))
            conn.execute(insert(SchemaRecord).values(revision=after, runs_with=runs_with(after),
                                                     release=__version__, upgraded_at=datetime.now(timezone.utc)))
    return before, after


def _too_new(revision: str, runs_with: str | None) -> SchemaTooNew:
    since = f", and it runs only with releases from revision {runs_with}" if runs_with else ""
    return SchemaTooNew(f"the results database is at schema revision {revision}, which this release does not know "
                        f"(it knows up to {head_revision()}){since}: upgrade this box to the release that migrated it, "
                        "or point --db at another database")
