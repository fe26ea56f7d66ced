"""Boards without fiducials aligned on their golden board's content (`photo_registration: {using: golden}`): a
known slide, turn and tilt recovered, what is not the board refused with the reason, the schema's errors, and a
board known from its CAD alone run through the line on a golden board the renderer drew (`board golden`)."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.app.accuracy import CONDITIONS, run_condition
from inspector.app.line import LineConfig
from inspector.board.register import RegistrationError, register_on_reference
from inspector.cli import main
from inspector.ingest.camera_model import CameraModel
from inspector.ingest.synthetic import render_board
from inspector.routing.rules import load_rules, parse_rules
from inspector.yamlio import ConfigError

from .test_registration import BOARD_A
from .test_routing_rules import GOOD, RULES

SLIDE = CameraModel(shift_px=10, rotation_deg=1.0, scale=0.01)  # a board stopping on a conveyor


def _part_error(board_to_frame: np.ndarray, frame_to_board: np.ndarray) -> float:
    """Largest distance, over every part's centre, between where the board put it and where alignment says."""
    pts = np.array([(p.x, p.y) for _c, p in BOARD_A.placements()], np.float64)
    there = cv2.perspectiveTransform(pts.reshape(-1, 1, 2), board_to_frame)
    back = cv2.perspectiveTransform(there, frame_to_board).reshape(-1, 2)
    return float(np.hypot(*(back - pts).T).max())


@pytest.fixture(scope="module")
def golden() -> np.ndarray:
    return render_board(BOARD_A, "golden", np.random.default_rng(1), rates={}).image


@pytest.mark.parametrize("camera", [SLIDE, CameraModel(tilt_deg=(2.0, -1.5))], ids=["slide", "tilt"])
def test_a_boards_slide_turn_and_tilt_are_recovered_from_its_golden_board(golden: np.ndarray,
                                                                          camera: CameraModel) -> None:
    for k in range(3):  # other boards than the golden one (their own parts' tones), defects and all
        board = render_board(BOARD_A, f"B{k}", np.random.default_rng(10 + k)).image
        frame, board_to_frame = camera.view(board, np.random.default_rng(k))
        reg = register_on_reference(frame, golden, px_per_mm=10.0)
        assert reg.method == "golden" and "aligned on the golden board" in reg.note
        assert _part_error(board_to_frame, reg.homography) < 1.0
        assert reg.residual_px < 1.0 and reg.residual_mm == pytest.approx(reg.residual_px / 10)


def test_what_is_not_the_board_is_refused_with_the_reason(golden: np.ndarray) -> None:
    noise = np.random.default_rng(0).integers(0, 255, golden.shape, dtype=np.uint8)
    with pytest.raises(RegistrationError, match="golden board"):
        register_on_reference(noise, golden)
    other = load_rules(RULES / "board_b.yaml")
    drawn = render_board(other, "B", np.random.default_rng(2), rates={}).image
    if drawn.shape == golden.shape:
        with pytest.raises(RegistrationError, match="golden board"):
            register_on_reference(drawn, golden)
    with pytest.raises(RegistrationError, match="frames of the board's size"):
        register_on_reference(golden[:-10], golden)


WITHOUT_MARKS = GOOD[:GOOD.index("fiducials:")]


