"""Boards as a camera sees them, through the real line: registered, scored, stored, exported.

Uses the tiny demo zoo (conftest) on the mini rule set, which has three fiducials.
"""
from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.app.accuracy import CONDITIONS, condition_source, format_table, run_condition
from inspector.app.line import Line, LineConfig
from inspector.app.run import run_line
from inspector.app.service import ServiceConfig
from inspector.cli import main
from inspector.ingest.camera_model import parse_camera
from inspector.ingest.registration import map_points
from inspector.ingest.sources import Frame, Source
from inspector.results.export import export_csv
from inspector.results.store import ResultStore, current_revision, head_revision, sqlite_url

from .conftest import DEMO_RULES as RULES
from .test_routing_rules import GOOD

CAMERA = parse_camera("shift=6,rotation=0.6,scale=0.006,gain=0.8,blur=0.8,noise=4,jpeg=70")


class Frames(Source):
    """Given frames, in order (what a camera delivered)."""

    def __init__(self, frames: list[Frame]) -> None:
        super().__init__("frames")
        self.frames = frames

    def __iter__(self) -> Iterator[Frame]:
        yield from self.frames


def _stored(store: ResultStore) -> dict[str, dict[str, str]]:
    return {i.board_serial: {p.ref: p.verdict for p in i.parts} for i in store.inspections()}


def test_a_board_with_a_covered_fiducial_gets_one_board_level_error_and_no_part_verdicts(demo, tmp_path: Path) -> None:
    root, zoo = demo
    source = condition_source(RULES, CAMERA, 3, seed=41)
    frames = list(source)
    f2 = RULES.fiducials.marks[1]
    x, y = map_points(frames[1].placement, np.array([(f2.x, f2.y)], float))[0]
    cv2.rectangle(frames[1].image, (int(x) - 10, int(y) - 10), (int(x) + 10, int(y) + 10), (40, 40, 40), -1)
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    service, _ = run_line(RULES, zoo, root / "models", Frames(frames), ServiceConfig(LineConfig(device_mb=40)),
                          store, tmp_path, lambda _m: None)
    boards = {i.board_serial: i for i in store.inspections()}
    assert len(boards) == 3 and service.line.stats.registration_failed == 1
    bad = boards[frames[1].serial]
    assert bad.verdict == "error" and bad.parts == []
    assert bad.error.startswith(f"registration failed: fiducial {f2.name} not found")
    for ok in (frames[0], frames[2]):
        row = boards[ok.serial]
        assert len(row.parts) == len(RULES.placements()) and row.error is None
        assert row.reg_residual_px is not None and row.reg_residual_px <= RULES.fiducials.max_residual_px
        assert row.reg_transform is not None and len(row.reg_fiducials) > 2
    assert service.detection.rejected_boards == 1
    assert service.detection.good + service.detection.defective == 2 * len(RULES.placements())
    out = tmp_path / "all.csv"
    with out.open("w", newline="") as fh:
        assert export_csv(store, fh) == 2 * len(RULES.placements()) + 1
    rows = [r for r in csv.DictReader(out.open()) if r["board_serial"] == frames[1].serial]
    assert len(rows) == 1 and rows[0]["ref"] == "" and rows[0]["board_verdict"] == "error"
    assert rows[0]["board_error"].startswith("registration failed: fiducial F2 not found")


def test_a_perturbed_batch_is_scored_against_the_truth_part_by_part(demo, tmp_path: Path) -> None:
    """The accuracy suite's numbers equal an independent count from the stored verdicts and the renderer's truth."""
    root, zoo = demo
    result = run_condition("combined", CONDITIONS["combined"], RULES, zoo, root / "models", 6,
                           LineConfig(device_mb=40), seed=43, share=0.34, data_dir=tmp_path)
    truth = {f.serial: f.truth for f in condition_source(RULES, CONDITIONS["combined"], 6, seed=43, share=0.34)}
    store = ResultStore(sqlite_url(tmp_path / "results.sqlite"))
    stored = _stored(store)
    assert result.stored == 6 == len(stored) and result.boards == 6
    scored = [(truth[serial][ref], verdict) for serial, parts in stored.items() for ref, verdict in parts.items()]
    defects = [v for t, v in scored if t != "ok"]
    good = [v for t, v in scored if t == "ok"]
    d = result.detection
    assert len(defects) == 6 and d.defective == 6  # one defect a board: 34% of 3 parts, rounded
    assert d.caught == sum(v != "pass" for v in defects)
    assert d.false_alarms == sum(v != "pass" for v in good) and d.good == len(good)
    by_type = result.to_json()["false_alarms_by_type"]  # where the false alarms come from, type by type
    assert sum(r["good"] for r in by_type.values()) == d.good
    assert sum(r["flagged"] for r in by_type.values()) == d.false_alarms == sum(
        sum(r["called"].values()) for r in by_type.values())
    assert sum(n for n, _ in d.by_class.values()) == 6 and result.parts == 18
    assert d.rejected_boards == 0 and result.residual_max_px is not None and result.residual_max_px < 1.0
    table = format_table([result])
    assert "combined" in table and "recall" in table


