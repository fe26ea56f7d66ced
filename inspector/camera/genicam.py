"""An industrial camera (GigE Vision, USB3 Vision, any GenTL producer) through Basler's pylon binding pypylon.

The device is named by its serial number or its index in the enumeration (`genicam:40012345`, `genicam:0`).
Its settings (camera/settings.py, GenICam SFNC names) are written on every open, so a camera swapped on the
line comes up as the recipe wants it. Free running, every frame goes to the board gate; triggered, every frame
is one board: a pulse on `Line1` (a board-present sensor) or a software trigger (`trigger()`, which the PLC's
Trigger tag or the line calls). Mono and Bayer formats are converted to BGR; a frame of another size than the
recipe's is mapped by the stated `Scale`. A camera that vanishes (cable pulled, power cut) is reopened with
exponential backoff, each attempt counted and named; after `max_reconnects` attempts in a row the source ends
and says why (the kiosk exits 1 and systemd restarts it). pypylon's wheel ships the transport layers and the
camera emulator (`PYLON_CAMEMU=N`) the tests drive.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import fields
from typing import Any

import cv2
import numpy as np

from ..extras import require
from ..ingest.sources import Frame, Source
from .last_frame import LastFrame
from .photo_settings import IMAGE_KEYS
from .settings import IMAGING, REGION, CameraSettings, other_spelling

LIVE = ("ExposureTime", "Gain")  # features a grabbing camera takes (SFNC: writable while it acquires)
UNDER_WAY = 3  # frames that may be under way when exposure or gain is written: one taken from the camera but not yet
# counted, one being read out, one being exposed (a frame numbered up to the newest counted + the ready ones + this is
# unsure: part of it may be exposed at the old values)
TRIGGERED_WAIT_MS = 100  # a triggered camera's grab waits this long for a frame before the loop looks again (its
# stop, settings that reopen the camera: a changeover's region waits at most this before the reopen)

try:  # the genicam extra (240 MB of transport layers): a box without it still runs every other source
    from pypylon import genicam, pylon
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    genicam = pylon = None  # type: ignore[assignment]


class CameraNotFound(RuntimeError):
    """No camera answers to the name; the message lists the ones that do."""


def list_cameras() -> list[dict[str, str]]:
    """Every camera the transport layers see: serial, model, vendor, class (what `genicam:` takes)."""
    _need_pylon()
    return [{"serial": d.GetSerialNumber(), "model": d.GetModelName(), "vendor": d.GetVendorName(),
             "class": d.GetDeviceClass(), "name": d.GetFriendlyName()}
            for d in pylon.TlFactory.GetInstance().EnumerateDevices()]


def _need_pylon() -> None:
    if pylon is None:
        require("genicam")  # MissingExtra with the pip line


class GenICamSource(Source):
    def __init__(self, device: str, settings: CameraSettings, max_reconnects: int = 5, backoff_s: float = 0.5,
                 board_size: tuple[int, int] | None = None, frames: int | None = None) -> None:
        _need_pylon()
        if max_reconnects < 0:
            raise ValueError(f"camera reconnects must be 0 or more, got {max_reconnects}")
        self.device, self.settings = device, settings
        self.max_reconnects, self.backoff_s, self.frames = max_reconnects, backoff_s, frames
        self.board_size = board_size
        self.camera: Any = None  # the open pylon.InstantCamera, or None
        self.connected = False
        self.triggers = 0  # software triggers fired
        self._trigger_times: deque[float] = deque(maxlen=64)  # monotonic times of triggers not yet answered
        self._lock = threading.RLock()  # reentrant: apply writes exposure under it, and the write marks its frames
        self.info: dict[str, str] = {}  # serial, model, vendor: set at the first open (never opened: empty)
        # the newest frame, board or not (the live view), with what it was exposed with: a golden photo says what
        # it was exposed at, not what the camera runs at when asked (a frame from before a changeover: the old)
        self.last: LastFrame | None = None
        self._exposing: dict[str, Any] | None = None  # the open camera's image settings, read back at open and write
        self._opens = 0  # the camera's opens: pylon numbers a new grab's frames from 1
        self._number = 0  # pylon's number of the newest frame taken from the open camera
        self._sure_after = 0  # frames numbered up to this were under way when exposure or gain last changed
        self._written_at = float("-inf")  # time.monotonic() of that change (a software trigger after it is sure)
        self._next: CameraSettings | None = None  # settings asked for, taken between two frames
        self._applied = threading.Condition()
        self._applying = threading.Lock()  # one apply at a time (a changeover's, an engineer's)
        self._apply_result: str | None = None
        # the frame loop's while it opens and grabs; free while a frame waits for its taker (a paused line, a full
        # queue, a changeover holding boards), when whoever asks for settings takes them itself
        self._use = threading.Lock()
        self._running = False  # the frame loop runs
        self.own: dict[str, Any] = {}  # the camera's own values of the features settings may set (read at first open)
        self._written: set[str] = set()  # features settings set: back to their own values where later ones leave them
        super().__init__(f"genicam:{device}")

    # -- the camera ------------------------------------------------------------------------------------------
    def _find(self) -> Any:
        factory = pylon.TlFactory.GetInstance()
        devices = factory.EnumerateDevices()
        for d in devices:
            if d.GetSerialNumber() == self.device:
                return factory.CreateDevice(d)
        if self.device.isdigit() and len(self.device) < 4 and int(self.device) < len(devices):
            return factory.CreateDevice(devices[int(self.device)])
        seen = ", ".join(f"{d.GetSerialNumber()} ({d.GetModelName()})" for d in devices) or "none"
        raise CameraNotFound(f"no camera with serial or index {self.device!r}; cameras seen: {seen}. Check the cable "
                             "and power, and that the camera's network is this box's (GigE Vision)")

    def _open(self) -> None:
        camera = pylon.InstantCamera(self._find())
        camera.Open()
        try:
            self._configure(camera)
            camera.StartGrabbing(pylon.GrabStrategy_OneByOne)
        except Exception:
            camera.Close()
            raise
        info = camera.GetDeviceInfo()
        self.info = {"serial": info.GetSerialNumber(), "model": info.GetModelName(), "vendor": info.GetVendorName()}
        exposing = self._read_back(camera)
        with self._lock:  # a new grab numbers its frames from 1, every one taken with what was just written
            self.camera, self.connected = camera, True
            self._exposing, self._number, self._sure_after = exposing, 0, 0
            self._opens += 1

    def _configure(self, camera: Any) -> None:
        """Write the settings; a feature they leave (None) that earlier settings set goes back to the camera's own
        value, so one product's exposure does not stay for the next (a camera keeps its features while powered)."""
        s = self.settings
        nodes = camera.GetNodeMap()
        if not self.own:
            self.own = _values(nodes, IMAGING)
        if s.ImageFilename is not None:  # the emulator's test images
            _set(nodes, "ImageFilename", s.ImageFilename)
            _set(nodes, "ImageFileMode", "On")
            _set(nodes, "TestImageSelector", "Off", optional=True)
        self._write(nodes, s)

    def _write(self, nodes: Any, settings: CameraSettings, only: Collection[str] | None = None) -> None:
        """The features of `settings` (those in `only`, or all) written in the order a camera takes them; one they
        leave that earlier settings set takes the camera's own value back, where the camera takes it."""
        asked = {name for name, _ in settings.camera_features() if only is None or name in only}
        features = [(name, value) for name, value in settings.camera_features(
            {k: v for k, v in self.own.items() if k in self._written}) if only is None or name in only]
        if any(name in REGION for name, _ in features):  # offsets first to 0: a wider region fits at any offset
            for name in ("OffsetX", "OffsetY"):
                _set(nodes, name, 0, optional=True)
        for name, value in features:
            if name == "PixelFormat" and not _has_symbol(nodes, name, value):
                value = other_spelling(value)  # BGR8 as an older camera (the emulator, GigE) spells it, or back
            if name == "Gain" and not _writable(nodes, "Gain") and _writable(nodes, "GainRaw"):
                continue  # a camera with raw gain steps only: leave its gain
            _set(nodes, name, value, optional=name not in asked)  # its own value back where the camera takes it
        self._written.update(asked)

    def _close(self) -> None:
        with self._lock:
            camera, self.camera, self.connected = self.camera, None, False
        if camera is None:
            return
        try:
            camera.StopGrabbing()
            camera.Close()
        except Exception:  # noqa: BLE001 - a vanished camera fails to close; it is gone either way
            pass

    def trigger(self) -> float | None:
        """Fire one software trigger (the PLC asked, or the line): its time.monotonic(), which the frame it takes
        carries as `triggered_at`; None when the camera cannot take one now (not open, not ready in 1 s)."""
        if not self.settings.software_trigger:
            raise RuntimeError(f"camera {self.device} is not in software-trigger mode (TriggerMode "
                               f"{self.settings.TriggerMode}, TriggerSource {self.settings.TriggerSource})")
        with self._lock:
            camera = self.camera
            if camera is None:
                return None
            try:
                if not camera.WaitForFrameTriggerReady(1000, pylon.TimeoutHandling_Return):
                    return None
                at = time.monotonic()
                camera.ExecuteSoftwareTrigger()
                self._trigger_times.append(at)  # under the lock: the grab cannot take the frame before this
            except Exception as exc:  # noqa: BLE001 - a camera going away under a trigger
                self.counters.fail(f"software trigger on camera {self.device} failed: {_short(exc)}")
                return None
            self.triggers += 1
            return at

    def apply(self, settings: CameraSettings, timeout: float = 15.0) -> str | None:
        """New settings for the running camera: exposure and gain written to the open camera at once (as a software
        trigger is written while the frame loop's grab waits), anything else between two frames by reopening it; the
        reason when the camera refused them (the previous settings stay in force), None when applied."""
        if settings.triggered != self.settings.triggered:
            return ("switching between free running and triggered changes how frames become boards (the gate); "
                    "save the settings and restart the line")
        with self._applying:
            return self._apply(settings, timeout)

    def _apply(self, settings: CameraSettings, timeout: float) -> str | None:
        with self._lock:  # exposure and gain written to the open camera now, as a software trigger is written
            camera = self.camera  # while the frame loop's grab waits (the lock keeps it from being closed meanwhile)
            if camera is not None and _changed(self.settings, settings) <= set(LIVE):
                return self._write_live(camera, self.settings, settings)
        with self._applied:
            self._next, self._apply_result = settings, None
        deadline = time.monotonic() + timeout
        while True:
            with self._applied:
                if self._next is None:  # taken, by the frame loop or below
                    return self._apply_result
            if self._use.acquire(timeout=0.05):  # the frame loop waits for a frame's taker, or does not run
                try:
                    if self._running and self.camera is not None:
                        self._take_settings()
                    else:  # not open (not started, or reconnecting): its next open takes them
                        with self._applied:
                            if self._next is not None:
                                self.settings, self._next = self._next, None
                finally:
                    self._use.release()
            elif time.monotonic() > deadline:
                with self._applied:
                    self._next = None
                return f"the camera did not take the settings within {timeout:g} s"

    def _take_settings(self) -> None:
        """Between two frames: the settings asked for taken (exposure and gain written to the grabbing camera, as
        SFNC lets them be; anything else by reopening it); back to the old ones when refused."""
        with self._applied:
            new, old = self._next, self.settings
        if new is None:
            return
        if self.camera is not None and _changed(old, new) <= set(LIVE):
            result = self._write_live(self.camera, old, new)
        else:
            result = self._reopen(old, new)
        with self._applied:
            self._next, self._apply_result = None, result
            self._applied.notify_all()

    def _reopen(self, old: CameraSettings, new: CameraSettings) -> str | None:
        """The camera reopened with `new` (a region, a format: not written to a grabbing camera); with `old` again
        when it refuses them."""
        self._close()
        self.settings = new
        try:
            self._open()
            return None
        except Exception as exc:  # noqa: BLE001 - a feature the camera refuses: the old settings come back
            self.settings = old
            result = f"the camera refused the settings ({_short(exc)}); the previous settings stay"
            self.counters.fail(f"camera {self.device}: {result}")
            try:
                self._open()  # as it was when the answer comes (else the frame loop reopens it)
            except Exception:  # noqa: BLE001 - gone meanwhile: the frame loop's reconnects
                pass
            return result

    def _write_live(self, camera: Any, old: CameraSettings, new: CameraSettings) -> str | None:
        """Exposure and gain written to the grabbing camera (SFNC lets them be); the old ones back when refused."""
        try:
            self._write(camera.GetNodeMap(), new, LIVE)
        except ValueError as exc:
            try:
                self._write(camera.GetNodeMap(), old, LIVE)
            except ValueError:  # noqa: S110 - it took them before: nothing else to put back
                pass
            result = f"the camera refused the settings ({exc}); the previous settings stay"
            self.counters.fail(f"camera {self.device}: {result}")
            return result
        self.settings = new
        exposing = self._read_back(camera)
        with self._lock:  # held already where apply writes; the frame loop's own write takes it here
            self._exposing, self._written_at = exposing, time.monotonic()
            self._sure_after = self.under_way()[1]
        return None

    def under_way(self) -> tuple[int, int]:
        """(open, number) of the last frame that may be under way now: taken from the camera but not yet counted,
        waiting in pylon's queue, being read out or exposed. A frame numbered past it, or of a later open, was
        exposed wholly after now (camera/photos.py takes such a frame as a photo asked for now)."""
        with self._lock:
            ready = _ready(self.camera) if self.camera is not None else 0
            return self._opens, self._number + ready + UNDER_WAY

    def newest(self) -> tuple[int, int]:
        """(open, number) of the newest frame taken from the camera: the one the frame loop just gave."""
        with self._lock:
            return self._opens, self._number

    def _read_back(self, camera: Any) -> dict[str, Any]:
        """The open camera's image settings as it has them (its increments applied; `Scale` is ours)."""
        return {**_values(camera.GetNodeMap(), [k for k in IMAGE_KEYS if k != "Scale"]), "Scale": self.settings.Scale}

    # -- frames ----------------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Frame]:
        failures, n, opened = 0, 0, False
        converter = pylon.ImageFormatConverter()
        converter.OutputPixelFormat = pylon.PixelType_BGR8packed
        self._running = True
        try:
            while not self._stop and (self.frames is None or n < self.frames):
                pause, frame, exposed = 0.0, None, None
                with self._use:
                    if self._next is not None:
                        self._take_settings()
                    if self.camera is None:
                        if opened:
                            self.counters.reconnects += 1  # every attempt after the first open is a reconnect
                        opened = True
                        try:
                            self._open()
                        except Exception as exc:  # noqa: BLE001 - not found, in use, gone again: counted and retried
                            if failures >= self.max_reconnects:
                                self.counters.fail(f"camera {self.device} lost for good after {failures} "
                                                   f"reconnects: {exc}" if self.info else
                                                   f"camera {self.device} cannot be opened: {exc}")
                                self.counters.gave_up = self.counters.last_error
                                return
                            failures += 1
                            self.counters.fail(f"camera {self.device} not available ({_short(exc)}); reconnect "
                                               f"{failures} of {self.max_reconnects}")
                            pause = self.backoff_s * 2 ** (failures - 1)
                    if self.camera is not None:
                        frame, exposed, lost = self._grab(converter)
                        if lost is not None:
                            self.counters.fail(f"camera {self.device} lost: {lost}")
                            self._close()
                if pause:
                    self._sleep(pause)
                if frame is None:
                    continue  # no camera yet, lost, or triggered and waiting for the next board
                failures = 0
                n += 1
                self.counters.delivered()
                self.last = LastFrame(frame.image, time.monotonic(), exposed, unsure=exposed is None)
                yield frame  # the camera is free meanwhile: settings asked for are taken by whoever asked
        finally:
            with self._use:
                self._running = False
                self._close()

    def _grab(self, converter: Any) -> tuple[Frame | None, dict[str, Any] | None, str | None]:
        """(frame, what it was exposed with or None where unsure, None), (None, None, None) while a triggered camera
        waits, or (None, None, why the camera is lost)."""
        camera = self.camera
        wait = self.settings.FrameTimeoutMs
        if self.settings.triggered:
            wait = min(wait, TRIGGERED_WAIT_MS)
        try:
            result = camera.RetrieveResult(wait, pylon.TimeoutHandling_Return)
        except Exception as exc:  # noqa: BLE001 - RuntimeException when the device is removed or closed
            return None, None, _short(exc)
        if result is None or not result.IsValid():
            if camera.IsCameraDeviceRemoved() or not camera.IsGrabbing():
                return None, None, "the device was removed (cable, power)"
            if self.settings.triggered:
                return None, None, None
            return None, None, f"no frame within {self.settings.FrameTimeoutMs} ms while free running"
        try:
            number = result.GetImageNumber()
            if not result.GrabSucceeded():
                self.counters.fail(f"camera {self.device}: a grab failed ({result.GetErrorDescription()})")
                return None, None, None
            image = self._bgr(result, converter)
        finally:
            result.Release()
        with self._lock:
            trigger_at = self._trigger_times.popleft() if self._trigger_times else None
            self._number = max(self._number, number)
            sure = number > self._sure_after or (trigger_at is not None and trigger_at > self._written_at)
            exposed = self._exposing if sure else None
        return Frame(image, "", self.name, serial_origin="none", triggered_at=trigger_at), exposed, None

    def _bgr(self, result: Any, converter: Any) -> np.ndarray:
        if result.GetPixelType() == pylon.PixelType_BGR8packed:
            image = np.array(result.Array, copy=True)
        else:
            image = np.array(converter.Convert(result).GetArray(), copy=True)
        if image.ndim == 2:
            image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
        scale = self.settings.Scale
        if scale != 1.0:
            h, w = image.shape[:2]
            size = (round(w / scale), round(h / scale)) if self.board_size is None else self.board_size
            image = cv2.resize(image, size, interpolation=cv2.INTER_AREA if scale > 1 else cv2.INTER_LINEAR)
        return image

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stop and time.monotonic() < end:
            time.sleep(min(0.05, end - time.monotonic()))

    def image_settings(self) -> dict[str, Any]:
        """The features that make the image as the open camera has them now (its increments applied; `Scale` is
        ours): what a photo it takes was taken with (camera/photo_settings.py). RuntimeError when it is not open."""
        with self._lock:  # read back at the open and at each write of exposure or gain: the camera's own now
            exposing = self._exposing if self.camera is not None else None
        if exposing is None:
            raise RuntimeError(f"camera {self.device} is not open")
        return dict(exposing)

    def status(self) -> dict[str, Any]:
        """What /status and the dashboard show of the camera."""
        return {"device": self.device, "connected": self.connected, **self.info, "triggers": self.triggers,
                "reconnects": self.counters.reconnects, "settings": self.settings.to_json()}


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def _ready(camera: Any) -> int:
    """Frames the camera has delivered that the frame loop has not taken yet (pylon's output queue)."""
    try:
        return int(camera.NumReadyBuffers.GetValue())
    except Exception:  # noqa: BLE001 - a camera going away: its frames with it
        return 0


