"""One inspection per board from a free-running stream, and each board's serial read from its own code.

The tiny demo zoo (conftest) on the mini rule set with a DataMatrix placed on free board space.
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.app.line import LineConfig
from inspector.app.run import open_source, run_line
from inspector.app.service import ServiceConfig
from inspector.camera.conveyor import conveyor_frames, write_video
from inspector.camera.gate import BoardGate, GatedSource
from inspector.camera.opencv import CameraSource
from inspector.ingest.identity import code_region, read_code
from inspector.ingest.sources import FolderSource, Frame
from inspector.ingest.synthetic import render_board
from inspector.results.export import export_csv
from inspector.results.store import ResultStore, sqlite_url
from inspector.routing.rules import parse_rules
from inspector.yamlio import ConfigError

from .conftest import DEMO_RULES
from .test_camera_line import Frames
from .test_routing_rules import GOOD

CODE = """\
serial_code:
  at: [100, 94]
  size: 44
  module_px: 2
"""
CODED = parse_rules(GOOD + CODE, "coded.yaml")
REFUSING = parse_rules(GOOD + CODE + "  on_noread: refuse\n", "refusing.yaml")


def _run(rules, zoo, root: Path, source, tmp_path: Path):  # noqa: ANN001, ANN202
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    service, _ = run_line(rules, zoo, root / "models", source, ServiceConfig(LineConfig(device_mb=40)), store,
                          tmp_path, lambda _m: None)
    return service, store


def test_a_code_region_that_touches_a_crop_is_refused_at_its_line() -> None:
    bad = CODE.replace("[100, 94]", "[120, 80]")
    with pytest.raises(ConfigError, match=r"coded.yaml:\d+: .*overlaps the crop of D1"):
        parse_rules(GOOD + bad, "coded.yaml")
    with pytest.raises(ConfigError, match="on_noread.*flag .* or refuse"):
        parse_rules(GOOD + CODE + "  on_noread: guess\n", "coded.yaml")


def test_a_code_and_a_gate_do_not_change_what_the_experts_were_trained_for() -> None:
    assert CODED.version != DEMO_RULES.version
    assert CODED.training_version == DEMO_RULES.training_version
    moved = parse_rules(GOOD.replace("[120, 60]", "[122, 60]"), "moved.yaml")
    assert moved.training_version != DEMO_RULES.training_version


def test_the_renderer_prints_a_real_datamatrix_that_reads_back_through_a_tilted_placement() -> None:
    rng = np.random.default_rng(3)
    board = render_board(CODED, "MINI-SN-000123", rng)
    assert read_code(board.image, CODED.serial_code).text == "MINI-SN-000123"
    angle = cv2.getRotationMatrix2D((100, 60), 1.0, 1.0)
    angle[:, 2] += (5, -4)
    moved = cv2.warpAffine(board.image, angle, (200, 120))
    assert read_code(moved, CODED.serial_code, angle).text == "MINI-SN-000123"
    assert code_region(moved, CODED.serial_code, angle).shape == (55, 55)


def test_a_board_shown_to_a_free_running_camera_is_stored_once_and_empty_conveyor_never(demo, tmp_path: Path) -> None:
    root, zoo = demo
    frames, serials = conveyor_frames(CODED, 5, seed=7)
    video = write_video(tmp_path / "line.avi", frames)
    source = open_source(f"camera:{video}", CODED, 0, 0)
    assert isinstance(source, GatedSource)  # auto: a free-running camera gets a gate
    service, store = _run(CODED, zoo, root, source, tmp_path)
    stored = store.inspections()
    assert len(stored) == 5 and [i.verdict for i in stored].count("error") == 0
    assert sorted(i.board_serial for i in stored) == sorted(serials)
    assert {i.serial_source for i in stored} == {"code"}
    g = source.gate.counters
    assert g.frames == len(frames) and g.boards == 5
    assert g.moving > 0 and g.empty > 0 and g.held > 0
    assert g.boards + g.moving + g.empty + g.held == g.frames
    assert service.line.stats.registered == 5  # the gate's registration was used, not done again


def test_without_a_gate_every_frame_of_the_stream_is_a_board(demo, tmp_path: Path) -> None:
    frames, _ = conveyor_frames(CODED, 1, seed=8)
    video = write_video(tmp_path / "line.avi", frames)
    assert len(list(CameraSource(str(video)))) == len(frames)
    plain = open_source(f"camera:{video}", CODED, 0, 0, gate="off")
    assert not isinstance(plain, GatedSource) and isinstance(plain.origin, CameraSource)  # no gate


def test_boards_back_to_back_are_told_apart_by_their_serial_and_place() -> None:
    frames, serials = conveyor_frames(CODED, 3, seed=9, back_to_back=True)
    gate = BoardGate(lambda: CODED)
    out = [f for f in (gate.offer(Frame(img, "", "cam", serial_origin="none")) for img in frames) if f is not None]
    assert [f.code.text for f in out] == serials
    assert all(f.registration is not None and f.rules_version == CODED.version for f in out)


def test_a_rule_set_the_gate_cannot_see_a_board_by_is_refused_with_what_to_do() -> None:
    bare = parse_rules(GOOD.split("fiducials:")[0], "bare.yaml")
    with pytest.raises(ValueError, match="no fiducials and no placed serial code.*--gate off"):
        BoardGate(lambda: bare)


def _scratch(image: np.ndarray) -> np.ndarray:
    out = image.copy()
    cv2.rectangle(out, (86, 80), (114, 108), (38, 96, 30), -1)  # the code rubbed off
    return out


def test_an_unreadable_code_is_inspected_as_noread_and_flagged_or_refused_by_the_rule_set(demo, tmp_path: Path) -> None:
    root, zoo = demo
    rng = np.random.default_rng(4)
    boards = [render_board(CODED, f"MINI-SN-{i}", rng) for i in range(3)]
    frames = [Frame(b.image if i != 1 else _scratch(b.image), b.serial, "t", truth=b.truth)
              for i, b in enumerate(boards)]
    service, store = _run(CODED, zoo, root, Frames(frames), tmp_path / "flag")
    by_id = {i.uuid: i for i in store.inspections()}
    bad = by_id[frames[1].inspection_id]
    assert bad.board_serial == f"NOREAD-{frames[1].inspection_id[:8]}" and bad.serial_source == "noread"
    assert bad.parts and bad.error is None  # flagged, still inspected
    assert by_id[frames[0].inspection_id].board_serial == "MINI-SN-0"
    assert service.line.stats.noreads == 1 and service.detection.serials_read == 2
    frames = [Frame(_scratch(boards[0].image), boards[0].serial, "t")]
    service, store = _run(REFUSING, zoo, root, Frames(frames), tmp_path / "refuse")
    (only,) = store.inspections()
    assert only.verdict == "error" and only.parts == [] and only.error.startswith("NOREAD: no datamatrix code")


def test_a_folder_takes_the_serial_from_a_sidecar_or_a_file_name_pattern(demo, tmp_path: Path) -> None:
    root, zoo = demo
    images = tmp_path / "in"
    images.mkdir()
    rng = np.random.default_rng(6)
    for i, name in enumerate(["SN1001_top.png", "SN1002_top.png", "other.png"]):
        cv2.imwrite(str(images / name), render_board(DEMO_RULES, f"x{i}", rng).image)
    (images / "SN1002_top.json").write_text(json.dumps({"serial": "MES-77"}))
    source = open_source(f"folder:{images}", DEMO_RULES, 0, 0, serial_pattern=r"(?P<serial>SN\d+)_")
    assert isinstance(source, FolderSource)
    _, store = _run(DEMO_RULES, zoo, root, source, tmp_path)
    got = {i.board_serial: i.serial_source for i in store.inspections()}
    assert got == {"SN1001": "filename", "MES-77": "sidecar", "other": "file"}
    with (tmp_path / "out.csv").open("w", newline="") as fh:
        export_csv(store, fh)
    assert "serial_source" in (tmp_path / "out.csv").read_text().splitlines()[0]
    with pytest.raises(ValueError, match="not a regular expression"):
        open_source(f"folder:{images}", DEMO_RULES, 0, 0, serial_pattern="(SN")
