"""Teaching an imported board from golden photos: registration to the CAD, made defects, the taught expert per
type, and checking photos through the line (issue 53, `board teach` / `board check`).

The photos are the product's own renders of a KiCad board (real KiCad text, imported by `board import`), placed
turned, scaled and tilted on a plain background the way a phone or a bench camera would take them. The shared
SnapperGPS photos are measured by the commands themselves (README), not asserted here.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.board.geometry import read_geometry
from inspector.board.made_defects import KINDS, made_defects, photo_variant
from inspector.board.outline import find_boards
from inspector.board.register import Registration, RegistrationError, register_points
from inspector.camera.photo_settings import TakenWith, save_photo
from inspector.ingest.synthetic import render_board
from inspector.routing.rules import load_rules

PARTS = [("R", "Resistor_SMD:R_0805_2012Metric", 0.9375, 0.975, 1.4),
         ("C", "Capacitor_SMD:C_0603_1608Metric", 0.7875, 0.875, 0.95)]


def kicad_board(n_per_row: int = 5) -> str:
    """A 40 x 30 mm KiCad 5 board: rows of 0805 resistors and 0603 capacitors, and one SOIC-8."""
    mods = []
    for row, (letter, fp, dx, w, h) in enumerate(PARTS):
        for i in range(n_per_row):
            turn = 90 * (i % 2)  # pcbnew 5 writes a pad's angle absolute: the module's own
            at = f"{6 + 6 * i} {6 + 7 * row} {turn}"
            mods.append(f"""  (module {fp} (layer F.Cu) (at {at}) (attr smd)
    (fp_text reference {letter}{i + 1} (at 0 -1.6) (layer F.SilkS))
    (fp_text value 1k (at 0 1.6) (layer F.Fab))
    (pad 1 smd roundrect (at -{dx} 0 {turn}) (size {w} {h}) (layers F.Cu F.Paste F.Mask))
    (pad 2 smd roundrect (at {dx} 0 {turn}) (size {w} {h}) (layers F.Cu F.Paste F.Mask)))""")
    mods.append("""  (module Package_SO:SOIC-8_3.9x4.9mm_P1.27mm (layer F.Cu) (at 30 23) (attr smd)
    (fp_text reference U1 (at 0 -3.4) (layer F.SilkS))
    (fp_text value NE555 (at 0 3.4) (layer F.Fab))
    (fp_line (start -1.95 -2.45) (end 1.95 -2.45) (layer F.Fab) (width 0.1))
    (fp_line (start 1.95 2.45) (end -1.95 2.45) (layer F.Fab) (width 0.1))
    (pad 1 smd roundrect (at -2.475 -1.905) (size 1.95 0.6) (layers F.Cu F.Paste F.Mask))
    (pad 4 smd roundrect (at -2.475 1.905) (size 1.95 0.6) (layers F.Cu F.Paste F.Mask))
    (pad 5 smd roundrect (at 2.475 1.905) (size 1.95 0.6) (layers F.Cu F.Paste F.Mask))
    (pad 8 smd roundrect (at 2.475 -1.905) (size 1.95 0.6) (layers F.Cu F.Paste F.Mask)))""")
    edges = "".join(f"  (gr_line (start {a}) (end {b}) (layer Edge.Cuts) (width 0.05))\n" for a, b in
                    (("0 0", "40 0"), ("40 0", "40 30"), ("40 30", "0 30"), ("0 30", "0 0")))
    return "(kicad_pcb (version 20171130) (host pcbnew 5.1.9)\n  (general (thickness 1.6))\n" + edges + \
        "\n".join(mods) + "\n)\n"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, text=True,
                          timeout=900)


def import_kicad(root: Path) -> Path:
    """kicad_board() imported by `board import` at 10 px/mm into `root`: its rule set."""
    (root / "b.kicad_pcb").write_text(kicad_board(), encoding="utf-8")
    r = cli("board", "import", str(root / "b.kicad_pcb"), "--out", str(root / "b.yaml"), "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    return root / "b.yaml"


MARKS = (("FID1", "3 27"), ("FID2", "37 3"), ("FID3", "3 3"), ("FID4", "37 27"))


def import_with_marks(root: Path, marks: tuple[tuple[str, str], ...] = MARKS) -> Path:
    """kicad_board() with KiCad's 1 mm fiducials in a 2 mm opening at `marks` (reference, "x y" mm), imported by
    `board import` at 10 px/mm into `root`: its rule set."""
    fids = "".join(f"""  (module Fiducial:Fiducial_1mm_Mask2mm (layer F.Cu) (at {at}) (attr virtual)
    (fp_text reference {ref} (at 0 -2) (layer F.SilkS))
    (fp_text value Fiducial (at 0 2) (layer F.Fab))
    (pad "" smd circle (at 0 0) (size 1 1) (layers F.Cu F.Mask) (solder_mask_margin 0.5)))
