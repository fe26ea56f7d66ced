"""An industrial camera through pypylon's own camera emulator: trigger modes, formats, a camera that vanishes."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.camera.genicam import CameraNotFound, GenICamSource, list_cameras
from inspector.camera.settings import load_settings, parse_settings
from inspector.yamlio import ConfigError

from .test_board_gate import CODED
from .test_routing_rules import GOOD  # noqa: F401 - the mini board's rule set text


def emulator_images(folder: Path, n: int = 3, seed: int = 2) -> list[str]:
    """Rendered coded boards as the emulator's test images (served in name order, round and round)."""
    from inspector.app.bench_io import render_folder

    return render_folder(CODED, folder, n, seed)


def settings(folder: Path, **extra: object):  # noqa: ANN201
    return parse_settings({"ImageFilename": str(folder), "Width": 200, "Height": 120, **extra}, "test")


def _collect(source: GenICamSource, n: int, timeout: float = 30.0) -> tuple[list, threading.Thread]:
    got: list = []

    def run() -> None:
        for frame in source:
            got.append(frame)
            if len(got) >= n:
                source.stop()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    while source.camera is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return got, t


def test_the_emulator_is_listed_and_an_unknown_camera_names_those_seen(tmp_path: Path) -> None:
    cams = list_cameras()
    assert len(cams) >= 1 and cams[0]["class"] == "BaslerCamEmu"
    source = GenICamSource("NOPE-1", settings(tmp_path), max_reconnects=0, frames=1)
    assert list(source) == []
    assert "no camera with serial or index 'NOPE-1'" in source.counters.gave_up
    assert cams[0]["serial"] in source.counters.gave_up
    with pytest.raises(CameraNotFound):
        source._find()


@pytest.mark.parametrize("fmt", ["BayerRG8", "Mono8", "BGR8"])
def test_software_trigger_gives_one_frame_per_trigger_in_every_pixel_format(tmp_path: Path, fmt: str) -> None:
    emulator_images(tmp_path / "img", 2)
    source = GenICamSource("0", settings(tmp_path / "img", PixelFormat=fmt, TriggerMode="On", TriggerSource="Software"))
    got, t = _collect(source, 2)
    time.sleep(0.3)
    assert got == []  # triggered: nothing without a trigger
    fired = [source.trigger() for _ in range(2)]
    t.join(10)
    assert all(f is not None for f in fired) and len(got) == 2
    assert [f.triggered_at for f in got] == fired
    assert all(f.image.shape == (120, 200, 3) and f.image.dtype == np.uint8 for f in got)
    reference = cv2.imread(str(tmp_path / "img" / "0000.png"))
    if fmt != "Mono8":  # Bayer is demosaiced, colour survives; Mono is grey by nature
        assert np.abs(got[0].image.astype(int) - reference).mean() < 12
    assert source.triggers == 2 and source.counters.frames == 2


def test_hardware_trigger_waits_for_pulses_without_counting_the_wait_as_a_lost_camera(tmp_path: Path) -> None:
    emulator_images(tmp_path / "img", 1)
    source = GenICamSource("0", settings(tmp_path / "img", TriggerMode="On", TriggerSource="Line1",
                                         TriggerActivation="RisingEdge", FrameTimeoutMs=100))
    got, t = _collect(source, 1)
    time.sleep(1.0)  # no board-present pulse on Line1 in the emulator: no frame, and no error
    source.stop()
    t.join(10)
    assert got == [] and source.counters.errors == [] and source.counters.reconnects == 0
    with pytest.raises(RuntimeError, match="not in software-trigger mode"):
        source.trigger()


def test_a_camera_that_vanishes_is_reopened_counted_and_named(tmp_path: Path) -> None:
    emulator_images(tmp_path / "img", 2)
    source = GenICamSource("0", settings(tmp_path / "img", AcquisitionFrameRate=30, FrameTimeoutMs=500),
                           backoff_s=0.05)
    got, t = _collect(source, 10**6)
    assert _wait(lambda: len(got) >= 5)
    source.camera.DestroyDevice()  # the cable pulled: the device is gone under the grab
    before = len(got)
    assert _wait(lambda: source.counters.reconnects >= 1 and len(got) > before + 5)
    source.stop()
    t.join(10)
    assert "lost" in source.counters.errors[0] and source.status()["reconnects"] >= 1


