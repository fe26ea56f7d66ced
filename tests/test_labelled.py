"""New experts from labelled folders (training/labelled/): teach, evaluate, and what bad folders are told."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from inspector.experts.registry import architecture_from_spec
from inspector.experts.resnet import ResNetClassifier
from inspector.experts.zoo import Zoo
from inspector.ingest.photometric import normalize_crops
from inspector.runtime.safetensors_io import parse
from inspector.training.deeppcb import DatasetError, read_annotations, read_pairs
from inspector.training.labelled.folder import FolderError, read_folder, split_of, stratified_heldout
from inspector.training.labelled.metrics import calls, choose_threshold, evaluate, separating_threshold
from inspector.training.labelled.sizing import choose_input
from inspector.training.labelled.teach import split
from inspector.training.labelled.windows import GOOD, window_label

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def crop(rng: np.random.Generator, kind: str) -> np.ndarray:
    """A copper-on-laminate crop of a random size and aspect; `blob`: a round void in the copper, `nick`: a bar cut
    across it. The defects are small against the crop, as real ones are."""
    h, w = int(rng.integers(22, 34)), int(rng.integers(22, 46))
    image = np.full((h, w, 3), 40, np.uint8)
    image[:, :, 1] = 90
    top = int(rng.integers(4, h // 2 - 2))
    image[top:top + h // 2, :] = (60, 170, 210)  # a trace across the crop
    if kind == "blob":
        cv2.circle(image, (int(rng.integers(6, w - 6)), top + h // 4), 3, (40, 90, 40), -1)
    elif kind == "nick":
        x = int(rng.integers(4, w - 8))
        image[top:top + h // 2, x:x + 3] = (40, 90, 40)
    noise = rng.normal(0, 6, image.shape)
    return np.clip(image + noise, 0, 255).astype(np.uint8)


def make_folder(root: Path, boards: int, per_board: dict[str, int], seed: int) -> Path:
    rng = np.random.default_rng(seed)
    for b in range(boards):
        for kind, n in per_board.items():
            (root / kind).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                cv2.imwrite(str(root / kind / f"s{seed}b{b:03d}__{i}.png"), crop(rng, kind))
    return root


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, encoding="utf-8",
                          cwd=cwd, timeout=600)


def test_a_new_classifier_is_taught_from_a_folder_recorded_and_evaluated_as_the_line_would_call(
        tmp_path: Path) -> None:
    train = make_folder(tmp_path / "train", 30, {"ok": 10, "blob": 2, "nick": 2}, seed=1)
    test = make_folder(tmp_path / "test", 8, {"ok": 10, "blob": 2, "nick": 2}, seed=2)
    zoo_dir = tmp_path / "zoo"
    r = cli("zoo", "train", "--new", "cls-trace", "--from", str(train), "--zoo", str(zoo_dir), "--epochs", "8",
            "--epoch-size", "512", "--threads", "2", "--json", str(tmp_path / "taught.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "good: ok" in r.stdout and "letterboxed" in r.stdout and "operating threshold" in r.stdout
    taught = json.loads((tmp_path / "taught.json").read_text())
    assert taught["classes"] == ["ok", "blob", "nick"] and taught["input"]["fit"] == "letterbox"
    assert sum(taught["counts"]["heldout"].values()) > 0 and taught["history"]
    # the epoch chosen on training boards set aside (never trained on), the held-out ones left the threshold alone
    aside = taught["counts"]["epoch"]
    assert aside["ok"] > 0 and aside["blob"] + aside["nick"] > 0, taught["counts"]
    assert sum(sum(taught["counts"][side].values()) for side in ("train", "epoch", "heldout")) == 30 * 14
    assert {h["watched"] for h in taught["history"]} == {"set-aside"}
    assert "training crops set aside to choose the epoch by" in r.stdout and "they chose the threshold, not the epoch" \
        in r.stdout and "the epoch was still chosen" not in r.stdout
    # the threshold rule scored on held-out crops it was not chosen on (the other half of the identities chose it)
    fitted = taught["heldout_cross_fitted"]
    held = taught["counts"]["heldout"]
    assert fitted["good"] == held["ok"] and fitted["defects"] == held["blob"] + held["nick"], fitted
    assert len(fitted["thresholds"]) == 2 and 0 <= fitted["found"] <= fitted["defects"]
    assert f"defect recall {100 * fitted['found'] / fitted['defects']:.1f}% ({fitted['found']}/" in r.stdout

    zoo = Zoo.load(zoo_dir)
    entry = zoo.entries["cls-trace"]
    assert entry.classes == ("ok", "blob", "nick") and entry.served == (entry.weights_sha256,)
    assert entry.versions[0]["origin"] == "taught from labelled crops" and entry.data_hash
    assert entry.versions[0]["epoch_chosen_on"]["items"] == sum(aside.values()) and entry.versions[0]["epoch_share"]
    assert entry.versions[0]["trained_with"] == {"threads": 2, "torch": torch.__version__}  # to teach it again alike
    arch = zoo.architecture("cls-trace")
    assert isinstance(arch, ResNetClassifier) and arch.fit == "letterbox"
    assert arch.good_margin == pytest.approx(taught["threshold"])

    r = cli("zoo", "evaluate", "--expert", "cls-trace", "--on", str(test), "--zoo", str(zoo_dir), "--json",
            str(tmp_path / "eval.json"), "--plots", str(tmp_path / "plots"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    for name in ("confusion.png", "pr.png"):
        assert cv2.imread(str(tmp_path / "plots" / name)) is not None
    assert "confusion" in r.stdout and "defect recall" in r.stdout
    scores = json.loads((tmp_path / "eval.json").read_text())
    for key in ("defect_recall", "false_call_rate", "macro_f1", "per_class", "confusion", "threshold"):
        assert key in scores
    assert scores["defects"] == 32 and scores["good"] == 80
    assert scores["defect_recall"] >= 0.9 and scores["false_call_rate"] <= 0.1, scores

    # the line's path (normalize_crops, preprocess_many, decode with the threshold) calls each crop the same
    folder = read_folder(test, classes=entry.classes)
    images = [cv2.imread(str(c.path)) for c in folder.crops]
    model = arch.materialize(parse(zoo.path_of("cls-trace").read_bytes()), torch.device("cpu"))
    line_calls = [p.label for p in arch.run(model, arch.preprocess_many(normalize_crops(images)))]
    confusion = np.zeros((3, 3), np.int64)
    for c, called in zip(folder.crops, line_calls):
        confusion[folder.index(c.label), called] += 1
    assert confusion.tolist() == scores["confusion"]
    # the same crops as the test split of a folder with its own split: scored when asked for by name, and only then
    (tmp_path / "split").mkdir()
    test.rename(tmp_path / "split" / "test")
    r = cli("zoo", "evaluate", "--expert", "cls-trace", "--on", str(tmp_path / "split"), "--zoo", str(zoo_dir),
            cwd=tmp_path)
    assert r.returncode == 1 and "has its own split (test 112): say which to score with --split" in r.stderr
    r = cli("zoo", "evaluate", "--expert", "cls-trace", "--on", str(tmp_path / "split"), "--split", "test", "--zoo",
            str(zoo_dir), "--json", str(tmp_path / "eval-split.json"), cwd=tmp_path)
    assert r.returncode == 0 and "(test crops)" in r.stdout, r.stderr[-3000:]
    assert json.loads((tmp_path / "eval-split.json").read_text())["confusion"] == scores["confusion"]

    r = cli("zoo", "train", "--new", "cls-trace", "--from", str(train), "--zoo", str(zoo_dir), cwd=tmp_path)
    assert r.returncode != 0 and "already has an expert 'cls-trace'" in r.stderr


def test_a_folder_that_cannot_be_used_says_what_to_change(tmp_path: Path) -> None:
    make_folder(tmp_path / "f", 2, {"pass": 2, "blob": 1}, seed=3)
    with pytest.raises(FolderError, match=r"which class .* is the good one\? Its classes: blob, pass; say it with "
                                          r"--good"):
        read_folder(tmp_path / "f")
    assert read_folder(tmp_path / "f", good="pass").classes == ("pass", "blob")
    with pytest.raises(FolderError, match="the good class 'okay' is not a folder"):
        read_folder(tmp_path / "f", good="okay")
    with pytest.raises(FolderError, match="classes the expert does not know: blob"):
        read_folder(tmp_path / "f", classes=("pass", "nick"))
    make_folder(tmp_path / "long", 1, {"ok": 1, "x" * 33: 1}, seed=4)
    with pytest.raises(FolderError, match="longer than the 32 characters a result stores"):
        read_folder(tmp_path / "long")
    make_folder(tmp_path / "one", 1, {"ok": 2}, seed=4)
    with pytest.raises(FolderError, match="only the class 'ok'"):
        read_folder(tmp_path / "one")
    make_folder(tmp_path / "g", 12, {"ok": 2, "blob": 1}, seed=6)
    (tmp_path / "g" / "blob" / "s6b011__broken.png").write_bytes(b"not a png")
    r = cli("zoo", "train", "--new", "x", "--from", str(tmp_path / "g"), "--heldout", "0.5", "--zoo",
            str(tmp_path / "zoo"), cwd=tmp_path)
    assert r.returncode == 1 and "s6b011__broken.png cannot be read as an image" in r.stderr, r.stderr
    assert not (tmp_path / "zoo").exists()  # nothing written


def test_the_split_follows_identity_and_does_not_move_when_crops_are_added(tmp_path: Path) -> None:
    ids = [f"board{i}" for i in range(2000)]
    sides = {i: split_of(i, 0.2) for i in ids}
    assert 0.17 < sum(s == "heldout" for s in sides.values()) / len(ids) < 0.23
    assert all(split_of(i, 0.2) == s for i, s in sides.items())  # the same tomorrow, whatever else is there
    # a test set split off first and then split again for model selection: the two splits are independent
    test_side = [i for i in ids if split_of(i, 0.1, "test") == "train"]
    assert 0.17 < sum(split_of(i, 0.2) == "heldout" for i in test_side) / len(test_side) < 0.23
    make_folder(tmp_path / "f", 3, {"ok": 3, "blob": 1}, seed=5)
    folder = read_folder(tmp_path / "f")
    assert {c.identity for c in folder.crops} == {"s5b000", "s5b001", "s5b002"}


def test_a_split_by_type_holds_out_and_trains_on_every_type_of_two_or_more_parts(tmp_path: Path) -> None:
    """A board's few parts a type: the plain hash split leaves some type with nothing held out (an empty validation
    row) or nothing trained on; the stratified one gives every type of two or more parts both sides."""
    rng = np.random.default_rng(0)
    strata = {f"P{k}": f"type{t}" for k, t in enumerate(rng.integers(0, 40, 120))}
    strata |= {"LONE": "alone"}
    plain = {i for i in strata if split_of(i, 0.25) == "heldout"}
    sizes = {t: sum(1 for s in strata.values() if s == t) for t in set(strata.values())}
    lacking = [t for t, n in sizes.items() if n >= 2 and not any(strata[i] == t for i in plain)]
    assert lacking  # the case this is for: some type with nothing held out under the hash alone
    held = stratified_heldout(strata, 0.25)
    assert held == stratified_heldout(dict(reversed(strata.items())), 0.25)  # the order given does not matter
    for t, n in sizes.items():
        mine = {i for i, s in strata.items() if s == t}
        if n >= 2:
            assert mine & held and mine - held, t
        else:
            assert (mine & held) == (mine & plain)  # a lone part follows its hash
    assert plain - held <= {i for i, s in strata.items() if sizes[s] >= 2}
    assert 0.2 < len(held) / len(strata) < 0.45  # about the share, plus one a type the hash missed
    # the trainer takes a caller's choice of identities as it is (board teaching's split by type)
    make_folder(tmp_path / "f", 6, {"ok": 3, "blob": 2}, seed=7)
    folder = read_folder(tmp_path / "f")
    chosen = frozenset({"s7b001", "s7b004"})
    sides = split(folder, 0.2, chosen)
    assert {c.identity for c in sides.heldout} == chosen
    assert not chosen & {c.identity for c in sides.train}


def test_letterbox_keeps_a_crops_aspect_and_squash_stretches_it() -> None:
    image = torch.zeros(1, 3, 16, 32)
    boxed = architecture_from_spec({"arch": "resnet10", "input_size": 32, "classes": 2, "fit": "letterbox"})
    squashed = architecture_from_spec({"arch": "resnet10", "input_size": 32, "classes": 2})
    x = boxed.preprocess_batch(image)
    assert torch.allclose(x[0, :, :8], torch.full((3, 8, 32), 128 / 255)) and float(x[0, :, 8:24].max()) == 0.0
    assert float(squashed.preprocess_batch(image).max()) == 0.0
    assert "fit" not in squashed.spec() and boxed.spec()["fit"] == "letterbox"
    with pytest.raises(ValueError, match="unknown resize policy"):
        architecture_from_spec({"arch": "resnet10", "input_size": 32, "classes": 2, "fit": "crop"})
    fit = choose_input([(30, 30), (31, 30), (30, 29)])
    assert fit.fit == "squash" and fit.input_size == 32
    assert choose_input([(20, 40), (40, 20), (30, 30)]).fit == "letterbox"


def test_the_operating_threshold_decides_good_and_the_scores_count_as_the_line_does() -> None:
    margin = float(np.log(0.9 / 0.1))  # P(good) >= 0.9
    arch = ResNetClassifier(10, 32, 3, good_margin=margin)
    logits = torch.log(torch.tensor([[0.95, 0.03, 0.02], [0.85, 0.05, 0.10], [0.2, 0.7, 0.1]]))
    assert [(p.label, p.passed) for p in arch.decode(logits)] == [(0, True), (2, False), (1, False)]
    assert calls(logits.numpy(), margin).tolist() == [0, 2, 1] and calls(logits.numpy(), None).tolist() == [0, 0, 1]
    # saturated crops (a float32 softmax says 1.0 for all of them) still order by their log-odds
    assert calls(np.array([[40.0, 0.0], [30.0, 0.0]]), 35.0).tolist() == [0, 1]
    # one good crop of four may be flagged: the threshold lies midway between the defect at 1.0 and the good at 2.0
    assert choose_threshold(np.array([-3.0, 2.0, 5.0, 9.0]), np.array([-8.0, 1.0, 4.0]), 0.25) == pytest.approx(1.5)
    assert choose_threshold(np.array([2.0, 5.0]), np.array([-1.0]), 0.0) == pytest.approx(0.5)
    # the demo trainer's operating point: fewest miscalls, then the middle of the widest gap that gives them
    assert separating_threshold(np.array([0.9, 2.0, 3.0]), np.array([-4.2, -6.0])) == pytest.approx(-1.65)
    assert separating_threshold(np.array([1.0, 2.0, -3.0]), np.array([-4.0, -2.0, 1.5])) == pytest.approx(-0.5)
    assert separating_threshold(np.array([1.0]), np.array([])) is None
    ev = evaluate(("ok", "a", "b"), np.array([0, 2, 2]), logits.numpy(), margin)
    assert ev.defect_recall == 1.0 and ev.false_call_rate == 0.0  # a "b" called "a" is still stopped
    assert ev.per_class[2].recall == 0.5 and ev.confusion.tolist() == [[1, 0, 0], [0, 0, 0], [0, 1, 1]]


def test_windows_are_labelled_by_the_defect_centred_in_them_and_grazed_ones_left_out() -> None:
    boxes = [((10, 10, 30, 30), "short")]
    assert window_label(0, 0, 64, boxes) == "short"
    assert window_label(0, 0, 16, boxes) is None  # touched, centre elsewhere
    assert window_label(64, 0, 64, boxes) == GOOD
    assert window_label(0, 0, 64, boxes + [((40, 40, 50, 50), "spur")]) is None  # two classes


def test_deeppcb_files_that_are_wrong_are_named_with_their_line(tmp_path: Path) -> None:
    notes = tmp_path / "1_not.txt"
    notes.write_text("1 2 30 40 3\n5,5,9,9,2\n1 2 3 x 1\n")
    with pytest.raises(DatasetError, match=r"1_not.txt:3: expected `x1 y1 x2 y2 type`"):
        read_annotations(notes)
    notes.write_text("1 2 30 40 9\n")
    with pytest.raises(DatasetError, match=r":1: defect type 9 is not one of 1..6"):
        read_annotations(notes)
    (tmp_path / "list.txt").write_text("g/1/1.jpg g/1_not/1.txt\n")
    with pytest.raises(DatasetError, match=r"list.txt:1: .*1_test.jpg is missing"):
        read_pairs(tmp_path, tmp_path / "list.txt")
    missing: list[str] = []
    with pytest.raises(DatasetError, match="names no pairs"):
        read_pairs(tmp_path, tmp_path / "list.txt", missing)
    assert missing and "list.txt:1" in missing[0]


def test_the_shared_deeppcb_pairs_read_with_every_defect() -> None:
    root = SHARED / "deeppcb-trainval"
    if not (root / "trainval.txt").is_file():
        pytest.skip(f"DeepPCB is not at {root} (../shared/data/deeppcb-trainval, see its README)")
    missing: list[str] = []
    pairs = read_pairs(root, None, missing)
    lines = sum(len([ln for ln in p.test.parent.with_name(p.test.parent.name + "_not").joinpath(
        p.name + ".txt").read_text().splitlines() if ln.strip()]) for p in pairs)
    assert len(pairs) >= 900 and sum(len(p.defects) for p in pairs) == lines
    test, template = pairs[0].images()
    assert test.shape == template.shape == (640, 640, 3)


def squares(rng: np.random.Generator, n: int, size: int = 32) -> np.ndarray:
    image = np.full((size, size, 3), 30, np.uint8)
    for _ in range(n):
        x, y = rng.integers(0, size - 6, 2)
        image[y:y + 6, x:x + 6] = 200
    return image


def make_golden_pairs(live: Path, golden: Path, boards: int, seed: int) -> None:
    """Each board its own pattern of squares; a defect is one square more than its golden board has. A square more
    looks like any other square: only the golden crop tells."""
    rng = np.random.default_rng(seed)
    for b in range(boards):
        for i in range(6):
            kind = "extra" if i % 3 == 0 else "ok"
            ref = squares(rng, int(rng.integers(2, 5)))
            image = ref.copy()
            while kind == "extra":  # on bare laminate, where the golden board has nothing
                x, y = rng.integers(0, 26, 2)
                if ref[max(0, y - 1):y + 7, max(0, x - 1):x + 7].max() < 100:
                    image[y:y + 6, x:x + 6] = 200
                    break
            noisy = np.clip(image + rng.normal(0, 4, image.shape), 0, 255).astype(np.uint8)
            for root, picture in ((live, noisy), (golden, ref)):
                (root / kind).mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(root / kind / f"g{seed}b{b:03d}__{i}.png"), picture)


def test_a_golden_comparison_expert_reads_the_golden_crop_beside_the_live_one(tmp_path: Path) -> None:
    make_golden_pairs(tmp_path / "live", tmp_path / "golden", 40, seed=7)
    make_golden_pairs(tmp_path / "live-test", tmp_path / "golden-test", 10, seed=8)
    r = cli("zoo", "train", "--new", "cls-golden", "--from", str(tmp_path / "live"), "--reference",
            str(tmp_path / "golden"), "--zoo", str(tmp_path / "zoo"), "--epochs", "10", "--epoch-size", "512",
            "--augment", "0.3", "--false-calls", "0.05", "--any-orientation", cwd=tmp_path)  # a square is a square
    assert r.returncode == 0, r.stderr[-3000:]
    assert "beside the golden crops" in r.stdout
    zoo = Zoo.load(tmp_path / "zoo")
    assert zoo.architecture("cls-golden").reference == "composite"
    assert zoo.entries["cls-golden"].versions[-1]["any_orientation"] is True
    r = cli("zoo", "evaluate", "--expert", "cls-golden", "--on", str(tmp_path / "live-test"), "--zoo",
            str(tmp_path / "zoo"), cwd=tmp_path)
    assert r.returncode == 1 and "pass the golden crops (--reference" in r.stderr
    r = cli("zoo", "evaluate", "--expert", "cls-golden", "--on", str(tmp_path / "live-test"), "--reference",
            str(tmp_path / "golden-test"), "--zoo", str(tmp_path / "zoo"), "--json", str(tmp_path / "e.json"),
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    scores = json.loads((tmp_path / "e.json").read_text())
    assert scores["defect_recall"] >= 0.9 and scores["false_call_rate"] <= 0.1, r.stdout


def test_the_composite_is_the_live_grey_the_golden_grey_and_their_difference() -> None:
    from inspector.ingest.golden import compose

    rng = np.random.default_rng(0)
    golden = torch.from_numpy(squares(rng, 3).transpose(2, 0, 1).copy()).unsqueeze(0)
    live = (golden.float() * 0.6 + 20).to(torch.uint8)  # darker light, same board
    out = compose(live, golden)
    assert out.shape == (1, 3, 32, 32) and out.dtype == torch.uint8
    assert int(out[0, 2].max()) <= 2 and torch.equal(out[0, 0], out[0, 1])  # standardised: the light is gone
    live[0, :, 0:4, 0:4] = 255
    assert int(compose(live, golden)[0, 2, 0:4, 0:4].min()) > 60
    with pytest.raises(ValueError, match="must be one window"):
        compose(live[:, :, :16], golden)


def test_a_bayer_camera_samples_one_colour_a_pixel_and_its_demosaic_fringes_edges() -> None:
    from inspector.ingest.bayer import demosaic, mosaic, through_bayer
    from inspector.ingest.camera_model import CameraModel, describe, parse_camera

    flat = np.zeros((8, 8, 3), np.uint8)
    flat[:] = (30, 120, 220)  # BGR
    for pattern in ("RG", "GR", "GB", "BG"):
        assert (demosaic(mosaic(flat, pattern), pattern)[2:6, 2:6] == flat[2:6, 2:6]).all(), pattern
    raw = mosaic(flat, "RG")
    assert raw[0, 0] == 220 and raw[0, 1] == 120 and raw[1, 1] == 30  # R G / G B at the top left
    edge = np.zeros((16, 16, 3), np.uint8)
    edge[:, 8:] = 255  # white against black: grey on both sides, so any colour is the demosaic's
    seen = through_bayer(edge, "RG").astype(int)
    assert np.abs(seen[:, 6:10, 0] - seen[:, 6:10, 2]).max() > 40 and (seen[:, :5] == 0).all()
    camera = parse_camera("bayer=rg,noise=3")
    assert camera.bayer == "RG" and describe(camera) == "noise=3,bayer=RG" and parse_camera("bayer").bayer == "RG"
    frame, _ = camera.view(np.full((32, 32, 3), 128, np.uint8), np.random.default_rng(0))
    assert frame.shape == (32, 32, 3) and 120 < frame.mean() < 136
    with pytest.raises(ValueError, match="unknown Bayer pattern 'XY'"):
        parse_camera("bayer=XY")
    assert CameraModel(bayer="GB") != CameraModel()


TAUGHT_RULES = """\
recipe: taught
board: {width: 160, height: 100}
classifier: {arch: resnet10, input_size: 32}
components:
  TR:
    shape: resistor
    size: [24, 12]
    at: {R1: [40, 30], R2: [110, 30], R3: [40, 70], R4: [110, 70]}
