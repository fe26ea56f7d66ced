"""Rule sets: the demo boards load, every mistake is reported with file and line, usage follows counts."""
from pathlib import Path

import pytest

from inspector.routing.rules import load_rules, parse_rules
from inspector.yamlio import ConfigError

RULES = Path(__file__).resolve().parents[1] / "routing_rules"

GOOD = """\
recipe: mini
board: {width: 200, height: 120}
classifier: {arch: resnet10, input_size: 32}
detectors:
  det-p: {arch: yolov8n.yaml, input_size: 64, threshold: 0.5}
components:
  R1K:
    shape: resistor
    size: [16, 8]
    at: {R1: [30, 30], R2: [70, 30, 90]}
  D1N:
    shape: diode
    size: [18, 10]
    detector: det-p
    at: {D1: [120, 60]}
fiducials:
  max_residual_px: 1.0
  marks:
    F1: {at: [24, 96]}
    F2: {at: [176, 24]}
    F3: {at: [176, 96], shape: square, size: 7}
"""
# the mini board as a panel of two boards: 1-R1, 1-D1 on the first, 2-R1 on the second
PANEL = GOOD.replace("at: {R1: [30, 30], R2: [70, 30, 90]}", "at: {1-R1: [30, 30], 2-R1: [70, 30, 90]}").replace(
    "at: {D1: [120, 60]}", "at: {1-D1: [120, 60]}").replace("recipe: mini\n", "recipe: mini\npanel: {boards: 2}\n")


def test_demo_rule_sets_load_with_versions_and_shared_detectors() -> None:
    a, b = load_rules(RULES / "board_a.yaml"), load_rules(RULES / "board_b.yaml")
    assert a.recipe == "board_a" and b.recipe == "board_b"
    assert len(a.placements()) >= 80 and len(a.components) >= 12
    assert {d.name for d in a.detectors} == {d.name for d in b.detectors}
    assert a.version != b.version and len(a.version) == 12


def test_usage_probabilities_follow_counts_and_routes() -> None:
    rules = parse_rules(GOOD, "mini.yaml")
    usage = rules.usage()
    assert usage.p("cls-R1K") == pytest.approx(2 * usage.p("cls-D1N"))
    assert usage.is_subsequent("det-p") and not usage.is_subsequent("cls-D1N")
    assert rules.component("D1N").route.experts == ("cls-D1N", "det-p")


def test_version_changes_with_the_text() -> None:
    moved = GOOD.replace("R2: [70, 30, 90]", "R2: [72, 30, 90]")
    assert parse_rules(GOOD, "a").version != parse_rules(moved, "a").version


