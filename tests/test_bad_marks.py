"""A panel's x-outs read on the box itself: the bad-mark pads (ingest/bad_marks.py), and a line that leaves the marked
boards uninspected."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from inspector.app.line import LineConfig
from inspector.app.run import open_source, run_line
from inspector.app.service import ServiceConfig
from inspector.ingest.bad_marks import marked_boards, pad_levels
from inspector.ingest.sources import SyntheticSource
from inspector.results.store import ResultStore, sqlite_url
from inspector.routing.panel import BadMarks
from inspector.routing.rules import parse_rules

from .test_routing_rules import MARKED

PADS = BadMarks({1: (20, 20), 2: (60, 20), 3: (100, 20)}, (8, 8))


def _panel(levels: dict[int, int], background: int = 60) -> np.ndarray:
    """A grey panel with each pad (10x10 around its centre) at its level."""
    image = np.full((40, 120, 3), background, np.uint8)
    for k, level in levels.items():
        x, y = PADS.at[k]
        image[y - 5:y + 5, x - 5:x + 5] = level
    return image


def test_a_dark_mark_on_a_light_pad_is_read_against_the_panels_clean_pads_or_the_golden_board() -> None:
    """Without a golden board the lightest pad is the clean one; with it, each pad its own golden pad. A light
    sticker on a dark pad reads the other way round; a shade of the light that is no mark is not one."""
    assert marked_boards(_panel({1: 200, 2: 40, 3: 185}), PADS) == [2]  # 185: the light falls off, no mark
    assert marked_boards(_panel({1: 200, 2: 200, 3: 200}), PADS) == []
    assert marked_boards(_panel({1: 40, 2: 40, 3: 200}), PADS) == [1, 2]
    golden = _panel({1: 200, 2: 120, 3: 200})  # pad 2 is a darker finish on this board: its golden pad says so
    assert marked_boards(_panel({1: 200, 2: 110, 3: 200}), PADS, golden=golden) == []
    assert marked_boards(_panel({1: 200, 2: 110, 3: 200}), PADS) == [2]  # read against pad 1 instead
    assert marked_boards(_panel({1: 200, 2: 30, 3: 195}), PADS, golden=golden) == [2]
    stickers = BadMarks(PADS.at, PADS.size, mark="light")
    assert marked_boards(_panel({1: 50, 2: 50, 3: 230}), stickers) == [3]
    assert marked_boards(_panel({1: 50, 2: 50, 3: 60}), stickers) == []


def test_the_pads_are_read_where_the_registration_puts_them() -> None:
    """A board shifted in the frame: its pads are read through the registration (recipe px -> image px)."""
    shifted = np.roll(_panel({1: 200, 2: 40, 3: 200}), 7, axis=1)
    to_image = np.array([[1.0, 0, 7], [0, 1.0, 0], [0, 0, 1.0]])
    assert marked_boards(shifted, PADS, to_image) == [2]
    assert pad_levels(shifted, PADS, to_image) == pad_levels(_panel({1: 200, 2: 40, 3: 200}), PADS)


def test_a_line_leaves_a_panels_marked_board_uninspected(demo, tmp_path: Path) -> None:  # noqa: ANN001
    """Panels photographed with a light bad-mark pad under each board, ink on board 2's pad of every other panel:
    those boards are not inspected (none of their parts in the result, nor among the failed boards), the others
    are, and the line counts the marks it read."""
    root, zoo = demo
    rules = parse_rules(MARKED, str(tmp_path / "marked.yaml"))
    folder = tmp_path / "panels"
    folder.mkdir()
    inked = set()
    for i, frame in enumerate(SyntheticSource(rules, 6, seed=4)):
        image = frame.image.copy()
        for k, (x, y) in rules.panel.bad_marks.at.items():
            image[y - 5:y + 5, x - 5:x + 5] = (215, 220, 225)  # the pad: light, as on the real board
            if k == 2 and i % 2 == 0:
                cv2.line(image, (x - 4, y - 4), (x + 4, y + 4), (25, 25, 25), 3)  # an x in marker ink
                cv2.line(image, (x - 4, y + 4), (x + 4, y - 4), (25, 25, 25), 3)
                inked.add(f"P-{i:02d}")
        cv2.imwrite(str(folder / f"P-{i:02d}.png"), image)
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    service, _ = run_line(rules, zoo, root / "models", open_source(f"folder:{folder}", rules, 0, 0),
                          ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None)
    stored = {i.board_serial: i for i in store.inspections()}
    assert len(stored) == 6 and len(inked) == 3 and service.line.stats.bad_marks == 3
    from prometheus_client import generate_latest

    from inspector.app.snapshot import snapshot
    from inspector.kiosk.metrics import line_registry

    page = generate_latest(line_registry(lambda: snapshot(service), "line-1", "aoi-1")).decode()
    assert 'inspector_bad_marks_total{line="line-1",station="aoi-1"} 3.0' in page
    for serial, board in stored.items():
        boards = {p.ref.split("-")[0] for p in board.parts}
        assert boards == ({"1"} if serial in inked else {"1", "2"}), serial
        assert 2 not in board.panel.failed or serial not in inked
        assert board.panel.skipped == ([2] if serial in inked else [])


def test_board_marks_reads_each_photos_pads_as_the_line_does(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`inspector board marks`: each pad's level, the clean pad's and the share taken, to place the pads and set the
    contrast; a photo the line could not inspect is said and the others read; a rule set without pads is refused."""
    import json

    from inspector.cli import main

    from .test_routing_rules import GOOD

    rules_file = tmp_path / "marked.yaml"
    rules_file.write_text(MARKED, encoding="utf-8")
    rules = parse_rules(MARKED, str(rules_file))
    frames = list(SyntheticSource(rules, 2, seed=4))
    for i, frame in enumerate(frames):
        image = frame.image.copy()
        for x, y in rules.panel.bad_marks.at.values():
            image[y - 5:y + 5, x - 5:x + 5] = 220
        if i == 1:
            image[96:104, 96:104] = 30  # ink over board 2's pad
        cv2.imwrite(str(tmp_path / f"P-{i}.png"), image)
    cv2.imwrite(str(tmp_path / "small.png"), frames[0].image[:60, :100])
    photos = [str(tmp_path / n) for n in ("P-0.png", "P-1.png", "small.png")]
    assert main(["board", "marks", *photos, "--rules", str(rules_file), "--json", str(tmp_path / "m.json")]) == 1
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("P-")]
    assert [(r[0], r[1], r[-1]) for r in rows] == [("P-0.png", "1", "no"), ("P-0.png", "2", "no"),
                                                     ("P-1.png", "1", "no"), ("P-1.png", "2", "yes")]
    assert "small.png: not read: board image is 100x60 px" in out
    saved = json.loads((tmp_path / "m.json").read_text())
    assert [p["marked"] for p in saved[photos[1]]["pads"]] == [False, True] and "error" in saved[photos[2]]
    plain = tmp_path / "plain.yaml"
    plain.write_text(GOOD, encoding="utf-8")
    assert main(["board", "marks", photos[0], "--rules", str(plain)]) == 2
    assert "names no bad-mark pads" in capsys.readouterr().err