"""


def test_a_taught_expert_serves_on_the_line_and_its_calls_carry_its_own_class_names(tmp_path: Path,
                                                                                    box_models: Path) -> None:
    """A rule set routes a component type to the taught classifier by name (cls-<type>); the verdicts name the
    taught classes, never the demo's six."""
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.app.verdict import class_name
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.routing.rules import parse_rules
    from inspector.training.labelled.teach import TeachPlan, teach

    make_folder(tmp_path / "crops", 12, {"ok": 6, "blob": 2, "nick": 2}, seed=11)
    done = teach(TeachPlan("cls-TR", tmp_path / "crops", tmp_path / "zoo", epochs=2, epoch_size=128, heldout_share=0.3))
    zoo = Zoo.load(tmp_path / "zoo")
    assert class_name(zoo, "cls-TR", 2) == "nick" and class_name(zoo, "cls-TR", 9) == "class 9"
    rules = parse_rules(TAUGHT_RULES, str(tmp_path / "taught.yaml"))
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    source = open_source("synthetic", rules, 4, 3, defect_rate=0.5)
    run_line(rules, zoo, box_models, source, ServiceConfig(LineConfig(device_mb=40)), store, tmp_path,
             lambda _m: None)
    parts = [p for insp in store.inspections() for p in insp.parts]
    assert len(parts) == 16 and {p.expert for p in parts} == {"cls-TR"}
    assert {p.weights_sha256 for p in parts} == {done.entry.weights_sha256}
    assert {p.defect_class for p in parts} <= {"ok", "blob", "nick"}, {p.defect_class for p in parts}


