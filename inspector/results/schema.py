"""The results tables (SQLAlchemy 2 declarative). Change them only with a new Alembic revision.

Times are stored as UTC and read back with their offset on every backend (`UtcDateTime`): SQLite
keeps no offset of its own, so a filter written with `+02:00` would otherwise compare wall clocks.
Keys are 64-bit where the backend distinguishes (PostgreSQL); SQLite's integer keys already are.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from .review_boxes import ReviewBox, read_stored
from .units import PanelResult

NAMING = {"ix": "ix_%(table_name)s_%(column_0_N_name)s", "uq": "uq_%(table_name)s_%(column_0_N_name)s",
          "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s", "pk": "pk_%(table_name)s",
          "ck": "ck_%(table_name)s_%(constraint_name)s"}
Key = BigInteger().with_variant(Integer, "sqlite")  # SQLite's autoincrement needs INTEGER PRIMARY KEY (64-bit)


class UtcDateTime(TypeDecorator):
    """Aware datetimes in, aware UTC datetimes out; a naive value going in is taken as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:  # noqa: ANN001
        if value is None:
            return None
        value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:  # noqa: ANN001
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Inspection(Base):
    """One board through the line."""

    __tablename__ = "inspections"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)  # the inspection id given at ingest
    started_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    finished_at: Mapped[datetime] = mapped_column(UtcDateTime)
    line: Mapped[str] = mapped_column(String(64))
    station: Mapped[str] = mapped_column(String(64))
    board_serial: Mapped[str] = mapped_column(String(128), index=True)
    # where the serial came from: code (read from the board), noread (NOREAD-<id>), sidecar, filename, file, ...
    serial_source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # the Hermes BoardId from upstream (or given here) when the line is on a Hermes lane; revision 0008, so
    # deferred: a box of this release reads a database still at 0007 without it
    board_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True, deferred=True)
    # a panel's boards, the positions among them that did not pass (results/units.py: `2;5`, 0 its frame, empty
    # when all passed) and its x-outs, not inspected; None off a panel. Revision 0009, deferred like board_id
    panel_boards: Mapped[int | None] = mapped_column(Integer, nullable=True, deferred=True)
    panel_failed: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)
    panel_skipped: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)
    # a panel's boards' own serials, JSON {"1": "SN-1", ...} (units.serials_text); revision 0010, deferred alike
    panel_serials: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)
    recipe: Mapped[str] = mapped_column(String(128))
    ruleset_version: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(16), index=True)
    source: Mapped[str] = mapped_column(String(512), default="")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)  # board-level: registration failed, ...
    reg_transform: Mapped[str | None] = mapped_column(String(256), nullable=True)  # JSON 2x3, recipe px -> image px
    reg_residual_px: Mapped[float | None] = mapped_column(Float, nullable=True)
    reg_fiducials: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON {name: [x, y]} found, image px
    parts: Mapped[list[ComponentResult]] = relationship(back_populates="inspection", cascade="all, delete-orphan",
                                                        passive_deletes=True, order_by="ComponentResult.id")

    @property
    def hermes_board_id(self) -> str | None:
        """The BoardId where it was read with the board (the store reads it where the schema has it), else None:
        never a query of its own, which a database at 0007 would refuse and a closed session could not run."""
        return None if "board_id" in sa_inspect(self).unloaded else self.board_id

    @property
    def panel(self) -> PanelResult | None:
        """The panel's boards and those that did not pass where it was stored as a panel (and read with them, as
        `hermes_board_id`), else None."""
        unloaded = sa_inspect(self).unloaded
        if "panel_boards" in unloaded:
            return None
        serials = None if "panel_serials" in unloaded else self.panel_serials
        return PanelResult.stored(self.panel_boards, self.panel_failed, self.panel_skipped, serials)

    # one line's reads on a plant's shared database: its newest boards, its time ranges, its prune
    __table_args__ = (Index("ix_inspections_line_station_id", "line", "station", "id"),
                      Index("ix_inspections_line_station_started_at", "line", "station", "started_at"))


