"""The record of every rollout step, in the plant's database: who rolled which expert version out to which
line, when, from which version, and what came of it, with the rates it was judged by."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .schema import RolloutStep
from .store import ResultStore

OUTCOMES = ("switched", "kept", "rolled_back", "failed", "not_reached")


@dataclass(frozen=True)
class Step:
    rollout: str
    at: datetime
    by: str
    expert: str
    line: str
    station: str
    from_sha256: str | None
    to_sha256: str
    outcome: str
    detail: dict[str, Any]


def record(store: ResultStore, step: Step) -> None:
    if step.outcome not in OUTCOMES:
        raise ValueError(f"outcome {step.outcome!r} is not one of {', '.join(OUTCOMES)}")
    with Session(store.engine) as s, s.begin():
        s.add(RolloutStep(rollout=step.rollout, at=step.at, by=step.by[:64], expert=step.expert, line=step.line,
                          station=step.station, from_sha256=step.from_sha256, to_sha256=step.to_sha256,
                          outcome=step.outcome, detail=json.dumps(step.detail, default=str)))


def history(store: ResultStore, rollout: str | None = None, limit: int = 100) -> list[Step]:
    """Steps, oldest first: one rollout's, or the newest `limit` of all."""
    with Session(store.engine) as s:
        q = select(RolloutStep)
        q = q.where(RolloutStep.rollout == rollout).order_by(RolloutStep.id) if rollout else \
            q.order_by(RolloutStep.id.desc()).limit(limit)
        rows = list(s.scalars(q))
    rows.sort(key=lambda r: r.id)
    return [Step(r.rollout, r.at, r.by, r.expert, r.line, r.station, r.from_sha256, r.to_sha256, r.outcome,
                 json.loads(r.detail) if r.detail else {}) for r in rows]


def now() -> datetime:
    return datetime.now(timezone.utc)