def test_the_line_feeds_a_golden_comparison_expert_the_golden_boards_window_beside_each_part(
        tmp_path: Path, box_models: Path) -> None:
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.ingest.crops import cut_board
    from inspector.ingest.golden import GoldenMissing, composed_tensors
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.routing.rules import parse_rules
    from inspector.training.labelled.teach import TeachPlan, teach

    make_golden_pairs(tmp_path / "live", tmp_path / "golden", 10, seed=12)
    teach(TeachPlan("cls-TR", tmp_path / "live", tmp_path / "zoo", epochs=2, epoch_size=128, heldout_share=0.3,
                    reference=tmp_path / "golden"))
    zoo = Zoo.load(tmp_path / "zoo")
    plain = parse_rules(TAUGHT_RULES, str(tmp_path / "taught.yaml"))
    golden_board = next(iter(open_source("synthetic", plain, 1, 5, defect_rate=0.0))).image
    cv2.imwrite(str(tmp_path / "golden.png"), golden_board)
    rules = parse_rules(TAUGHT_RULES + "golden: golden.png\n", str(tmp_path / "taught.yaml"))
    assert rules.golden == str(tmp_path / "golden.png")

    source = open_source("synthetic", rules, 3, 6, defect_rate=0.5)
    frames = list(source)
    crops = cut_board(frames[0].image, rules)
    tensors, matched = composed_tensors(crops, [torch.zeros(1)] * len(crops), rules, {"TR": "composite"})
    assert all(t.shape == (3, *c.image.shape[:2]) for t, c in zip(tensors, crops)) and matched == {}
    # the golden window of an unchanged part differs from the live one by nothing: the third grey is flat
    same, _ = composed_tensors(cut_board(golden_board, rules), [torch.zeros(1)] * len(crops), rules,
                               {"TR": "composite"})
    assert all(float(t[2].float().std()) < 1.0 for t in same)

    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(rules, zoo, box_models, open_source("synthetic", rules, 3, 6, defect_rate=0.5),
             ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None)
    parts = [p for insp in store.inspections() for p in insp.parts]
    assert len(parts) == 12 and {p.defect_class for p in parts} <= {"ok", "extra"}

    from dataclasses import asdict

    from inspector.experts.yolo import YoloDetector
    from inspector.experts.zoo import write_expert

    # detectors beside it (random weights): one reads the live crop, two compare with the golden board
    manifest = json.loads((tmp_path / "zoo" / "manifest.json").read_text())
    for name, reference in (("det-p", None), ("det-g", "composite"), ("det-c", "colour")):
        det = YoloDetector("yolov8n.yaml", 64, 2, reference=reference)
        manifest["experts"].append(asdict(write_expert(tmp_path / "zoo", name, "detector", det.spec(),
                                                       det.random_state(0))))
    (tmp_path / "zoo" / "manifest.json").write_text(json.dumps(manifest))
    zoo = Zoo.load(tmp_path / "zoo")

    def routed_to(det: str) -> str:
        text = TAUGHT_RULES.replace("classifier: {arch: resnet10, input_size: 32}",
                                    "classifier: {arch: resnet10, input_size: 32}\ndetectors:\n  "
                                    f"{det}: {{arch: yolov8n.yaml, input_size: 64}}")
        return text.replace("size: [24, 12]", f"size: [24, 12]\n    detector: {det}") + "golden: golden.png\n"
    for text, why in ((TAUGHT_RULES, "add `golden: FILE`"),
                      (TAUGHT_RULES + "golden: nowhere.png\n", "cannot be read"),
                      (routed_to("det-p"), "routes to cls-TR, which compares with the golden board (composite), and "
                                           "then to det-p, which reads the live crop alone: a part is one request"),
                      (routed_to("det-c"), "then to det-c, which compares with the golden board (colour)")):
        bad = parse_rules(text, str(tmp_path / "taught.yaml"))
        with pytest.raises((GoldenMissing, ValueError), match=r"(?s)" + why.replace("(", r"\(").replace(
                ")", r"\)").replace("`", ".")):
            run_line(bad, zoo, box_models, open_source("synthetic", bad, 1, 6),
                     ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None)
    # a detector taught on the same composite reads the one image the part's request carries
    rules = parse_rules(routed_to("det-g"), str(tmp_path / "taught.yaml"))
    store = ResultStore(sqlite_url(tmp_path / "r2.sqlite"))
    run_line(rules, zoo, box_models, open_source("synthetic", rules, 3, 6, defect_rate=0.5),
             ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None)
    parts = [p for insp in store.inspections() for p in insp.parts]
    assert len(parts) == 12 and {p.verdict for p in parts} <= {"pass", "fail"}
    assert any(p.expert == "det-g" for p in parts)  # the classifier passed some, and the detector then decided


