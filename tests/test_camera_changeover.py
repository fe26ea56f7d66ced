"""A product's own camera settings (`camera:` of its rule set), taken by pypylon's emulated camera at the product's
changeover, the station's own back for a product without them, refused settings refusing the changeover."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from inspector.access.identity import Identity
from inspector.routing.rules import RuleSet, parse_rules
from inspector.yamlio import ConfigError

from .test_board_gate import CODE
from .test_genicam import emulator_images
from .test_routing_rules import GOOD

DARK = GOOD.replace("recipe: mini", "recipe: mini-dark") + CODE + "camera:\n  ExposureTime: 1200\n  Gain: 3\n"
PLAIN = GOOD.replace("recipe: mini", "recipe: mini-plain") + CODE
ENGINEER = Identity("carl", "engineer", "test")


def _sets(text: str, name: str) -> RuleSet:
    return parse_rules(text, name)


def test_a_rule_set_names_what_its_product_needs_of_the_camera_and_nothing_of_the_station() -> None:
    rules = _sets(DARK, "dark.yaml")
    assert rules.camera.to_json() == {"ExposureTime": 1200.0, "Gain": 3.0}
    assert rules.camera.said() == "ExposureTime 1200, Gain 3"
    assert not _sets(PLAIN, "plain.yaml").camera
    line = len(GOOD.splitlines()) + len(CODE.splitlines()) + 2  # the key under camera:
    for key, value, needle in (("TriggerMode", "On", "is the station's, not a product's"),
                               ("FrameTimeoutMs", 100, "is the station's"),
                               ("Exposure", 3, "unknown key"),
                               ("ExposureTime", 0, "must be at least 1.0"),
                               ("PixelFormat", "Mono16", "must be one of Mono8")):
        with pytest.raises(ConfigError) as err:
            _sets(PLAIN + f"camera:\n  {key}: {value}\n", "bad.yaml")
        assert f"bad.yaml:{line}: camera.{key}: {needle}" in str(err.value), str(err.value)


def _node(source, name: str) -> object:  # noqa: ANN001 - the GenICam source
    camera = source.origin.camera
    return None if camera is None else camera.GetNodeMap().GetNode(name).GetValue()


def _wait(what, timeout: float = 30.0) -> bool:  # noqa: ANN001 - a predicate
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.02)
    return False


def test_the_camera_takes_each_products_settings_at_its_changeover_and_refused_ones_refuse_it(
        demo, tmp_path: Path) -> None:
    from inspector.app.line import LineConfig
    from inspector.app.run import line_profiles, open_source
    from inspector.app.service import LineService, ServiceConfig
    from inspector.kiosk.camera_control import CameraControl
    from inspector.kiosk.http import Call, HttpError
    from inspector.results.store import ResultStore, sqlite_url

    root, zoo = demo
    dark, plain = _sets(DARK, str(tmp_path / "dark.yaml")), _sets(PLAIN, str(tmp_path / "plain.yaml"))
    emulator_images(tmp_path / "img", 2, seed=5)
    source = open_source("genicam:0", dark, 0, 0, camera_settings={
        "ImageFilename": str(tmp_path / "img"), "Width": 200, "Height": 120, "TriggerMode": "On",
        "TriggerSource": "Software"})
    said: list[str] = []
    profiles = line_profiles(zoo, root / "models", said.append)
    service = LineService(dark, zoo, profiles, ServiceConfig(LineConfig(device_mb=40), queue_capacity=1),
                          ResultStore(sqlite_url(tmp_path / "r.sqlite")), tmp_path, source, say=said.append)
    camera = source.origin
    service.start()
    running = threading.Thread(target=service.run, daemon=True)
    running.start()
    try:
        assert _wait(lambda: camera.camera is not None)
        assert (_node(source, "ExposureTime"), _node(source, "Gain")) == pytest.approx((1200, 3), abs=1e-3)  # dark's
        assert camera.own["ExposureTime"] == 10000.0  # the emulator's own exposure, read before it was set

        service.line.apply_rules(plain)  # a product without settings: the station's own again
        assert (_node(source, "ExposureTime"), _node(source, "Gain")) == pytest.approx((10000, 0), abs=1e-3)
        assert camera.settings.ExposureTime is None and service.line.rules is plain

        # a paused line stops taking frames: the camera waits with a frame for the full queue, and still takes
        # the next product's settings at once (it is free while a frame waits)
        service.pause()
        for _ in range(3):
            camera.trigger()
            time.sleep(0.3)
        assert _wait(lambda: len(service.queue) >= 1)
        asked = time.monotonic()
        service.line.apply_rules(dark)
        assert time.monotonic() - asked < 10 and _node(source, "ExposureTime") == 1200.0
        service.resume()

        bright = PLAIN.replace("recipe: mini-plain", "recipe: mini-bright") + "camera:\n  ExposureTime: 1.0e+12\n"
        refused = _sets(bright, str(tmp_path / "bright.yaml"))
        with pytest.raises(ValueError, match="camera refused mini-bright's settings .ExposureTime 1e\\+12.: .*"
                                             "the line serves mini-dark"):
            service.line.apply_rules(refused)
        assert service.line.rules is dark and _node(source, "ExposureTime") == 1200.0  # nothing changed

        # a board change whose engine cannot start puts the camera back with the old board
        def no_profiles() -> dict:
            raise RuntimeError("no profile")
        with pytest.raises(ValueError, match="mini-plain cannot be served"):
            service.line.change_board(plain, zoo, no_profiles)
        assert service.line.rules is dark and _node(source, "ExposureTime") == 1200.0
        service.line.change_board(plain, zoo, lambda: profiles)
        assert _node(source, "ExposureTime") == 10000.0 and service.line.board_changes == 1
        service.line.change_board(dark, zoo, lambda: profiles)
        assert _node(source, "ExposureTime") == 1200.0

        # an engineer changes the station's settings; a key the product in force sets is its rule file's
        control = CameraControl(service, str(tmp_path / "camera.yaml"))
        with pytest.raises(HttpError) as err:
            control.apply_settings(Call(json.dumps({"ExposureTime": 900}).encode(), ENGINEER))
        assert err.value.code == 409 and "ExposureTime is set by the rule set in force (mini-dark" in str(err.value)
        done = control.apply_settings(Call(json.dumps({"AcquisitionFrameRate": 20}).encode(), ENGINEER))
        assert done["settings"]["ExposureTime"] == 1200.0 and done["settings"]["AcquisitionFrameRate"] == 20.0
        kept = (tmp_path / "camera.yaml").read_text()
        assert "AcquisitionFrameRate: 20.0" in kept and "ExposureTime" not in kept  # the station's file only
        assert _node(source, "AcquisitionFrameRate") == 20.0
        service.line.apply_rules(plain)  # the station's new rate stays, dark's exposure goes
        assert (_node(source, "ExposureTime"), _node(source, "AcquisitionFrameRate")) == (10000.0, 20.0)
        state = service.camera_sets.to_json()
        assert state["recipe"] == "mini-plain" and state["recipe_settings"] == {}
        assert state["station"]["AcquisitionFrameRate"] == 20.0
        assert any("camera set up for mini-dark: ExposureTime 1200, Gain 3" in m for m in said), said
        wider = _sets(PLAIN.replace("{width: 200, height: 120}", "{width: 240, height: 150}"), "wider.yaml")
        service.line.apply_rules(wider)  # a scaled frame is mapped to the size of the set in force
        assert camera.board_size == (240, 150)
    finally:
        service.request_stop()
        running.join(60)
    assert not running.is_alive() and not camera.connected  # stopped, the camera let go of


def test_a_line_without_a_camera_serves_a_product_with_settings_and_says_they_are_not_applied(
        demo, tmp_path: Path) -> None:
    from inspector.app.line import LineConfig
    from inspector.app.run import line_profiles, open_source
    from inspector.app.service import LineService, ServiceConfig
    from inspector.results.store import ResultStore, sqlite_url

    root, zoo = demo
    plain, dark = _sets(PLAIN, "plain.yaml"), _sets(DARK, "dark.yaml")
    said: list[str] = []
    service = LineService(plain, zoo, line_profiles(zoo, root / "models", said.append),
                          ServiceConfig(LineConfig(device_mb=40)), ResultStore(sqlite_url(tmp_path / "r.sqlite")),
                          tmp_path, open_source("synthetic", plain, 1, 3), say=said.append)
    service.line.apply_rules(dark)
    service.line.apply_rules(plain)
    service.line.apply_rules(dark)
    assert service.line.rules is dark
    told = [m for m in said if "asks for camera settings" in m]
    assert told == ["mini-dark asks for camera settings (ExposureTime 1200, Gain 3); this line's source is not a "
                    "GenICam camera, so they are not applied"]  # once
