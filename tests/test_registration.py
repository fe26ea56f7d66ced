"""Registration on fiducials: known transforms recovered, bad marks left out, covered marks fail the board,
crops cut through the transform, and the schema's errors at their lines. Fixed seeds, no timing."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from inspector.ingest.camera_model import CameraModel, parse_camera
from inspector.ingest.crops import crop_matrix, crop_part, cut_board
from inspector.ingest.registration import Registration, RegistrationFailed, map_points, register, warp_inverse
from inspector.ingest.synthetic import FIDUCIAL_BGR, MASK_BGR, render_board
from inspector.routing.rules import load_rules, parse_rules
from inspector.yamlio import ConfigError

from .test_routing_rules import GOOD, RULES

BOARD_A = load_rules(RULES / "board_a.yaml")
MINI = parse_rules(GOOD, "mini.yaml")
FOUR_MARKS = GOOD.replace("    F3: {at: [176, 96], shape: square, size: 7}\n",  # the mini board with a fourth mark
                          "    F3: {at: [176, 96], shape: square, size: 7}\n    F4: {at: [24, 60]}\n")


def _part_error(rules, placement: np.ndarray, reg: Registration) -> float:
    """Largest distance, over every part centre, between where the camera put it and where registration says."""
    pts = np.array([(p.x, p.y) for _, p in rules.placements()], float)
    return float(np.hypot(*(map_points(placement, pts) - map_points(reg.homography, pts)).T).max())


@pytest.mark.parametrize("rules", [BOARD_A, MINI], ids=["board_a", "mini"])
@pytest.mark.parametrize("camera", ["shift=10,rotation=1,scale=0.01", "shift=6,rotation=0.5,blur=1.2,noise=6,jpeg=60",
                                    "shift=8,gain=0.6,contrast=0.7,gradient=0.25"])
def test_registration_recovers_known_transforms_within_a_third_of_a_pixel(rules, camera: str) -> None:
    rng = np.random.default_rng(5)
    model = parse_camera(camera)
    for i in range(6):
        board = render_board(rules, f"b{i}", rng)
        image, placement = model.view(board.image, rng)
        reg = register(image, rules.fiducials)
        assert _part_error(rules, placement, reg) <= 0.3, (camera, i, reg)
        assert reg.residual_px <= rules.fiducials.max_residual_px and not reg.left_out
        assert set(reg.found) == {m.name for m in rules.fiducials.marks}


def test_an_affine_recipe_fits_shear_and_two_scales() -> None:
    rules = parse_rules(GOOD.replace("fiducials:\n", "fiducials:\n  transform: affine\n"), "affine.yaml")
    rng = np.random.default_rng(2)
    board = render_board(rules, "a", rng)
    placement = np.array([[1.006, 0.004, 3.3], [-0.002, 0.995, -2.6]])
    import cv2

    image = cv2.warpAffine(board.image, placement, (200, 120), flags=cv2.INTER_LINEAR)
    reg = register(image, rules.fiducials)
    assert _part_error(rules, placement, reg) <= 0.3


def _paint_over(image: np.ndarray, x: int, y: int, r: int = 8) -> None:
    import cv2

    cv2.rectangle(image, (x - r, y - r), (x + r, y + r), (40, 40, 40), -1)  # a label or a finger over the mark


def test_a_covered_fiducial_fails_registration_with_its_name() -> None:
    board = render_board(BOARD_A, "c", np.random.default_rng(1))
    f2 = BOARD_A.fiducials.marks[1]
    _paint_over(board.image, f2.x, f2.y)
    with pytest.raises(RegistrationFailed, match=rf"registration failed: fiducial {f2.name} not found"):
        register(board.image, BOARD_A.fiducials)


def test_one_misplaced_mark_is_left_out_and_the_others_still_register() -> None:
    import cv2

    rng = np.random.default_rng(3)
    board = render_board(BOARD_A, "m", rng)
    image, placement = CameraModel(shift_px=5, rotation_deg=0.5).view(board.image, rng)
    f3 = BOARD_A.fiducials.marks[2]
    x, y = map_points(placement, np.array([(f3.x, f3.y)], float))[0]
    cv2.circle(image, (int(round(x)), int(round(y))), 12, MASK_BGR, -1)  # the real mark gone ...
    cv2.circle(image, (int(round(x)) + 4, int(round(y)) - 3), f3.size // 2, FIDUCIAL_BGR, -1)  # ... a lookalike
    reg = register(image, BOARD_A.fiducials)
    assert reg.left_out == (f3.name,)
    assert _part_error(BOARD_A, placement, reg) <= 0.3


def test_marks_that_disagree_beyond_the_tolerance_fail_the_board() -> None:
    rules = MINI  # three marks for a similarity: leaving one out leaves nothing to check it against
    board = render_board(rules, "d", np.random.default_rng(4))
    import cv2

    f1 = rules.fiducials.marks[0]
    cv2.circle(board.image, (f1.x, f1.y), 12, MASK_BGR, -1)
    cv2.circle(board.image, (f1.x + 6, f1.y + 4), f1.size // 2, FIDUCIAL_BGR, -1)
    with pytest.raises(RegistrationFailed, match="fiducials disagree by"):
        register(board.image, rules.fiducials)


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_crops_through_the_identity_are_the_nominal_crops_and_through_a_shift_follow_it(rotation: int) -> None:
    rules = parse_rules(GOOD.replace("R2: [70, 30, 90]", f"R2: [70, 30, {rotation}]"), "rot.yaml")
    image = render_board(rules, "r", np.random.default_rng(6)).image
    ident = Registration((1.0, 0.0, 0.0, 0.0, 1.0, 0.0), 0.0)
    for warp in ("crop", "board"):
        for a, b in zip(cut_board(image, rules), cut_board(image, rules, ident, warp)):
            assert np.array_equal(a.image, b.image), (warp, a.ref)
    # the whole board moved by whole pixels: crops through the registration equal the unmoved board's
    moved = np.zeros_like(image)
    moved[3:, 5:] = image[:-3, :-5]
    shifted = Registration((1.0, 0.0, 5.0, 0.0, 1.0, 3.0), 0.0)
    comp, place = next((c, p) for c, p in rules.placements() if p.ref == "R2")
    m, size = crop_matrix(comp, place, rules.crop_margin, shifted.homography)
    got = warp_inverse(moved, m, size)
    assert np.array_equal(got, crop_part(image, comp, place, rules.crop_margin))


def test_fiducial_schema_errors_name_their_line() -> None:
    cases = {
        "F2: {at: [176, 24]}": ("F2: {at: [120, 60]}", "touch D1"),  # on a part
        "F3: {at: [176, 96], shape: square, size: 7}": ("F3: {at: [176, 96], shape: star}", "shape"),
        "F1: {at: [24, 96]}": ("F1: {at: [2, 96]}", "does not fit"),
        "  max_residual_px: 1.0\n": ("  max_residual_px: 1.0\n  transform: projective\n", "transform"),
    }
    for old, (new, message) in cases.items():
        text = GOOD.replace(old, new)
        with pytest.raises(ConfigError, match=message) as exc:
            parse_rules(text, "bad.yaml")
        line = next(i for i, s in enumerate(text.splitlines(), 1) if new.strip().splitlines()[-1] in s)
        assert exc.value.line == line, (new, str(exc.value))
    with pytest.raises(ConfigError, match=r"bad.yaml:19: fiducials.marks.F1.ring: is the bare ring's outer diameter"):
        parse_rules(GOOD.replace("F1: {at: [24, 96]}", "F1: {at: [24, 96], size: 8, ring: 10}"), "bad.yaml")
    two = GOOD.replace("    F3: {at: [176, 96], shape: square, size: 7}\n", "").replace(
        "fiducials:\n", "fiducials:\n  transform: affine\n")
    with pytest.raises(ConfigError, match="at least 3 fiducials"):
        parse_rules(two, "two.yaml")


def test_a_marks_own_bare_ring_is_what_it_is_matched_with() -> None:
    """A fiducial as a real board has it: a copper dot in a mask opening half its diameter wide (KiCad's 1.5 mm dot,
    3 mm opening), the solder mask beyond (these colours: a real board's, photographed). With the footprint's own
    `ring` (what `board import` writes from the CAD's mask margin) the template covers the dot and its ring and no
    mask, so the match is closer than at the default ring, one diameter wide, and the board registers to the pixel.
    (On the real board, test_board_import, the default ring refuses it.)"""
    import cv2

    from inspector.ingest.registration import find_mark

    marks = {"F1": (30, 90), "F2": (170, 30), "F3": (170, 90)}
    text = GOOD[:GOOD.index("fiducials:")] + "fiducials:\n  marks:\n" + "".join(
        f"    {n}: {{at: [{x}, {y}], size: 12{{ring}}}}\n" for n, (x, y) in marks.items())
    default, own = (parse_rules(text.replace("{ring}", ring), "real.yaml") for ring in ("", ", ring: 24"))
    assert {m.reach for m in default.fiducials.marks} == {18.0} and {m.reach for m in own.fiducials.marks} == {12.0}
    image = np.full((120, 200, 3), (69, 136, 11), np.uint8)  # green mask
    for x, y in marks.values():
        cv2.circle(image, (x + 2, y - 1), 12, (52, 59, 63), -1)  # the bare laminate in the mask's opening
        cv2.circle(image, (x + 2, y - 1), 6, (135, 126, 127), -1)  # the copper dot, the board 2 px off
    image = cv2.GaussianBlur(image, (0, 0), 1.0)
    image = np.clip(image + np.random.default_rng(3).normal(0, 3, image.shape), 0, 255).astype(np.uint8)
    reg = register(image, own.fiducials)
    assert set(reg.found) == set(marks) and max(abs(reg.shift[0] - 2), abs(reg.shift[1] + 1)) < 0.3, reg
    gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32)

    def score(mark) -> float:  # noqa: ANN001
        from inspector.ingest.registration import mark_template

        t = mark_template(mark.shape, mark.size, mark.reach)
        h = t.shape[0] // 2
        window = gray[mark.y - h - 4:mark.y + h + 5, mark.x - h - 4:mark.x + h + 5]
        return float(cv2.matchTemplate(window, t, cv2.TM_CCOEFF_NORMED).max())

    for d, o in zip(default.fiducials.marks, own.fiducials.marks):
        assert score(o) > score(d) + 0.1 and isinstance(find_mark(gray, o), tuple)  # here 0.86 against 0.64


def test_a_rule_set_without_fiducials_still_loads_and_cuts_at_nominal_positions() -> None:
    plain = parse_rules(GOOD[:GOOD.index("fiducials:")], "plain.yaml")
    assert plain.fiducials is None
    image = render_board(plain, "p", np.random.default_rng(0)).image
    assert [c.ref for c in cut_board(image, plain)] == [p.ref for _, p in plain.placements()]


HOMOGRAPHY = load_rules(RULES / "board_a.yaml")
HOMOGRAPHY = dataclasses.replace(HOMOGRAPHY, fiducials=dataclasses.replace(HOMOGRAPHY.fiducials,
                                                                           transform="homography"))


def test_a_homography_recipe_follows_a_tilted_camera_that_a_similarity_refuses() -> None:
    rng = np.random.default_rng(11)
    camera = parse_camera("tilt=2:-1.5,shift=8,rotation=0.8")
    for i in range(4):
        board = render_board(HOMOGRAPHY, f"t{i}", rng)
        image, placement = camera.view(board.image, rng)
        reg = register(image, HOMOGRAPHY.fiducials)
        assert _part_error(HOMOGRAPHY, placement, reg) <= 0.3, (i, reg)
        with pytest.raises(RegistrationFailed, match="fiducials disagree"):
            register(image, BOARD_A.fiducials)  # similarity: the tilt is over its residual


def test_a_tilted_camera_is_told_to_use_a_homography_and_the_line_says_so_once() -> None:
    from inspector.ingest.transform_watch import MIN_BOARDS, TransformWatch

    rng = np.random.default_rng(11)
    camera = parse_camera("tilt=2:-1.5,shift=8,rotation=0.8")
    watch, said = TransformWatch(), []
    for i in range(MIN_BOARDS + 3):
        board = render_board(BOARD_A, f"t{i}", rng)
        image, _ = camera.view(board.image, rng)
        with pytest.raises(RegistrationFailed) as refused:
            register(image, BOARD_A.fiducials)
        text = str(refused.value)  # one board cannot tell a tilt from a dirty mark: it names both
        assert "check mark" in text and "`transform: homography`" in text and "calibrate --plane" in text, text
        said.append(watch.see(BOARD_A.fiducials, refused.value.found, refused=True))
    assert said[:MIN_BOARDS - 1] == [None] * (MIN_BOARDS - 1) and said[MIN_BOARDS:] == [None] * 3  # once
    hint = said[MIN_BOARDS - 1]
    assert hint is not None and hint.transform == "homography" and hint.refused == MIN_BOARDS
    assert "`transform: homography`" in hint.sentence() and watch.hint == hint
    square = parse_camera("shift=8,rotation=0.8")  # the camera squared again: a window of boards withdraws it
    from inspector.ingest.transform_watch import WINDOW

    for i in range(WINDOW):
        assert watch.hint is not None
        image, _ = square.view(render_board(BOARD_A, f"s{i}", rng).image, rng)
        assert watch.see(BOARD_A.fiducials, register(image, BOARD_A.fiducials).found, refused=False) is None
    assert watch.hint is None


def test_dirty_marks_board_by_board_never_look_like_a_tilt() -> None:
    """A mark off by 1.5-5 px, a different mark and way on each board: each board may be refused, but the boards
    do not ask the same perspective, so the watch says nothing."""
    import cv2

    from inspector.ingest.transform_watch import TransformWatch

    for rules in (BOARD_A, parse_rules(FOUR_MARKS, "four.yaml")):
        rng = np.random.default_rng(101)
        watch = TransformWatch()
        for i in range(30):
            board = render_board(rules, f"d{i}", rng)
            mark = rules.fiducials.marks[rng.integers(len(rules.fiducials.marks))]
            turn, off = rng.uniform(0, 2 * np.pi), rng.uniform(1.5, 5)
            cv2.circle(board.image, (mark.x, mark.y), mark.size, MASK_BGR, -1)
            cv2.circle(board.image, (int(round(mark.x + off * np.cos(turn))), int(round(mark.y + off * np.sin(turn)))),
                       mark.size // 2, FIDUCIAL_BGR, -1)
            try:
                found, refused = register(board.image, rules.fiducials).found, False
            except RegistrationFailed as exc:
                found, refused = exc.found, True
            assert watch.see(rules.fiducials, found, refused) is None, (rules.recipe, i)


def test_four_marks_that_need_more_perspective_than_a_tilt_fail_the_board() -> None:
    import cv2

    board = render_board(HOMOGRAPHY, "p", np.random.default_rng(12))
    f4 = HOMOGRAPHY.fiducials.marks[3]
    cv2.circle(board.image, (f4.x, f4.y), 12, MASK_BGR, -1)
    cv2.circle(board.image, (f4.x - 16, f4.y - 12), f4.size // 2, FIDUCIAL_BGR, -1)  # a lookalike 20 px off
    with pytest.raises(RegistrationFailed, match=r"need 5\.\d px of perspective.*one of F1, F2, F3, F4"):
        register(board.image, HOMOGRAPHY.fiducials)


def test_a_board_beyond_the_search_radius_is_found_by_the_coarse_search() -> None:
    import cv2

    rng = np.random.default_rng(13)
    board = render_board(BOARD_A, "far", rng)
    placement = np.array([[1.0, 0.0, 52.0], [0.0, 1.0, 37.0], [0.0, 0.0, 1.0]])  # 64 px off; search_px is 24
    image = cv2.warpAffine(board.image, placement[:2], (760, 520), borderValue=(58, 58, 62))
    big = image  # a wider field of view than the board: the whole board is still in it
    rules = dataclasses.replace(BOARD_A, board_size=(760, 520))
    reg = register(big, rules.fiducials)
    assert reg.coarse_shift is not None and math.dist(reg.coarse_shift, (52, 37)) < 3
    assert _part_error(rules, placement, reg) <= 0.3


def test_a_board_nowhere_near_says_the_coarse_search_found_nothing() -> None:
    blank = np.full((400, 640, 3), (58, 58, 62), np.uint8)
    with pytest.raises(RegistrationFailed, match="coarse search over .* found no position most marks agree on"):
        register(blank, BOARD_A.fiducials)