def test_reviews_of_a_taught_experts_calls_use_its_own_classes_and_retrain_it(tmp_path: Path, box_models: Path) -> None:
    """The loop a demo expert has, for a taught one: reviews name its classes (checked against its zoo), the
    export writes its crops under them, and `zoo train --expert` retrains it from its folder and the reviews."""
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.app.verdict import classes_of
    from inspector.experts.resnet import good_logodds
    from inspector.experts.zoo import set_operating_point
    from inspector.ingest.crops import crop_tensors, cut_board
    from inspector.results.dataset import export_dataset
    from inspector.results.reviews import ReviewRefused, ReviewRequest, record_review
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.routing.rules import parse_rules
    from inspector.training.labelled.evaluate import served_module
    from inspector.training.labelled.retrain_taught import retrain_taught
    from inspector.training.labelled.teach import TeachPlan, teach

    make_folder(tmp_path / "crops", 16, {"ok": 6, "blob": 2, "nick": 2}, seed=12)
    teach(TeachPlan("cls-TR", tmp_path / "crops", tmp_path / "zoo", epochs=2, epoch_size=128, heldout_share=0.3))
    zoo = Zoo.load(tmp_path / "zoo")
    rules = parse_rules(TAUGHT_RULES, str(tmp_path / "taught.yaml"))
    # the tiny expert never saw these renders: serve it at the median of their log-odds, so that it calls some of
    # them each way whatever its threshold from teaching (the loop under test needs both kinds of call)
    crops = [c for f in open_source("synthetic", rules, 8, 5, defect_rate=0.5) for c in cut_board(f.image, rules)]
    arch, model = served_module(zoo, "cls-TR")
    with torch.inference_mode():
        odds = good_logodds(model(torch.stack([arch.preprocess(t) for t in crop_tensors(crops)])).float())
    zoo = set_operating_point(zoo, "cls-TR", float(odds.median()))
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(rules, zoo, box_models, open_source("synthetic", rules, 8, 5, defect_rate=0.5),
             ServiceConfig(LineConfig(device_mb=40), keep_crops="all"), store, tmp_path / "data", lambda _m: None)
    parts = [(insp.uuid, p) for insp in store.inspections() for p in insp.parts]
    failed = [(u, p) for u, p in parts if p.verdict == "fail"]
    passed = [(u, p) for u, p in parts if p.verdict == "pass"]
    assert failed and passed, "the taught expert must call some parts each way for this test"
    of = classes_of(zoo)
    u, p = failed[0]
    with pytest.raises(ReviewRefused, match="blob, nick"):  # not one of its classes: the refusal names them
        record_review(store, ReviewRequest(u, p.ref, "confirmed", "scratch", "qa"), of)
    with pytest.raises(ReviewRefused, match="against its zoo"):  # without its zoo only the demo's are known
        record_review(store, ReviewRequest(u, p.ref, "confirmed", "nick", "qa"))
    for i, (u, p) in enumerate(failed):
        record_review(store, ReviewRequest(u, p.ref, "confirmed", "nick", "qa") if i % 2 else
                      ReviewRequest(u, p.ref, "false_call", None, "qa"), of)
    for u, p in passed:
        record_review(store, ReviewRequest(u, p.ref, "escape", "blob", "qa"), of)
    report = export_dataset(store, tmp_path / "dataset", [rules], classes_of=of, heldout_percent=30)
    labels = {item["label"] for item in report.items}
    assert labels <= {"ok", "blob", "nick"} and "nick" in labels and "blob" in labels

    # as if its teacher had declared its classes orientation-free (a blob is a blob turned): retraining keeps that
    manifest = tmp_path / "zoo" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["experts"][0]["versions"][0]["any_orientation"] = True
    manifest.write_text(json.dumps(doc))
    zoo = Zoo.load(tmp_path / "zoo")
    r = retrain_taught(zoo, "cls-TR", tmp_path / "dataset", 2, 0, lambda _m: None)
    entry = Zoo.load(tmp_path / "zoo").entries["cls-TR"]
    assert [v["origin"] for v in entry.versions] == ["taught from labelled crops", "retrained from reviews"]
    assert entry.versions[1]["any_orientation"] is True  # retrained the way it was taught
    assert entry.served == (entry.versions[0]["weights_sha256"],)  # added, not served
    assert r.reviewed_train > 0 and set(r.scores) == {"reviewed held-out", "taught held-out"}
    assert r.scores["taught held-out"][1].crops > 0 and "rule" in r.gate
    for name, (was, now) in r.scores.items():  # the defects the two disagree on add up to the recall's change
        d = r.gate["disagreements"][name]
        assert d["lost"] - d["gained"] == was.found - now.found and d["lost"] <= was.found, (name, d)
    # its epoch chosen on training crops set aside (reviewed ones among them), never on the held-out crops the gate
    # reads: what is set aside is not trained on
    from inspector.training.labelled.epoch_split import MIN_STRATUM

    aside = entry.versions[1]["epoch_chosen_on"]
    assert "training crops set aside to choose the epoch by" in r.says[0] and aside["items"] > 0
    trained = [item for item in report.items if item["expert"] == "cls-TR" and item["split"] == "train"]
    assert r.reviewed_train == entry.versions[1]["reviewed_train"] == len(trained) - aside["reviewed"]
    # each kind of reviewed crop (good, defective: a crop its own identity) gives some up where it has enough
    kinds = [sum((item["label"] == "ok") == good for item in trained) for good in (True, False)]
    assert (aside["reviewed"] > 0) == any(n >= MIN_STRATUM for n in kinds), (kinds, aside)
    # the new weights' own margin, chosen again by teaching's rule and carried as the version's operating point; the
    # type is served at the median above, off teaching's margin, and the new margin keeps that offset
    added = entry.versions[1]
    assert added["operating"] == {"good_margin": added["threshold"]} and "teaching's rule" in r.says[1]
    assert added["served_margin"] == pytest.approx(float(odds.median()))
    assert added["margin_offset"] == pytest.approx(float(odds.median()) - entry.versions[0]["threshold"])
    assert f"served at margin {float(odds.median()):.3f}" in r.says[1] and "keeps that" in r.says[1]
    assert "zoo train --taught-point leaves it behind" in r.says[1] and added["move_left_behind"] is None
    # scored at a margin chosen without each crop's part (cross-fitted) where the parts allow it, the served weights
    # by the same rule (their figures at their served margin said beside the table, and kept)
    fitted = "each held-out crop called at the margin chosen on the other half of the parts" in r.says[1]
    assert fitted or "scored on the crops it was chosen on" in r.says[1]
    assert ("so scored as the new are" in r.says[1]) == fitted
    assert any(x.startswith("the served weights at their served margin") for x in r.says) == fitted
    assert all("old_at_served" in added["eval"][name] for name in r.scores)
    # served (forced past its gate), it calls at its own margin; rolled back, the old weights at theirs
    from inspector.experts.versions import activate, rollback

    assert activate(Zoo.load(tmp_path / "zoo"), "cls-TR", added["weights_sha256"], force=True).spec["good_margin"] \
        == pytest.approx(added["threshold"])
    assert rollback(Zoo.load(tmp_path / "zoo"), "cls-TR").spec["good_margin"] == pytest.approx(float(odds.median()))
    # the same retraining asked to leave the plant's move behind (--taught-point): the same weights, served at
    # teaching's rule alone, the move recorded as left
    left = retrain_taught(Zoo.load(tmp_path / "zoo"), "cls-TR", tmp_path / "dataset", 2, 0, lambda _m: None,
                          keep_move=False)
    again = left.version
    assert again["weights_sha256"] == added["weights_sha256"] and again["margin_offset"] == 0.0
    assert again["trained_with"] == added["trained_with"] == {"threads": torch.get_num_threads(),
                                                              "torch": torch.__version__}
    assert again["move_left_behind"] == pytest.approx(added["margin_offset"], abs=1e-5)
    assert again["threshold"] == pytest.approx(added["threshold"] - added["margin_offset"])
    assert "left behind (zoo train --taught-point): the new weights serve at teaching's rule alone" in left.says[1]
    # each retraining scored the same weights the other way round: what the other would serve, to choose by
    for done, other in ((added, again), (again, added)):
        way = done["other_way"]
        assert way["margin"] == pytest.approx(other["threshold"]) and way["move_kept"] == (done is again)
        assert way["gate_passed"] == other["gate"]["passed"]
        assert {k: v["new"] for k, v in way["eval"].items()} == {k: v["new"] for k, v in other["eval"].items()}
    said = next(x for x in r.says if x.startswith("the other way"))
    assert said.startswith("the other way, leaving the plant's move behind (zoo train --taught-point): margin "
                           f"{again['threshold']:.3f}") and ("passed" if again["gate"]["passed"] else "REFUSED") in said
    assert next(x for x in left.says if x.startswith("the other way")).startswith(
        "the other way, keeping the plant's move (zoo train --no-taught-point)")


