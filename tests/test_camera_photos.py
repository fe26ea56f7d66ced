"""Photos through the line's camera that say the settings they were taken with (pypylon's emulated camera), and
what teaching and checking make of a photo's settings (board/photo_camera.py)."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from inspector.board.photo_camera import checked_camera, taught_camera
from inspector.camera.genicam import UNDER_WAY, GenICamSource
from inspector.camera.photo_settings import TEXT_KEY, TakenWith, save_photo, taken_with
from inspector.camera.photos import KIOSK_POLL_S, photos_from_kiosk, take_photos
from inspector.routing.rules import parse_rules
from inspector.yamlio import ConfigError

from .test_genicam import emulator_images, settings
from .test_routing_rules import GOOD


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True, timeout=300,
                          input=stdin)


def test_photos_through_the_line_camera_say_the_settings_the_camera_ran_at_and_number_on(tmp_path: Path) -> None:
    """`inspector camera photos`: the station's settings with the product's `camera:` over them, one photo per
    software trigger, lossless, each saying what the camera read back; a second round numbers on after the first."""
    emulator_images(tmp_path / "img", 2)
    (tmp_path / "station.yaml").write_text(f"ImageFilename: {tmp_path / 'img'}\nWidth: 200\nHeight: 120\n"
                                           "PixelFormat: BGR8\nTriggerMode: 'On'\nTriggerSource: Software\n"
                                           "ExposureTime: 5000\n", encoding="utf-8")
    (tmp_path / "mini.yaml").write_text(GOOD + "camera:\n  ExposureTime: 1200\n", encoding="utf-8")
    base = ("camera", "photos", "--source", "genicam:0", "--camera-settings", str(tmp_path / "station.yaml"),
            "--rules", str(tmp_path / "mini.yaml"), "--out", str(tmp_path / "golden"))
    r = cli(*base, "--count", "2")
    assert r.returncode == 0, r.stderr
    assert "mini's over them: ExposureTime 1200" in r.stderr and "inspector board teach --golden" in r.stdout
    r = cli(*base, "--ask", stdin="\n")  # one more, after Enter: numbered on, nothing overwritten
    assert r.returncode == 0, r.stderr
    assert "photo 1 of 1: put the board in place and press Enter" in r.stderr
    photos = sorted((tmp_path / "golden").glob("*.png"))
    assert [p.name for p in photos] == ["golden-01.png", "golden-02.png", "golden-03.png"]
    taken = taken_with(photos[0])
    assert taken is not None
    values = taken.values()
    assert values["ExposureTime"] == pytest.approx(1200) and (values["Width"], values["Height"]) == (200, 120)
    assert values["PixelFormat"] == "BGR8" and values["Scale"] == 1.0  # by its SFNC name, whatever the camera reads
    assert "TriggerMode" not in values  # the station's wiring is not the photo's
    assert dict(taken.camera)["model"] == "Emulation" and taken.taken_at.startswith("20")
    image = cv2.imread(str(photos[0]))
    served = cv2.imread(str(tmp_path / "img" / "0000.png"))
    assert image.shape == (120, 200, 3) and np.abs(image.astype(int) - served).mean() < 3  # as the camera gave it
    # closed stdin with --ask, a source that is not a camera, a camera not there: each refused, saying so
    r = cli(*base, "--ask", stdin="")
    assert r.returncode != 0 and "no Enter came" in r.stderr
    r = cli("camera", "photos", "--source", "genicam:0", "--kiosk", "http://127.0.0.1:9", "--out", str(tmp_path))
    assert r.returncode == 2 and "or the kiosk whose line holds it" in r.stderr
    r = cli("camera", "photos", "--kiosk", "http://127.0.0.1:9", "--rules", str(tmp_path / "mini.yaml"), "--out",
            str(tmp_path))
    assert r.returncode == 2 and "camera runs at the settings of its station" in r.stderr
    r = cli("camera", "photos", "--source", f"folder:{tmp_path}", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "come from a GenICam camera" in r.stderr
    r = cli("camera", "photos", "--source", "genicam:NOPE-9", "--out", str(tmp_path / "x"))
    assert r.returncode == 1 and "camera NOPE-9 cannot be opened: no camera with serial or index 'NOPE-9'" in r.stderr
    assert "take the photos through the kiosk (`inspector camera photos --kiosk URL`" in r.stderr
    assert not list((tmp_path / "x").glob("*.png"))
    # a camera triggered by a board-present sensor waits for a board; none passing is said as such
    (tmp_path / "wired.yaml").write_text(f"ImageFilename: {tmp_path / 'img'}\nWidth: 200\nHeight: 120\n"
                                         "TriggerMode: 'On'\nTriggerSource: Line1\n", encoding="utf-8")
    r = cli("camera", "photos", "--source", "genicam:0", "--camera-settings", str(tmp_path / "wired.yaml"), "--out",
            str(tmp_path / "x"), "--timeout", "1")
    assert r.returncode == 1 and "triggered by Line1: no board passed its sensor within 1 s" in r.stderr
    assert not list((tmp_path / "x").glob("*.png"))


def test_a_photo_is_taken_through_the_lines_correction_and_says_so(tmp_path: Path) -> None:
    """The line corrects its frames (lens, flat field) before anything looks at them; a golden photo is corrected
    the same way, by `camera photos --correction` and through a running line's source (the kiosk's, the dashboard's)."""
    from inspector.app.run import open_source
    from inspector.camera.correction import CameraCorrection
    from inspector.camera.photos import newest_photo

    emulator_images(tmp_path / "img", 1)
    (tmp_path / "mini.yaml").write_text(GOOD, encoding="utf-8")
    r = cli("camera", "reference", "--synthetic", "vignette=0.3,cast=0.1", "--rules", str(tmp_path / "mini.yaml"),
            "--out", str(tmp_path / "cam.json"))
    assert r.returncode == 0, r.stderr
    correction = CameraCorrection.load(tmp_path / "cam.json")
    served = cv2.imread(str(tmp_path / "img" / "0000.png"))
    (tmp_path / "station.yaml").write_text(f"ImageFilename: {tmp_path / 'img'}\nWidth: 200\nHeight: 120\n"
                                           "PixelFormat: BGR8\n", encoding="utf-8")
    r = cli("camera", "photos", "--source", "genicam:0", "--camera-settings", str(tmp_path / "station.yaml"),
            "--correction", str(tmp_path / "cam.json"), "--out", str(tmp_path / "golden"))
    assert r.returncode == 0, r.stderr
    assert "corrected: flat field at level" in r.stderr
    photo = tmp_path / "golden" / "golden-01.png"
    assert np.array_equal(cv2.imread(str(photo)), correction.apply(served))  # as the line sees the frame
    said = taken_with(photo)
    assert said is not None and said.corrected == correction.describe()

    rules = parse_rules(GOOD, "mini.yaml")
    source = open_source("genicam:0", rules, 0, 0, camera_settings={
        "ImageFilename": str(tmp_path / "img"), "Width": 200, "Height": 120, "PixelFormat": "BGR8",
        "TriggerMode": "On", "TriggerSource": "Software"}, correction=tmp_path / "cam.json")
    frames: list = []

    running = threading.Thread(target=lambda: frames.extend(source), daemon=True)  # the line's frame loop
    running.start()
    try:
        deadline = time.monotonic() + 30
        while source.origin.camera is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert newest_photo(source) is None  # triggered: no frame yet
        assert source.origin.trigger() is not None
        while not frames and time.monotonic() < deadline:
            time.sleep(0.02)
        image, taken, age, unsure = newest_photo(source)  # the camera open, its line running
    finally:
        source.stop()
        running.join(10)
    assert np.array_equal(image, frames[0].image) and np.array_equal(image, correction.apply(served))
    assert taken is not None and taken.corrected == correction.describe() and age is not None and age >= 0
    assert not unsure