class UnitSerial(Base):
    """One of a panel's boards' own serials (revision 0010): what a search by a board's serial finds its panel by, an
    index lookup where a scan of every panel's `panel_serials` would read the whole table. The panel's row keeps
    them all for reading; this is only the index."""

    __tablename__ = "unit_serials"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    inspection_id: Mapped[int] = mapped_column(Key, ForeignKey("inspections.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    serial: Mapped[str] = mapped_column(Text, index=True)  # any text a code holds: no length refuses a board


class ComponentResult(Base):
    """One reference designator's verdict on one board."""

    __tablename__ = "component_results"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    inspection_id: Mapped[int] = mapped_column(Key, ForeignKey("inspections.id", ondelete="CASCADE"))
    ref: Mapped[str] = mapped_column(String(32))
    component_type: Mapped[str] = mapped_column(String(128))
    expert: Mapped[str] = mapped_column(String(128))
    weights_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    verdict: Mapped[str] = mapped_column(String(16))
    defect_class: Mapped[str] = mapped_column(String(32))
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    box_x0: Mapped[float | None] = mapped_column(Float, nullable=True)
    box_y0: Mapped[float | None] = mapped_column(Float, nullable=True)
    box_x1: Mapped[float | None] = mapped_column(Float, nullable=True)
    box_y1: Mapped[float | None] = mapped_column(Float, nullable=True)
    crop_path: Mapped[str | None] = mapped_column(String(512), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the approved make's window the part was compared with (its file's name under the rule set's `alternates:`),
    # None: its golden board's. Revision 0011, deferred as inspections' later columns are
    alternate: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)
    inspection: Mapped[Inspection] = relationship(back_populates="parts")

    @property
    def approved_make(self) -> str | None:
        """`alternate` where it was read with the part (the store reads it where the schema has it), else None:
        never a query of its own, which a database before 0011 would refuse."""
        return None if "alternate" in sa_inspect(self).unloaded else self.alternate

    # a board's parts, and what a line's rates count, read from the index alone
    __table_args__ = (Index("ix_component_results_component_type_verdict", "component_type", "verdict"),
                      Index("ix_component_results_inspection_id_type_verdict", "inspection_id", "component_type",
                            "verdict"))


class DeadLetter(Base):
    """A board result the database refused (a value too long for its column, ...), kept whole with the reason,
    so one bad row never blocks the results behind it and nothing refused is thrown away."""

    __tablename__ = "dead_letters"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    uuid: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reason: Mapped[str] = mapped_column(Text)
    payload: Mapped[str] = mapped_column(Text)  # the board as JSON (records.BoardRecord.to_json)


class Review(Base):
    """An operator's word on one part's call: a confirmed defect, a false call, or an escape (a missed defect),
    optionally with the class the part really has. One review a part; reviewing again replaces it. The expert and
    weights hash are copied from the part, so a review still names what it judged after the expert is retrained."""

    __tablename__ = "reviews"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    component_result_id: Mapped[int] = mapped_column(
        Key, ForeignKey("component_results.id", ondelete="CASCADE"), unique=True)
    inspection_uuid: Mapped[str] = mapped_column(String(36), index=True)
    ref: Mapped[str] = mapped_column(String(32))
    component_type: Mapped[str] = mapped_column(String(128), index=True)
    expert: Mapped[str] = mapped_column(String(128))
    weights_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    call: Mapped[str] = mapped_column(String(16))  # confirmed | false_call | escape
    correct_class: Mapped[str | None] = mapped_column(String(32), nullable=True)
    reviewer: Mapped[str] = mapped_column(String(64), default="")
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    # where the defect is, as the reviewer drew it on the part's kept crop (x0, y0, x1, y1 in crop pixels, the frame
    # of the part's own box_* columns): what teaches a detector an escape. Revision 0012, deferred as the parts'
    # later columns are
    box_x0: Mapped[float | None] = mapped_column(Float, nullable=True, deferred=True)
    box_y0: Mapped[float | None] = mapped_column(Float, nullable=True, deferred=True)
    box_x1: Mapped[float | None] = mapped_column(Float, nullable=True, deferred=True)
    box_y1: Mapped[float | None] = mapped_column(Float, nullable=True, deferred=True)

    # all the boxes drawn (JSON, results/review_boxes.py: each [x0, y0, x1, y1] and its class where it names one), the
    # first also in box_* for the releases before it. Revision 0013, deferred alike
    boxes: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)

    @property
    def drawn_boxes(self) -> tuple[ReviewBox, ...]:
        """The reviewer's boxes where they were read with the review (the store reads the columns the schema has),
        else none: never a query of its own, which a database before 0012 would refuse."""
        unloaded = sa_inspect(self).unloaded
        first = None if "box_x0" in unloaded or self.box_x0 is None else \
            (self.box_x0, self.box_y0, self.box_x1, self.box_y1)
        return read_stored(None if "boxes" in unloaded else self.boxes, first)  # type: ignore[arg-type]


class SchemaRecord(Base):
    """What `inspector db upgrade` last did: the revision, the oldest release schema whose code still runs on it
    (results/revisions.py), which release upgraded it and when. A box of an older release reads this to know it
    may keep running on a schema it has never seen."""

    __tablename__ = "schema_record"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    revision: Mapped[str] = mapped_column(String(32))
    runs_with: Mapped[str] = mapped_column(String(32))
    release: Mapped[str] = mapped_column(String(64))
    upgraded_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ExpertRelease(Base):
    """A version of an expert's weights the plant has released to its lines: the file itself, kept where every
    box can read it (the plant's database), under its sha256. A box installs a release only after checking the
    bytes against the hash (`inspector zoo publish` puts one here, `zoo rollout` serves it line by line)."""

    __tablename__ = "expert_releases"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    expert: Mapped[str] = mapped_column(String(128))
    weights_sha256: Mapped[str] = mapped_column(String(64))
    weights: Mapped[bytes] = mapped_column(LargeBinary)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    published_at: Mapped[datetime] = mapped_column(UtcDateTime)
    published_by: Mapped[str] = mapped_column(String(64))
    note: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (UniqueConstraint("expert", "weights_sha256"),)


class RolloutStep(Base):
    """One step of rolling an expert's version out to the plant's lines: who, when, which line, from and to which
    version, and what came of it (switched, kept, rolled_back, failed, not_reached), with the rates it judged by."""

    __tablename__ = "rollout_steps"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    rollout: Mapped[str] = mapped_column(String(36), index=True)  # one rollout's id, shared by its steps
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    by: Mapped[str] = mapped_column(String(64))
    expert: Mapped[str] = mapped_column(String(128))
    line: Mapped[str] = mapped_column(String(64))
    station: Mapped[str] = mapped_column(String(64))
    from_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    to_sha256: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON: rates before and after, the reason


class User(Base):
    """A person who signs in: the dashboard and the APIs know them by name and role (inspector/access). The
    password is an argon2 hash; a disabled user keeps their rows (the audit trail names them) but signs in no more."""

    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))  # operator | engineer | admin (inspector/access/roles.py)
    password_hash: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    disabled_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class ApiToken(Base):
    """One user's bearer token for the APIs (or a dashboard's session): only its sha256 is kept; `key` is the
    token's public prefix, so a request finds its row without scanning. Revocable and expiring."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    key: Mapped[str] = mapped_column(String(16), unique=True)
    secret_sha256: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[int] = mapped_column(Key, ForeignKey("users.id"))
    label: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class AuditEvent(Base):
    """One change to the line, append-only: who, when, from where, what, before and after, why. Each row carries
    the hash of the one before and its own hash over both (inspector/access/audit.py), so an edited, inserted or
    deleted row breaks the chain where it happened. `prev_sha256` is unique: two writers cannot fork the chain."""

    __tablename__ = "audit_events"
    id: Mapped[int] = mapped_column(Key, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    actor: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    origin: Mapped[str] = mapped_column(String(256))  # where from: the client's address and the way in
    line: Mapped[str] = mapped_column(String(64))
    station: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(32), index=True)
    subject: Mapped[str] = mapped_column(String(256))
    before: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON
    after: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    prev_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    sha256: Mapped[str] = mapped_column(String(64))


class RuleText(Base):
    """Every rule set a line ran, its text kept once under its hash, so each stored result (its
    `ruleset_version`: the text's sha256, first 12 hex digits) resolves to the rules that produced it."""

    __tablename__ = "rule_texts"
    version: Mapped[str] = mapped_column(String(12), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    recipe: Mapped[str] = mapped_column(String(128))
    text: Mapped[str] = mapped_column(Text)
    first_seen: Mapped[datetime] = mapped_column(UtcDateTime)
