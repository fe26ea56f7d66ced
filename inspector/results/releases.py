"""Expert versions the plant releases to its lines, kept in the plant's database under their sha256.

One place the plant controls says which versions a line may serve: `inspector zoo publish` puts a version's
weights file here, and a box installs a release only after the bytes it read hash to the release's sha256, so
a damaged transfer or an edited row is refused, never served.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from .errors import StoreUnavailable
from .schema import ExpertRelease
from .store import ResultStore


class ReleaseError(ValueError):
    """No such release, or bytes that do not match their hash."""


@dataclass(frozen=True)
class Release:
    expert: str
    weights_sha256: str
    size_bytes: int
    published_at: datetime
    published_by: str
    note: str | None


def publish(store: ResultStore, expert: str, data: bytes, by: str, note: str | None = None) -> Release:
    """Release `data` as a version of `expert` (idempotent: publishing the same bytes again changes nothing)."""
    sha = hashlib.sha256(data).hexdigest()
    store.ready()
    try:
        with Session(store.engine) as s, s.begin():
            have = s.scalar(select(ExpertRelease).where(ExpertRelease.expert == expert,
                                                        ExpertRelease.weights_sha256 == sha))
            if have is None:
                have = ExpertRelease(expert=expert, weights_sha256=sha, weights=data, size_bytes=len(data),
                                     published_at=datetime.now(timezone.utc), published_by=by[:64], note=note)
                s.add(have)
            return _release(have)
    except IntegrityError:  # published at the same moment by someone else: it is there
        return find(store, expert, sha)
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"cannot publish to {store.safe_url}: {type(exc).__name__}: {exc}") from None


def find(store: ResultStore, expert: str, sha: str) -> Release:
    """The release of `expert` whose hash starts with `sha` (8+ hex digits); ReleaseError when not exactly one."""
    with Session(store.engine) as s:
        rows = _matching(s, expert, sha)
        return _release(rows[0])


def fetch(store: ResultStore, expert: str, sha: str) -> tuple[Release, bytes]:
    """The release and its weights, checked: ReleaseError when the bytes do not hash to the release's sha256."""
    with Session(store.engine) as s:
        row = _matching(s, expert, sha)[0]
        data = bytes(row.weights)
        actual = hashlib.sha256(data).hexdigest()
        if actual != row.weights_sha256:
            raise ReleaseError(f"release {row.weights_sha256[:12]} of {expert} is damaged: its {len(data)} bytes hash "
                               f"to {actual[:12]}; publish it again (inspector zoo publish)")
        return _release(row), data


def releases(store: ResultStore, expert: str | None = None) -> list[Release]:
    with Session(store.engine) as s:
        q = select(ExpertRelease).order_by(ExpertRelease.published_at)
        if expert is not None:
            q = q.where(ExpertRelease.expert == expert)
        return [_release(r) for r in s.scalars(q)]


def _matching(s: Session, expert: str, sha: str) -> list[ExpertRelease]:
    sha = sha.strip().lower()
    if len(sha) < 8:
        raise ReleaseError(f"give at least 8 hex digits of the weights hash, not {sha!r}")
    rows = list(s.scalars(select(ExpertRelease).where(ExpertRelease.expert == expert,
                                                      ExpertRelease.weights_sha256.startswith(sha))))
    if len(rows) != 1:
        raise ReleaseError(f"the plant has {'no' if not rows else 'more than one'} release {sha} of {expert}; "
                           "publish it first (inspector zoo publish --expert E --version HASH)")
    return rows


def _release(r: ExpertRelease) -> Release:
    return Release(r.expert, r.weights_sha256, r.size_bytes, r.published_at, r.published_by, r.note)
