"""The results tables (SQLAlchemy 2 declarative). Change them only with a new Alembic revision."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class Inspection(Base):
    """One board through the line."""

    __tablename__ = "inspections"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    line: Mapped[str] = mapped_column(String(64))
    station: Mapped[str] = mapped_column(String(64))
    board_serial: Mapped[str] = mapped_column(String(128), index=True)
    recipe: Mapped[str] = mapped_column(String(128))
    ruleset_version: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(16), index=True)
    source: Mapped[str] = mapped_column(String(512), default="")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)  # board-level: registration failed, ...
    reg_transform: Mapped[str | None] = mapped_column(String(256), nullable=True)  # JSON 2x3, recipe px -> image px
    reg_residual_px: Mapped[float | None] = mapped_column(Float, nullable=True)
    reg_fiducials: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON {name: [x, y]} found, image px
    parts: Mapped[list[ComponentResult]] = relationship(back_populates="inspection", cascade="all, delete-orphan")


class ComponentResult(Base):
    """One reference designator's verdict on one board."""

    __tablename__ = "component_results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    inspection_id: Mapped[int] = mapped_column(ForeignKey("inspections.id", ondelete="CASCADE"))
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
    inspection: Mapped[Inspection] = relationship(back_populates="parts")

    __table_args__ = (Index("ix_component_results_inspection", "inspection_id"),)