def _changed(old: CameraSettings, new: CameraSettings) -> set[str]:
    return {f.name for f in fields(CameraSettings) if getattr(old, f.name) != getattr(new, f.name)}


def _value(nodes: Any, name: str) -> Any:
    """A feature's value, or None where the camera has none to read."""
    node = nodes.GetNode(name)
    try:
        return node.GetValue() if node is not None and genicam.IsReadable(node) else None
    except genicam.GenericException:
        return None


def _values(nodes: Any, names: Collection[str]) -> dict[str, Any]:
    """The features of `names` the camera has a value of, by name."""
    return {name: value for name in names if (value := _value(nodes, name)) is not None}


def _writable(nodes: Any, name: str) -> bool:
    node = nodes.GetNode(name)
    return node is not None and genicam.IsWritable(node)


def _has_symbol(nodes: Any, name: str, value: str) -> bool:
    node = nodes.GetNode(name)
    return node is not None and value in node.Symbolics


def _set(nodes: Any, name: str, value: Any, optional: bool = False) -> None:
    """Write one feature; ValueError naming the feature, the value and why the camera refused it."""
    node = nodes.GetNode(name)
    if node is None or not genicam.IsWritable(node):
        if optional:
            return
        raise ValueError(f"the camera has no writable feature {name}; remove it from the camera settings")
    try:
        node.SetValue(value)
    except genicam.GenericException as exc:
        raise ValueError(f"the camera refused {name} = {value!r}: {_short(exc)}") from None