def test_each_frame_says_the_exposure_it_was_taken_with_and_frames_under_way_at_a_change_say_they_are_unsure(
        tmp_path: Path) -> None:
    """A changeover writes exposure to the grabbing camera: the frames before say the old one, the frames that may
    have been under way say they are unsure, and every frame after says the new one (camera/genicam.py)."""
    emulator_images(tmp_path / "img", 2)
    source = GenICamSource("0", settings(tmp_path / "img", ExposureTime=900))  # free running
    seen: list = []
    for _frame in source:  # the line's frame loop, paused at each frame while its taker looks
        seen.append(source.last.exposed)
        assert source.last.unsure == (source.last.exposed is None)
        if len(seen) == 5:
            assert source.apply(settings(tmp_path / "img", ExposureTime=2500)) is None  # written at once
        if len(seen) == 40:
            break
    assert not source.connected
    exposures = [None if s is None else round(s["ExposureTime"]) for s in seen]
    unsure = [i for i, e in enumerate(exposures) if e is None]
    assert exposures[:5] == [900] * 5 and len(unsure) >= UNDER_WAY and unsure[0] == 5
    assert unsure == list(range(5, 5 + len(unsure)))  # the frames right after the change, and only those
    assert set(exposures[5 + len(unsure):]) == {2500}
    assert all(s["Width"] == 200 and s["Scale"] == 1.0 for s in seen if s is not None)


