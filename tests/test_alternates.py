"""Approved alternates: a second source's part approved on a taught board (`board approve`), the rule set's
`alternates:` block, and the line comparing each such part with the nearest of its golden windows.

The board is test_board_teach's KiCad board (real KiCad text through `board import`), taught by `board teach` from
one rendered golden photo; "another make" of its SOIC-8 is the same board with U1's body repainted (a grey body
with a white marking where the golden one is black)."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.ingest.synthetic import render_board
from inspector.routing.rules import body_box, load_rules, parse_rules
from inspector.yamlio import ConfigError

from .test_board_teach import cli, import_kicad, photo_of


def other_make(board: np.ndarray, rules, ref: str = "U1") -> np.ndarray:  # noqa: ANN001 - a RuleSet
    """`board` with `ref`'s body drawn as another maker's: grey, with a white marking across it."""
    out = board.copy()
    comp, place = next((c, p) for c, p in rules.placements() if p.ref == ref)
    x0, y0, x1, y1 = body_box(comp, place, -2)
    out[y0:y1, x0:x1] = (110, 110, 110)
    cv2.rectangle(out, (x0 + 3, (y0 + y1) // 2 - 2), (x1 - 4, (y0 + y1) // 2 + 2), (245, 245, 245), -1)
    return out


@pytest.fixture(scope="module")
def taught(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the taught rule set, its zoo), taught from one golden photo."""
    root = tmp_path_factory.mktemp("alternates")
    imported = import_kicad(root)
    rules = load_rules(imported)
    golden = render_board(rules, "g0", np.random.default_rng(3), rates={}).image
    cv2.imwrite(str(root / "golden.png"), photo_of(golden, 12.0, 1.5, 0.02, (150, 120))[0])
    r = cli("board", "teach", "--rules", str(imported), "--golden", str(root / "golden.png"), "--epochs", "4",
            "--json", str(root / "teach.json"))
    assert r.returncode == 0, r.stderr
    return root / "b.taught.yaml", Path(json.loads((root / "teach.json").read_text(encoding="utf-8"))["zoo"])


def window_difference(rules_path: Path, photo: Path, ref: str = "U1") -> float:
    """The golden comparison's difference between `ref` on the photo's board and the window the line compares it
    with (the golden board's, or the nearest approved one), registered and cut as the line does."""
    from inspector.app.board_photos import boards_of, read_photo, registration_inputs
    from inspector.ingest.alternates import alternate_windows
    from inspector.ingest.crops import crop_part
    from inspector.ingest.golden import difference, golden_image, nearest

    rules = load_rules(rules_path)
    geometry, points = registration_inputs(rules_path, rules)
    board = next(b for b in boards_of(read_photo(photo), photo, rules, geometry, points, golden_image(rules))
                 if b.image is not None)
    comp, place = next((c, p) for c, p in rules.placements() if p.ref == ref)
    crop = crop_part(board.image, comp, place, rules.crop_margin)
    windows = [crop_part(golden_image(rules), comp, place, rules.crop_margin), *alternate_windows(rules).get(ref, [])]
    return difference(crop, windows[nearest(crop, windows)])


def check(rules: Path, zoo: Path, models: Path, *photos: Path) -> dict[str, dict]:
    """`board check` on the box's profiles under `models`."""
    out = rules.parent / "check.json"
    r = cli("--models", str(models), "board", "check", "--rules", str(rules), "--zoo", str(zoo), *map(str, photos),
            "--json", str(out))
    assert r.returncode == 0, r.stderr
    return {Path(c["photo"]).name: c for c in json.loads(out.read_text(encoding="utf-8"))}


