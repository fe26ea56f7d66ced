"""Keeping the crops of flagged parts as PNG files, so a quality engineer can look at what was rejected.

Runs on the result writer's thread, before the board is stored, so a stored
crop_path always names a file that was written. A crop that cannot be written
(disk full, permissions) leaves crop_path empty and is counted; the board's
result is stored regardless: the verdict matters more than its picture.
"""
from __future__ import annotations

import re
import threading
from pathlib import Path

import cv2

from .records import BoardRecord

KEEP_MODES = ("failed", "all", "none")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("._") or "unnamed"


class CropKeeper:
    def __init__(self, root: str | Path, keep: str = "failed") -> None:
        if keep not in KEEP_MODES:
            raise ValueError(f"unknown crop keeping {keep!r}: use one of {', '.join(KEEP_MODES)}")
        self.root, self.keep = Path(root), keep
        self._lock = threading.Lock()
        self.kept = 0
        self.failed = 0
        self.last_error: str | None = None

    def wanted(self, verdict: str) -> bool:
        return self.keep == "all" or (self.keep == "failed" and verdict != "pass")

    def __call__(self, board: BoardRecord) -> None:
        """Write the wanted crops of one board and set their parts' crop_path; drops the in-memory crops."""
        crops, board.crops = board.crops, {}
        # one folder per inspection: a board inspected twice (or a camera's serials after a restart) never
        # overwrites the crops of another inspection
        folder = (self.root / board.started_at.strftime("%Y-%m-%d")
                  / f"{_safe(board.board_serial)}-{_safe(board.inspection_id)[:8]}")
        for part in board.parts:
            image = crops.get(part.ref)
            if image is None or not self.wanted(part.verdict):
                continue
            path = folder / f"{_safe(part.ref)}.png"
            try:
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