def test_verdicts_under_a_camera_do_not_depend_on_the_policy(demo, tmp_path: Path) -> None:
    root, zoo = demo
    verdicts = {}
    for policy in ("coserve", "samba"):
        store = ResultStore(sqlite_url(tmp_path / f"{policy}.sqlite"))
        run_line(RULES, zoo, root / "models", condition_source(RULES, CAMERA, 5, seed=47),
                 ServiceConfig(LineConfig(policy=policy, device_mb=40)), store, tmp_path / policy, lambda _m: None)
        verdicts[policy] = {s: dict(sorted(p.items())) for s, p in _stored(store).items()}
    assert verdicts["coserve"] == verdicts["samba"] and len(verdicts["coserve"]) == 5


def test_registration_off_cuts_at_nominal_positions_and_stores_no_transform(demo, tmp_path: Path) -> None:
    root, zoo = demo
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(RULES, zoo, root / "models", condition_source(RULES, CONDITIONS["clean"], 2, seed=53),
             ServiceConfig(LineConfig(device_mb=40, register=False)), store, tmp_path, lambda _m: None)
    assert all(i.reg_transform is None and i.reg_residual_px is None for i in store.inspections())
    assert current_revision(store.engine) == head_revision() == "0013"


def test_a_zoo_trained_for_other_crops_is_refused_with_what_to_do(demo) -> None:
    _, zoo = demo
    old = dataclasses.replace(zoo, input_version=1)
    with pytest.raises(ValueError, match="rebuild it"):
        Line(RULES, old, {}, LineConfig())


def test_inspector_accuracy_prints_its_table_and_json(demo, tmp_path: Path, capsys) -> None:
    root, zoo = demo
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD)
    report = tmp_path / "acc.json"
    assert main(["--models", str(root / "models"), "accuracy", "--rules", str(rules), "--zoo", str(zoo.root),
                 "--boards", "2", "--conditions", "clean,placement", "--json", str(report), "--device-mb", "40"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("clean ") for line in lines) and any(line.startswith("placement ") for line in lines)
    import json

    data = json.loads(report.read_text())
    assert [d["condition"] for d in data] == ["clean", "placement"] and all(d["boards"] == 2 for d in data)
    assert main(["--models", str(root / "models"), "accuracy", "--rules", str(rules), "--zoo", str(zoo.root),
                 "--conditions", "sunny"]) == 2
    assert "unknown condition" in capsys.readouterr().err


def test_a_synthetic_source_through_a_camera_knows_where_it_put_each_board() -> None:
    frames = list(condition_source(RULES, CONDITIONS["placement"], 3, seed=59))
    assert all(f.placement is not None and f.placement.shape == (3, 3) for f in frames)
    assert len({tuple(np.round(f.placement.reshape(-1), 4)) for f in frames}) == 3  # each board placed anew


def test_camera_settings_parse_presets_ranges_and_refuse_unknowns_with_what_to_write() -> None:
    from inspector.ingest.camera_model import PRESETS, describe

    model = parse_camera("realistic,jpeg=60,gain=0.6:1.4")
    assert model.jpeg_quality == (60.0, 60.0) and model.gain == (0.6, 1.4)
    assert model.shift_px == PRESETS["realistic"].shift_px
    assert parse_camera(describe(model)) == model  # describe speaks parse_camera's language
    for bad, message in (("sunny", "unknown camera 'sunny'"), ("focus=2", "unknown camera setting 'focus'"),
                         ("blur=soft", "must be a number or a range")):
        with pytest.raises(ValueError, match=message):
            parse_camera(bad)
    from inspector.app.run import open_source

    with pytest.raises(ValueError, match="--camera renders synthetic boards"):
        open_source("folder:/tmp", RULES, 1, 1, camera="realistic")