@pytest.mark.parametrize(("extra", "message"), [
    ("photo_registration: {using: golden}\n", "golden: FILE"),
    ("golden: g.png\nphoto_registration: {using: golden, geometry: b.json}\n", "keep one"),
    ("golden: g.png\nphoto_registration: {using: sideways}\n", "one of outline, points, golden"),
    ("photo_registration: {using: points, geometry: b.json}\n", "names no points"),
])
def test_the_schema_names_what_golden_alignment_needs(extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_rules(WITHOUT_MARKS + extra, "mini.yaml")


def test_the_residual_a_frame_may_keep_is_the_rule_sets() -> None:
    golden = "golden: g.png\nphoto_registration: {using: golden%s}\n"
    assert parse_rules(WITHOUT_MARKS + golden % "", "m.yaml").photo.max_residual_px == 1.0
    assert parse_rules(WITHOUT_MARKS + golden % ", max_residual_px: 2.5", "m.yaml").photo.max_residual_px == 2.5
    outline = "photo_registration: {geometry: b.json%s}\n"
    assert parse_rules(WITHOUT_MARKS + outline % "", "m.yaml").photo.max_residual_px is None  # a photo's own px
    assert parse_rules(WITHOUT_MARKS + outline % ", max_residual_px: 6", "m.yaml").photo.max_residual_px == 6
    with pytest.raises(ConfigError, match="at least 0.05"):
        parse_rules(WITHOUT_MARKS + golden % ", max_residual_px: 0", "m.yaml")


def test_a_board_from_cad_alone_runs_the_line_aligned_on_its_drawn_golden_board(demo, tmp_path: Path,
                                                                               capsys) -> None:
    root, zoo = demo
    path = tmp_path / "mini.yaml"
    path.write_text(WITHOUT_MARKS, encoding="utf-8")
    assert main(["board", "golden", "--rules", str(path)]) == 0
    assert "photo_registration: {using: golden}" in capsys.readouterr().out
    rules = load_rules(path)
    assert rules.photo.using == "golden" and Path(rules.golden).is_file()
    assert rules.training_version == parse_rules(WITHOUT_MARKS, str(path)).training_version  # its zoo still serves
    stop = CameraModel(shift_px=8, gain=(0.8, 1.2), noise_sigma=(3.0, 3.0))  # where the conveyor stopped it
    result = run_condition("stop", stop, rules, zoo, root / "models", 4, LineConfig(device_mb=40), seed=43,
                           share=0.34, data_dir=tmp_path)
    assert result.stored == 4 and result.detection.rejected_boards == 0 and result.parts == 12
    assert result.residual_max_px is not None and result.residual_max_px < 1.0  # every board aligned
    assert rules.photo.max_residual_px == 1.0  # the fiducials' default: a board left further off is refused
    # asked again, or of a board that has fiducials, it refuses and leaves the rule set as it was
    before = path.read_text(encoding="utf-8")
    assert main(["board", "golden", "--rules", str(path)]) == 1
    assert "names `golden:` already" in capsys.readouterr().err and path.read_text(encoding="utf-8") == before
    marked = tmp_path / "marked.yaml"
    marked.write_text(GOOD, encoding="utf-8")
    assert main(["board", "golden", "--rules", str(marked)]) == 1
    assert "fiducials" in capsys.readouterr().err and marked.read_text(encoding="utf-8") == GOOD


def test_a_frame_no_alignment_brings_within_the_residual_is_refused(tmp_path: Path, capsys) -> None:
    """The demo's board A without its fiducials, aligned on its drawn golden board: a frame bent in a way no
    homography undoes (a wave of 3 px across the board, as a lens without its correction file bends a large
    board) is refused with the reason (the line stores it as a board-level error, as one whose fiducials
    disagree); a board that only moved is not."""
    from inspector.app.board_photos import register_photo

    text = (RULES / "board_a.yaml").read_text(encoding="utf-8")
    start, end = text.index("\nfiducials:"), text.index("\nserial_code:")
    path = tmp_path / "a.yaml"
    path.write_text(text[:start] + text[end:], encoding="utf-8")
    assert main(["board", "golden", "--rules", str(path)]) == 0
    capsys.readouterr()
    rules = load_rules(path)
    golden = cv2.imread(rules.golden)
    board = render_board(rules, "B1", np.random.default_rng(5)).image
    moved, _ = CONDITIONS["placement"].view(board, np.random.default_rng(1))
    _image, reg = register_photo(moved, rules, golden, light=False)
    assert reg.residual_px < 1.0
    h, w = board.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    bent = cv2.remap(board, xs + 3 * np.sin(2 * np.pi * ys / h), ys + 3 * np.sin(2 * np.pi * xs / w),
                     cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    with pytest.raises(RegistrationError, match=r"over the rule set's photo_registration.max_residual_px 1 .*calib"):
        register_photo(bent, rules, golden, light=False)


def test_accuracy_says_when_a_moved_board_has_nothing_to_register_it_by(demo, tmp_path: Path, capsys) -> None:
    root, zoo = demo
    path = tmp_path / "mini.yaml"
    path.write_text(WITHOUT_MARKS, encoding="utf-8")
    args = ["--models", str(root / "models"), "accuracy", "--rules", str(path), "--zoo", str(zoo.root), "--boards",
            "1", "--conditions", "clean,placement", "--device-mb", "40"]
    assert main(args) == 0
    said = capsys.readouterr()
    out = said.out + said.err
    assert "note: placement: the camera moves the board and rule set mini has no fiducials" in out
    assert "note: clean:" not in out and "board golden" in out
    assert main(["board", "golden", "--rules", str(path)]) == 0
    capsys.readouterr()
    assert main(args) == 0
    said = capsys.readouterr()
    assert "moves the board" not in said.out + said.err  # aligned on its golden board now