""" for ref, at in marks)
    text = kicad_board()
    (root / "f.kicad_pcb").write_text(text[:text.rstrip().rindex(")")] + fids + ")\n", encoding="utf-8")
    r = cli("board", "import", str(root / "f.kicad_pcb"), "--out", str(root / "f.yaml"), "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    return root / "f.yaml"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_kicad(tmp_path_factory.mktemp("teach"))


def photo_of(board: np.ndarray, angle: float, scale: float, tilt: float, shift: tuple[int, int],
             canvas: tuple[int, int] = (900, 760), background: int = 235) -> tuple[np.ndarray, np.ndarray]:
    """(the board placed on a plain background as a camera would see it, the homography board px -> photo px)."""
    h, w = board.shape[:2]
    src = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    rot = cv2.getRotationMatrix2D((w / 2, h / 2), angle, scale)
    dst = cv2.transform(src[None], rot)[0] + np.float32(shift)
    dst[1] += (0, tilt * h)  # one corner pulled: a tilted camera
    m = cv2.getPerspectiveTransform(src, dst)
    photo = cv2.warpPerspective(board, m, canvas, borderValue=(background,) * 3)
    noise = np.random.default_rng(1).normal(0, 2, photo.shape)
    return np.clip(photo + noise, 0, 255).astype(np.uint8), m


def test_import_writes_the_outline_and_every_inspected_parts_pads_beside_the_rule_set(imported: Path) -> None:
    rules, geometry = load_rules(imported), read_geometry(imported)
    assert geometry is not None and geometry.px_per_mm == 10
    assert geometry.outline == pytest.approx((0, 0, 400, 300), abs=0.01)  # 40 x 30 mm at 10 px/mm
    assert set(geometry.pads) == {p.ref for _c, p in rules.placements()}
    # R1 at (6, 6) mm, unturned: pads at x = 6 -+ 0.9375 mm, 0.975 x 1.4 mm
    r1 = sorted(geometry.pads["R1"])
    assert r1[0] == pytest.approx((60 - 9.375 - 4.875, 60 - 7, 60 - 9.375 + 4.875, 60 + 7), abs=0.01)
    # R2 at (12, 6) turned 90 degrees: its pads stack vertically, their sides swapped
    r2 = sorted(geometry.pads["R2"], key=lambda p: p[1])
    assert r2[0] == pytest.approx((120 - 7, 60 - 9.375 - 4.875, 120 + 7, 60 - 9.375 + 4.875), abs=0.01)


def test_a_photo_registers_on_the_boards_outline_whatever_its_turn_and_tilt(imported: Path) -> None:
    rules, geometry = load_rules(imported), read_geometry(imported)
    board = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    pads = [p for ps in geometry.pads.values() for p in ps]
    for angle in (0.0, 17.0, 95.0, 200.0):
        photo, m = photo_of(board, angle, 1.4, 0.02, (160, 140))
        found = find_boards(photo, rules.board_size, geometry.outline, pads, geometry.px_per_mm)
        assert len(found) == 1 and found[0].registration is not None, found[0].reason
        reg = found[0].registration
        corners = np.float64([[[0, 0]], [[400, 0]], [[400, 300]], [[0, 300]]])
        back = cv2.perspectiveTransform(cv2.perspectiveTransform(corners, m), reg.homography)
        assert np.abs(back - corners).max() < 4.0, (angle, back.reshape(-1, 2))  # px at 10 px/mm: 0.4 mm
        assert reg.residual_mm < 0.2


def test_a_connector_over_the_edge_does_not_tilt_the_outline(imported: Path) -> None:
    """A connector's metal shell hanging 1.5 mm over half the bottom edge (a USB receptacle): the side is fitted
    through the solder mask's own edge, not the shell's."""
    rules, geometry = load_rules(imported), read_geometry(imported)
    board = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    pad = 40
    padded = cv2.copyMakeBorder(board, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=(235, 235, 235))
    h, w = board.shape[:2]
    cv2.rectangle(padded, (pad + 60, pad + h - 30), (pad + 260, pad + h + 15), (150, 155, 160), -1)
    pads = [p for ps in geometry.pads.values() for p in ps]
    corners = np.float64([[[0, 0]], [[400, 0]], [[400, 300]], [[0, 300]]])
    for angle in (8.0, 185.0):
        photo, m = photo_of(padded, angle, 1.3, 0.0, (60, 40), canvas=(1000, 800))
        found = find_boards(photo, rules.board_size, geometry.outline, pads, geometry.px_per_mm)
        reg = found[0].registration
        assert reg is not None, found[0].reason
        seen = cv2.perspectiveTransform(corners + pad, m)  # the board's corners in the photo
        assert np.abs(cv2.perspectiveTransform(seen, reg.homography) - corners).max() < 2.0, angle
        assert reg.photo_scale(rules.board_size) == pytest.approx(1.3, rel=0.02)  # photo px per recipe px


def test_things_lying_against_a_corner_do_not_tilt_the_outline(imported: Path) -> None:
    """A chain of washers off a corner (dark rings, bright middles: one blob with the board): each side is fitted
    near the box of the solder mask's own edge, not of the whole blob, which the chain tilts and widens (before,
    the sides came out 1.03-4.01:1 and the board was refused)."""
    rules, geometry = load_rules(imported), read_geometry(imported)
    board = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    pad = 120
    padded = cv2.copyMakeBorder(board, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=(120, 120, 120))
    w = board.shape[1]
    for i in range(4):
        cv2.circle(padded, (pad + w - 10 + 30 * i, pad + 10 - 25 * i), 26, (50, 60, 70), -1)
        cv2.circle(padded, (pad + w - 10 + 30 * i, pad + 10 - 25 * i), 13, (225, 225, 230), -1)
    pads = [p for ps in geometry.pads.values() for p in ps]
    corners = np.float64([[[0, 0]], [[400, 0]], [[400, 300]], [[0, 300]]])
    for angle in (12.0, 250.0):
        photo, m = photo_of(padded, angle, 1.0, 0.0, (150, 150), background=120)
        found = find_boards(photo, rules.board_size, geometry.outline, pads, geometry.px_per_mm)
        reg = found[0].registration
        assert reg is not None, found[0].reason
        seen = cv2.perspectiveTransform(corners + pad, m)
        assert np.abs(cv2.perspectiveTransform(seen, reg.homography) - corners).max() < 2.0, angle


def test_check_says_when_a_photo_resolves_the_board_more_coarsely_than_the_recipe() -> None:
    from inspector.app.board_check import BoardChecked, format_checked
    from inspector.app.board_photos import PhotoBoard

    half = Registration(np.diag([2.0, 2.0, 1.0]), "outline", 0.2, 0.02)  # 1 photo px = 2 recipe px
    assert half.photo_scale((400, 300)) == pytest.approx(0.5)
    board = PhotoBoard(Path("bare.jpg"), 0, (10, 10), half, None)
    coarse = BoardChecked(board, 60, [], 20 * half.photo_scale((400, 300)), 20)
    assert "resolves it at 10.0 px/mm" in format_checked([coarse]) and coarse.to_json()["photo_px_per_mm"] == 10
    fine = BoardChecked(board, 60, [], 18.0, 20)
    assert "resolves" not in format_checked([fine])


def test_boards_that_touch_or_a_line_of_points_are_refused_with_the_reason(imported: Path) -> None:
    rules, geometry = load_rules(imported), read_geometry(imported)
    board = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    pads = [p for ps in geometry.pads.values() for p in ps]
    photo, _ = photo_of(board, 10.0, 1.0, 0.0, (60, 60), canvas=(1000, 700))
    second, _ = photo_of(board, 10.0, 1.0, 0.0, (420, 120), canvas=(1000, 700))
    both = np.minimum(photo, second)  # two boards overlapping: one blob
    found = find_boards(both, rules.board_size, geometry.outline, pads, geometry.px_per_mm)
    assert found and all(c.registration is None for c in found)
    assert any("overlap" in c.reason or "whole board" in c.reason for c in found)
    with pytest.raises(RegistrationError, match="one line"):
        register_points([((0, 0), (0, 0)), ((10, 10), (5, 5)), ((20, 20), (10, 10))], 10.0)
    reg = register_points([((10, 10), (0, 0)), ((210, 10), (100, 0)), ((10, 110), (0, 50))], 10.0)
    assert cv2.perspectiveTransform(np.float64([[[110, 60]]]), reg.homography)[0, 0] == pytest.approx((50, 25))


def test_three_picked_points_on_a_tilted_photo_take_the_tilt_from_the_pad_rims(imported: Path) -> None:
    """Three points picked on a photo from a tilted camera fit an affine map, whose far corner lands 20 px (2 mm)
    off; the tilt that keeps the three points where they are and agrees best with the CAD's pad rims puts every
    corner within 3 px (1.5 px here). Square on, the pad rims still read a slight tilt (2.2 px at the far corner):
    what they tell a tilt within."""
    from inspector.app.board_photos import boards_of

    rules, geometry = load_rules(imported), read_geometry(imported)
    board = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    corners = np.float64([[[0, 0]], [[400, 0]], [[400, 300]], [[0, 300]]])
    for tilt in (0.0, 0.08):
        photo, m = photo_of(board, 10.0, 1.2, tilt, (150, 120))
        seen = cv2.perspectiveTransform(corners, m).reshape(-1, 2)
        points = [(tuple(seen[i]), tuple(corners[i, 0])) for i in (0, 1, 3)]
        affine = register_points(points, geometry.px_per_mm).homography
        off = np.abs(cv2.perspectiveTransform(cv2.perspectiveTransform(corners, m), affine) - corners).max()
        assert (off > 10.0) == bool(tilt), off
        board_found = next(iter(boards_of(photo, Path("tilted.png"), rules, geometry, points)))
        reg = board_found.registration
        error = np.abs(cv2.perspectiveTransform(cv2.perspectiveTransform(corners, m), reg.homography) - corners).max()
        assert error < 3.0, reg.note


def test_made_defects_change_the_window_in_the_crops_own_colours(imported: Path) -> None:
    rules = load_rules(imported)
    board = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    comp, place = next((c, p) for c, p in rules.placements() if p.ref == "U1")
    from inspector.ingest.crops import crop_part

    crop = crop_part(board, comp, place, rules.crop_margin)
    rng = np.random.default_rng(0)
    plain = made_defects(crop, [], rules.crop_margin, polarised=False, rng=rng)
    assert set(plain) == set(KINDS) - {"reversed"}  # a symmetric part is never made "reversed"
    assert "reversed" in made_defects(crop, [], rules.crop_margin, polarised=True, rng=rng)
    m = rules.crop_margin
    for kind, image in plain.items():
        assert image.shape == crop.shape
        assert np.abs(image.astype(int) - crop.astype(int))[m:-m, m:-m].mean() > 3, kind
    rim = np.concatenate([crop[:m].reshape(-1, 3), crop[-m:].reshape(-1, 3)])
    body = plain["missing"][crop.shape[0] // 2, crop.shape[1] // 2].astype(int)
    assert np.abs(body - np.median(rim, axis=0)).max() < 25  # emptied to the board's own colour
    assert photo_variant(crop, rng).shape == crop.shape


def test_a_two_terminal_parts_bridge_runs_beside_its_body_and_a_rows_between_its_pins() -> None:
    """Solder bridges over the board: a chip's two lands are joined along their outer edge, its body's middle
    left as it was; two pins of a row are joined straight across the board between them."""
    from inspector.board.made_defects import bridge

    crop = np.full((40, 60, 3), (120, 40, 60), np.uint8)  # the mask's colour
    crop[14:26, 12:48] = (60, 60, 60)  # the body, dark
    lands = [(10, 12, 20, 28), (40, 12, 50, 28)]
    for x0, y0, x1, y1 in lands:
        crop[y0:y1, x0:x1] = (220, 220, 220)
    changed_edges = set()
    for seed in range(8):
        out = bridge(crop, lands, 8, np.random.default_rng(seed))
        diff = np.abs(out.astype(int) - crop.astype(int)).sum(axis=2)
        assert diff[19:21, 22:38].max() < 8, seed  # the body's middle, between the lands, untouched
        top, bottom = diff[10:14, 22:38].mean(), diff[26:30, 22:38].mean()
        assert max(top, bottom) > 60, seed  # a band along one land edge, over the board beside the body
        changed_edges.add("top" if top > bottom else "bottom")
    assert changed_edges == {"top", "bottom"}  # either side, as the seed falls
    row = [(10, 4, 16, 14), (22, 4, 28, 14), (34, 4, 40, 14)]  # three pins of a row: straight across the gap
    crop2 = np.full((30, 50, 3), (120, 40, 60), np.uint8)
    for x0, y0, x1, y1 in row:
        crop2[y0:y1, x0:x1] = (220, 220, 220)
    out = bridge(crop2, row, 4, np.random.default_rng(0))
    gaps = np.abs(out.astype(int) - crop2.astype(int)).sum(axis=2)[7:11]
    assert max(gaps[:, 17:21].mean(), gaps[:, 29:33].mean()) > 60


def test_passing_a_good_boards_flags_lowers_each_types_threshold_nearest_first_and_recounts_recall() -> None:
    from inspector.app.board_costs import Flag, HeldOut, passing_costs

    held = HeldOut(np.array(["A"] * 5 + ["B"]), np.array(["missing"] * 4 + ["good", "good"]),
                   np.array([-5.0, -3.0, -1.0, 5.0, 2.0, 3.0]), np.array([False, False, False, True, False, False]),
                   {})
    flags = [Flag("b", "A2", "A", -2.0, False), Flag("b", "B1", "B", -4.0, False), Flag("b", "A1", "A", -0.5, False),
             Flag("b", "A3", "A", None, True)]  # A3: the presence check's call
    assert held.recall({"A": 0.0, "B": 0.0}) == 1.0  # the presence-called defect counts at any threshold
    steps = passing_costs(flags, {"A": 0.0, "B": 0.0}, held)
    assert [s.flag.ref for s in steps] == ["A1", "A2", "B1"]  # nearest its threshold first; the presence's never
    assert [s.flagged for s in steps] == [3, 2, 1]
    assert [s.after for s in steps] == pytest.approx([-0.501, -2.001, -4.001])
    assert [s.recall for s in steps] == pytest.approx([1.0, 0.75, 0.75])  # under -2.001 the -1 defect passes
    assert steps[1].type_before == 1.0 and steps[1].type_after == 0.75
    assert steps[2].type_before != steps[2].type_before  # B: no held-out defect, its cost never measured


def test_a_tune_passes_each_types_flags_nearest_first_while_its_held_out_recall_holds_and_says_why_not() -> None:
    from inspector.app.board_costs import Flag, HeldOut
    from inspector.app.board_tune import PRESENCE, STALE, UNMEASURED, plan_tune

    held = HeldOut(np.array(["A"] * 4 + ["B", "C", "C"]),
                   np.array(["missing"] * 3 + ["good", "good", "missing", "good"]),
                   np.array([-5.0, -3.0, -1.0, 4.0, 3.0, -4.0, 2.0]), np.zeros(7, bool), {})
    flags = [Flag("b", "A3", "A", -6.0, False), Flag("b", "A2", "A", -2.0, False), Flag("b", "A1", "A", -0.5, False),
             Flag("b", "B1", "B", -1.0, False), Flag("b", "C1", "C", -1.0, False), Flag("b", "P1", "A", None, True)]
    served, experts = {"A": 0.0, "B": 0.0, "C": 0.0}, {"A": "cls-A", "B": "cls-B", "C": "cls-C"}
    tune = plan_tune(flags, served, experts, held, most_lost=0.34, margin=0.5, stale={"C"})
    a = next(t for t in tune.types if t.type == "A")
    # A1 passes at -1.0 (the -1 defect now passes: 3/3 -> 2/3, within 0.34), A2 at -2.5 (-3 still called); passing
    # A3 at -6.5 would lose every A defect: it stays, and so does everything it cannot pass
    assert a.passed == ["A1", "A2"] and a.after == pytest.approx(-2.5) and a.recall_after == pytest.approx(2 / 3)
    why = {f.ref: w for f, w in tune.left}
    assert set(why) == {"A3", "B1", "C1", "P1"} and "A3" in why["A3"] and "34 points" in why["A3"]
    assert why["B1"] == UNMEASURED and why["C1"] == STALE and why["P1"] == PRESENCE
    assert tune.thresholds() == {"cls-A": pytest.approx(-2.5)}  # only what moves is served
    assert tune.recall_before == 1.0 and tune.recall_after == pytest.approx(3 / 4)  # C's defect -4 still called
    # no loss allowed: a part passes only where no held-out defect of its type sits between it and the threshold
    strict = plan_tune(flags, served, experts, held, most_lost=0.0, margin=0.5)
    assert next(t for t in strict.types if t.type == "A").passed == [] and strict.thresholds() == {"cls-C": -1.5}
    with pytest.raises(ValueError):
        plan_tune(flags, served, experts, held, most_lost=-0.1, margin=0.5)


@pytest.fixture(scope="module")
def taught_board(imported: Path) -> tuple[Path, dict, str]:
    """The imported board taught (2 epochs) from one golden photo, which says the camera settings it was taken
    with: (its folder, teach's JSON, teach's output and notes); beside it other.png (another good board, at another
    exposure), bare.png (every part missing), odd.png (bodies turned, shifted and bridged, which the experts flag
    and the presence check mostly does not) and noise.png (no board)."""
    root = imported.parent
    rules = load_rules(imported)
    rng = np.random.default_rng(3)
    golden = render_board(rules, "g0", rng, rates={}).image
    camera = {"serial": "EMU-1", "model": "Emulation"}  # as `inspector camera photos` writes them (test_camera_photos)
    save_photo(root / "golden.png", photo_of(golden, 12.0, 1.5, 0.02, (150, 120))[0],
               TakenWith.now({"ExposureTime": 805.0, "Gain": 2.0}, camera))
    other = render_board(rules, "g1", rng, rates={}).image
    save_photo(root / "other.png", photo_of(other, -8.0, 1.3, 0.0, (200, 200))[0],
               TakenWith.now({"ExposureTime": 1500.0, "Gain": 2.0}, camera))
    bare = render_board(rules, "b", rng, rates={}, forced={p.ref: "missing" for _c, p in rules.placements()}).image
    cv2.imwrite(str(root / "bare.png"), photo_of(bare, 5.0, 1.4, 0.01, (180, 160))[0])
    cv2.imwrite(str(root / "noise.png"), rng.integers(0, 255, (400, 500, 3), dtype=np.uint8))
    forced = {"R1": "rotated", "R2": "shifted", "R3": "bridge", "C1": "rotated", "C2": "shifted", "C3": "bridge"}
    odd = render_board(rules, "odd", rng, rates={}, forced=forced).image
    cv2.imwrite(str(root / "odd.png"), photo_of(odd, -3.0, 1.35, 0.01, (170, 150))[0])
    r = cli("board", "teach", "--rules", str(imported), "--golden", str(root / "noise.png"), "--work",
            str(root / "bad"))
    assert r.returncode != 0 and "did not register" in r.stderr and "points" in r.stderr
    r = cli("board", "teach", "--rules", str(imported), "--golden", str(root / "golden.png"), "--heldout", "1")
    assert r.returncode == 2 and "--heldout is a share" in r.stderr
    r = cli("board", "teach", "--rules", str(imported), "--golden", str(root / "golden.png"), "--threads", "0")
    assert r.returncode == 2 and "--threads is a count of torch threads, 1 or more, got 0" in r.stderr
    r = cli("board", "teach", "--rules", str(imported), "--golden", str(root / "golden.png"), "--epochs", "2",
            "--json", str(root / "teach.json"), "--escape-rate", "0.05", "--threads", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads((root / "teach.json").read_text(encoding="utf-8"))
    return root, doc, r.stdout + r.stderr  # its tables, and what it said on the way


def test_one_golden_photo_teaches_every_type_and_the_line_checks_other_photos(
        imported: Path, taught_board: tuple[Path, dict, str], box_models: Path) -> None:
    """`board teach` on one golden photo: registration, crops, a golden-comparison expert served per type, a
    taught rule set the line loads; `board check` registers other photos and inspects them on the line."""
    root, doc, stdout = taught_board
    rules = load_rules(imported)
    assert doc["goldens"][0]["method"] == "outline" and doc["goldens"][0]["residual_mm"] < 0.2
    assert {"good", "missing", "shifted", "rotated", "bridge", "tombstone"} <= set(doc["crops"])
    assert {t["type"] for t in doc["types"]} == {c.name for c in rules.components}
    for t in doc["types"]:  # every type of two or more parts validated on one it never trained on, and trained on one
        assert 0 < t["heldout_parts"] < t["parts"] if t["parts"] >= 2 else t["heldout_parts"] <= 1, t
    assert Path(doc["overlays"][0]).is_file() and "validation on held-out parts" in stdout
    # the golden photo's camera settings asked of the camera by the taught set (taken at its changeover)
    assert doc["camera"] == {"ExposureTime": 805.0, "Gain": 2.0}
    assert "camera: the taught set asks ExposureTime 805, Gain 2, as golden.png, by camera EMU-1" in stdout
    # the recall split by what was wrong: every held-out defect counted once, called at its own type's threshold
    kinds = {k["kind"]: k for k in doc["kinds"]}
    assert {"missing", "shifted", "rotated"} <= set(kinds) and "good" not in kinds
    assert sum(k["defects"] for k in kinds.values()) == sum(t["defects"] for t in doc["types"]) == doc["all"]["defects"]
    assert sum(k["called"] for k in kinds.values()) == round(sum(t["recall"] * t["defects"] for t in doc["types"]
                                                                 if t["defects"]))
    assert "held-out defects called, by kind" in stdout and f"missing {kinds['missing']['called']}/" in stdout
    taught = load_rules(root / "b.taught.yaml")
    assert taught.golden and Path(taught.golden).is_file() and not taught.detectors
    assert taught.camera.to_json() == doc["camera"] and "# camera: as golden photo golden.png" in taught.text
    # what the imported set was made from rides on into the taught one (board/provenance.py)
    made = [line for line in taught.text.splitlines() if line.startswith("# made from: design b.kicad_pcb (sha256 ")]
    assert len(made) == 1 and made[0] in (root / "b.yaml").read_text()
    from inspector.experts.zoo import Zoo

    teachings = [v for e in Zoo.load(doc["zoo"]).entries.values() for v in e.versions]
    assert teachings and all(v["trained_with"]["threads"] == 2 for v in teachings)  # --threads 2, to teach it alike
    # the presence check, served beside the experts on every type whose body stands out from the board
    assert doc["presence"]["least_share"] is not None and "presence check" in stdout
    assert all(0 < c.body_contrast < 1 for c in taught.components)
    from inspector.experts.zoo import Zoo

    zoo = Zoo.load(Path(doc["zoo"]))
    for t in doc["types"]:  # each type served by its own entry at its own threshold
        assert zoo.entries[f"cls-{t['type']}"].spec["good_margin"] == pytest.approx(t["threshold"])
    # each part's type kept with the teaching: a retraining's epoch set is drawn type by type from it
    taught_version = zoo.entries[f"cls-{doc['types'][0]['type']}"].versions[0]
    assert taught_version["identity_kinds"] == {p.ref: c.name for c, p in rules.placements()}
    r = cli("--models", str(box_models), "board", "check", "--rules", str(root / "b.taught.yaml"), "--zoo", doc["zoo"],
            *(str(root / f"{p}.png") for p in ("other", "bare", "noise")), "--json", str(root / "check.json"))
    assert r.returncode == 0, r.stderr
    assert "other.png was taken at ExposureTime 1500; b asks ExposureTime 805" in r.stderr + r.stdout
    checked = json.loads((root / "check.json").read_text(encoding="utf-8"))
    other_board = [c for c in checked if c["photo"].endswith("other.png")]
    assert len(other_board) == 1 and other_board[0]["registered"]
    assert other_board[0]["inspected"] == len(rules.placements())
    bare_board = next(c for c in checked if c["photo"].endswith("bare.png"))
    assert len(bare_board["flagged"]) == bare_board["inspected"] == len(rules.placements())  # every part flagged
    assert all(not c["registered"] and c["reason"] for c in checked if c["photo"].endswith("noise.png"))
    # shown as a good board, the bare board's flags are costed: each part the expert flagged passed in turn, nearest
    # its threshold first, at the price of held-out recall; the presence check's calls listed apart
    held = json.loads((Path(doc["zoo"]) / "heldout-scores.json").read_text(encoding="utf-8"))["crops"]
    assert len(held) == doc["all"]["good"] + doc["all"]["defects"]
    r = cli("--models", str(box_models), "board", "check", "--good", "--rules", str(root / "b.taught.yaml"), "--zoo",
            doc["zoo"], str(root / "bare.png"))
    assert r.returncode == 0, r.stderr
    table = r.stdout[r.stdout.index("passing the good boards' flagged parts"):].splitlines()
    rows = [line.split() for line in table[2:] if line[:1].isdigit()]
    served = sum(k["called"] for k in kinds.values()) / sum(k["defects"] for k in kinds.values())
    assert rows[0] == ["0", "(served)", str(len(rules.placements())), f"{100 * served:.1f}%"]
    presence = bare_board["by_presence"]
    assert len(rows) - 1 == len(rules.placements()) - len(presence)  # every part the expert flagged, once
    flagged = [int(row[7]) for row in rows[1:]]
    recall = [float(row[8 if k else 3].rstrip("%")) for k, row in enumerate(rows)]
    assert flagged == list(range(len(rules.placements()) - 1, len(presence) - 1, -1))  # one passed a step
    assert all(a >= b for a, b in zip(recall, recall[1:]))  # each lower threshold lets more made defects through
    assert not presence or "called by the presence check" in r.stdout
    from inspector.app.board_costs import read_heldout, stale_types
    from inspector.experts.zoo import Zoo

    kept, served_zoo = read_heldout(Path(doc["zoo"])), Zoo.load(Path(doc["zoo"]))
    assert kept is not None and stale_types(kept, taught, served_zoo) == []
    retrained = next(iter(kept.weights))  # as if its type's expert were retrained and swapped in since teaching
    kept.weights[retrained] = "0" * 64
    assert stale_types(kept, taught, served_zoo) == [retrained]
    # the line itself takes the raw photos: the taught rule set registers each on the board's outline
    assert taught.photo is not None and Path(taught.photo.geometry).is_file()
    (root / "frames").mkdir()
    for name in ("other.png", "noise.png"):
        (root / "frames" / name).write_bytes((root / name).read_bytes())
    from inspector.results.store import ResultStore, sqlite_url

    db = sqlite_url(root / "line.sqlite")
    r = cli("--models", str(box_models), "run", "--rules", str(root / "b.taught.yaml"), "--zoo", doc["zoo"], "--source",
            f"folder:{root / 'frames'}", "--db", db, "--data", str(root / "data"))
    assert r.returncode == 0, r.stderr
    stored = {Path(i.source).name: i for i in ResultStore(db).inspections()}
    assert len(stored["other.png"].parts) == len(rules.placements()) and stored["other.png"].error is None
    assert not stored["noise.png"].parts and "registration failed" in stored["noise.png"].error
    # a run in which not one board was inspected failed its purpose: exit 1, saying why (each board still stored)
    (root / "errored").mkdir()
    (root / "errored" / "noise.png").write_bytes((root / "noise.png").read_bytes())
    for name in ("cut.png", "empty.jpg"):
        (root / "errored" / name).write_bytes(b"not an image")
    r = cli("--models", str(box_models), "run", "--rules", str(root / "b.taught.yaml"), "--zoo", doc["zoo"], "--source",
            f"folder:{root / 'errored'}", "--db", db, "--data", str(root / "data"))
    assert r.returncode == 1 and "no board was inspected: all 3 errored (the first: " in r.stderr, r.stderr
    assert len(ResultStore(db).inspections()) == len(stored) + 3


def test_a_retrained_types_expert_is_gated_on_its_own_types_held_out_parts(
        taught_board: tuple[Path, dict, str], box_models: Path, tmp_path: Path) -> None:
    """Every type's entry names the type it serves; reviews of one type's flagged parts retrain that entry alone, and
    its held-out table parts the taught held-out crops into its own type's and the other types': the gate reads its
    own (the other types' row shown, not read), or where its type holds no held-out defect, says the others stand in.
    """
    import shutil

    from inspector.experts.zoo import Zoo
    from inspector.results.store import ResultStore, sqlite_url

    root, doc, _ = taught_board
    zoo_dir = tmp_path / "zoo"
    shutil.copytree(doc["zoo"], zoo_dir)
    zoo = Zoo.load(zoo_dir)
    for t in doc["types"]:
        assert zoo.entries[f"cls-{t['type']}"].versions[0]["component_type"] == t["type"]
    (tmp_path / "frames").mkdir()
    for name in ("odd.png", "other.png"):
        (tmp_path / "frames" / name).write_bytes((root / name).read_bytes())
    db = sqlite_url(tmp_path / "line.sqlite")
    r = cli("--models", str(box_models), "run", "--rules", str(root / "b.taught.yaml"), "--zoo", str(zoo_dir),
            "--source", f"folder:{tmp_path / 'frames'}", "--db", db, "--data", str(tmp_path / "data"),
            "--keep-crops", "all")
    assert r.returncode == 0, r.stderr
    parts = [(i.uuid, p) for i in ResultStore(db).inspections() for p in i.parts]
    flagged = [(u, p) for u, p in parts if p.verdict == "fail"]
    assert flagged, "the odd board's turned, shifted and bridged parts are flagged"
    kind = flagged[0][1].component_type
    for u, p in flagged:
        if p.component_type == kind:
            r = cli("review", "--inspection", u, "--ref", p.ref, "--call", "confirmed", "--zoo", str(zoo_dir),
                    "--db", db)
            assert r.returncode == 0, r.stderr
    r = cli("dataset", "export", "--out", str(tmp_path / "dataset"), "--all", "--rules", str(root / "b.taught.yaml"),
            "--zoo", str(zoo_dir), "--heldout-percent", "0", "--db", db)
    assert r.returncode == 0, r.stderr
    config = tmp_path / "inspector.yaml"  # the plant's rule for every retraining, kept in its config file
    config.write_text('"zoo train":\n  epochs: 1\n  tolerate: 5\n')
    r = cli("--config", str(config), "zoo", "train", "--expert", f"cls-{kind}", "--from", str(tmp_path / "dataset"),
            "--zoo", str(zoo_dir))
    assert r.returncode in (0, 1), r.stderr[-3000:]  # 1: the gate refused (said in the table)
    assert f"the plant's rule for retrainings, {config}:3: tolerate 5" in r.stderr
    rows = [line.split("  ")[0] for line in r.stdout.splitlines() if line.startswith("taught held-out")]
    assert rows == [f"taught held-out, {kind}", "taught held-out, other types"], r.stdout
    added = Zoo.load(zoo_dir).entries[f"cls-{kind}"].versions[-1]
    assert added["component_type"] == kind and set(added["eval"]) == {"reviewed held-out", *rows}
    gate = added["gate"]
    assert gate["tolerance"] == 0.05 and gate["tolerance_from"] == f"{config}:3"
    assert gate["rule"].endswith(f"by at most 5 points (95% one-sided bound on the fall; the plant's rule, {config}:3)")
    for name, bound in gate["fall_bounds"].items():  # a fall seen passes its set exactly where its bound is within
        assert (bound <= 0.05) == any(t.startswith(f"recall on the {name} crops") for t in gate["tolerated"])
    own_defects = added["eval"][rows[0]]["old"]["defects"]
    if own_defects:  # its own type's held-out parts are what the gate reads
        assert f"recall on the reviewed held-out and the taught held-out, {kind} crops not below" in \
            added["gate"]["rule"]
        assert added["gate"]["passed"] == ("recall gate: passed" in r.stdout)
        assert set(added["gate"]["losses_seen_on"]) <= {"reviewed held-out", rows[0]}
    else:
        assert f"{kind} holds no held-out defect of its own" in r.stdout


def test_tune_serves_the_planned_thresholds_audited_the_line_confirms_them_and_restore_serves_teachings_again(
        taught_board: tuple[Path, dict, str], box_models: Path, tmp_path: Path) -> None:
    """`board tune` on a board shown as good (here one with defects made: parts the experts flag, some the
    presence check calls): planned without --apply and nothing written; with it the zoo serves the plan, each
    change in the audit trail, and the line's second look flags exactly what the plan left (the parts the presence
    check calls among them); --restore serves teaching's thresholds."""
    import shutil

    from inspector.access.audit import AuditTrail
    from inspector.app.board_tune import UNMEASURED
    from inspector.experts.zoo import Zoo, set_operating_point
    from inspector.results.store import ResultStore, sqlite_url

    root, doc, _ = taught_board
    zoo = tmp_path / "zoo"
    shutil.copytree(doc["zoo"], zoo)
    # every type served at a threshold no part reaches, so the experts flag every part and the plan meets every
    # reason whatever the taught expert (teaching differs with the threads it runs on)
    high = Zoo.load(zoo)
    for name in [n for n in high.entries if n.startswith("cls-")]:
        high = set_operating_point(high, name, 30.0)
    manifest = (zoo / "manifest.json").read_bytes()
    db = sqlite_url(tmp_path / "box.sqlite")
    tune = ("--models", str(box_models), "board", "tune", "--rules", str(root / "b.taught.yaml"), "--zoo", str(zoo),
            "--db", db, "--work", str(tmp_path / "w"))
    r = cli(*tune, str(root / "odd.png"), "--most-lost", "0", "--json", str(tmp_path / "strict.json"))
    assert r.returncode == 0, r.stderr
    assert (zoo / "manifest.json").read_bytes() == manifest  # planned, not served
    strict = json.loads((tmp_path / "strict.json").read_text(encoding="utf-8"))["plan"]
    for t in strict["types"]:  # no held-out defect of a measured type lost
        assert t["recall_before"] is None or t["recall_after"] == t["recall_before"], t
    assert strict["flagged"] == len(load_rules(root / "b.taught.yaml").placements())
    whys = {f["why"] for f in strict["left"]}
    assert UNMEASURED in whys and all(whys)  # the one-part type's cost was never measured: never lowered
    # a trail that cannot be written refuses the change before anything is served
    r = cli(*tune, str(root / "odd.png"), "--most-lost", "100", "--apply", "--db",
            sqlite_url(tmp_path / "no-such-folder" / "box.sqlite"))
    assert r.returncode != 0 and "cannot open the results database" in r.stderr, r.stderr
    assert (zoo / "manifest.json").read_bytes() == manifest
    r = cli(*tune, str(root / "odd.png"), "--most-lost", "100", "--margin", "0.25", "--apply", "--reason",
            "bench board", "--json", str(tmp_path / "served.json"))
    assert r.returncode == 0, r.stderr
    served = json.loads((tmp_path / "served.json").read_text(encoding="utf-8"))
    moved = {t["expert"]: t for t in served["plan"]["types"] if t["threshold_after"] < t["threshold_before"]}
    assert moved and "served" in r.stdout
    entries = Zoo.load(zoo).entries
    for name, t in moved.items():
        assert entries[name].spec["good_margin"] == pytest.approx(t["threshold_after"], abs=1e-4)
    # the line's second look is measured: it flags exactly the parts the plan left flagged
    again = {ref.split()[0] for board in served["after"] for ref in board["flagged"]}
    assert again == {f["ref"] for f in served["plan"]["left"]}
    trail = AuditTrail(ResultStore(db).engine)
    events = trail.events("expert.threshold", newest_first=False)
    assert {e.subject for e in events} == set(moved) and all(e.reason == "bench board" for e in events)
    assert all(json.loads(e.before)["good_margin"] > json.loads(e.after)["good_margin"] for e in events)
    assert all(e.actor.startswith("system:") for e in events)  # no --as: the account running the command
    record = zoo / "heldout-scores.json"  # as if one moved type's expert were retrained since teaching
    kept = record.read_text(encoding="utf-8")
    retrained = next(iter(moved))[len("cls-"):]
    doc_kept = json.loads(kept)
    doc_kept["weights"][retrained] = "0" * 64
    record.write_text(json.dumps(doc_kept), encoding="utf-8")
    r = cli(*tune, "--restore")
    assert r.returncode == 0 and f"retrained since teaching: its taught threshold is of other weights): {retrained}" \
        in r.stdout and f"cls-{retrained}: served" not in r.stdout, r.stdout
    record.write_text(kept, encoding="utf-8")
    r = cli(*tune, "--restore")  # said, not served
    assert r.returncode == 0 and "add --apply" in r.stdout and Zoo.load(zoo).entries == entries
    r = cli(*tune, "--restore", "--apply")
    assert r.returncode == 0, r.stderr
    taught = {f"cls-{t['type']}": t["threshold"] for t in doc["types"]}
    restored = Zoo.load(zoo).entries
    assert all(restored[name].spec["good_margin"] == pytest.approx(taught[name], abs=1e-4) for name in taught)
    assert len(trail.events("expert.threshold")) == len(moved) + len(taught) and trail.verify().intact
    r = cli(*tune, "--restore")
    assert r.returncode == 0 and "nothing to restore" in r.stdout
    r = cli(*tune)
    assert r.returncode == 2 and "name the photos" in r.stderr