def test_a_retrained_classifiers_margin_is_chosen_again_by_teachings_rule_and_scored_on_parts_it_was_not_chosen_on(
) -> None:
    """The new weights get the margin teaching's rule chooses for their own log-odds (a pure move of the scale moves
    the margin with it and changes no call), moved as far as the served margin sits from teaching's; every held-out
    crop is called at the margin chosen on the other half of the parts, a part's crops together."""
    from inspector.training.labelled.classifier_margin import new_margin
    from inspector.training.labelled.metrics import identity_halves
    from inspector.training.labelled.trainer import Crops, served_threshold

    rng = np.random.default_rng(0)
    parts = [f"P{i}" for i in range(8) for _ in range(4)]  # eight parts, four crops each: two good, two defective
    labels = np.array([0, 0, 1, 1] * 8)
    crops = Crops([rng.integers(0, 255, (8, 8, 3), dtype=np.uint8) for _ in labels], labels, None, parts)
    odds = np.where(labels == 0, 3.0, -3.0) + rng.normal(0, 1, len(labels))
    fit = new_margin(odds, crops, 0.5, 0.5, 0.01, 0)
    assert fit.offset == 0.0 and fit.margin == pytest.approx(served_threshold(odds, labels, parts, 0.01))
    moved = new_margin(odds - 4.0, crops, 0.5, 0.5, 0.01, 0)
    assert moved.margin == pytest.approx(fit.margin - 4.0) and np.array_equal(moved.flags, fit.flags)
    tuned = new_margin(odds, crops, 1.5, 0.5, 0.01, 0)  # the type served a whole log-odds above teaching's margin
    assert tuned.margin == pytest.approx(fit.margin + 1.0) and "keeps that" in tuned.why
    # the halves: whole parts, each half holding good crops and defects
    half = identity_halves(parts, labels != 0)
    assert all(len({h for h, p in zip(half, parts) if p == name}) == 1 for name in set(parts)) and 0 < sum(half) < 32
    # one good crop the new weights score far lower: on all the crops the margin goes under it (no false call
    # allowed), but the other half's margin never saw it, and there it is a false call
    odd = odds.copy()
    odd[0] = -2.0
    fit = new_margin(odd, crops, 0.5, 0.5, 0.01, 0)
    assert fit.half_margins is not None and fit.flags[0] and not odd[0] < fit.margin
    assert "each held-out crop called at the margin chosen on the other half of the parts" in fit.why
    # halves by part name, not by order
    again = new_margin(odd[::-1].copy(), Crops(crops.images[::-1], labels[::-1].copy(), None, parts[::-1]), 0.5, 0.5,
                       0.01, 0)
    assert again.flags.tolist() == fit.flags.tolist()[::-1]
    # too few parts to choose on each half: scored in-sample, said to flatter
    few = new_margin(odds[:4], Crops(crops.images[:4], labels[:4], None, parts[:4]), 0.5, 0.5, 0.01, 0)
    assert few.half_margins is None and "optimistic" in few.why


def test_a_retrainings_gate_scores_the_served_classifier_by_the_rule_that_scores_the_new() -> None:
    """The served margin was chosen on the held-out crops the gate reads: called at it there, the served weights
    would be scored in-sample beside the new weights' cross-fitted calls. They are called as the new are, at the
    margin teaching's rule chooses on the other half of the parts (the same offset kept), so new weights that score
    every crop as the served ones do make the same calls; too few parts to halve, each at its own margin."""
    from inspector.training.labelled.classifier_margin import new_margin, old_calls
    from inspector.training.labelled.trainer import Crops

    rng = np.random.default_rng(0)
    parts = [f"P{i}" for i in range(8) for _ in range(4)]
    labels = np.array([0, 0, 1, 1] * 8)
    crops = Crops([rng.integers(0, 255, (8, 8, 3), dtype=np.uint8) for _ in labels], labels, None, parts)
    odds = np.where(labels == 0, 3.0, -3.0) + rng.normal(0, 1, len(labels))
    odds[0] = -2.0  # one good crop scored low: the margin chosen on all of them goes under it
    for taught, served in ((0.5, 0.5), (0.5, 1.5)):  # as taught; and a type tuned a log-odds above teaching's
        fit = new_margin(odds, crops, served, taught, 0.01, 0)
        served_at = fit.margin  # the served weights' margin chosen on these very crops: no false call there
        flags, why = old_calls(odds, crops, served_at, fit, 0.01, 0)
        assert fit.half_margins is not None and np.array_equal(flags, fit.flags) and flags[0]
        # teaching's rule on all of them did not flag the low good crop: at the served margin it is no false call
        assert not odds[0] < fit.margin - fit.offset and "scored as the new are" in why and f"{served_at:.3f}" in why
    few = Crops(crops.images[:4], labels[:4], None, parts[:4])
    fit = new_margin(odds[:4], few, 0.5, 0.5, 0.01, 0)
    flags, why = old_calls(odds[:4] + 1.0, few, 0.7, fit, 0.01, 0)
    assert fit.half_margins is None and np.array_equal(flags, odds[:4] + 1.0 < 0.7) and "scored there" in why