def test_an_approved_make_is_compared_with_its_own_window_and_a_missing_one_is_still_called(  # noqa: ANN001
        taught, box_models: Path) -> None:
    rules_path, zoo = taught
    root = rules_path.parent
    rules = load_rules(rules_path)
    rng = np.random.default_rng(7)
    boards = {name: render_board(rules, name, rng, rates={}).image for name in ("a", "b", "c")}
    for name, angle in (("a", -6.0), ("b", 9.0)):
        cv2.imwrite(str(root / f"{name}.png"), photo_of(other_make(boards[name], rules), angle, 1.4, 0.01,
                                                         (170, 150))[0])
    cv2.imwrite(str(root / "same.png"), photo_of(boards["c"], 4.0, 1.45, 0.0, (160, 140))[0])
    bare = render_board(rules, "bare", rng, rates={}, forced={"U1": "missing"}).image
    cv2.imwrite(str(root / "bare.png"), photo_of(bare, -3.0, 1.5, 0.01, (150, 150))[0])

    # another make differs from the golden window far more than the golden make does, wherever it sits
    other, same = window_difference(rules_path, root / "b.png"), window_difference(rules_path, root / "same.png")
    assert other > 5 * same  # (here 41.5 against 2.8)

    before = check(rules_path, zoo, box_models, root / "b.png")["b.png"]
    # another make's look differs from the golden window: called (as which defect is the expert's guess)
    assert "U1" in {f.split(" ")[0] for f in before["flagged"]}, before
    r = cli("board", "approve", "U1", "--rules", str(rules_path), "--photo", str(root / "a.png"))
    assert r.returncode == 0, r.stderr
    approved = load_rules(rules_path)
    assert list(approved.alternates) == ["U1"] and Path(approved.alternates["U1"][0]).is_file()
    assert approved.alternates["U1"][0].endswith("b.taught.alternates/U1__a.png")
    assert "U1: approved" in r.stdout and approved.version != rules.version
    assert approved.training_version == rules.training_version  # nothing to retrain: the same zoo serves it

    assert window_difference(rules_path, root / "b.png") < other / 4  # compared with its own make's window (5.7)
    after = check(rules_path, zoo, box_models, root / "b.png", root / "same.png", root / "bare.png")
    flagged = {name: {f.split(" ")[0] for f in c["flagged"]} for name, c in after.items()}
    # another board of that make, compared with the window approved from a.png, passes; the golden make is compared
    # with the golden board's as before; a missing part differs from every approved look and is still called
    assert "U1" not in flagged["b.png"] and after["b.png"]["alternates"] == {"U1": "U1__a.png"}, (before, after)
    assert "U1" not in flagged["same.png"] and after["same.png"]["alternates"] == {}, after
    assert "U1" in flagged["bare.png"], after
    # each part's log-odds of good beside its type's threshold: the approved make's U1 clears it, the missing one not
    from inspector.experts.zoo import Zoo

    u1_type = next(c.name for c, p in rules.placements() if p.ref == "U1")
    cut = Zoo.load(zoo).architecture(f"cls-{u1_type}").good_margin
    assert len(after["b.png"]["logodds"]) == after["b.png"]["inspected"]
    assert after["bare.png"]["logodds"]["U1"] < cut < after["b.png"]["logodds"]["U1"], (cut, after)

    # a second approval of the same part adds a window; a bare board's window is refused (it shows no body)
    r = cli("board", "approve", "U1", "--rules", str(rules_path), "--photo", str(root / "bare.png"))
    assert r.returncode != 0 and "shows no body" in r.stderr and "missing" in r.stderr
    assert load_rules(rules_path).alternates == approved.alternates  # nothing written
    r = cli("board", "approve", "U1", "--rules", str(rules_path), "--photo", str(root / "b.png"), "--make", "//")
    assert r.returncode != 0 and "make '//': name the approved make by its part number" in r.stderr
    r = cli("board", "approve", "U1", "--rules", str(rules_path), "--photo", str(root / "b.png"), "--make",
            "BC847C,215")
    assert r.returncode == 0 and "looks like a make approved already" in r.stdout, r.stderr + r.stdout
    assert [Path(f).name for f in load_rules(rules_path).alternates["U1"]] == ["U1__a.png", "U1__BC847C_215.png"]
    r = cli("board", "approve", "Q9", "--rules", str(rules_path), "--photo", str(root / "b.png"))
    assert r.returncode != 0 and "Q9: no inspected part" in r.stderr
    # a crop the line kept of the part, as it is; one of another size, or for two parts, refused
    kept = root / "kept.png"
    cv2.imwrite(str(kept), cv2.imread(load_rules(rules_path).alternates["U1"][0]))
    r = cli("board", "approve", "U1", "--rules", str(rules_path), "--crop", str(kept))
    assert r.returncode == 0, r.stderr
    assert Path(load_rules(rules_path).alternates["U1"][-1]).name == "U1__kept.png"
    cv2.imwrite(str(kept), np.zeros((9, 9, 3), np.uint8))
    r = cli("board", "approve", "U1", "--rules", str(rules_path), "--crop", str(kept))
    assert r.returncode != 0 and "is 9x9 px but U1's window is" in r.stderr
    r = cli("board", "approve", "U1", "R1", "--rules", str(rules_path), "--crop", str(kept))
    assert r.returncode != 0 and "--crop is one part's window" in r.stderr


