"""OpenCV VideoCapture: a device index ("0"), an RTSP/HTTP URL or a video file, running free.

A free-running stream delivers every frame, board or not; `camera/gate.py` decides which frames are boards.
When a live camera stops delivering it is reopened with exponential backoff (up to `max_reconnects`,
counted, the cause named); a video file simply ends. A frame has no serial of its own: the line reads the
board's code (ingest/identity.py), or the board goes by NOREAD-<inspection id>.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import cv2

from ..ingest.sources import Frame, Source
from .last_frame import LastFrame


class CameraSource(Source):
    def __init__(self, uri: str, max_reconnects: int = 5, backoff_s: float = 0.5, frames: int | None = None) -> None:
        if max_reconnects < 0:
            raise ValueError(f"camera reconnects must be 0 or more, got {max_reconnects}")
        self.uri = uri
        self.max_reconnects, self.backoff_s, self.frames = max_reconnects, backoff_s, frames
        super().__init__(f"camera:{uri}")
        self.is_file = Path(uri).is_file()
        self.last: LastFrame | None = None  # the newest frame, board or not (the live view); no settings to say

    def _open(self) -> cv2.VideoCapture:
        target: int | str = int(self.uri) if self.uri.isdigit() else self.uri
        return cv2.VideoCapture(target)

    def __iter__(self) -> Iterator[Frame]:
        cap = self._open()
        failures, n = 0, 0
        try:
            while (self.frames is None or n < self.frames) and not self._stop:
                ok, image = cap.read() if cap.isOpened() else (False, None)
                if ok and image is not None:
                    failures = 0
                    n += 1
                    self.counters.delivered()
                    self.last = LastFrame(image, time.monotonic())
                    yield Frame(image, "", self.name, serial_origin="none")
                    continue
                if self.is_file and cap.isOpened():
                    return  # end of the video file
                if failures >= self.max_reconnects:
                    self.counters.fail(f"camera {self.uri} gave no frame after {failures} reconnects; check the "
                                       "cable, the URL or the device index")
                    self.counters.gave_up = self.counters.last_error
                    return
                failures += 1
                self.counters.reconnects += 1
                self.counters.fail(f"camera {self.uri} delivered no frame; reconnect {failures} of "
                                   f"{self.max_reconnects}")
                cap.release()
                time.sleep(self.backoff_s * 2 ** (failures - 1))
                cap = self._open()
        finally:
            cap.release()

    def status(self) -> dict:
        """What /status and the dashboard show of the camera."""
        return {"device": self.uri, "connected": self.last is not None and not self.counters.gave_up,
                "reconnects": self.counters.reconnects, "settings": None}
