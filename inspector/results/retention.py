"""Retention: what a line box deletes so that months of running never fill its disk.

Boards (with their parts) older than the retention are deleted from the database in small transactions,
kept crops by their day folder (crops/YYYY-MM-DD/), and archived images (a watched folder's inspected/) by
their modification time. `inspector db prune` runs this; the installer schedules it daily with a systemd
timer. The dead letters are never pruned: they wait for a person.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from .scope import Scope
from .store import ResultStore


@dataclass
class PruneReport:
    boards: int = 0
    crop_days: int = 0
    images: int = 0
    errors: int = 0
    last_error: str | None = None
    scope: str = ""  # which line's boards: its label

    def line(self, days: float) -> str:
        out = (f"pruned what is older than {days:g} days: {self.boards} boards ({self.scope}), "
               f"{self.crop_days} day(s) of crops, "
               f"{self.images} archived image(s)")
        return out + (f"; {self.errors} not removed, last: {self.last_error}" if self.errors else "")


def prune(store: ResultStore | None, crops: Path | None, archive: Path | None, days: float,
          scope: Scope) -> PruneReport:
    """Boards of `scope` (the box's own line by default: a shared database holds other lines' boards too), and
    this box's own crops and archived images, older than `days`."""
    if days <= 0:
        raise ValueError(f"--retain-days must be more than 0, got {days:g}")
    cutoff = datetime.now(timezone.utc) - timedelta(days=days)
    report = PruneReport(scope=scope.label())
    if store is not None:
        report.boards = store.prune(cutoff, scope)
    if crops is not None and crops.is_dir():
        for folder in sorted(crops.iterdir()):
            day = _day(folder.name)
            if folder.is_dir() and day is not None and day < cutoff.date():
                try:
                    shutil.rmtree(folder)
                    report.crop_days += 1
                except OSError as exc:
                    report.errors += 1
                    report.last_error = f"{folder}: {exc.strerror}"
    if archive is not None and archive.is_dir():
        limit = cutoff.timestamp()
        for path in archive.iterdir():
            try:
                if path.is_file() and path.stat().st_mtime < limit:
                    path.unlink()
                    report.images += 1
            except OSError as exc:
                report.errors += 1
                report.last_error = f"{path}: {exc.strerror}"
    return report


def _day(name: str) -> date | None:
    try:
        return date.fromisoformat(name)
    except ValueError:
        return None
