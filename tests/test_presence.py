"""The presence check (board/presence.py): a part's body colour against the board's, on the golden board and the
live one. Drawn boards of a real KiCad import (the renderer's mask and bodies), real crops as the line cuts them."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.board.presence import EXPERT, contrast, exposed_pad, least_share, masks, overrule, share, teach_presence
from inspector.ingest.crops import crop_part
from inspector.ingest.synthetic import render_board
from inspector.results.records import PartRecord
from inspector.routing.rules import ComponentRule, load_rules
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


def qfn(pads_inset: int = 29) -> ComponentRule:
    """A QFN drawn as a real one's footprint sits (SnapperGPS's U2 at 20 px/mm): an 80 px body, seven lands a side
    at 8 px pitch reaching past it, an exposed pad under its centre 5 px inside the lands."""
    row = range(-24, 25, 8)
    lands = [(-46, y - 3, -34, y + 3) for y in row] + [(34, y - 3, 46, y + 3) for y in row]
    lands += [(x - 3, -46, x + 3, -34) for x in row] + [(x - 3, 34, x + 3, 46) for x in row]
    return ComponentRule("QFN", "qfp", (92, 92), None, 2.0, 0.99, (), pads=tuple(lands) + (
        (-pads_inset, -pads_inset, pads_inset, pads_inset),), body=(-40, -40, 40, 40), body_contrast=0.3)


MASK, BODY, TIN, COPPER, LAMINATE = (40, 110, 30), (35, 35, 38), (200, 200, 205), (70, 130, 200), (165, 185, 195)


def drawn(comp: ComponentRule, margin: int, placed: bool, gain: float = 1.0, seed: int = 0) -> np.ndarray:
    """The part's crop as the line cuts it (BGR): green mask, opened in one band round the fine-pitch lands (a
    gang opening: the web between them would be too thin) over pale laminate, tinned lands, and either the black
    body over them or the bare exposed pad in copper; a lens's blur over all, a sensor's noise, a photo's gain."""
    w, h = comp.size[0] + 2 * margin, comp.size[1] + 2 * margin
    crop = np.zeros((h, w, 3), np.float32)
    crop[:] = MASK
    crop[h // 2 - 48:h // 2 + 48, w // 2 - 48:w // 2 + 48] = LAMINATE
    crop[h // 2 - 31:h // 2 + 31, w // 2 - 31:w // 2 + 31] = MASK
    for i, (a, b, c, d) in enumerate(comp.pads):
        last = i == len(comp.pads) - 1 and (c - a) > 20
        crop[h // 2 + b:h // 2 + d, w // 2 + a:w // 2 + c] = COPPER if last else TIN
    if placed:
        x0, y0, x1, y1 = comp.body
        crop[h // 2 + y0:h // 2 + y1, w // 2 + x0:w // 2 + x1] = BODY
    crop = cv2.GaussianBlur(crop, (0, 0), 3.0) * gain
    crop += np.random.default_rng(seed).normal(0, 3, crop.shape)
    return np.clip(crop, 0, 255).astype(np.uint8)


def test_an_exposed_pad_is_the_largest_land_under_the_bodys_centre_and_inside_it() -> None:
    assert exposed_pad(qfn()) == (-29, -29, 29, 29)
    assert exposed_pad(qfn(pads_inset=38)) is None  # reaches the body's edge band: the camera sees it either way
    two = ComponentRule("LED", "led", (60, 20), None, 2.0, 0.99, (), pads=((-29, -10, -10, 10), (5, -10, 25, 10)),
                        body=(-18, -10, 30, 10))
    assert exposed_pad(two) is None  # a two-terminal part's land under its centre is a termination
    balls = tuple((x - 3, y - 3, x + 3, y + 3) for x in range(-20, 21, 10) for y in range(-20, 21, 10))
    bga = ComponentRule("BGA", "bga", (60, 60), None, 2.0, 0.99, (), pads=balls, body=(-30, -30, 30, 30))
    assert exposed_pad(bga) is None  # lands alike: none is an exposed pad


def test_a_bare_exposed_pad_is_called_where_the_ring_between_the_lands_still_reads_as_a_body() -> None:
    comp, m = qfn(), 12
    golden = drawn(comp, m, placed=True)
    bare = drawn(comp, m, placed=False, seed=1)
    inner, rim = masks(comp, golden.shape, m)
    ring_alone = contrast(bare, inner, rim) / contrast(golden, inner, rim)
    assert ring_alone > 0.5  # the copper's blur fills the thin ring: the body's window alone passes the bare board
    assert share(golden, golden, comp, m) == pytest.approx(1.0)
    assert share(bare, golden, comp, m) < 0.3
    assert share(drawn(comp, m, placed=True, gain=0.8, seed=2), golden, comp, m) > 0.8  # a good board, darker photo
    # tin instead of copper on the bare pad: as far from the black body in lightness
    tinned = drawn(replace(comp, pads=comp.pads[:-1]), m, placed=False, seed=3)
    tinned[m + 20:m + 72, m + 20:m + 72] = TIN
    assert share(tinned, golden, comp, m) < 0.3
    grey = cv2.cvtColor(cv2.cvtColor(golden, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    assert share(grey, grey, comp, m) is None  # a grey board: neither window can tell


SNAPPER = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "boards" / "snappergps"
SNAPPER_CLASSES = {"3.2X1.5": "crystal", "ALEX_CONN5": "test-point", "AMANDA_TSST8": "sot", "D32G": "crystal",
                   "JAE_DX07S016JA1R1500": "connector", "SAW_FILTER": "soic", "SON127P800X600X80-9N": "qfn-qfp",
                   "TVS_DIODE-PRTR5V0U2AX": "sot", "U.FL": "connector"}


@pytest.mark.skipif(not (SNAPPER / "images" / "pcb.jpg").is_file(), reason="the shared SnapperGPS photos are not here")
def test_a_real_bare_boards_qfns_are_missing_by_their_exposed_pads_and_another_good_boards_are_not(
        tmp_path: Path) -> None:
    """SnapperGPS imported from its Eagle file, its golden photo registered on the outline, and its two QFNs read on
    the bare board (their pads copper, the ring round them in a gang opening) and on another good board of other
    makes, another camera: the ring alone passes the bare QFNs, the exposed pad calls them."""
    from inspector.app.board_photos import boards_of, read_photo, registration_inputs
    from tests.test_board_teach import cli

    lib = tmp_path / "plant.yaml"
    lib.write_text("packages:\n" + "".join(f"  '{k}': {{class: {v}}}\n" for k, v in SNAPPER_CLASSES.items()))
    out = tmp_path / "sg.yaml"
    r = cli("board", "import", str(SNAPPER / "snappergps_1_0_0.brd"), "--out", str(out), "--px-per-mm", "20",
            "--library", str(lib))
    assert r.returncode == 0, r.stderr
    rules = load_rules(out)
    geometry, points = registration_inputs(out, rules)

    def board(name: str, reference: np.ndarray | None) -> np.ndarray:
        photo = SNAPPER / "images" / name
        return next(b.image for b in boards_of(read_photo(photo), photo, rules, geometry, points, reference)
                    if b.image is not None)

    golden = board("assembled.jpg", None)
    bare, other = board("pcb.jpg", golden), board("assembled2.jpg", golden)
    m = rules.crop_margin
    crops = {p.ref: (c, crop_part(golden, c, p, m), crop_part(bare, c, p, m), crop_part(other, c, p, m))
             for c, p in rules.placements() if p.ref in ("U1", "U2")}
    for ref, (comp, g, b, o) in crops.items():
        assert exposed_pad(comp) is not None, ref
        inner, rim = masks(comp, g.shape, m)
        assert contrast(b, inner, rim) / contrast(g, inner, rim) > 0.4, ref  # the ring alone: as if placed
        assert share(b, g, comp, m) < 0.2, ref
        assert share(o, g, comp, m) > 0.4, ref