@pytest.mark.parametrize(("old", "new", "line", "needle"), [
    ("    shape: resistor", "    shape: resistr", 8, "unknown shape 'resistr'"),
    ("    detector: det-p", "    detector: det-x", 14, "det-x"),
    ("R2: [70, 30, 90]", "R2: [70, 30, 45]", 10, "rotation must be one of"),
    ("R2: [70, 30, 90]", "R2: [199, 30]", 10, "outside the 200x120 board"),
    ("R2: [70, 30, 90]", "R2: [34, 31]", 10, "overlaps"),
    ("D1: [120, 60]", "R1: [120, 60]", 15, "already used by R1K"),
    ("    size: [16, 8]", "    size: [16]", 9, "[width, height]"),
    ("classifier: {arch: resnet10", "classifier: {arch: yolov8n.yaml", 3, "a classifier is a ResNet"),
    ("input_size: 64, threshold", "input_size: 50, threshold", 5, "multiple of 32"),
    ("recipe: mini", "recipe: mini\ncolour: red", 2, "unknown key"),
    ("board: {width: 200", "board: {width: [200", 2, "not valid YAML"),
])
def test_errors_name_file_line_and_fix(old: str, new: str, line: int, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_rules(GOOD.replace(old, new), "mini.yaml")
    assert err.value.source == "mini.yaml"
    assert err.value.line == line, str(err.value)
    assert needle in str(err.value)


def test_unreadable_rule_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the rule file"):
        load_rules(tmp_path / "nope.yaml")


POLARITY = """\
recipe: pol
board: {width: 200, height: 120}
classifier: {arch: resnet10, input_size: 32}
components:
  HDR:
    shape: soic
    size: [40, 20]
    polarized: false
    at: {J1: [60, 60]}
  U:
    shape: soic
    size: [40, 20]
    at: {U1: [140, 60]}
"""


def test_a_type_says_it_has_no_polarity_where_its_drawn_shape_would() -> None:
    import numpy as np

    from inspector.ingest.synthetic import render_board

    rules = parse_rules(POLARITY, "pol.yaml")
    assert not rules.component("HDR").polarized and rules.component("U").polarized
    for k in range(5):  # every part that can be reversed is: only U1 can
        truth = render_board(rules, f"B{k}", np.random.default_rng(k), rates={"polarity": 1.0}).truth
        assert truth == {"J1": "ok", "U1": "polarity"}
    # what the experts are trained on changed, so does the training version; a rule set without the key keeps its own
    plain = parse_rules(POLARITY.replace("    polarized: false\n", ""), "pol.yaml")
    assert plain.component("HDR").polarized and plain.training_version != rules.training_version
    assert repr(plain.component("HDR")) == repr(rules.component("HDR"))  # the demo zoos' cache keys stand


@pytest.mark.parametrize(("line", "message"), [("    polarized: true\n", "draws no polarity mark"),
                                               ("    polarized: 1\n", "true or false")])
def test_polarity_the_shape_cannot_draw_is_refused(line: str, message: str) -> None:
    text = POLARITY.replace("    shape: soic\n    size: [40, 20]\n    polarized: false\n",
                            "    shape: resistor\n    size: [40, 20]\n" + line)
    with pytest.raises(ConfigError, match=message):
        parse_rules(text, "pol.yaml")


LANDS = POLARITY.replace("    polarized: false\n", "    polarized: false\n    pads: [[-20, -10, -12, 10], "
                         "[-4, -10, 4, 10], [12, -10, 20, 10]]\n    body: [-10, -6, 10, 6]\n")


def test_a_type_brings_its_footprints_lands_and_body_and_the_renderer_draws_them() -> None:
    import numpy as np

    from inspector.ingest.synthetic import render_board

    rules = parse_rules(LANDS, "lands.yaml")
    hdr = rules.component("HDR")
    assert hdr.pads == ((-20, -10, -12, 10), (-4, -10, 4, 10), (12, -10, 20, 10)) and hdr.body == (-10, -6, 10, 6)
    assert hdr.body_geometry == (0.0, 0.0, 20.0, 12.0)
    assert rules.component("U").body_geometry == pytest.approx((0, 0, 31.2, 20))
    plain = parse_rules(POLARITY, "pol.yaml")
    assert rules.training_version != plain.training_version  # what experts see changed
    assert repr(hdr) == repr(plain.component("HDR"))  # and a rule set without them keeps its key

    def grey(image: np.ndarray, x: int, y: int) -> bool:  # a land's or solder's colour, not the mask's green
        b, g, r = image[y, x].astype(int)
        return min(b, g, r) > 110 and abs(g - r) < 40

    good = render_board(rules, "B1", np.random.default_rng(1), rates={}).image
    # J1 at (60, 60): its outer lands show past the body at x 40..47 and 73..79; the middle one is under the body
    assert grey(good, 43, 60) and grey(good, 76, 60) and not grey(good, 60, 60)
    assert not grey(good, 50, 52)  # the gap between the left land and the body, above the body: mask
    seen = set()
    for k in range(8):  # a bridge joins a land to its nearest neighbour over the 8 px gap, where the middle land
        # shows above or below the body (x 49 and 71 lie in the gaps; y 52 and 68 off the body's 54..65)
        bad = render_board(rules, f"B{k}", np.random.default_rng(k), forced={"J1": "bridge"}, rates={}).image
        seen |= {side for side, x in (("left", 49), ("right", 71)) if any(grey(bad, x, y) for y in (51, 52, 68, 69))}
        assert not any(grey(bad, x, y) for x in (49, 71) for y in (58, 60, 62))  # none drawn under the body
    assert seen == {"left", "right"}


@pytest.mark.parametrize(("lands", "message"), [
    ("    pads: [[-30, -10, -12, 10]]\n", "outside the 40x20 px window"),
    ("    pads: [[-4, 5, 4, 5]]\n", "is empty"),
    ("    pads: [[-4, -5, 4]]\n", r"\[x0, y0, x1, y1\]"),
    ("    pads: []\n", "at least one"),
    ("    body: [-10, -6, 10, 16]\n", "outside the 40x20 px window")])
def test_lands_outside_the_window_or_malformed_are_refused(lands: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_rules(POLARITY.replace("    polarized: false\n", "    polarized: false\n" + lands), "lands.yaml")


# the mini panel with a bad-mark pad under each board (x-outs: ingest/bad_marks.py)
MARKED = PANEL.replace("panel: {boards: 2}\n", "panel:\n  boards: 2\n  bad_marks:\n    size: [8, 8]\n"
                       "    at: {1: [60, 100], 2: [100, 100]}\n")


def test_a_panels_bad_mark_pads_are_read_from_the_rule_set_and_a_wrong_one_named_at_its_line() -> None:
    """`bad_marks:` names each board's pad; a board the panel does not have, a window off the board, a mark that is
    neither dark nor light, each refused at its line."""
    rules = parse_rules(MARKED, "marked.yaml")
    marks = rules.panel.bad_marks
    assert (marks.at, marks.size, marks.mark, marks.contrast) == ({1: (60, 100), 2: (100, 100)}, (8, 8), "dark", 0.4)
    pads = "at: {1: [60, 100], 2: [100, 100]}"
    for wrong, says in (((pads, "at: {1: [60, 100], 3: [100, 100]}"), "3: is no board of the panel"),
                        ((pads, "at: {1: [60, 100], 2: [198, 100]}"), "2: the pad at .198, 100. .* does not fit"),
                        (("size: [8, 8]", "size: [2, 8]"), "size: must be .w, h.* whole px"),
                        (("size: [8, 8]", "size: [8, 8]\n    mark: grey"), "mark: must be one of dark, light"),
                        (("size: [8, 8]", "size: [8, 8]\n    contrast: 1.5"), "contrast: must be at most 0.95"),
                        (("size: [8, 8]", "size: [8, 8]\n    at2: 1"), "at2: unknown key")):
        with pytest.raises(ConfigError, match=rf"marked.yaml:\d+: panel.bad_marks.*{says}"):
            parse_rules(MARKED.replace(*wrong), "marked.yaml")


def test_a_panel_rule_set_gives_each_part_its_board_and_refuses_a_board_it_does_not_have() -> None:
    """`panel: {boards: N}`: parts k-REF are board k's (what `board import` writes for an ODB++ panel), others on the
    panel's frame (0); a k beyond N is named, not counted on the frame in silence."""
    panel = GOOD.replace("at: {R1: [30, 30], R2: [70, 30, 90]}", "at: {1-R1: [30, 30], 2-R1: [70, 30, 90]}") \
        + "panel: {boards: 2}\n"
    rules = parse_rules(panel, "panel.yaml")
    assert rules.panel is not None and rules.panel.boards == 2
    assert {p.ref: rules.panel.position_of(p.ref) for _c, p in rules.placements()} == {"1-R1": 1, "2-R1": 2, "D1": 0}
    assert parse_rules(GOOD, "mini.yaml").panel is None
    with pytest.raises(ConfigError, match=r"panel.yaml:\d+: .*1 references name a copy the panel of 1 boards does "
                                          r"not have \(2-R1\)"):
        parse_rules(panel.replace("boards: 2", "boards: 1"), "panel.yaml")
    with pytest.raises(ConfigError, match=r"panel.yaml:\d+: .*boards"):
        parse_rules(panel.replace("boards: 2", "boards: 0"), "panel.yaml")
    with pytest.raises(ConfigError, match=r"panel.yaml:\d+: .*copies"):
        parse_rules(panel.replace("boards: 2", "boards: 2, copies: 3"), "panel.yaml")


def test_part_numbers_name_placements_and_are_text() -> None:
    rules = parse_rules(GOOD + 'part_numbers:\n  R1: RC0402FR-071KL\n  D1: "1N4148WS,115"\n  R2: 4711\n', "p.yaml")
    assert rules.part_numbers == {"R1": "RC0402FR-071KL", "D1": "1N4148WS,115", "R2": "4711"}
    with pytest.raises(ConfigError, match=r"p.yaml:\d+: .*F1.* is no inspected part of this board"):
        parse_rules(GOOD + "part_numbers:\n  F1: FID\n", "p.yaml")  # a fiducial is no placement
    with pytest.raises(ConfigError, match=r"must be the part's number as the BOM gives it"):
        parse_rules(GOOD + "part_numbers:\n  R1: [a, b]\n", "p.yaml")
