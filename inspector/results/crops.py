"""Keeping the crops of flagged parts as PNG files, so a quality engineer can look at what was rejected.

Runs on the result writer's thread, before the board is stored, so a stored
crop_path always names a file that was written. A crop that cannot be written
(disk full, permissions) leaves crop_path empty and is counted; the board's
result is stored regardless: the verdict matters more than its picture.
Below a free-disk floor no crop is written at all (counted as skipped, and
health says so), so pictures never take the space the spool and the database
need.
"""
from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

from .records import BoardRecord

KEEP_MODES = ("failed", "all", "none")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("._") or "unnamed"


FREE_CHECK_S = 5.0  # how often the free space is looked at


class CropKeeper:
    def __init__(self, root: str | Path, keep: str = "failed", min_free_mb: float = 512.0) -> None:
        if keep not in KEEP_MODES:
            raise ValueError(f"unknown crop keeping {keep!r}: use one of {', '.join(KEEP_MODES)}")
        self.root, self.keep, self.min_free_mb = Path(root), keep, min_free_mb
        self._lock = threading.Lock()
        self.kept = 0
        self.failed = 0
        self.skipped_low_disk = 0
        self.low_disk: str | None = None  # why crops are not kept now (free space under the floor)
        self.last_error: str | None = None
        self._checked_at = -FREE_CHECK_S

    def _space_ok(self) -> bool:
        now = time.monotonic()
        if now - self._checked_at >= FREE_CHECK_S:
            self._checked_at = now
            probe = self.root if self.root.exists() else self.root.parent
            while not probe.exists() and probe != probe.parent:
                probe = probe.parent
            try:
                free_mb = shutil.disk_usage(probe).free / 2**20
            except OSError:
                free_mb = float("inf")
            self.low_disk = (None if free_mb >= self.min_free_mb else
                             f"{free_mb:.0f} MiB free under {probe}, below the floor of {self.min_free_mb:.0f} MiB: "
                             "crops are not kept until space returns (inspector db prune, or --min-free-mb)")
        return self.low_disk is None

    def wanted(self, verdict: str) -> bool:
        return self.keep == "all" or (self.keep == "failed" and verdict != "pass")

    def __call__(self, board: BoardRecord) -> None:
        """Write the wanted crops of one board and set their parts' crop_path; drops the in-memory crops."""
        crops, board.crops = board.crops, {}
        # one folder per inspection: a board inspected twice (or a camera's serials after a restart) never
        # overwrites the crops of another inspection
        folder = (self.root / board.started_at.strftime("%Y-%m-%d")
                  / f"{_safe(board.board_serial)}-{_safe(board.inspection_id)[:8]}")
        wanted = [p for p in board.parts if crops.get(p.ref) is not None and self.wanted(p.verdict)]
        if wanted and not self._space_ok():
            with self._lock:
                self.skipped_low_disk += len(wanted)
            return
        for part in wanted:
            image = crops[part.ref]
            path = folder / f"{_safe(part.ref)}.png"
            try:
                import cv2  # here: the CLI reads KEEP_MODES without OpenCV

                ok, png = cv2.imencode(".png", image)
                if not ok:
                    raise OSError(f"PNG encoding failed for a {image.shape} crop")
                folder.mkdir(parents=True, exist_ok=True)
                path.write_bytes(png.tobytes())
            except OSError as exc:
                with self._lock:
                    self.failed += 1
                    self.last_error = f"cannot keep crop {path}: {exc.strerror or exc}"
                continue
            part.crop_path = str(path)
            with self._lock:
                self.kept += 1
