"""Camera calibration (lens, tilt), the grey-card flat field, the correction file and the source that applies it,
on the synthetic camera whose truth is known. Fixed seeds, no timing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inspector.app.run import open_source
from inspector.camera.correction import CameraCorrection, CorrectedSource
from inspector.camera.flatfield import FlatField, ReferenceRefused, exposure_advice
from inspector.camera.lens import CalibrationFailed, calibrate
from inspector.camera.targets import grey_card_views, synthetic_correction, target_views
from inspector.ingest.camera_model import intrinsics, parse_camera
from inspector.ingest.registration import RegistrationFailed, register
from inspector.ingest.synthetic import render_board
from inspector.routing.rules import load_rules

from .test_routing_rules import RULES

BOARD_A = load_rules(RULES / "board_a.yaml")
SIZE = BOARD_A.board_size
PATTERN = (9, 6)


def test_calibration_recovers_the_lens_it_was_shown() -> None:
    rng = np.random.default_rng(0)
    camera = parse_camera("k1=-0.1,noise=3")
    lens = calibrate(target_views(camera, SIZE, PATTERN, 25, rng), PATTERN)
    k = np.asarray(lens.camera_matrix)
    truth = intrinsics(*SIZE)
    assert lens.views >= 20 and lens.rms_px < 0.3
    assert abs(k[0, 0] / truth[0, 0] - 1) < 0.02 and abs(k[0, 2] - truth[0, 2]) < 5 and abs(k[1, 2] - truth[1, 2]) < 5
    assert abs(lens.distortion[0] - -0.1) < 0.03


def test_a_calibrated_tilted_distorted_camera_registers_boards_as_a_similarity_again() -> None:
    camera = parse_camera("tilt=2:-1.5,k1=-0.1,shift=8,rotation=0.8")
    correction = synthetic_correction(camera, SIZE, seed=3)
    assert correction.lens.rectify is not None and correction.lens.plane_rms_px < 0.3
    rng = np.random.default_rng(4)
    for i in range(4):
        image, _ = camera.view(render_board(BOARD_A, f"l{i}", rng).image, rng)
        with pytest.raises(RegistrationFailed):
            register(image, BOARD_A.fiducials)  # raw: tilt and barrel are far over the residual
        reg = register(correction.apply(image), BOARD_A.fiducials)
        assert reg.residual_px <= 0.7 and abs(reg.scale - 1) < 0.01


def test_too_few_views_of_the_target_fail_naming_them() -> None:
    rng = np.random.default_rng(1)
    views = target_views(parse_camera("k1=-0.05"), SIZE, PATTERN, 2, rng)
    blank = [np.full((SIZE[1], SIZE[0], 3), 128, np.uint8)] * 3
    with pytest.raises(CalibrationFailed, match=r"found in 2 of 5 views, 4 needed \(not found in: c, d, e\)"):
        calibrate(views + blank, PATTERN, ["a", "b", "c", "d", "e"])
    with pytest.raises(CalibrationFailed, match="differ in size"):
        calibrate([views[0], views[1][:200]], PATTERN)


def test_a_view_found_wrongly_is_left_out_and_named_and_a_small_frame_takes_a_target_it_resolves() -> None:
    """One view whose corners do not lie on a flat grid (a bent target) pulled the whole lens before; it is left out
    by its fit, the lens solved again, and the file keeps its name. A small frame's synthetic target has fewer,
    larger squares, so its corrected conditions calibrate."""
    import cv2

    from inspector.camera.lens import LensCalibration
    from inspector.camera.targets import square_px, target_pattern

    views = target_views(parse_camera("k1=-0.1,noise=3"), SIZE, PATTERN, 12, np.random.default_rng(0))
    ys, xs = np.mgrid[0:SIZE[1], 0:SIZE[0]].astype(np.float32)
    views[5] = cv2.remap(views[5], xs + 4 * np.sin(ys / 25), ys + 4 * np.cos(xs / 30), cv2.INTER_LINEAR)
    lens = calibrate(views, PATTERN)
    assert list(lens.left_out) == ["view 6"] and lens.left_out["view 6"] > 1.5
    assert lens.views == 11 and lens.rms_px < 0.2 and abs(lens.distortion[0] - -0.1) < 0.03
    assert LensCalibration.from_json(json.loads(json.dumps(lens.to_json()))).left_out == lens.left_out
    assert target_pattern(SIZE) == (9, 6)
    small = (200, 120)
    assert target_pattern(small) == (4, 3) and square_px(small, (4, 3)) >= 12 > square_px(small, PATTERN)
    correction = synthetic_correction(parse_camera("tilt=2:-1.5,k1=-0.1"), small, seed=7)  # its 9x6 target failed
    assert correction.lens.pattern == (4, 3) and correction.lens.rms_px < 0.2 and correction.lens.plane_rms_px < 0.1


def test_the_flat_field_makes_a_vignetted_cast_frame_even_and_neutral() -> None:
    rng = np.random.default_rng(2)
    camera = parse_camera("vignette=0.35,cast=0.15,noise=2")
    flat = FlatField.from_reference(grey_card_views(camera, SIZE, 4, rng))
    frame = grey_card_views(camera, SIZE, 1, rng)[0]
    before, after = frame.astype(float), flat.apply(frame).astype(float)
    means = after.reshape(-1, 3).mean(0)
    assert np.ptp(before.reshape(-1, 3).mean(0)) > 20  # the cast: red far above blue
    assert np.ptp(means) < 0.02 * means.mean()  # neutral after
    assert after.mean(2).std() < 0.3 * before.mean(2).std()  # the corners' falloff gone, noise left
    with pytest.raises(ReferenceRefused, match="clipped"):
        FlatField.from_reference([np.full((SIZE[1], SIZE[0], 3), 255, np.uint8)])
    with pytest.raises(ReferenceRefused, match="not a uniform grey card"):
        card = np.full((SIZE[1], SIZE[0], 3), 150, np.uint8)
        card[:, :200] = 10
        FlatField.from_reference([card])


def test_the_correction_file_round_trips_and_a_bad_one_says_what_to_do(tmp_path: Path) -> None:
    correction = synthetic_correction(parse_camera("k1=-0.08,vignette=0.2"), SIZE, seed=5)
    path = tmp_path / "cam.json"
    correction.save(path)
    again = CameraCorrection.load(path)
    frame = grey_card_views(parse_camera("k1=-0.08,vignette=0.2"), SIZE, 1, np.random.default_rng(6))[0]
    assert np.abs(again.apply(frame).astype(int) - correction.apply(frame).astype(int)).max() <= 2  # gains in f16
    path.write_text("{nope")
    with pytest.raises(ValueError, match="not a camera correction file"):
        CameraCorrection.load(path)
    with pytest.raises(ValueError, match="inspector camera calibrate"):
        CameraCorrection.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="calibrated on 640x400 frames, this one is 320x200"):
        correction.apply(frame[:200, :320])


def test_the_source_corrects_every_frame_and_keeps_the_exposure_advice(tmp_path: Path) -> None:
    camera = "tilt=1.5:1,k1=-0.1,vignette=0.3,cast=0.12"
    path = tmp_path / "cam.json"
    synthetic_correction(parse_camera(camera), SIZE, seed=7).save(path)
    camera += ",gain=0.3"  # the light failed since the reference was taken
    source = open_source("synthetic:2", BOARD_A, 2, 1000, camera=camera, correction=path, gate="off")
    assert isinstance(source, CorrectedSource)
    frames = list(source)
    assert len(frames) == 2 and all(f.image.shape == (SIZE[1], SIZE[0], 3) for f in frames)
    assert source.exposure is not None and "under-exposed" in source.exposure  # gain 0.3: a dark frame
    assert exposure_advice(np.full((400, 640, 3), 255, np.uint8)).startswith("over-exposed")
    assert exposure_advice(np.full((400, 640, 3), 120, np.uint8)) is None


def test_the_calibrate_and_reference_commands_write_one_file(tmp_path: Path) -> None:
    out = tmp_path / "cam.json"
    spec = "tilt=1:-1,k1=-0.06,vignette=0.25,cast=0.1"
    cal = subprocess.run([sys.executable, "-m", "inspector.cli", "camera", "calibrate", "--synthetic", spec,
                          "--out", str(out)], capture_output=True, encoding="utf-8", timeout=300)
    assert cal.returncode == 0, cal.stderr
    assert "rectified" in cal.stdout and "k1 -0.0" in cal.stdout
    ref = subprocess.run([sys.executable, "-m", "inspector.cli", "camera", "reference", "--synthetic", spec,
                          "--out", str(out)], capture_output=True, encoding="utf-8", timeout=300)
    assert ref.returncode == 0, ref.stderr
    doc = json.loads(out.read_text())
    assert doc["lens"]["rectify"] is not None and doc["flat_field"]["level"] > 100
    bad = subprocess.run([sys.executable, "-m", "inspector.cli", "camera", "calibrate", "--pattern", "9by6",
                          "--out", str(out), "x.png"], capture_output=True, encoding="utf-8", timeout=300)
    assert bad.returncode != 0 and "COLSxROWS" in bad.stderr