def test_a_free_running_camera_photo_is_a_frame_taken_after_it_was_asked_for(tmp_path: Path) -> None:
    emulator_images(tmp_path / "img", 3)
    source = GenICamSource("0", settings(tmp_path / "img", ExposureTime=900))
    asked: list[int] = []
    written = take_photos(source, 2, tmp_path / "out", "board", ask=asked.append)
    assert asked == [0, 1] and [p.name for p in written] == ["board-01.png", "board-02.png"]
    taken = taken_with(written[1])
    assert taken is not None and taken.values()["ExposureTime"] == pytest.approx(900)
    assert not source.connected  # the camera given back


def test_a_kiosk_photo_under_way_at_a_changeover_is_passed_over_for_the_next_frame(tmp_path: Path) -> None:
    """`camera photos --kiosk`: a frame the kiosk says is unsure of its settings is not taken; the next one is, and
    a camera that never takes one is named."""
    png = base64.b64encode(cv2.imencode(".png", np.zeros((4, 6, 3), np.uint8))[1].tobytes()).decode("ascii")
    asked = time.monotonic()
    answers = iter([{"png_base64": png, "width": 6, "height": 4, "age_s": 0.0, "settings_unsure": True,
                     "taken_with": None}] * 2)
    sure = {"png_base64": png, "width": 6, "height": 4, "age_s": 0.0, "settings_unsure": False,
            "taken_with": {"settings": {"ExposureTime": 2500.0}}}
    said: list[str] = []
    written = photos_from_kiosk(lambda: next(answers, sure), 1, tmp_path, say=said.append)
    assert [p.name for p in written] == ["golden-01.png"] and said[0].endswith("at ExposureTime 2500")
    assert time.monotonic() - asked >= 2 * KIOSK_POLL_S  # it waited past the two unsure frames
    with pytest.raises(RuntimeError, match="under way while the camera's exposure or gain changed"):
        photos_from_kiosk(lambda: {**sure, "settings_unsure": True, "taken_with": None}, 1, tmp_path, timeout=0.5)


def photo(path: Path, exposure: float | None, serial: str = "EMU-1") -> Path:
    image = np.full((60, 80, 3), 90, np.uint8)
    if exposure is None:
        cv2.imwrite(str(path), image)
        return path
    return save_photo(path, image, TakenWith.now({"ExposureTime": exposure, "Gain": 2.0, "PixelFormat": "BayerRG8",
                                                  "Scale": 1.0}, {"serial": serial, "model": "Emulation"}))