def test_a_boards_type_expert_is_gated_on_its_own_types_held_out_parts_and_says_when_others_stand_in() -> None:
    """Board teaching serves every type its own entry of one shared classifier: a retraining of one type's entry is
    served to that type alone, so its taught held-out crops are parted into its own type's and the other types', and
    the gate reads its own (with the reviewed ones); a type with no held-out defect of its own has the other types'
    stand in, said. An expert of every part (no type recorded) keeps one taught row."""
    from inspector.training.labelled.retrain_taught import heldout_sets, served_type
    from inspector.training.labelled.trainer import Crops

    kinds = {"R1": "0402", "R2": "0402", "C1": "0603", "U1": "QFN"}
    assert served_type({"component_type": "0603", "identity_kinds": kinds}, "cls-whatever") == "0603"
    assert served_type({"identity_kinds": kinds}, "cls-QFN") == "QFN"  # a zoo taught before the type was recorded
    assert served_type({"identity_kinds": kinds}, "cls-board") is None and served_type({}, "cls-QFN") is None
    parts = ["R1", "R1", "R2", "C1", "C1", "U1"]
    crops = Crops([np.zeros((4, 4, 3), np.uint8)] * 6, np.array([0, 1, 1, 0, 1, 0]), None, parts)
    sets, read, stand_in = heldout_sets(crops, 9, "0402", kinds)
    assert [list(v) for v in sets.values()] == [[6, 7, 8], [0, 1, 2], [3, 4, 5]]
    assert list(sets) == ["reviewed held-out", "taught held-out, 0402", "taught held-out, other types"]
    assert read == ["reviewed held-out", "taught held-out, 0402"] and stand_in is None
    sets, read, stand_in = heldout_sets(crops, 9, "QFN", kinds)  # U1's one held-out crop is good: no defect
    assert read == list(sets) and "QFN holds no held-out defect of its own" in stand_in
    sets, read, stand_in = heldout_sets(crops, 9, None, kinds)
    assert list(sets) == read == ["reviewed held-out", "taught held-out"] and stand_in is None


def test_reviews_retrain_a_golden_comparison_expert_beside_the_windows_the_line_compared(
        tmp_path: Path, box_models: Path) -> None:
    """A board taught from its golden photos serves golden-comparison experts: the export writes, beside every crop,
    the golden board's window the line compared it with (golden/ mirroring the crops), and retraining reads each
    reviewed crop beside it and each crop of its folder beside the golden crop it was taught with."""
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.app.verdict import classes_of
    from inspector.experts.resnet import good_logodds
    from inspector.experts.zoo import set_operating_point
    from inspector.ingest.crops import crop_part, cut_board
    from inspector.ingest.golden import composed_tensors
    from inspector.results.dataset import export_dataset
    from inspector.results.reviews import ReviewRequest, record_review
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.routing.rules import parse_rules
    from inspector.training.labelled.evaluate import served_module
    from inspector.training.labelled.retrain_taught import retrain_taught
    from inspector.training.labelled.teach import TeachPlan, teach

    make_golden_pairs(tmp_path / "live", tmp_path / "golden-crops", 10, seed=12)
    teach(TeachPlan("cls-TR", tmp_path / "live", tmp_path / "zoo", epochs=2, epoch_size=128, heldout_share=0.3,
                    reference=tmp_path / "golden-crops"))
    plain = parse_rules(TAUGHT_RULES, str(tmp_path / "taught.yaml"))
    golden_board = next(iter(open_source("synthetic", plain, 1, 5, defect_rate=0.0))).image
    cv2.imwrite(str(tmp_path / "golden.png"), golden_board)
    rules = parse_rules(TAUGHT_RULES + "golden: golden.png\n", str(tmp_path / "taught.yaml"))
    # served at the median of its log-odds on these boards' composites, so that it calls parts each way
    frames = list(open_source("synthetic", rules, 6, 9, defect_rate=0.5))
    crops = [c for f in frames for c in cut_board(f.image, rules)]
    tensors, _ = composed_tensors(crops, [c.tensor() for c in crops], rules, {"TR": "composite"})
    arch, model = served_module(Zoo.load(tmp_path / "zoo"), "cls-TR")
    with torch.inference_mode():
        odds = good_logodds(model(torch.stack([arch.preprocess(t) for t in tensors])).float())
    zoo = set_operating_point(Zoo.load(tmp_path / "zoo"), "cls-TR", float(odds.median()))
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(rules, zoo, box_models, open_source("synthetic", rules, 6, 9, defect_rate=0.5),
             ServiceConfig(LineConfig(device_mb=40), keep_crops="all"), store, tmp_path / "data", lambda _m: None)
    parts = [(insp.uuid, p) for insp in store.inspections() for p in insp.parts]
    failed = [(u, p) for u, p in parts if p.verdict == "fail"]
    assert failed and len(failed) < len(parts), "the expert must call parts each way for this test"
    of = classes_of(zoo)
    for i, (u, p) in enumerate(failed):
        record_review(store, ReviewRequest(u, p.ref, "confirmed" if i % 2 else "false_call",
                                           "extra" if i % 2 else None, "qa"), of)
    report = export_dataset(store, tmp_path / "dataset", [rules], classes_of=of, heldout_percent=30)
    items = [i for i in report.items if i["expert"] == "cls-TR"]
    assert items and all(i["golden"] == f"golden/{i['file']}" for i in items)
    place = {p.ref: p for _c, p in rules.placements()}
    for item in items:  # the golden board's window of the part, as the line cut it
        window = cv2.imread(str(tmp_path / "dataset" / item["golden"]))
        assert np.array_equal(window, crop_part(golden_board, rules.components[0], place[item["ref"]],
                                                rules.crop_margin))
    r = retrain_taught(zoo, "cls-TR", tmp_path / "dataset", 2, 0, lambda _m: None)
    entry = Zoo.load(tmp_path / "zoo").entries["cls-TR"]
    assert [v["origin"] for v in entry.versions] == ["taught from labelled crops", "retrained from reviews"]
    assert r.scores["taught held-out"][1].crops > 0 and r.reviewed_train > 0
    # an export without the golden board cannot retrain it, and says why
    bare = export_dataset(store, tmp_path / "bare", [plain], classes_of=of, heldout_percent=30)
    assert bare.items and not any("golden" in i for i in bare.items)
    with pytest.raises(ValueError, match="has no golden window beside it"):
        retrain_taught(zoo, "cls-TR", tmp_path / "bare", 2, 0, lambda _m: None)


def write_deeppcb_pair(root: Path, name: str, shift: tuple[int, int], rng: np.random.Generator) -> None:
    """A pair in DeepPCB's layout: traces on a 256 px board, the tested image the template moved by `shift` px (as
    the dataset's pairs are: a few px apart) with one spur of copper more, annotated."""
    board = np.zeros((256, 256), np.uint8)
    for _ in range(40):
        x, y = rng.integers(0, 240, 2)
        w, h = (int(rng.integers(20, 120)), 4) if rng.random() < 0.5 else (4, int(rng.integers(20, 120)))
        board[y:y + h, x:x + w] = 255
    test = np.roll(board, shift, axis=(0, 1)).copy()
    test[200:210, 30:40] = 255
    group = root / "group1" / "1"
    (root / "group1" / "1_not").mkdir(parents=True, exist_ok=True)
    group.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(group / f"{name}_test.jpg"), cv2.cvtColor(test, cv2.COLOR_GRAY2BGR))
    cv2.imwrite(str(group / f"{name}_temp.jpg"), cv2.cvtColor(board, cv2.COLOR_GRAY2BGR))
    (root / "group1" / "1_not" / f"{name}.txt").write_text("26 196 44 214 4\n")
    with (root / "trainval.txt").open("a") as f:
        f.write(f"group1/1/{name}.jpg group1/1_not/{name}.txt\n")