def test_camera_settings_use_sfnc_names_and_refuse_what_a_camera_would_not_take(tmp_path: Path) -> None:
    path = tmp_path / "camera.yaml"
    path.write_text("ExposureTime: 800\nGain: 6\nPixelFormat: BayerRG8\nTriggerMode: On\nTriggerSource: Line1\n")
    s = load_settings(path)
    assert (s.ExposureTime, s.Gain, s.PixelFormat, s.triggered, s.software_trigger) == (800.0, 6.0, "BayerRG8",
                                                                                         True, False)
    path.write_text("ExposureTime: 800\nExposure: 3\n")
    with pytest.raises(ConfigError, match="camera.yaml:2"):
        load_settings(path)
    with pytest.raises(ConfigError, match="TriggerSource.*Software, Line1"):
        parse_settings({"TriggerSource": "Line9"}, "t")
    source = GenICamSource("0", settings(tmp_path, ExposureTime=1e12), max_reconnects=0, frames=1)
    assert list(source) == []
    assert "ExposureTime" in source.counters.gave_up


def test_a_triggered_camera_waiting_for_a_board_takes_exposure_and_gain_at_once_and_refuses_what_it_cannot(
        tmp_path: Path) -> None:
    """Exposure and gain are written to the open camera while its grab waits for the next trigger (no frame needed);
    a value the camera refuses leaves the old ones, and the next board's frame comes as before."""
    from dataclasses import replace

    emulator_images(tmp_path / "img", 1)
    source = GenICamSource("0", settings(tmp_path / "img", ExposureTime=1000.0, TriggerMode="On",
                                         TriggerSource="Software"))
    got, t = _collect(source, 1)
    try:
        nodes = source.camera.GetNodeMap()
        assert source.apply(replace(source.settings, ExposureTime=2500.0, Gain=4.0)) is None
        assert got == []  # taken with no frame taken (how fast is measured, not asserted: the manual's figures)
        assert (nodes.GetNode("ExposureTime").GetValue(), nodes.GetNode("Gain").GetValue()) == pytest.approx(
            (2500, 4), abs=1e-3)
        assert source.settings.ExposureTime == 2500.0
        refused = source.apply(replace(source.settings, ExposureTime=1e12, Gain=1.0))
        assert refused is not None and "previous settings stay" in refused and "ExposureTime" in refused
        assert (nodes.GetNode("ExposureTime").GetValue(), nodes.GetNode("Gain").GetValue()) == pytest.approx(
            (2500, 4), abs=1e-3)
        assert source.settings.ExposureTime == 2500.0 and source.counters.last_error.endswith(refused)
        assert source.trigger() is not None
        t.join(10)
        assert len(got) == 1 and got[0].image.shape == (120, 200, 3)
    finally:
        source.stop()
        t.join(10)


def test_a_feature_settings_leave_goes_back_to_the_cameras_own_value_and_a_wider_region_fits(tmp_path: Path) -> None:
    """A real camera keeps its features while powered: settings that leave one a product set take its own value back
    (the emulator resets on reopen, so its one open camera is set up twice here)."""
    from dataclasses import replace

    from pypylon import pylon

    emulator_images(tmp_path / "img", 1)
    source = GenICamSource("0", settings(tmp_path, ExposureTime=1200.0, OffsetX=600, Width=400), frames=1)
    camera = pylon.InstantCamera(source._find())
    camera.Open()
    try:
        nodes = camera.GetNodeMap()
        source._configure(camera)
        assert source.own["ExposureTime"] == 10000.0 and source.own["Width"] == 1024  # read before the first write
        assert [nodes.GetNode(n).GetValue() for n in ("ExposureTime", "OffsetX", "Width")] == [1200.0, 600, 400]
        source.settings = replace(source.settings, ExposureTime=None, OffsetX=0, Width=1000)  # wider, at 0
        source._configure(camera)
        assert [nodes.GetNode(n).GetValue() for n in ("ExposureTime", "OffsetX", "Width")] == [10000.0, 0, 1000]
    finally:
        camera.Close()


def test_frames_of_another_size_are_mapped_by_the_stated_scale(tmp_path: Path) -> None:
    emulator_images(tmp_path / "img", 1)
    big = tmp_path / "big"
    big.mkdir()
    image = cv2.imread(str(tmp_path / "img" / "0000.png"))
    cv2.imwrite(str(big / "0000.png"), cv2.resize(image, (400, 240), interpolation=cv2.INTER_CUBIC))
    s = parse_settings({"ImageFilename": str(big), "Width": 400, "Height": 240, "Scale": 2.0,
                        "TriggerMode": "On"}, "t")
    source = GenICamSource("0", s, board_size=(200, 120))
    got, t = _collect(source, 1)
    source.trigger()
    t.join(10)
    assert got[0].image.shape == (120, 200, 3)


def _wait(check, timeout: float = 20.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
