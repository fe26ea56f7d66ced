"""The camera over the kiosk's API: its state and live view for anyone who may read /status, its settings for
an engineer's token; each change recorded in the audit trail.

- `GET /camera`: the camera's state and settings (SFNC names), the board gate's counters, the serials read, and
  `sets`: the station's settings and what the rule set in force asks for over them (its `camera:`).
- `GET /camera/frame`: the newest frame the camera delivered, board or not, as a JPEG (base64 in JSON).
- `GET /camera/photo`: the same frame as a lossless PNG that says the settings the camera exposed it with (a golden
  photo for teaching, camera/photo_settings.py), or `settings_unsure` where it was under way at a changeover.
- `POST /camera/settings`: new station settings (JSON of SFNC names), taken by the running camera between two
  frames with the set in force's over them; refused settings leave the camera as it was; a key the set in force
  asks for is refused (409: its rule file says it); applied settings replace the settings file atomically, so a
  restarted kiosk starts with them (a file the kiosk cannot write puts the camera back: nothing changed).
"""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import cv2
import yaml

from ..access.audit import Change
from ..app.camera_changeover import SetByRecipe
from ..app.changes import ChangeLog
from ..app.service import LineService
from ..app.snapshot import camera_state
from ..camera.photo_settings import photo_png
from ..camera.photos import newest_frame, newest_photo
from ..camera.settings import CameraSettings
from ..results.errors import StoreUnavailable
from ..runtime.diskio import write_atomically
from ..yamlio import ConfigError
from .http import Call, HttpError, json_object


class CameraControl:
    def __init__(self, service: LineService, settings_path: str | None = None, log: ChangeLog | None = None) -> None:
        self.service, self.log = service, log
        self.settings_path = Path(settings_path) if settings_path else None

    @property
    def camera(self) -> Any:
        return self.service.source.origin

    def document(self) -> dict[str, Any]:
        return {"source": self.service.source.name, **camera_state(self.service),
                "settings_file": self.settings_path.name if self.settings_path else None}

    def frame(self) -> dict[str, Any]:
        newest = newest_frame(self.camera)
        if newest is None:
            raise HttpError(404, f"source {self.service.source.name} has delivered no camera frame yet")
        image, age = newest
        ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 80])
        if not ok:
            raise HttpError(500, "the frame could not be encoded")
        return {"width": int(image.shape[1]), "height": int(image.shape[0]), "age_s": age,
                "jpeg_base64": base64.b64encode(jpeg.tobytes()).decode("ascii")}

    def photo(self) -> dict[str, Any]:
        """The newest frame as a lossless golden photo saying the settings it was taken with (camera/photos.py)."""
        newest = newest_photo(self.service.source)
        if newest is None:
            raise HttpError(404, f"source {self.service.source.name} has delivered no camera frame yet")
        image, taken, age, unsure = newest
        return {"width": int(image.shape[1]), "height": int(image.shape[0]), "age_s": age,
                "taken_with": None if taken is None else taken.to_json(), "settings_unsure": unsure,
                "png_base64": base64.b64encode(photo_png(image, taken)).decode("ascii")}

    def _keep(self, station: CameraSettings) -> None:
        """The station's settings (not a rule set's over them) kept for the next start."""
        if self.settings_path is not None:
            kept = {k: v for k, v in station.to_json().items() if v is not None}
            write_atomically(self.settings_path, yaml.safe_dump(kept, sort_keys=False).encode("utf-8"))

    def apply_settings(self, call: Call) -> dict[str, Any]:
        camera = self.camera
        if not hasattr(camera, "apply"):
            raise HttpError(409, f"source {self.service.source.name} has no settings to change (a GenICam camera "
                                 "has: --source genicam:SERIAL)")
        doc = json_object(call.body, 'JSON of GenICam SFNC names, e.g. {"ExposureTime": 800, "Gain": 6}')
        if self.log is not None:
            try:
                self.log.ready()
            except StoreUnavailable as exc:
                raise HttpError(503, str(exc)) from None
        try:
            held, settings = self.service.camera_sets.change_station(doc, "the posted camera settings", self._keep)
        except SetByRecipe as exc:
            raise HttpError(409, str(exc)) from None
        except ConfigError:
            raise  # 422, naming the value
        except ValueError as exc:  # the camera's refusal
            raise HttpError(422, str(exc)) from None
        before = held.to_json()
        recorded = {} if self.log is None else self.log.record(
            call.who, Change("camera", self.service.source.name, before, settings.to_json(), call.reason))
        return {"applied": True, "settings": settings.to_json(), **recorded}