def test_window_golden_twins_are_cut_from_the_template_aligned_onto_the_tested_image(tmp_path: Path) -> None:
    from inspector.cli import main

    rng = np.random.default_rng(3)
    for i in range(2):
        write_deeppcb_pair(tmp_path / "dpcb", f"1000{i}", (2, -3), rng)
    apart = {}
    for how in ("aligned", "raw"):
        out, golden = tmp_path / how / "w", tmp_path / how / "g"
        args = ["dataset", "windows", "--deeppcb", str(tmp_path / "dpcb"), "--out", str(out), "--golden-out",
                str(golden), "--window", "64"]
        assert main(args + (["--raw-template"] if how == "raw" else [])) == 0
        goods = sorted((out / GOOD).glob("*.png"))
        assert goods and len(list((out / "spur").glob("*.png"))) == 2
        apart[how] = np.mean([np.abs(cv2.imread(str(p)).astype(int) - cv2.imread(str(golden / GOOD / p.name))).mean()
                              for p in goods])
    assert apart["aligned"] < 0.25 * apart["raw"], apart  # what remains is JPEG's noise at the traces' edges


def test_windows_held_out_by_pair_are_a_test_split_teaching_keeps_back(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`dataset windows --heldout` writes OUT/train and OUT/test: a folder zoo train reads as its own split (teaching
    from train, keeping test back) and zoo evaluate --split test scores; every pair's windows on one side."""
    from inspector.cli import main
    from inspector.training.labelled.folder import read_folder

    rng = np.random.default_rng(5)
    for i in range(8):
        write_deeppcb_pair(tmp_path / "dpcb", f"2000{i}", (0, 0), rng)
    out = tmp_path / "w"
    assert main(["dataset", "windows", "--deeppcb", str(tmp_path / "dpcb"), "--out", str(out), "--window", "64",
                 "--heldout", "0.5"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["test", "train"]
    said = capsys.readouterr().out
    held = said.split("held-out pairs: ")[1].split()
    crops = read_folder(out).crops
    assert {c.split for c in crops} == {"train", "test"}
    assert {c.path.name.split("__")[0] for c in crops if c.split == "test"} == set(held)
    assert not {c.path.name.split("__")[0] for c in crops if c.split == "train"} & set(held)


def test_an_orientation_free_crop_is_drawn_under_the_squares_symmetries_with_its_golden_crop_alike() -> None:
    from inspector.training.augment import turned
    from inspector.training.labelled.trainer import turn_all

    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # no symmetry of its own
    seen = {turned(image, k).tobytes() + bytes(turned(image, k).shape) for k in range(8)}
    assert len(seen) == 8 and np.array_equal(turned(image, 0), image)
    live = [np.random.default_rng(i).integers(0, 255, (5, 7, 3), dtype=np.uint8) for i in range(20)]
    lives, goldens = turn_all(live, [im.copy() for im in live], np.random.default_rng(0))
    assert all(np.array_equal(a, b) for a, b in zip(lives, goldens))  # the same turn for both
    assert {im.shape for im in lives} == {(5, 7, 3), (7, 5, 3)}


def test_an_image_that_cannot_be_written_says_why_instead_of_going_on(tmp_path: Path) -> None:
    """cv2.imwrite returns False on a full disk; a dataset cut went on writing nothing and reported success."""
    from inspector.ingest.images import write_image

    image = np.zeros((8, 8, 3), np.uint8)
    write_image(tmp_path / "ok.png", image)
    assert cv2.imread(str(tmp_path / "ok.png")).shape == (8, 8, 3)
    (tmp_path / "full.png").symlink_to("/dev/full")  # the kernel's own ENOSPC
    with pytest.raises(OSError, match=r"full.png: No space left on device; free space and run again"):
        write_image(tmp_path / "full.png", image)
    with pytest.raises(OSError, match="check the folder exists"):
        write_image(tmp_path / "missing" / "x.png", image)


def test_the_served_threshold_keeps_the_budget_over_resamples_of_whole_identities() -> None:
    from inspector.training.labelled.metrics import guarded_threshold

    rng = np.random.default_rng(4)
    # 60 boards of 50 good windows each; a board's windows share its offset (its own look), so they move together
    offsets = rng.normal(0.0, 1.5, 60)
    good = np.concatenate([rng.normal(6.0 + o, 0.5, 50) for o in offsets])
    boards = [f"b{i}" for i in range(60) for _ in range(50)]
    plain = float(np.sort(good)[int(0.01 * len(good))])  # exactly the budget on these crops
    guarded = guarded_threshold(good, boards, 0.01)
    assert guarded < plain and (good < guarded).mean() < 0.01  # a margin for the next boards
    # every window its own identity, the same spread: the resamples barely move, the margin is small
    alone = guarded_threshold(good, [str(i) for i in range(len(good))], 0.01)
    assert guarded < alone <= plain and plain - alone < (plain - guarded) / 2
    with pytest.raises(ValueError, match="identities"):
        guarded_threshold(good, boards[:10], 0.01)


def test_a_small_set_draws_full_epochs_and_is_kept_annealed_and_no_worse_than_a_guess() -> None:
    """A few dozen crops still give the one-cycle schedule MIN_EPOCH draws an epoch (a given epoch size is kept);
    patience counts from the schedule's half-way down; an epoch whose held-out loss is worse than a uniform guess's
    is never kept over one that is not, whatever its recall (a one-photo board once kept an epoch of held-out loss 22
    and served a threshold of -32 log-odds)."""
    from inspector.training.labelled.trainer import MIN_EPOCH, Crops, epoch_score, patience_from, train

    assert (patience_from(30), patience_from(12), patience_from(6)) == (20, 8, 4)
    assert epoch_score(1.2, 0.5, 7) > epoch_score(22.2, 0.9, 7) > epoch_score(23.0, 0.9, 7)
    assert epoch_score(1.2, 0.6, 7) > epoch_score(0.9, 0.5, 7) and epoch_score(0.8, None, 2) < epoch_score(0.6, 0.0, 2)
    rng = np.random.default_rng(5)
    kinds = ["ok", "blob", "nick"]

    def crops(n: int) -> Crops:
        labels = np.arange(n) % 3
        return Crops([crop(rng, kinds[k]) for k in labels], labels.astype(np.int64))

    arch = ResNetClassifier(10, input_size=16, classes=3)
    taught = train(arch, tuple(kinds), crops(36), crops(12), epochs=2, patience=1, seed=0)
    assert [h["draws"] for h in taught.history] == [MIN_EPOCH, MIN_EPOCH]
    given = train(arch, tuple(kinds), crops(36), crops(12), epochs=1, patience=1, seed=0, epoch_size=96)
    assert given.history[0]["draws"] == 96


def test_an_anomaly_expert_is_not_retrained_from_renders_and_says_how_it_learns(tmp_path: Path) -> None:
    """An expert fitted to good crops alone (board teach --experts anomaly) has no taught version to retrain from
    its folder; the demo's loop would render crops of its type: refused, naming the way it learns a false call."""
    from dataclasses import asdict

    from inspector.experts.resnet import ResNetClassifier
    from inspector.experts.zoo import write_expert
    from inspector.training.retrain import retrain_classifier

    arch = ResNetClassifier(10, 32, 2, good_margin=0.0, head="anomaly")
    entry = write_expert(tmp_path, "cls-C1", "classifier", arch.spec(), arch.random_state(0), digest=True,
                         classes=("good", "anomalous"))
    (tmp_path / "manifest.json").write_text(json.dumps({"build_key": "t", "experts": [asdict(entry)]}))
    with pytest.raises(ValueError, match=r"anomaly expert.*board teach --defects DIR"):
        retrain_classifier(Zoo.load(tmp_path), "cls-C1", tmp_path / "dataset", [])


def test_a_passed_gate_says_on_how_few_defects_a_loss_could_show() -> None:
    """The gate reads recall on each held-out set; a loss can only show among the defects the served weights find,
    and where those are few its pass says what it cannot have seen."""
    from inspector.training.labelled.recall_gate import recall_kept
    from inspector.training.retrain import FEW_DEFECTS, Score, gate_caution

    few = {"reviewed held-out": (Score.counted(10, 12, 0, 8), Score.counted(11, 12, 0, 8)),
           "reviewed unboxed": (Score.counted(0, 7, 0, 0), Score.counted(0, 7, 0, 0))}  # nothing found: none to lose
    gate = recall_kept(few, "images")
    assert gate["passed"] and gate["losses_seen_on"] == {"reviewed held-out": 10}
    said = gate_caution(gate)
    assert "10 reviewed held-out defects the served weights find" in said and "under 1 in 10 (10%)" in said
    many = {"reviewed held-out": (Score.counted(FEW_DEFECTS, 40, 0, 8), Score.counted(FEW_DEFECTS, 40, 0, 8))}
    said = gate_caution(recall_kept(many, "images"))
    assert f"the {FEW_DEFECTS} reviewed held-out defects" in said and "cannot show" not in said
    assert gate_caution({"passed": True, "reasons": []}) == ""  # a gate that recorded none (the demo's) says nothing


def test_a_folder_too_small_to_spare_an_epoch_set_runs_the_whole_course_and_its_held_out_chose_no_epoch(
        tmp_path: Path) -> None:
    from inspector.training.labelled.teach import TeachPlan, teach

    folder = make_folder(tmp_path / "crops", 4, {"ok": 6, "blob": 3}, seed=3)
    plan = TeachPlan("cls-small", folder, tmp_path / "zoo", good="ok", epochs=3, epoch_size=64,
                     heldout=frozenset({"s3b000"}))  # three boards to train on: fewer than a kind needs to spare one
    taught = teach(plan)
    assert taught.taught.best_epoch == taught.taught.epochs_run == 3 and not taught.epoch_set_aside
    assert {h["watched"] for h in taught.taught.history} == {"held-out"}  # only watched: the last epoch kept
    report = taught.summary()
    assert "its last epoch kept" in report and "they chose the threshold, not the epoch" in report, report
    assert Zoo.load(tmp_path / "zoo").entries["cls-small"].versions[0]["epoch_chosen_on"] is None
    # the held-out crops choose it only when asked (--epoch-share 0), and the report says so
    plan = TeachPlan("cls-asked", folder, tmp_path / "zoo", good="ok", epochs=3, epoch_size=64,
                     heldout=frozenset({"s3b000"}), epoch_share=0)
    report = teach(plan).summary()
    assert "(--epoch-share 0): the held-out crops choose it" in report and "so read these as optimistic" in report


def test_a_refusal_says_whether_the_loss_could_be_the_luck_of_the_split() -> None:
    """The defects the two versions call differently, on the same held-out items: were they as good, each would go
    either way as a coin falls, and a refusal says how often a loss that large would come so."""
    from inspector.training.labelled.recall_gate import REAL_LOSS, Disagreement, recall_kept
    from inspector.training.retrain import Score

    old = [True, True, True, True, False, True, False, False]
    new = [True, False, False, False, True, True, False, True]
    bad = [True, True, True, True, True, True, True, False]  # the last is good: a false call, not a defect
    d = Disagreement.of(old, new, bad)
    assert (d.lost, d.gained) == (3, 1) and d.chance == 5 / 16  # 3 or 4 of 4 disagreements lost by a fair coin
    luck = {"reviewed held-out": (Score.of(old, bad), Score.of(new, bad))}
    gate = recall_kept(luck, "images", {"reviewed held-out": d})
    assert not gate["passed"] and "by chance 31% of the time: too few to tell" in gate["reasons"][0], gate
    assert gate["disagreements"]["reviewed held-out"] == {"lost": 3, "gained": 1, "chance": 0.3125}
    real = Disagreement(6, 0)  # six lost, none gained: a fair coin does that once in 64
    assert real.chance == 1 / 64 < REAL_LOSS and "a real loss" in real.says()
    assert Disagreement(0, 0).chance == 1.0 and Disagreement(2, 5).chance > 0.9  # nothing lost: no loss to explain
    assert recall_kept(luck, "images")["reasons"] == ["recall on the reviewed held-out images fell from 71.4% to "
                                                      "42.9%"]  # without the items' calls, the reason alone


def test_a_tolerated_fall_passes_only_where_its_bound_is_within_the_tolerance() -> None:
    """A plant may accept a fall of a few points (a non-inferiority margin): a fall seen passes where the most it
    could be (Tango's one-sided score bound on the paired calls) is within it; the bound tightens with the defects
    read, and covers a true fall as often as it says."""
    import numpy as np

    from inspector.training.labelled.recall_gate import CONFIDENCE, Disagreement, fall_bound, recall_kept
    from inspector.training.retrain import Retrained, Score, format_scores

    z2 = 1.6448536269514722 ** 2
    assert abs(fall_bound(0, 0, 50) - z2 / (50 + z2)) < 1e-9  # nothing disagrees: the closed form
    assert fall_bound(18, 11, 261) < fall_bound(18, 11, 100)  # the same disagreements among more defects: tighter
    assert fall_bound(11, 18, 261) < fall_bound(18, 11, 261)  # a gain bounds lower than the same loss
    assert fall_bound(5, 0, 5) == 1.0  # every defect lost: nothing bounds it below all
    with pytest.raises(ValueError, match="to hold the 6 lost"):
        fall_bound(6, 0, 5)
    rng = np.random.default_rng(0)  # cells (lost, gained, agreeing) drawn at a true fall of three points
    draws = rng.multinomial(200, [0.06, 0.03, 0.91], size=1500)
    covered = np.mean([fall_bound(int(b), int(c), 200) >= 0.03 for b, c, _ in draws])
    assert 0.93 <= covered <= 0.985, covered  # one-sided 95%: neither short nor loose

    old = Score.counted(183, 261, 0, 272)  # 70.1%
    new = Score.counted(176, 261, 0, 272)  # 67.4%: 18 lost, 11 gained
    sets, why = {"taught held-out": (old, new)}, {"taught held-out": Disagreement(18, 11)}
    strict = recall_kept(sets, "crops", why)
    assert not strict["passed"] and "tolerance" not in strict and "fell from 70.1% to 67.4%" in strict["reasons"][0]
    loose = recall_kept(sets, "crops", why, tolerance=0.07)
    assert loose["passed"] and loose["tolerance"] == 0.07 and loose["confidence"] == CONFIDENCE
    assert loose["fall_bounds"] == {"taught held-out": round(fall_bound(18, 11, 261), 4)}
    assert "by at most 6.3 points (95% one-sided bound, 18 lost and 11 gained of 261 defects): within the 7 " \
        "tolerated" in loose["tolerated"][0], loose
    assert loose["rule"].endswith("or below them by at most 7 points (95% one-sided bound on the fall)")
    tight = recall_kept(sets, "crops", why, tolerance=0.05)
    assert not tight["passed"] and not tight["tolerated"] and "over the 5 tolerated" in tight["reasons"][0]
    few = {"reviewed held-out": (Score.counted(5, 6, 0, 4), Score.counted(4, 6, 0, 4))}  # one of six lost
    assert not recall_kept(few, "images", {"reviewed held-out": Disagreement(1, 0)}, tolerance=0.1)["passed"]
    unpaired = recall_kept(sets, "crops", tolerance=0.07)  # no paired calls: nothing bounds the fall
    assert not unpaired["passed"] and "no paired calls to bound the fall by" in unpaired["reasons"][0]
    with pytest.raises(ValueError, match="a share from 0 to 1, got 2"):
        recall_kept(sets, "crops", why, tolerance=2)
    from inspector.training.labelled.recall_gate import at_served_says

    served = {"taught held-out": old}
    assert "(what the line does with them now; chosen on held-out crops among these, so in-sample there)" in \
        at_served_says("margin -9.795", served, "crops")
    assert "teaching chose its point on held-out crops among these and the plant moved it since): taught held-out " \
        "183/261 defects found (70.1%)" in at_served_says("margin -12.795", served, "crops", moved=True)
    printed = format_scores(Retrained("cls-x", {}, sets, 0, 0, 1.0, 0, loose))
    assert "recall gate: passed (" in printed and "; tolerated: recall on the taught held-out crops fell" in printed


def test_an_epoch_set_does_not_shorten_a_classifiers_epoch(tmp_path: Path) -> None:
    """An epoch draws as many crops as the whole training side holds, those set aside to choose the epoch counted."""
    from inspector.training.labelled.teach import TeachPlan, teach

    folder = make_folder(tmp_path / "crops", 80, {"ok": 15, "blob": 2, "nick": 2}, seed=4)
    taught = teach(TeachPlan("cls-long", folder, tmp_path / "zoo", good="ok", epochs=1))
    train, aside = (sum(taught.counts[side].values()) for side in ("train", "epoch"))
    assert aside > 0 and train > 1024  # above the least epoch, so the set aside would have shortened it
    assert taught.taught.history[0]["draws"] == train + aside