def test_a_rule_sets_alternates_are_checked_at_their_line_and_when_applied(taught, tmp_path: Path) -> None:  # noqa: ANN001
    from inspector.app.board_approve import with_alternates
    from inspector.app.line import Line, LineConfig
    from inspector.experts.zoo import Zoo

    rules_path, zoo_root = taught
    text = rules_path.read_text(encoding="utf-8").split("\nalternates:")[0] + "\n"  # as taught, none approved
    for block, says in (("alternates:\n  Q9: [x.png]\n", "alternates.Q9: is no inspected part"),
                        ("alternates:\n  U1: 7\n", "alternates.U1: must be a list of image files"),
                        ("alternates:\n  U1: [x.png, x.png]\n", "alternates.U1: names one image twice")):
        with pytest.raises(ConfigError, match=rf"t.yaml:\d+: {says}"):
            parse_rules(text + block, str(tmp_path / "t.yaml"))
    no_golden = "\n".join(line for line in text.splitlines() if not line.startswith("golden:")) + "\n"
    no_golden = "\n".join(line for line in no_golden.splitlines() if "body_contrast" not in line) + "\n"
    with pytest.raises(ConfigError, match="alternates: an approved alternate is a second golden window"):
        parse_rules(no_golden + "alternates:\n  U1: [x.png]\n", str(rules_path))
    # the block is replaced where it stands, every other line and comment kept
    edited = with_alternates("recipe: r  # mine\nalternates:\n  U1: [a.png]\n\n# after\nseed: 1\n",
                             {"U1": ["a.png", "b.png"]})
    assert edited.startswith("recipe: r  # mine\nalternates:") and "  U1: ['a.png', 'b.png']\n" in edited
    assert edited.endswith("# after\nseed: 1\n")
    inside = with_alternates("alternates:\n  U1: [a.png]\n# a note in the block\n  U2: [b.png]\n\n# kept\nseed: 1\n",
                             {"U1": ["a.png"], "U2": ["b.png", "c.png"]})
    assert inside == ("alternates:  # approved makes' windows (`inspector board approve`)\n  U1: ['a.png']\n"
                      "  U2: ['b.png', 'c.png']\n\n# kept\nseed: 1\n")
    # `board check` and `board approve` register photos on the files the rule set names, as the line does, not on
    # files named after the rule file (a renamed copy registered on its outline alone, and answered otherwise)
    from inspector.app.board_photos import registration_inputs

    renamed = rules_path.with_name("renamed.yaml")
    renamed.write_text(text, encoding="utf-8")
    assert registration_inputs(renamed)[0] is None and registration_inputs(renamed, load_rules(renamed))[0] is not None
    # applied on the line: a file gone, or a window of another size, is named before a board is inspected
    zoo = Zoo.load(zoo_root)
    gone = parse_rules(text + "alternates:\n  U1: [gone.png]\n", str(rules_path))
    with pytest.raises(ValueError, match="U1's approved alternate .*gone.png cannot be read"):
        Line(gone, zoo, {}, LineConfig())
    cv2.imwrite(str(rules_path.parent / "small.png"), np.zeros((8, 8, 3), np.uint8))
    small = parse_rules(text + "alternates:\n  U1: [small.png]\n", str(rules_path))
    with pytest.raises(ValueError, match="is 8x8 px but U1's window is"):
        Line(small, zoo, {}, LineConfig())