def test_tune_served_through_the_kiosk_of_the_board_moves_its_running_line_and_refuses_a_kiosk_of_other_weights(
        taught_board: tuple[Path, dict, str], box_models: Path, tmp_path: Path) -> None:
    """`board tune --apply --kiosk URL`: the running kiosk of the board serves each planned threshold from its next
    board on (its line calls at them, its zoo keeps them, its trail names the person whose token asked), and the
    boards are checked again where the zoo is the kiosk's own; a kiosk serving other weights of a type than the
    tuned zoo holds is refused before anything moves; --kiosk without --apply is a usage error."""
    import shutil
    import threading

    from inspector.access.audit import AuditTrail
    from inspector.app.expert_swap import swap_live
    from inspector.app.line import LineConfig
    from inspector.app.run import line_profiles, open_source
    from inspector.app.service import LineService, ServiceConfig
    from inspector.experts.versions import add_version
    from inspector.experts.zoo import Zoo, set_operating_point
    from inspector.kiosk.service import Kiosk, KioskConfig
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.runtime.safetensors_io import parse

    from .people import person
    from .services import free_port

    root, doc, _ = taught_board
    zoo_dir = tmp_path / "zoo"
    shutil.copytree(doc["zoo"], zoo_dir)
    high = Zoo.load(zoo_dir)  # every type served high, so that the experts flag the odd board's parts
    for name in [n for n in high.entries if n.startswith("cls-")]:
        high = set_operating_point(high, name, 30.0)
    shutil.copytree(zoo_dir, tmp_path / "mine")  # the same weights, tuned below after the kiosk's have moved on
    rules = load_rules(root / "b.taught.yaml")
    data = tmp_path / "kiosk"
    data.mkdir()
    db = sqlite_url(data / "results.sqlite")
    zoo = Zoo.load(zoo_dir)
    service = LineService(rules, zoo, line_profiles(zoo, box_models, lambda _m: None),
                          ServiceConfig(LineConfig(device_mb=40)), ResultStore(db), data,
                          open_source("synthetic", rules, 0, 1000, 0.1, 0.05))
    token = tmp_path / "kim.token"
    token.write_text(person(db, "kim", "engineer"), encoding="utf-8")
    token.chmod(0o600)
    port = free_port()
    kiosk = Kiosk(service, KioskConfig(listen=f"127.0.0.1:{port}", token="t0ken-" + "k" * 30), data_dir=data)
    serving = threading.Thread(target=kiosk.serve, daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{port}"
    tune = ("--models", str(box_models), "board", "tune", "--rules", str(root / "b.taught.yaml"), "--work",
            str(tmp_path / "w"), str(root / "odd.png"), "--most-lost", "100", "--kiosk", url, "--token-file",
            str(token))
    trail = AuditTrail(service.store.engine)
    try:
        r = cli(*tune, "--zoo", str(zoo_dir))
        assert r.returncode == 2 and "goes with --apply" in r.stderr, r.stderr
        r = cli(*tune, "--zoo", str(zoo_dir), "--apply", "--reason", "bench board", "--json", str(tmp_path / "t.json"))
        assert r.returncode == 0, r.stderr
        served = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
        moved = {t["expert"]: t["threshold_after"] for t in served["plan"]["types"]
                 if t["threshold_after"] < t["threshold_before"]}
        assert moved and "on the running line" in r.stdout and "checked again" in r.stdout, r.stdout
        for name, after in moved.items():
            assert service.line.zoo.architecture(name).good_margin == pytest.approx(after, abs=1e-4)
            assert Zoo.load(zoo_dir).entries[name].spec["good_margin"] == pytest.approx(after, abs=1e-4)
        events = trail.events("expert.threshold")
        assert {e.subject for e in events} == set(moved) and {(e.actor, e.reason) for e in events} == \
            {("kim", "bench board")}
        assert "after" in served  # checked again on this box: the kiosk's zoo is this one
        # the kiosk's line now serves retrained weights of one moved type: a tune of the weights before is refused
        name = sorted(moved)[0]
        state = {k: v + 1e-3 if v.is_floating_point() else v
                 for k, v in parse(Zoo.load(zoo_dir).path_of(name).read_bytes()).items()}
        version = add_version(Zoo.load(zoo_dir), name, state, origin="retrained from reviews")
        swap_live(service.line, name, version["weights_sha256"], force=True)
        r = cli(*tune, "--zoo", str(tmp_path / "mine"), "--apply")
        assert r.returncode != 0 and f"does not serve the weights {tmp_path / 'mine'} holds of {name}" in r.stderr, \
            r.stderr
        assert len(trail.events("expert.threshold")) == len(moved)  # nothing moved
    finally:
        kiosk.stop("test done")
        serving.join(60)


def revision_board() -> str:
    """kicad_board() revised: six parts a row (R6 and C6 fitted now), R5 left off, C2 moved 1 mm down."""
    text = kicad_board(6)
    start = text.index("  (module Resistor_SMD:R_0805_2012Metric (layer F.Cu) (at 30 6 0)")
    text = text[:start] + text[text.index("  (module", start + 10):]
    return text.replace("(at 12 13 90)", "(at 12 14 90)", 1)


def test_a_revision_of_the_board_is_carried_without_teaching_windows_only_where_it_changed(
        taught_board: tuple[Path, dict, str], box_models: Path, tmp_path: Path) -> None:
    """`board revise`: the revision's import compared with the taught set place by place; without a photo of a
    revised board the changed places are named and nothing is written; a photo whose new places are bare is refused;
    with a revised board's photo only the changed places' windows (and the left-off part's) change in the golden
    board, the taught experts serve it, and an old-revision board is flagged where it lacks the new parts."""
    root, doc, _ = taught_board
    (tmp_path / "r.kicad_pcb").write_text(revision_board(), encoding="utf-8")
    r = cli("board", "import", str(tmp_path / "r.kicad_pcb"), "--out", str(tmp_path / "r.yaml"), "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    revised_rules = load_rules(tmp_path / "r.yaml")
    rng = np.random.default_rng(7)
    cv2.imwrite(str(tmp_path / "rev.png"), photo_of(render_board(revised_rules, "r0", rng, rates={}).image,
                                                    -6.0, 1.4, 0.01, (170, 170))[0])
    bare = render_board(revised_rules, "r1", rng, rates={}, forced={"R6": "missing", "C6": "missing",
                                                                     "C2": "missing"}).image
    cv2.imwrite(str(tmp_path / "rev-bare.png"), photo_of(bare, 4.0, 1.4, 0.0, (160, 150))[0])
    revise = ("board", "revise", "--rules", str(root / "b.taught.yaml"), "--revision", str(tmp_path / "r.yaml"),
              "--out", str(tmp_path / "r.taught.yaml"))
    r = cli(*revise)
    assert r.returncode == 1 and "C2, C6, R6: the golden board does not show what the revision fits there" in r.stderr
    table = {line.split()[0]: line.split()[1:3] for line in r.stdout.splitlines()[1:] if line[:1] in "RCU"}
    assert table == {"C2": ["moved", "(120,"], "C6": ["fitted", "now"], "R5": ["no", "longer"], "R6": ["fitted", "now"]}
    assert not (tmp_path / "r.taught.yaml").exists()
    r = cli(*revise, "--photo", str(tmp_path / "rev-bare.png"))
    assert r.returncode == 1 and "shows no body" in r.stderr and not (tmp_path / "r.taught.yaml").exists()
    # the zoo names what serves: a zoo without the resistors' expert cannot serve the revision
    import shutil

    shutil.copytree(doc["zoo"], tmp_path / "zoo")
    manifest = json.loads((tmp_path / "zoo" / "manifest.json").read_text(encoding="utf-8"))
    resistor = next(c.name for c in revised_rules.components if c.name.startswith("R_"))
    manifest["experts"] = [e for e in manifest["experts"] if e["name"] != f"cls-{resistor}"]
    (tmp_path / "zoo" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    r = cli(*revise, "--zoo", str(tmp_path / "zoo"), "--photo", str(tmp_path / "rev.png"))
    assert r.returncode == 1 and f"no taught expert serves the revision's component type(s) {resistor} (R1, R2, " \
        "R3, R4, R6)" in r.stderr, r.stderr
    r = cli(*revise, "--zoo", doc["zoo"], "--photo", str(tmp_path / "rev.png"), "--json", str(tmp_path / "rev.json"))
    assert r.returncode == 0, r.stderr
    done = json.loads((tmp_path / "rev.json").read_text(encoding="utf-8"))
    assert done["windows"] == ["C2", "C6", "R6"] and done["bare"] == ["R5"] and not done["still_shown"]
    assert done["unchecked"] == []  # every new window checked to show a body (every type's presence check tells)
    taught, revised = load_rules(root / "b.taught.yaml"), load_rules(tmp_path / "r.taught.yaml")
    assert {p.ref for _c, p in revised.placements()} == {p.ref for _c, p in revised_rules.placements()}
    assert revised.classifier_spec == taught.classifier_spec and not revised.detectors
    assert {c.name: c.body_contrast for c in revised.components} == {c.name: c.body_contrast for c in
                                                                     taught.components}
    assert revised.text.startswith("# revised by `inspector board revise`") and "# taught on: design b.kicad_pcb" \
        in revised.text and "# made from: design r.kicad_pcb" in revised.text
    # the golden board changed inside the changed places' windows alone (C2's old place and new)
    from inspector.ingest.golden import golden_image
    from inspector.routing.rules import body_box

    old, new = golden_image(taught), golden_image(revised)
    changed = np.zeros(old.shape[:2], bool)
    for rules, ref in ((revised, "C2"), (taught, "C2"), (revised, "C6"), (revised, "R6"), (taught, "R5")):
        x0, y0, x1, y1 = next(body_box(c, p, rules.crop_margin) for c, p in rules.placements() if p.ref == ref)
        changed[max(0, y0):y1, max(0, x0):x1] = True
    differs = (old != new).any(axis=2)
    assert differs[changed].mean() > 0.5 and not differs[~changed].any()
    # the taught zoo serves the revision: an old-revision board lacks R6 and C6, and the presence check (measured
    # against the revised golden windows) calls them missing there and not on a revised board (the fixture's
    # two-epoch experts call most parts of either photo a bridge: not what this test is about)
    r = cli("--models", str(box_models), "board", "check", "--rules", str(tmp_path / "r.taught.yaml"), "--zoo",
            doc["zoo"], str(root / "other.png"), str(tmp_path / "rev.png"), "--json", str(tmp_path / "check.json"))
    assert r.returncode == 0, r.stderr
    checked = {Path(c["photo"]).name: c for c in json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))}
    assert all(c["registered"] and c["inspected"] == len(revised.placements()) for c in checked.values())
    missing = {name: set(c["by_presence"]) for name, c in checked.items()}
    assert {"R6", "C6"} <= missing["other.png"] and not {"R6", "C6"} & missing["rev.png"], missing
    # revised again with nothing changed: the golden board stays, and the experts are still named by what they were
    # taught on
    r = cli("board", "revise", "--rules", str(tmp_path / "r.taught.yaml"), "--revision", str(tmp_path / "r.yaml"),
            "--out", str(tmp_path / "r2.taught.yaml"))
    assert r.returncode == 0 and "(no part changed)" in r.stdout, r.stderr
    again = load_rules(tmp_path / "r2.taught.yaml")
    assert again.golden == revised.golden and not (tmp_path / "r2.taught.golden.png").exists()
    assert [line for line in again.text.splitlines() if line.startswith("# taught on:")] == \
        [line for line in revised.text.splitlines() if line.startswith("# taught on:")]


def test_the_kiosk_revises_the_board_it_serves_and_an_engineer_changes_the_line_over_to_it(
        taught_board: tuple[Path, dict, str], box_models: Path, tmp_path: Path) -> None:
    """`board revise --kiosk`: the running kiosk revises its rule file in force with its own zoo from the revision
    sent (its rule text and geometry) and a photo sent, or the newest board its line inspected; the revised set is a
    recipe of its rule folder, audited as written and not served; `--serve` changes the line over from its next
    board, under the engineer's name, kept for the kiosk's next start and through a reload."""
    import shutil
    import threading
    import time

    from inspector.access.audit import AuditTrail
    from inspector.app.line import LineConfig
    from inspector.app.recipes import in_force
    from inspector.app.run import line_profiles, open_source
    from inspector.app.service import LineService, ServiceConfig
    from inspector.endpoint import EndpointError, request_json
    from inspector.experts.zoo import Zoo
    from inspector.kiosk.service import Kiosk, KioskConfig, Reread
    from inspector.results.store import ResultStore, sqlite_url

    from .people import person
    from .services import free_port

    root, doc, _ = taught_board
    line_dir = tmp_path / "line"  # the kiosk's rule folder: the taught set and what it names
    line_dir.mkdir()
    for f in root.glob("b.taught*"):
        if f.is_file():
            shutil.copy(f, line_dir / f.name)
    (tmp_path / "r.kicad_pcb").write_text(revision_board(), encoding="utf-8")
    r = cli("board", "import", str(tmp_path / "r.kicad_pcb"), "--out", str(tmp_path / "r.yaml"), "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    revised_rules = load_rules(tmp_path / "r.yaml")
    cv2.imwrite(str(tmp_path / "rev.png"), photo_of(render_board(revised_rules, "r0", np.random.default_rng(7),
                                                                 rates={}).image, -6.0, 1.4, 0.01, (170, 170))[0])
    rules = load_rules(line_dir / "b.taught.yaml")
    data = tmp_path / "kiosk"
    drop = tmp_path / "drop"
    drop.mkdir()
    db = sqlite_url(data / "results.sqlite")
    data.mkdir()
    zoo = Zoo.load(doc["zoo"])
    service = LineService(rules, zoo, line_profiles(zoo, box_models, lambda _m: None),
                          ServiceConfig(LineConfig(device_mb=40)), ResultStore(db), data,
                          open_source(f"watch:{drop}", rules, 0, 1))
    token = tmp_path / "kim.token"
    token.write_text(person(db, "kim", "engineer"), encoding="utf-8")
    token.chmod(0o600)
    port = free_port()
    kiosk = Kiosk(service, KioskConfig(listen=f"127.0.0.1:{port}", token="t0ken-" + "k" * 30), data_dir=data,
                  rules_path=str(line_dir / "b.taught.yaml"))
    serving = threading.Thread(target=kiosk.serve, daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{port}"
    revise = ("board", "revise", "--kiosk", url, "--token-file", str(token), "--revision", str(tmp_path / "r.yaml"))
    trail = AuditTrail(service.store.engine)
    try:
        r = cli(*revise)  # the revision changes places and no photo is given: refused, nothing written
        assert r.returncode == 1 and "422" in r.stderr and "C2, C6, R6: the golden board does not show" in r.stderr
        assert sorted(f.name for f in line_dir.iterdir()) == sorted(f.name for f in root.glob("b.taught*")
                                                                    if f.is_file()) + ["revisions"]
        assert not any((line_dir / "revisions").iterdir())
        r = cli(*revise, "--rules", str(line_dir / "b.taught.yaml"))
        assert r.returncode == 2 and "--rules is not given with --kiosk" in r.stderr
        r = cli(*revise, "--photo", str(tmp_path / "rev.png"), "--name", "rev-b", "--reason", "ECO 12",
                "--json", str(tmp_path / "rev.json"))
        assert r.returncode == 0, r.stderr
        assert "C6         fitted now" in r.stdout and "the kiosk wrote rev-b.taught.yaml" in r.stdout, r.stdout
        assert "not served" in r.stdout
        done = json.loads((tmp_path / "rev.json").read_text(encoding="utf-8"))
        assert done["windows"] == ["C2", "C6", "R6"] and done["bare"] == ["R5"] and done["file"] == "rev-b.taught.yaml"
        assert "out" not in done and "golden" not in done  # the kiosk's paths stay its own
        assert {"rev-b.taught.yaml", "rev-b.taught.golden.png", "rev-b.taught.board.json"} <= \
            {f.name for f in line_dir.iterdir()}
        assert sorted(f.name for f in (line_dir / "revisions" / "rev-b").iterdir()) == \
            ["rev-b.board.json", "rev-b.yaml", "rev.png"]
        assert "2 golden window(s) from rev.png" not in load_rules(line_dir / "rev-b.taught.yaml").text  # 3, C2 too
        assert "3 golden window(s) from rev.png" in load_rules(line_dir / "rev-b.taught.yaml").text
        assert service.line.rules.version == rules.version  # written, not served
        (event,) = trail.events("rules.revise")
        assert (event.actor, event.reason, json.loads(event.after)["file"]) == ("kim", "ECO 12", "rev-b.taught.yaml")
        r = cli(*revise, "--photo", str(tmp_path / "rev.png"), "--name", "rev-b")
        assert r.returncode == 1 and "409" in r.stderr and "rev-b.taught.yaml is already in" in r.stderr
        # a rule folder the kiosk cannot write a revision into (its revisions/ a file here, as a read-only install
        # refuses any user, root too): said with the folder, not a dropped connection, and nothing written
        (line_dir / "revisions").rename(tmp_path / "kept")
        (line_dir / "revisions").write_text("not a folder", encoding="utf-8")
        try:
            r = cli(*revise, "--photo", str(tmp_path / "rev.png"), "--name", "rev-x")
        finally:
            (line_dir / "revisions").unlink()
            (tmp_path / "kept").rename(line_dir / "revisions")
        assert r.returncode == 1 and "507" in r.stderr and "cannot write the revision into its rule folder" in \
            r.stderr, r.stderr
        assert not (line_dir / "rev-x.taught.yaml").exists()
        # a board of the revision put through the line: the newest board it inspected gives the windows
        shutil.copy(tmp_path / "rev.png", drop / "rev.png")
        deadline = time.monotonic() + 120
        while service.last_board is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert service.last_board is not None
        r = cli(*revise, "--photo", "line", "--name", "rev-c", "--serve")
        assert r.returncode == 0, r.stderr
        assert "served:" in r.stdout and "golden windows from the photo: C2, C6, R6" in r.stdout, r.stdout
        assert "3 golden window(s) from line-rev.png" in load_rules(line_dir / "rev-c.taught.yaml").text
        assert Path(service.line.rules.source).name == "rev-c.taught.yaml"
        assert {p.ref for _c, p in service.line.rules.placements()} == {p.ref for _c, p in
                                                                       revised_rules.placements()}
        (event,) = trail.events("rules.changeover")
        assert event.actor == "kim" and json.loads(event.after)["version"] == service.line.rules.version
        assert in_force(data, line_dir / "b.taught.yaml")[0] == line_dir / "rev-c.taught.yaml"
        assert in_force(data, line_dir / "other.yaml") is None  # the configuration names another file: it wins
        with pytest.raises(EndpointError, match="no rule set for recipe 'rev-x'"):
            request_json(url + "/rules/changeover", {"recipe": "rev-x"}, token.read_text(encoding="utf-8"))
        # a reload whose configuration still names the taught set keeps the changeover's set in force
        kiosk.reread = lambda: Reread(kiosk.config, str(line_dir / "b.taught.yaml"))
        kiosk.reload()
        assert Path(service.line.rules.source).name == "rev-c.taught.yaml"
        request_json(url + "/rules/changeover", {"recipe": "b.taught"}, token.read_text(encoding="utf-8"))
        assert Path(service.line.rules.source).name == "b.taught.yaml"
        assert in_force(data, line_dir / "b.taught.yaml") is None  # back on the configured file: nothing kept
    finally:
        kiosk.stop("test done")
        serving.join(60)


def test_bench_takes_a_rule_sets_own_boards_as_its_workload(imported: Path) -> None:
    from inspector.app.rules_workload import workload_of_rules

    rules = load_rules(imported)
    w = workload_of_rules(rules, boards=3, device_mb=200)
    assert {c.name: c.count for c in w.components} == {c.name: len(c.placements) for c in rules.components}
    assert w.requests == 3 * len(rules.placements()) and w.device_bytes == 200 * 2**20
    assert {c.name for c in w.components if c.detector} == {c.name for c in rules.components if c.detector}
    with pytest.raises(ValueError, match="1 or more"):
        workload_of_rules(rules, boards=0)
    r = cli("bench", "--rules", str(imported), "--workload", "x.yaml")
    assert r.returncode != 0 and "not both" in r.stderr


def test_real_crops_teach_defects_and_alternates_found_good(imported: Path, tmp_path: Path) -> None:
    """`--defects DIR`: a defect class's crops as they are, and good/ (an alternate part the line flagged and an
    engineer found good) taught as a golden crop is, with another photo's variation; every crop beside its part's
    golden window, and a crop the line would not cut refused with what to do."""
    from inspector.app.board_teach import add_real_crops
    from inspector.ingest.crops import crop_part

    rules = load_rules(imported)
    golden = render_board(rules, "g", np.random.default_rng(0), rates={}).image
    comp, place = next(iter(rules.placements()))
    crop = crop_part(golden, comp, place, rules.crop_margin)
    for label in ("good", "bridge"):
        (tmp_path / label).mkdir()
        cv2.imwrite(str(tmp_path / label / f"{place.ref}__flagged.png"), 255 - crop)
    taught: list[tuple[str, str, tuple, tuple]] = []
    add_real_crops(tmp_path, rules, golden, lambda label, name, image, ref: taught.append(
        (label, name, image.shape, ref.shape)), variants=4, rng=np.random.default_rng(1))
    assert [t[0] for t in taught].count("good") == 4 and [t[0] for t in taught].count("bridge") == 1
    assert all(t[1].startswith(f"{place.ref}__real_") and t[2] == t[3] == crop.shape for t in taught)
    cv2.imwrite(str(tmp_path / "good" / f"{place.ref}__small.png"), crop[:-2])
    with pytest.raises(ValueError, match="cut it as the line does"):
        add_real_crops(tmp_path, rules, golden, lambda *a: None)


def test_the_colour_comparison_sees_a_mask_of_another_colour_where_the_grey_one_does_not() -> None:
    import torch

    from inspector.ingest.golden import compose

    rng = np.random.default_rng(0)
    pads = rng.integers(0, 2, (1, 1, 24, 32)).astype(bool)
    def board(mask_rgb: tuple[int, int, int]) -> torch.Tensor:  # bright pads on a mask of this colour
        x = torch.tensor(mask_rgb, dtype=torch.uint8).view(1, 3, 1, 1).repeat(1, 1, 24, 32)
        return torch.where(torch.from_numpy(pads), torch.full_like(x, 230), x)

    purple, blue = board((120, 40, 160)), board((23, 59, 196))  # one grey level (0.299 R + 0.587 G + 0.114 B)
    grey = compose(purple, blue, "composite")[0, 2].float().mean()
    colour = compose(purple, blue, "colour")[0, 2].float().mean()
    assert grey < 3 and colour > 40


def test_the_matched_comparison_keeps_how_dark_a_window_is_where_the_grey_one_does_not() -> None:
    """A bare 0402 land pattern (two bright lands, dark mask between) against a placed resistor (bright
    terminations, a black body): standardised each on its own they are one picture; on the golden window's scale
    the black body is darker than the mask it hides."""
    import torch

    from inspector.ingest.golden import compose

    def window(middle: int) -> torch.Tensor:
        x = torch.full((1, 3, 20, 40), 230, dtype=torch.uint8)
        x[..., :, 12:28] = middle
        return x

    placed, bare = window(20), window(70)  # a black body; the dark mask between bare lands
    grey = compose(bare, placed, "composite")[0, 2, :, 12:28].float().mean()  # the difference where the body is
    matched = compose(bare, placed, "matched")[0, 2, :, 12:28].float().mean()
    assert grey < 1 and matched > 15
    same = compose(placed, placed, "matched")[0, 2].float().mean()
    assert same < 1


def test_good_crops_alone_teach_an_anomaly_expert_per_type_that_the_line_serves(imported: Path,
                                                                                box_models: Path) -> None:
    """`--experts anomaly`: each type's own expert, its head fitted on its good crops alone over the features of the
    classifier this teaching trained; the line loads it and decodes it as any classifier."""
    import torch

    from inspector.experts.registry import architecture_from_spec
    from inspector.experts.resnet import AnomalyHead
    from inspector.experts.zoo import Zoo

    head = AnomalyHead(4)
    with torch.no_grad():
        head.proj.weight.copy_(torch.eye(4))
        head.proj.bias.zero_()
        head.calib.weight.fill_(-0.5)
        head.calib.bias.fill_(2.0)
    logits = head(torch.tensor([[0.0, 0.0, 0.0, 0.0], [4.0, 4.0, 4.0, 4.0]]))
    assert logits.tolist() == [[2.0, 0.0], [-6.0, 0.0]]  # log-odds of good: 2 - 0.5 x mean squared distance

    root = imported.parent / "anomaly"
    root.mkdir()
    rules = load_rules(imported)
    golden = render_board(rules, "g0", np.random.default_rng(5), rates={}).image
    cv2.imwrite(str(root / "golden.png"), photo_of(golden, 5.0, 1.4, 0.0, (150, 150))[0])
    r = cli("board", "teach", "--rules", str(imported), "--golden", str(root / "golden.png"), "--epochs", "1",
            "--experts", "anomaly", "--work", str(root / "work"), "--out", str(root / "a.taught.yaml"),
            "--json", str(root / "a.json"))
    assert r.returncode == 0, r.stderr
    assert "anomaly experts: 3 types" in r.stderr + r.stdout
    zoo = Zoo.load(root / "work" / "zoo")
    files = set()
    for comp in rules.components:
        entry = zoo.entries[f"cls-{comp.name}"]
        assert entry.spec["head"] == "anomaly" and entry.classes == ("good", "anomaly")
        assert architecture_from_spec(entry.spec).key.endswith("+anomaly")
        files.add(entry.file)
    assert len(files) == len(rules.components)  # each type its own head
    other = render_board(rules, "g1", np.random.default_rng(6), rates={}).image
    cv2.imwrite(str(root / "other.png"), photo_of(other, -4.0, 1.3, 0.0, (160, 160))[0])
    r = cli("--models", str(box_models), "board", "check", "--rules", str(root / "a.taught.yaml"), "--zoo",
            str(root / "work" / "zoo"), str(root / "other.png"), "--json", str(root / "c.json"))
    assert r.returncode == 0, r.stderr
    checked = json.loads((root / "c.json").read_text(encoding="utf-8"))
    assert checked[0]["registered"] and checked[0]["inspected"] == len(rules.placements())


def test_the_taught_rule_set_serves_every_type_the_taught_experts_input(imported: Path, tmp_path: Path) -> None:
    """A starter expert's `input_size:` (board import's, for a large package) does not survive teaching: every type
    is served the taught golden comparison, at the input it was taught at."""
    import yaml

    from inspector.app.board_teach import taught_rules_text

    name = load_rules(imported).components[0].name
    text = imported.read_text(encoding="utf-8").replace(f"  {name}:\n", f"  {name}:\n    input_size: 64\n", 1)
    (tmp_path / "b.yaml").write_text(text, encoding="utf-8")
    rules = load_rules(tmp_path / "b.yaml")
    assert rules.expert_specs()[f"cls-{name}"]["input_size"] == 64
    (tmp_path / "g.png").write_bytes(b"")
    out = tmp_path / "b.taught.yaml"
    out.write_text(taught_rules_text(rules, tmp_path / "g.png", {"depth": 10, "input_size": 48}, out, {}),
                   encoding="utf-8")
    assert not any("input_size" in c for c in yaml.safe_load(out.read_text(encoding="utf-8"))["components"].values())
    assert {s["input_size"] for s in load_rules(out).expert_specs().values()} == {48}


def test_a_board_with_fiducials_taught_from_photos_is_found_in_a_photo_then_refined_on_its_marks(
        tmp_path: Path) -> None:
    """A board whose CAD has fiducials, taught from photos: the taught rule set finds the board in a photo of any
    scale as teaching did (`photo_registration`) and then refines it on its marks. It kept `fiducials:` alone
    before, so the line refused every photo it was taught from (`board image is 959x1280 px but the rule set lays
    out a 1300x1401 board`, on the shared stm32wb55-dev board)."""
    import shutil

    from inspector.app.board_photos import register_photo
    from inspector.app.board_teach import taught_rules_text
    from inspector.board.geometry import geometry_path
    from inspector.board.golden_marks import golden_marks
    from inspector.ingest.registration import register
    from inspector.routing.rules import parse_rules

    rules = load_rules(import_with_marks(tmp_path, MARKS[:3]))
    assert rules.fiducials is not None and {m.ring for m in rules.fiducials.marks} == {20}
    # the golden board as a photo brought it: 3 px right and 2 up of where the CAD puts it (points picked a little off)
    golden = cv2.warpAffine(render_board(rules, "g", np.random.default_rng(4), rates={}).image,
                            np.float32([[1, 0, 3], [0, 1, -2]]), rules.board_size, borderMode=cv2.BORDER_REPLICATE)
    cv2.imwrite(str(tmp_path / "f.taught.golden.png"), golden)
    marks = golden_marks(golden, rules.fiducials)
    nominal = {m.name: (m.x, m.y) for m in rules.fiducials.marks}
    assert {n: (x - nominal[n][0], y - nominal[n][1]) for n, (x, y) in marks.at.items()} == {
        "FID1": (3, -2), "FID2": (3, -2), "FID3": (3, -2)}
    out = tmp_path / "f.taught.yaml"
    shutil.copyfile(geometry_path(tmp_path / "f.yaml"), geometry_path(out))
    out.write_text(taught_rules_text(rules, tmp_path / "f.taught.golden.png", {"depth": 10, "input_size": 48}, out,
                                     {"geometry": geometry_path(out).name}, marks=marks), encoding="utf-8")
    taught = load_rules(out)  # both ways at once load: found in the photo, then refined on the marks
    assert taught.photo is not None and taught.fiducials is not None
    board = render_board(rules, "b", np.random.default_rng(5), rates={}).image
    photo, _ = photo_of(board, 7.0, 1.45, 0.01, (150, 110))
    image, found = register_photo(photo, taught, golden)
    assert image.shape[:2] == golden.shape[:2] and found.method.startswith("outline")
    refined = register(image, taught.fiducials)
    assert set(refined.found) == {"FID1", "FID2", "FID3"} and refined.residual_px <= 1.0, refined
    # refined on the marks where the golden board has them, the board stays on the golden board it was aligned on
    # (on the CAD's places it would be moved 3.6 px off it, and every crop off its golden window)
    assert math.hypot(*refined.shift) < 1.0, refined
    assert math.hypot(*register(image, rules.fiducials).shift) > 3.0
    # a mark the golden board does not show is left out; too few left, the taught set keeps none
    covered = golden.copy()
    cv2.circle(covered, nominal["FID2"], 14, (40, 90, 30), -1)
    assert set(golden_marks(covered, rules.fiducials).at) == {"FID1", "FID3"}
    cv2.circle(covered, nominal["FID3"], 14, (40, 90, 30), -1)
    none = golden_marks(covered, rules.fiducials)
    assert none.at == {} and "the golden board shows 1 of them" in none.note
    text = taught_rules_text(rules, tmp_path / "f.taught.golden.png", {"depth": 10, "input_size": 48}, out,
                             {"geometry": geometry_path(out).name}, marks=none)
    assert "\nfiducials:" not in text and parse_rules(text, str(out)).fiducials is None
    # a revision of the marked board (C2 moved 1 mm down) carried from the taught set: the photo of a revised board
    # found on its outline and refined on the marks where the golden board has them, C2's window pasted there, and
    # the marks kept at the golden board's places
    from inspector.app.board_revise import RevisePlan, revise_board
    from inspector.ingest.golden import golden_image
    from inspector.routing.rules import body_box

    out.write_text(taught_rules_text(rules, tmp_path / "f.taught.golden.png", {"depth": 10, "input_size": 48}, out,
                                     {"geometry": geometry_path(out).name}, marks=marks), encoding="utf-8")
    (tmp_path / "rev").mkdir()
    text = (tmp_path / "f.kicad_pcb").read_text(encoding="utf-8").replace("(at 12 13 90)", "(at 12 14 90)", 1)
    (tmp_path / "rev" / "f.kicad_pcb").write_text(text, encoding="utf-8")
    r = cli("board", "import", str(tmp_path / "rev" / "f.kicad_pcb"), "--out", str(tmp_path / "rev" / "f.yaml"),
            "--px-per-mm", "10")
    assert r.returncode == 0, r.stderr
    moved = render_board(load_rules(tmp_path / "rev" / "f.yaml"), "r", np.random.default_rng(6), rates={}).image
    cv2.imwrite(str(tmp_path / "rev.png"), photo_of(moved, -5.0, 1.4, 0.0, (160, 120))[0])
    done = revise_board(RevisePlan(out, tmp_path / "rev" / "f.yaml", tmp_path / "rev" / "f.taught.yaml",
                                   tmp_path / "rev.png"))
    assert [(c.ref, c.kind) for c in done.revision.changes] == [("C2", "moved")] and done.windows == ["C2"]
    assert done.unchecked == ["C2"] and "the windows of C2 were not checked to show a body" in done.summary()  # no
    # presence check was taught for this set
    revised = load_rules(tmp_path / "rev" / "f.taught.yaml")
    assert {m.name: (m.x, m.y) for m in revised.fiducials.marks} == marks.at
    new = golden_image(revised)
    changed = np.zeros(golden.shape[:2], bool)
    for rs in (revised, taught):
        x0, y0, x1, y1 = next(body_box(c, p, rs.crop_margin) for c, p in rs.placements() if p.ref == "C2")
        changed[y0:y1, x0:x1] = True
    differs = (golden != new).any(axis=2)
    assert differs[changed].mean() > 0.5 and not differs[~changed].any()
    # the pasted window lies where the golden board has the part: C2's new window on the revised golden board is
    # nearer the revised board's own C2 (drawn 3 px right and 2 up, as the golden board was) than a window 3 px off
    c2 = next((c, p) for c, p in revised.placements() if p.ref == "C2")
    drawn = cv2.warpAffine(moved, np.float32([[1, 0, 3], [0, 1, -2]]), rules.board_size,
                           borderMode=cv2.BORDER_REPLICATE)
    from inspector.ingest.crops import crop_part

    here = crop_part(drawn, *c2, revised.crop_margin).astype(float)
    off = crop_part(np.roll(drawn, 3, axis=1), *c2, revised.crop_margin).astype(float)
    window = crop_part(new, *c2, revised.crop_margin).astype(float)
    assert np.abs(window - here).mean() < np.abs(window - off).mean()


def test_a_board_taught_elsewhere_is_installed_on_a_running_kiosk_and_served_from_its_next_start(
        taught_board: tuple[Path, dict, str], demo, tmp_path: Path) -> None:
    """`board install --kiosk`: a board taught on another machine (its rule set, golden board, registration files
    and its own zoo) travels as one package to a kiosk serving another board; a damaged package, a name taken and a
    caller without a token change nothing; chosen for the next start (`--next-start`), a restarted kiosk serves it
    with its zoo and inspects a photo of it; `board serve` changes the running line over to the configured board and
    back to b live, and the board served last is the one the next start runs."""
    import shutil
    import tarfile

    from inspector.access.audit import AuditTrail
    from inspector.results.store import ResultStore, sqlite_url

    from .faults import KioskProcess, http, wait_until
    from .people import person
    from .test_routing_rules import GOOD

    root, doc, _ = taught_board
    models, zoo = demo
    rules = tmp_path / "mini.yaml"  # the kiosk's configured board: the demo's
    rules.write_text(GOOD, encoding="utf-8")
    inbox, data = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    data.mkdir()
    db = sqlite_url(data / "results.sqlite")
    token = tmp_path / "kim.token"
    token.write_text(person(db, "kim", "engineer"), encoding="utf-8")
    token.chmod(0o600)
    kiosk = KioskProcess(models, zoo.root, rules, inbox, data)
    package = tmp_path / "b.board.tar"
    try:
        kiosk.start()
        assert kiosk.status()["line"]["recipe"] == "mini"
        install = ("board", "install", "--kiosk", kiosk.url, "--rules", str(root / "b.taught.yaml"), "--zoo",
                   doc["zoo"])
        r = cli(*install, "--out", str(package))  # no token: refused, nothing installed
        assert r.returncode == 3 and "401" in r.stderr and not (data / "boards").exists(), r.stderr
        with tarfile.open(package) as tar:
            names = tar.getnames()
            weights = next(m for m in tar.getmembers() if m.name.endswith(".safetensors"))
        assert names[0] == "package.json" and "board/b.taught.yaml" in names and "board/b.taught.golden.png" in names
        assert "zoo/manifest.json" in names and not any(n.startswith("zoo/runtime/") for n in names)
        damaged = tmp_path / "damaged.tar"
        raw = bytearray(package.read_bytes())
        raw[weights.offset_data + weights.size // 2] ^= 0xFF  # one byte of the weights changed on the way
        damaged.write_bytes(bytes(raw))
        r = cli("board", "install", "--kiosk", kiosk.url, "--token-file", str(token), "--package", str(damaged))
        assert r.returncode == 1 and "422" in r.stderr and "sha256 differs" in r.stderr, r.stderr
        assert [p.name for p in (data / "boards").iterdir()] == []  # nothing of it stays
        r = cli("board", "install", "--kiosk", kiosk.url, "--token-file", str(token), "--package", str(package),
                "--reason", "new product B")
        assert r.returncode == 0 and "installed on" in r.stdout and "not served" in r.stdout, r.stderr
        board = data / "boards" / "b"
        assert (board / "board" / "b.taught.golden.png").read_bytes() == (root / "b.taught.golden.png").read_bytes()
        assert kiosk.status()["line"]["recipe"] == "mini"  # installed, not served
        r = cli("board", "install", "--kiosk", kiosk.url, "--token-file", str(token), "--package", str(package))
        assert r.returncode == 1 and "409" in r.stderr and "installed already" in r.stderr
        profile = ("board", "profile", "b", "--kiosk", kiosk.url, "--token-file", str(token))
        r = cli(*profile)  # at a quiet moment: what b's first changeover would measure, measured now
        assert r.returncode == 0 and r.stdout.startswith("board b: "), r.stderr
        profiled = [("board.profile", "kim", None)] if "profiled on" in r.stdout else []  # this box had none of it
        r = cli(*profile)
        assert r.returncode == 0 and "has a profile of each of its architectures already" in r.stdout, r.stdout
        assert kiosk.status()["line"]["recipe"] == "mini"  # profiled, not served
        r = cli("board", "next", "b", "--kiosk", kiosk.url, "--token-file", str(token), "--reason", "changeover to B")
        assert r.returncode == 0 and "next start" in r.stdout, r.stderr
        code, boards = http(kiosk.url + "/boards")
        assert code == 200 and boards["next"] == "b" and boards["serving"] is None
        r = cli("board", "remove", "b", "--kiosk", kiosk.url, "--token-file", str(token))
        assert r.returncode == 1 and "409" in r.stderr and "next start runs it" in r.stderr, r.stderr
        assert [b["board"] for b in boards["boards"]] == ["b"] and boards["boards"][0]["recipe"] == "b"
        assert kiosk.stop() == 0
        kiosk.start()  # the line's changeover: the kiosk restarted serves the installed board with its own zoo
        status = kiosk.status()
        assert status["line"]["recipe"] == "b", status["line"]
        assert http(kiosk.url + "/boards")[1]["serving"] == "b"
        assert "board b installed on this kiosk" in kiosk.tail()
        shutil.copy(root / "other.png", inbox / "other.png")  # another good board, photographed
        store = ResultStore(db)
        assert wait_until(lambda: store.count()[0] >= 1, 120), kiosk.tail()
        inspected = store.inspections(limit=1)[0]
        assert inspected.recipe == "b" and len(inspected.parts) == len(load_rules(root / "b.taught.yaml").placements())
        serve = ("board", "serve", "--kiosk", kiosk.url, "--token-file", str(token))
        r = cli(*serve, "--configured")  # live, at the line's next changeover: no restart
        assert r.returncode == 0 and "the configured board served from the next board on" in r.stdout, r.stderr
        assert kiosk.status()["line"]["recipe"] == "mini"
        assert http(kiosk.url + "/boards")[1] | {"boards": None} == {"boards": None, "next": None, "serving": None,
                                                                     "configured": {"rules": "mini.yaml"}}
        r = cli(*serve, "b", "--reason", "lot of B")
        assert r.returncode == 0 and "board b served" in r.stdout and "next start" in r.stdout, r.stderr
        status = kiosk.status()
        assert status["line"]["recipe"] == "b" and status["board_changes"] == 2
        from urllib.request import urlopen

        from .test_kiosk import metric

        with urlopen(kiosk.url + "/metrics", timeout=5) as page:
            assert metric(page.read().decode(), "inspector_board_changes_total") == 2.0
        shutil.copy(root / "other.png", inbox / "other-again.png")  # inspected by b's zoo, served live
        assert wait_until(lambda: store.count()[0] >= 2, 120), kiosk.tail()
        inspected = store.inspections(limit=1)[0]
        assert inspected.recipe == "b" and len(inspected.parts) == len(load_rules(root / "b.taught.yaml").placements())
        r = cli(*serve, "--configured")
        assert r.returncode == 0, r.stderr
        assert kiosk.stop() == 0
        kiosk.start()  # the board served last is the one the kiosk starts on
        assert kiosk.status()["line"]["recipe"] == "mini"
        r = cli("board", "remove", "b", "--kiosk", kiosk.url, "--token-file", str(token))
        assert r.returncode == 0 and not board.exists() and http(kiosk.url + "/boards")[1]["boards"] == []
        assert kiosk.stop() == 0
    finally:
        kiosk.close()
    trail = AuditTrail(ResultStore(db).engine).events()
    kinds = [(e.kind, e.actor, e.reason) for e in reversed(trail) if e.kind.startswith("board.")]
    assert kinds == [("board.install", "kim", "new product B"), *profiled, ("board.next", "kim", "changeover to B"),
                     ("board.serve", "kim", None), ("board.serve", "kim", "lot of B"), ("board.serve", "kim", None),
                     ("board.remove", "kim", None)], kinds
