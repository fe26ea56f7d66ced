"""The presence check (board/presence.py): a part's body colour against the board's, on the golden board and the
live one. Drawn boards of a real KiCad import (the renderer's mask and bodies), real crops as the line cuts them."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.board.presence import EXPERT, least_share, overrule, share, teach_presence
from inspector.ingest.crops import crop_part
from inspector.ingest.synthetic import render_board
from inspector.results.records import PartRecord
from inspector.routing.rules import load_rules
from tests.test_board_teach import import_kicad


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_kicad(tmp_path_factory.mktemp("presence"))


def crops_of(rules, image: np.ndarray) -> dict[str, tuple]:  # noqa: ANN001
    return {p.ref: (c, crop_part(image, c, p, rules.crop_margin)) for c, p in rules.placements()}


def test_a_bare_footprint_keeps_little_of_the_golden_bodys_contrast_and_a_placed_part_keeps_it(
        imported: Path) -> None:
    rules = load_rules(imported)
    refs = [p.ref for _c, p in rules.placements()]
    golden = crops_of(rules, render_board(rules, "g", np.random.default_rng(1), rates={}).image)
    other = crops_of(rules, render_board(rules, "o", np.random.default_rng(2), rates={}).image)
    bare = crops_of(rules, render_board(rules, "b", np.random.default_rng(3), rates={},
                                        forced={r: "missing" for r in refs}).image)
    m = rules.crop_margin
    for ref in refs:
        comp, g = golden[ref]
        assert share(g, g, comp, m) == pytest.approx(1.0)
        assert share(other[ref][1], g, comp, m) > 0.5, ref  # another good board of the same make
        assert share(bare[ref][1], g, comp, m) < 0.3, ref  # the window shows the mask where the body was
        # a grey board: colour cannot tell body from board, so the check says nothing rather than guess
        grey = cv2.cvtColor(cv2.cvtColor(g, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
        assert share(grey, grey, comp, m) is None


def test_the_least_share_comes_from_good_crops_at_the_budget_and_calls_only_under_it(imported: Path) -> None:
    rules = load_rules(imported)
    refs = [p.ref for _c, p in rules.placements()]
    rng = np.random.default_rng(4)
    golden = crops_of(rules, render_board(rules, "g", rng, rates={}).image)
    images, goldens, types, idents, labels = [], [], [], [], []
    for k in range(6):  # good boards, and bare ones: every part missing
        for bad in (False, True):
            board = render_board(rules, f"b{k}", rng, rates={}, forced={r: "missing" for r in refs} if bad else None)
            for ref, (comp, crop) in crops_of(rules, board.image).items():
                images.append(crop)
                goldens.append(golden[ref][1])
                types.append(comp.name)
                idents.append(ref)
                labels.append(int(bad))
    labels_ = np.array(labels)
    heldout = np.array([i.startswith("C") for i in idents])  # the capacitors held out, as teaching splits by part
    taught, called = teach_presence(rules, images, goldens, np.array(types), idents, labels_, heldout, 0.05)
    assert taught.least is not None and 0.3 < taught.least < 1.0
    assert taught.parts == len(refs) and set(taught.types) == {c.name for c in rules.components}
    assert taught.heldout_defects == taught.defects_caught  # every bare held-out footprint called
    assert taught.good_called <= 0.1 * taught.heldout_good
    assert called[labels_ == 1].all()
    assert least_share([0.9] * 10, 0.01) is None  # too few good crops to set a 1% quantile: no check


def test_the_check_overrules_a_pass_only_and_says_it_decided() -> None:
    good = PartRecord("R1", "0805", "cls-0805", "abc", "pass", "ok", 3.0)
    called = overrule(good, 0.1, 0.4)
    assert (called.verdict, called.defect_class, called.expert, called.weights_sha256) == \
        ("fail", "missing", EXPERT, None)
    assert overrule(good, 0.5, 0.4) is good and overrule(good, None, 0.4) is good and overrule(good, 0.1, None) is good
    named = PartRecord("R1", "0805", "cls-0805", "abc", "fail", "bridge", -4.0)
    assert overrule(named, 0.1, 0.4) is named  # the experts' more specific call stands


def test_a_rule_sets_body_contrast_is_a_share(imported: Path, tmp_path: Path) -> None:
    text = imported.read_text(encoding="utf-8")
    name = next(iter(load_rules(imported).components)).name
    bare = text.replace(f"  {name}:\n", f"  {name}:\n    body_contrast: 0.4\n", 1)
    good = bare + "golden: golden.png\n"
    (tmp_path / "ok.yaml").write_text(good, encoding="utf-8")
    assert next(c for c in load_rules(tmp_path / "ok.yaml").components if c.name == name).body_contrast == 0.4
    (tmp_path / "bad.yaml").write_text(good.replace("body_contrast: 0.4", "body_contrast: 4"), encoding="utf-8")
    with pytest.raises(ValueError, match="body_contrast.*share between 0 and 1"):
        load_rules(tmp_path / "bad.yaml")
    (tmp_path / "nogolden.yaml").write_text(bare, encoding="utf-8")
    with pytest.raises(ValueError, match="golden board"):  # no golden board to compare with: said, not skipped
        load_rules(tmp_path / "nogolden.yaml")
