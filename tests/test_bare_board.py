"""A bare board through the line: a `compare:` rule set's windows, the golden board aligned onto each board, every
difference in a window one part named by the window type's expert (routing/compare.py, ingest/compare.py)."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.app.line import Line, LineConfig
from inspector.app.run import line_profiles
from inspector.experts.resnet import ResNetClassifier
from inspector.experts.zoo import Zoo, set_operating_point, write_expert, write_manifest
from inspector.ingest.photometric import INPUT_VERSION
from inspector.results.records import BoardRecord
from inspector.results.store import ResultStore, sqlite_url
from inspector.routing.compare import tiles
from inspector.routing.rules import parse_rules
from inspector.yamlio import ConfigError
from tests.test_deeppcb_bench import board

CLASSES = ("good", "copper", "pin_hole")


def rules_text(windows: str = "W1: [48, 48], W2: [144, 48], W3: [48, 144], W4: [144, 144]", extra: str = "") -> str:
    return ("recipe: bare\nboard: {width: 192, height: 192}\ngolden: golden.png\n"
            "compare: {opening: 3, margin: 4, least_side: 0, context: 1.5}\n"
            "classifier: {arch: resnet10, input_size: 32}\n"
            f"components:\n  bare:\n    shape: window\n    size: [96, 96]\n    at: {{{windows}}}\n{extra}")


def test_windows_tile_a_board_to_its_last_pixel() -> None:
    got = tiles(192, 160, 96)
    assert [(r, x, y) for r, x, y in got] == [("W1-1", 48, 48), ("W1-2", 144, 48), ("W2-1", 48, 112),
                                               ("W2-2", 144, 112)]  # the last row moved in to end at the edge
    assert len(tiles(640, 640, 160)) == 16
    with pytest.raises(ValueError, match="does not fit"):
        tiles(100, 300, 160)


@pytest.mark.parametrize("text, why", [
    (rules_text().replace("golden: golden.png\n", ""), "add `golden: FILE`"),
    (rules_text().replace("compare: {opening: 3, margin: 4, least_side: 0, context: 1.5}\n", ""),
     "add a `compare:` section"),
    (rules_text().replace("opening: 3", "opening: 4"), "must be odd"),
    (rules_text().replace("shape: window", "shape: resistor").replace("[96, 96]", "[20, 10]"),
     "inspects windows only"),
    (rules_text(extra="fiducials:\n  marks:\n    F1: {at: [30, 30]}\n    F2: {at: [160, 160]}\n"),
     "leave out .fiducials."),
    (rules_text(windows="W1: [48, 48], W2: [150, 48]"), "outside the 192x192 board"),
])
def test_a_bare_board_rule_set_says_what_is_wrong_with_it(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=r"(?s)" + why.replace("`", ".")):
        parse_rules(text, "/plant/bare.yaml")


def random_zoo(root: Path, margin: float) -> Zoo:
    """A golden-comparison classifier of real weights (random: what is tested is the path, not the calls)."""
    root.mkdir(parents=True, exist_ok=True)
    arch = ResNetClassifier(10, 32, len(CLASSES), reference="composite", good_margin=margin)
    entry = write_expert(root, "cls-bare", "classifier", arch.spec(), arch.random_state(0), digest=True,
                         classes=CLASSES)
    return write_manifest(root, "bare-test", 0, [entry], input_version=INPUT_VERSION)


def test_every_difference_in_a_window_is_one_part_of_it_named_by_the_shared_expert(tmp_path: Path,
                                                                                 box_models: Path) -> None:
    rng = np.random.default_rng(5)
    golden = cv2.cvtColor(board(rng), cv2.COLOR_GRAY2BGR)
    cv2.imwrite(str(tmp_path / "golden.png"), golden)
    live = cv2.warpAffine(golden, np.float32([[1, 0, 1.6], [0, 1, -1.2]]), (192, 192),
                          borderMode=cv2.BORDER_REPLICATE)  # never quite where the golden board was
    spots = [(30, 30), (40, 150), (150, 150)]  # W1, W3 and W4 (W2 has none)
    for x, y in spots:
        live[y - 4:y + 4, x - 4:x + 4] = 255 - live[y, x]
    (tmp_path / "bare.yaml").write_text(rules_text())
    rules = parse_rules(rules_text(), str(tmp_path / "bare.yaml"))
    zoo = random_zoo(tmp_path / "zoo", margin=0.0)
    records: list[BoardRecord] = []
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    line = Line(rules, zoo, line_profiles(zoo, box_models, lambda _m: None), LineConfig(device_mb=40),
                sinks=[records.append, lambda r: store.write([r])])
    line.start()
    line.inspect(live, "B1", serial_origin="filename")
    line.inspect(golden, "B2", serial_origin="filename")  # no difference at all: no part, a pass
    only = parse_rules(rules_text(windows="W1: [48, 48]"), str(tmp_path / "bare.yaml"))
    line.apply_rules(only)
    line.inspect(live, "B3", serial_origin="filename")  # the windows say where to look: W1 alone
    line.stop()
    by = {r.board_serial: r for r in records}
    parts = by["B1"].parts
    assert [p.ref for p in parts] == ["W1.1", "W3.1", "W4.1"]
    for p, (x, y) in zip(parts, spots):
        assert p.at is not None and p.at[0] <= x <= p.at[2] and p.at[1] <= y <= p.at[3]
        assert p.box is not None and p.box[0] >= 0 and p.box[1] >= 0  # in its crop's pixels
        assert p.expert == "cls-bare" and p.good_logodds is not None and p.likeliest in CLASSES[1:]
        assert p.defect_class == ("ok" if p.good_logodds >= 0.0 else p.likeliest)
    assert by["B2"].parts == [] and by["B2"].verdict == "pass" and line.stats.boards == 3
    assert [p.ref for p in by["B3"].parts] == ["W1.1"]
    stored = {i.board_serial: i for i in store.inspections()}
    assert len(stored) == 3 and [p.ref for p in stored["B1"].parts] == ["W1.1", "W3.1", "W4.1"]

    # the operating point a benchmark chooses serves from then on, the weights unchanged
    strict = set_operating_point(zoo, "cls-bare", 1e5)
    assert strict.architecture("cls-bare").good_margin == 1e5
    assert strict.entries["cls-bare"].weights_sha256 == zoo.entries["cls-bare"].weights_sha256
    with pytest.raises(ValueError, match="not a classifier"):
        set_operating_point(zoo, "det-x", 0.0)


def test_a_bare_board_is_not_drawn_by_the_synthetic_renderer(tmp_path: Path) -> None:
    from inspector.ingest.synthetic import render_board

    rules = parse_rules(rules_text(), str(tmp_path / "bare.yaml"))
    with pytest.raises(ValueError, match="photographed boards"):
        render_board(rules, "S1", np.random.default_rng(0))


def test_the_dashboards_board_picture_marks_the_window_a_difference_lies_in(tmp_path: Path) -> None:
    from ui.picture import board_picture

    rules = parse_rules(rules_text(), str(tmp_path / "bare.yaml"))
    pic = board_picture(rules, "B1", "fail", [("W3.1", "fail", "copper"), ("W3.2", "pass", "ok")], None)
    assert [(b.ref, b.box) for b in pic.boxes] == [("W3.1", (-2, 94, 98, 194)), ("W3.2", (-2, 94, 98, 194))]


def test_a_bare_panels_x_out_has_none_of_its_differences_inspected(tmp_path: Path, box_models: Path) -> None:
    """A bare panel of four boards, a window each (`k-W1`): board 3, an x-out, is not inspected though its window
    differs from the golden board; the others' differences are, each on its own board."""
    rng = np.random.default_rng(5)
    golden = cv2.cvtColor(board(rng), cv2.COLOR_GRAY2BGR)
    cv2.imwrite(str(tmp_path / "golden.png"), golden)
    live = golden.copy()
    for x, y in [(30, 30), (40, 150), (150, 150)]:  # boards 1, 3 and 4
        live[y - 4:y + 4, x - 4:x + 4] = 255 - live[y, x]
    text = rules_text(windows="1-W1: [48, 48], 2-W1: [144, 48], 3-W1: [48, 144], 4-W1: [144, 144]",
                      extra="panel: {boards: 4}\n")
    rules = parse_rules(text, str(tmp_path / "bare.yaml"))
    zoo = random_zoo(tmp_path / "zoo", margin=0.0)
    records: list[BoardRecord] = []
    line = Line(rules, zoo, line_profiles(zoo, box_models, lambda _m: None), LineConfig(device_mb=40),
                sinks=[records.append])
    line.start()
    line.inspect(live, "P1", serial_origin="filename", skip_boards=frozenset({3}))
    line.inspect(live, "P2", serial_origin="filename")
    line.stop()
    by = {r.board_serial: r for r in records}
    assert [p.ref for p in by["P1"].parts] == ["1-W1.1", "4-W1.1"] and by["P1"].panel_skipped == [3]
    assert [p.ref for p in by["P2"].parts] == ["1-W1.1", "3-W1.1", "4-W1.1"]