def test_teaching_asks_the_camera_for_the_first_golden_photos_settings_and_names_every_other(tmp_path: Path) -> None:
    rules = parse_rules(GOOD + "camera:\n  ExposureTime: 1200\n  AcquisitionFrameRate: 10\n", "mini.yaml")
    g1, g2, g3 = photo(tmp_path / "g1.png", 805), photo(tmp_path / "g2.png", 1500, "EMU-2"), photo(tmp_path / "g3.png",
                                                                                                 None)
    taught = taught_camera(rules, [g3, g1, g2])
    assert taught.camera == {"ExposureTime": 805.0, "AcquisitionFrameRate": 10.0, "PixelFormat": "BayerRG8",
                             "Gain": 2.0, "Scale": 1.0}
    said = "\n".join(taught.notes)
    assert "the taught set asks PixelFormat BayerRG8, ExposureTime 805, Gain 2, Scale 1, as g1.png, by camera EMU-1" \
        in said
    assert "the rule set asked ExposureTime 1200" in said
    assert "g2.png was taken at ExposureTime 1500 (the taught set asks ExposureTime 805)" in said
    assert "g2.png was taken by camera EMU-2 (Emulation), g1.png by camera EMU-1 (Emulation)" in said
    assert "g3.png does not say its camera settings" in said
    corrected = save_photo(tmp_path / "g4.png", np.full((60, 80, 3), 90, np.uint8), TakenWith.now(
        {"ExposureTime": 805.0, "Gain": 2.0, "PixelFormat": "BayerRG8", "Scale": 1.0},
        {"serial": "EMU-1", "model": "Emulation"}, "flat field at level 180"))
    assert "g4.png was corrected (flat field at level 180), g1.png not corrected: the line corrects its frames one " \
           "way" in taught_camera(rules, [g1, corrected]).notes
    # the taught camera loads as a rule set's own, and a check's photo taken otherwise is named
    taught_rules = parse_rules(GOOD + "camera: " + json.dumps(taught.camera) + "\n", "taught.yaml")
    assert checked_camera(taught_rules, [g1, g3]) == []
    assert checked_camera(taught_rules, [g2]) == ["g2.png was taken at ExposureTime 1500; mini asks ExposureTime 805: "
                                                  "what it flags may be the camera's, not the board's"]
    # photos that say nothing change nothing
    plain = taught_camera(rules, [g3])
    assert plain.camera is None and "ExposureTime 1200" in plain.notes[0] and "do not say" in plain.notes[0]


def test_a_photos_damaged_settings_are_refused_naming_the_photo_and_the_feature(tmp_path: Path) -> None:
    def with_text(name: str, text: str) -> Path:
        info = PngImagePlugin.PngInfo()
        info.add_itxt(TEXT_KEY, text)
        Image.new("RGB", (8, 8)).save(tmp_path / name, pnginfo=info)
        return tmp_path / name

    with pytest.raises(ConfigError, match="cut.png.*cannot be read"):
        taken_with(with_text("cut.png", "{not json"))
    with pytest.raises(ConfigError, match="low.png.*ExposureTime"):
        taken_with(with_text("low.png", json.dumps({"settings": {"ExposureTime": -3}})))
    with pytest.raises(ConfigError, match="wired.png.*TriggerMode"):
        taken_with(with_text("wired.png", json.dumps({"settings": {"TriggerMode": "On"}})))
    assert taken_with(tmp_path / "missing.png") is None


def test_a_folder_of_photos_is_taken_as_its_photos_by_name_and_an_empty_one_is_refused(tmp_path: Path) -> None:
    """`board teach --golden DIR`, `board check DIR`, `board tune DIR`: the folder `camera photos` wrote."""
    from inspector.cli.common import photos_given
    from inspector.cli.exits import UsageError

    (tmp_path / "golden").mkdir()
    for name in ("golden-02.png", "golden-01.png", "notes.txt", "golden-03.JPG"):
        (tmp_path / "golden" / name).write_bytes(b"x")
    (tmp_path / "golden" / "sub.png").mkdir()  # a folder named like a photo is not one
    other = tmp_path / "other.png"
    assert photos_given([str(tmp_path / "golden"), str(other)]) == [
        tmp_path / "golden" / n for n in ("golden-01.png", "golden-02.png", "golden-03.JPG")] + [other]
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="empty is a folder with no photo in it"):
        photos_given([str(tmp_path / "empty")])
