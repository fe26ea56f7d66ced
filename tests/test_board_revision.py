"""What a revision of a taught board changes, place by place (board/revision.py) and what `board revise` refuses
before it reads a photo (app/board_revise.py): rule sets made from one imported board's text, edited as a revised
CAD or BOM would change them. The photo's windows and the served revision are tested in test_board_teach.py."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inspector.board.revision import ADDED, MOVED, PACKAGE, PART_NUMBER, REMOVED, compare, format_revision, neighbours
from inspector.routing.rules import parse_rules

BOARD = {
    "recipe": "r", "seed": 0, "board": {"width": 400, "height": 300}, "crop_margin": 4,
    "classifier": {"arch": "resnet10", "input_size": 32},
    "components": {
        "R_0603": {"shape": "resistor", "size": [24, 10], "pads": [[-12, -5, -4, 5], [4, -5, 12, 5]],
                   "body": [-8, -4, 8, 4], "at": {"R1": [60, 50], "R2": [100, 50], "R3": [140, 50, 90]}},
        "C_0603": {"shape": "capacitor", "size": [24, 10], "pads": [[-12, -5, -3, 5], [3, -5, 12, 5]],
                   "body": [-8, -4, 8, 4], "at": {"C1": [60, 120], "C2": [84, 120]}},
    },
    "part_numbers": {"R1": "RC0603FR-0710KL", "R2": "RC0603FR-0710KL", "R3": "RC0603FR-0710KL",
                     "C1": "GRM188R71H104KA93D", "C2": "GRM188R71H104KA93D"},
    "fiducials": {"marks": {"FID1": {"at": [20, 20]}, "FID2": {"at": [380, 280]}}},
}


def rules(edit=lambda d: None):  # noqa: ANN001, ANN201
    doc = yaml.safe_load(yaml.safe_dump(BOARD))
    edit(doc)
    return parse_rules(yaml.safe_dump(doc, sort_keys=False), "r.yaml")


def at(doc: dict, comp: str) -> dict:
    return doc["components"][comp]["at"]


def leave_off(d: dict, comp: str, ref: str) -> None:
    """A part the revision does not fit: off the board and off the BOM."""
    del at(d, comp)[ref]
    d["part_numbers"].pop(ref, None)


def test_the_same_board_changes_nothing() -> None:
    rev = compare(rules(), rules(), 10.0)
    assert rev.changes == [] and sorted(rev.kept) == ["C1", "C2", "R1", "R2", "R3"] and not rev.layout
    assert rev.needing_window() == [] and "(no part changed)" in format_revision(rev)


def test_each_kind_of_change_is_named_with_what_was_and_what_is() -> None:
    def edit(d: dict) -> None:
        leave_off(d, "R_0603", "R2")  # a DNP in the new BOM
        at(d, "R_0603")["R4"] = [180, 50]  # fitted now
        at(d, "R_0603")["R3"] = [140, 52, 90]  # moved 2 px
        d["part_numbers"]["C1"] = "CL10B104KB8NNNC"  # a second source
        d["part_numbers"]["R1"] = "RC0603FR-0712KL"  # another value
        c2 = at(d, "C_0603").pop("C2")  # another package for C2: now a resistor's footprint
        at(d, "R_0603")["C2"] = c2

    rev = compare(rules(), rules(edit), 10.0)
    kinds = {(c.ref, c.kind) for c in rev.changes}
    assert kinds == {("R2", REMOVED), ("R4", ADDED), ("R3", MOVED), ("C1", PART_NUMBER), ("R1", PART_NUMBER),
                     ("C2", PACKAGE)}
    assert rev.kept == []
    moved = next(c for c in rev.changes if c.kind == MOVED)
    assert (moved.was, moved.now) == ("(140, 50) px, 90 deg", "(140, 52) px, 90 deg")
    assert rev.needing_window() == ["C1", "C2", "R1", "R3", "R4"]
    assert rev.needing_window(frozenset({"R1"})) == ["C1", "C2", "R3", "R4"]  # another value of an unmarked chip
    assert rev.of_kind(REMOVED) == ["R2"] and not rev.new_types


def test_a_part_number_known_on_one_side_only_is_no_change_and_a_footprint_changed_is() -> None:
    def edit(d: dict) -> None:
        del d["part_numbers"]["R1"]
        d["components"]["C_0603"]["pads"] = [[-12, -5, -4, 5], [4, -5, 12, 5]]  # the library's land pattern redrawn

    rev = compare(rules(), rules(edit), 10.0)
    assert {(c.ref, c.kind) for c in rev.changes} == {("C1", PACKAGE), ("C2", PACKAGE)}
    assert "another footprint" in rev.changes[0].now and "R1" in rev.kept


def test_a_type_no_taught_expert_serves_and_another_layout_are_what_teaching_must_do() -> None:
    def edit(d: dict) -> None:
        d["components"]["SOT-23"] = {"shape": "sot23", "size": [34, 29], "at": {"Q1": [250, 200]}}
        d["board"] = {"width": 420, "height": 300}
        d["crop_margin"] = 6
        del d["fiducials"]["marks"]["FID2"]
        d["fiducials"]["marks"]["FID1"] = {"at": [30, 20]}  # 1 mm at 10 px/mm
        d["fiducials"]["marks"]["FID3"] = {"at": [380, 20]}

    rev = compare(rules(), rules(edit), 10.0)
    assert rev.new_types == {"SOT-23": ["Q1"]}
    said = " | ".join(rev.layout)
    assert "420x300 px where the taught one is 400x300" in said and "crop_margin 6" in said
    assert "FID2 no longer on the board" in said and "FID1 moved more than 0.5 mm" in said
    assert compare(rules(), rules(lambda d: d["fiducials"]["marks"].update(FID1={"at": [24, 20]})), 10.0).layout == []


def test_a_left_off_part_names_the_neighbours_whose_windows_still_show_it() -> None:
    def edit(d: dict) -> None:
        leave_off(d, "C_0603", "C1")  # C2's window (24 px on, 4 px of margin) reaches over C1's body

    assert neighbours(rules(), rules(edit), ["C1"]) == {"C1": ["C2"]}
    assert neighbours(rules(), rules(lambda d: leave_off(d, "R_0603", "R3")), ["R3"]) == {}


def test_revise_refuses_what_it_cannot_carry_before_reading_any_photo(tmp_path: Path) -> None:
    from inspector.app.board_revise import RevisePlan, revise_board
    from inspector.board.geometry import BoardGeometry, write_geometry

    taught = yaml.safe_load(yaml.safe_dump(BOARD))
    taught["golden"] = "t.golden.png"
    (tmp_path / "t.golden.png").write_bytes(b"")
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(taught), encoding="utf-8")
    write_geometry(BoardGeometry((0, 0, 400, 300), 10.0), tmp_path / "t.yaml")

    def plan(edit=lambda d: None, px: float = 10.0, **kw) -> RevisePlan:  # noqa: ANN001
        doc = yaml.safe_load(yaml.safe_dump(BOARD))
        edit(doc)
        (tmp_path / "n.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        write_geometry(BoardGeometry((0, 0, 400, 300), px), tmp_path / "n.yaml")
        return RevisePlan(tmp_path / "t.yaml", tmp_path / "n.yaml", tmp_path / "n.taught.yaml", **kw)

    with pytest.raises(ValueError, match="is not a taught rule set"):
        revise_board(RevisePlan(plan().revision, tmp_path / "t.yaml", tmp_path / "o.yaml"))
    with pytest.raises(ValueError, match="is a taught rule set: give the revision as `board import` wrote it"):
        revise_board(RevisePlan(tmp_path / "t.yaml", tmp_path / "t.yaml", tmp_path / "o.yaml"))
    with pytest.raises(ValueError, match=r"imported at 20 px/mm, the taught board at 10: .*--px-per-mm 10"):
        revise_board(plan(px=20.0))
    with pytest.raises(ValueError, match="another layout .* crop_margin 6 .* teach the revision instead"):
        revise_board(plan(lambda d: d.update(crop_margin=6)))
    with pytest.raises(ValueError, match=r"no taught expert serves the revision's component type\(s\) SOT-23 \(Q1\)"):
        revise_board(plan(lambda d: d["components"].update({"SOT-23": {"shape": "sot23", "size": [34, 29],
                                                                        "at": {"Q1": [250, 200]}}})))
    with pytest.raises(ValueError, match="C1: the golden board does not show what the revision fits there"):
        revise_board(plan(lambda d: d["part_numbers"].update(C1="CL10B104KB8NNNC")))
    with pytest.raises(ValueError, match=r"--looks-alike R1: no part number of theirs changed .*\(changed: C1\)"):
        revise_board(plan(lambda d: d["part_numbers"].update(C1="CL10B104KB8NNNC"), looks_alike="R1"))
    assert not (tmp_path / "n.taught.yaml").exists()