def test_an_engineer_approves_a_kept_crop_over_the_kiosk_api_and_the_next_board_is_compared_with_it(
        taught, tmp_path: Path, box_models: Path) -> None:  # noqa: ANN001
    """POST /rules/alternates: the crop a running kiosk kept of a flagged part becomes an approved window, applied as
    a change of the rule set (audited, the running set kept when refused); only a role that may change rules may."""
    import threading
    import time

    from inspector.app.line import LineConfig
    from inspector.app.run import line_profiles, open_source
    from inspector.app.service import LineService, ServiceConfig
    from inspector.endpoint import EndpointError, request_json
    from inspector.experts.zoo import Zoo
    from inspector.kiosk.service import Kiosk, KioskConfig
    from inspector.results.store import ResultStore, sqlite_url

    from .people import person
    from .services import free_port

    taught_path, zoo_root = taught
    root = taught_path.parent
    rules_path = root / "kiosk.yaml"  # beside the taught set (its golden board and geometry), none approved
    rules_path.write_text(taught_path.read_text(encoding="utf-8").split("\nalternates:")[0] + "\n", encoding="utf-8")
    rules = load_rules(rules_path)
    rng = np.random.default_rng(11)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    photos = {name: photo_of(other_make(render_board(rules, name, rng, rates={}).image, rules), angle, 1.4, 0.01,
                             (170, 150))[0] for name, angle in (("first", -5.0), ("second", 7.0))}
    zoo = Zoo.load(zoo_root)
    data = tmp_path / "data"
    data.mkdir()
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    service = LineService(rules, zoo, line_profiles(zoo, box_models, lambda _m: None),
                          ServiceConfig(LineConfig(device_mb=200), keep_crops="all", min_free_mb=1), store, data,
                          open_source(f"watch:{inbox}", rules, 0, 0))
    port = free_port()
    engineer, operator = (person(str(store.engine.url), name, role) for name, role in (("erin", "engineer"),
                                                                                       ("otto", "operator")))
    kiosk = Kiosk(service, KioskConfig(listen=f"127.0.0.1:{port}", rules_poll_s=0.2), rules_path=str(rules_path),
                  data_dir=data)
    threading.Thread(target=kiosk.serve, daemon=True).start()

    def call(body: dict, token: str) -> tuple[int, dict]:
        try:
            return 200, request_json(f"http://127.0.0.1:{port}/rules/alternates", body, token, timeout=60)
        except EndpointError as e:
            return e.status, {"error": e.message}

    def stored(n: int) -> list:
        deadline = time.monotonic() + 120
        while len(boards := store.inspections()) < n and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(boards) >= n, "the kiosk did not store the board"
        return boards

    try:
        cv2.imwrite(str(inbox / "first.png"), photos["first"])
        board = stored(1)[0]
        assert next(p for p in board.parts if p.ref == "U1").crop_path  # its crop kept
        body = {"inspection_id": board.uuid, "ref": "U1"}
        assert call(body, operator)[0] == 403  # an operator reviews; approving a make changes the recipe
        code, answer = call({**body, "inspection_id": "no-such-board"}, engineer)
        assert code == 404 and "no crop of U1" in answer["error"]
        code, answer = call({**body, "make": "  "}, engineer)
        assert code == 422 and "name the approved make by its part number" in answer["error"], (code, answer)
        code, answer = call({**body, "make": "LIS3DH TR"}, engineer)
        assert code == 200 and answer["applied"] and answer["ref"] == "U1" and answer["audit"], answer
        assert answer["file"] == "U1__LIS3DH_TR.png"  # named after the make
        from inspector.access.audit import AuditTrail

        events = [e for e in AuditTrail(store.engine).events() if e.kind == "rules.alternate"]
        assert [(e.actor, json.loads(e.after)["version"]) for e in events] == [("erin", service.line.rules.version)]
        assert service.line.rules.alternates and Path(service.line.rules.alternates["U1"][0]).is_file()
        assert load_rules(rules_path).alternates == service.line.rules.alternates  # the file and the line agree
        cv2.imwrite(str(inbox / "second.png"), photos["second"])
        second = next(b for b in stored(2) if b.board_serial == "second")
        u1 = next(p for p in second.parts if p.ref == "U1")
        assert u1.verdict == "pass" and service.line.stats.alternates["U1"], (u1, service.line.stats.alternates)
        # which make it was stored with (schema 0011): the approved window's file; the first board's, none
        assert u1.approved_make == "U1__LIS3DH_TR.png"
        assert next(p for p in board.parts if p.ref == "U1").approved_make is None
        assert second.ruleset_version == service.line.rules.version != board.ruleset_version
    finally:
        kiosk.stop()


def test_the_dashboard_running_the_line_approves_a_kept_crop_as_its_engineer(taught, tmp_path: Path,  # noqa: ANN001
                                                                               box_models: Path) -> None:
    """The dashboard's own line (LocalBackend, what its Approve button calls): the same approval, applied to the
    running line and saved to its rule file, recorded under the signed-in engineer; an operator may not."""
    import time

    from inspector.access.identity import Identity
    from inspector.app.controller import LineController, LineSetup
    from inspector.app.line import LineConfig
    from inspector.app.service import ServiceConfig
    from inspector.experts.zoo import Zoo
    from ui.backend import LocalBackend

    taught_path, zoo_root = taught
    rules_path = taught_path.parent / "dashboard.yaml"
    rules_path.write_text(taught_path.read_text(encoding="utf-8").split("\nalternates:")[0] + "\n", encoding="utf-8")
    rules = load_rules(rules_path)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    cv2.imwrite(str(inbox / "first.png"), photo_of(other_make(render_board(rules, "d", np.random.default_rng(5),
                                                                           rates={}).image, rules), 4.0, 1.4, 0.0,
                                                   (160, 150))[0])
    setup = LineSetup(rules_path=rules_path, source=f"watch:{inbox}", boards=0,
                      service=ServiceConfig(LineConfig(device_mb=200), keep_crops="all", min_free_mb=1))
    backend = LocalBackend(LineController(box_models, tmp_path / "data", zoo=Zoo.load(zoo_root)), setup)
    backend.start()
    try:
        deadline = time.monotonic() + 120
        while (backend.store() is None or not backend.store().inspections()) and time.monotonic() < deadline:
            time.sleep(0.2)
        board = backend.store().inspections()[0]
        backend.identity = Identity("otto", "operator", "the tests")
        with pytest.raises(PermissionError, match="may not change rules"):
            backend.approve_alternate(board.uuid, "U1")
        backend.identity = Identity("erin", "engineer", "the tests")
        said = backend.approve_alternate(board.uuid, "U1", "second source, approved by purchasing", make="BC847C")
        assert said.startswith("approved U1 as another make (U1__BC847C.png)") and "applied and saved" in said
        running = backend.controller.service.line.rules
        assert list(running.alternates) == ["U1"] and load_rules(rules_path).version == running.version
        event = next(e for e in backend.audit().events() if e.kind == "rules.alternate")
        assert event.actor == "erin" and event.reason == "second source, approved by purchasing"
    finally:
        backend.stop()
        backend.close(30)


def test_a_line_frame_of_a_board_with_fiducials_is_approved_through_the_cameras_correction(tmp_path: Path) -> None:
    """`board approve --photo FRAME --correction cam.json` on a rule set registered on fiducials: the window is cut
    as the line cuts it (corrected, registered on the marks, one warp per crop)."""
    from inspector.app.accuracy import CONDITIONS
    from inspector.camera.correction import CameraCorrection
    from inspector.camera.targets import synthetic_correction
    from inspector.ingest.crops import cut_board
    from inspector.ingest.registration import register

    from .test_routing_rules import RULES

    rules_path = tmp_path / "a.yaml"
    board_a = load_rules(RULES / "board_a.yaml")
    cv2.imwrite(str(tmp_path / "golden.png"), render_board(board_a, "g", np.random.default_rng(1), rates={}).image)
    rules_path.write_text((RULES / "board_a.yaml").read_text(encoding="utf-8") + "golden: golden.png\n",
                          encoding="utf-8")
    rules = load_rules(rules_path)
    camera = CONDITIONS["tilt-2"]
    synthetic_correction(camera, rules.board_size, seed=4).save(tmp_path / "cam.json")
    rng = np.random.default_rng(9)
    frame, _ = camera.view(render_board(rules, "f", rng, rates={}).image, rng)
    cv2.imwrite(str(tmp_path / "frame.png"), frame)
    ref = rules.placements()[3][1].ref
    r = cli("board", "approve", ref, "--rules", str(rules_path), "--photo", str(tmp_path / "frame.png"))
    assert r.returncode != 0 and "frame.png: registration failed" in r.stderr  # uncorrected, the tilt refuses it
    r = cli("board", "approve", ref, "--rules", str(rules_path), "--photo", str(tmp_path / "frame.png"),
            "--correction", str(tmp_path / "cam.json"))
    assert r.returncode == 0, r.stderr
    written = cv2.imread(load_rules(rules_path).alternates[ref][0])
    corrected = CameraCorrection.load(tmp_path / "cam.json").apply(cv2.imread(str(tmp_path / "frame.png")))
    line_cut = next(c.image for c in cut_board(corrected, rules, register(corrected, rules.fiducials)) if c.ref == ref)
    assert np.array_equal(written, line_cut)
