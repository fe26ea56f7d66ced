"""A detector that compares with the golden board (`zoo train --new --kind detector --reference DIR`): each image is
read beside its golden image, as golden-comparison classifiers read crops (ingest/golden.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.experts.zoo import Zoo
from inspector.training.labelled.boxes import Box, BoxedImage
from inspector.training.labelled.folder import FolderError

from .test_labelled_detector import voc_xml

CLASSES = ("void", "spur")
LAMINATE, COPPER = (40, 80, 40), (60, 160, 200)


def pair(rng: np.random.Generator, kinds: list[int], stubs: int, stub_width: int = 6,  # noqa: ANN201
         widths: tuple[int, ...] = (64, 80)):
    """A board and its golden board, (live, golden, boxes): test_labelled_detector's board, whose design also has
    `stubs` copper stubs of `stub_width` px (in both: at 16 px a stub looks just like a spur); a void (a hole in a
    bar) or a spur (a 16-px stub the design lacks, clear of its stubs) only on the live board. Each photo has its
    own camera noise."""
    w = int(rng.choice(widths))
    design = np.full((64, w, 3), LAMINATE, np.uint8)
    design[4:26, :] = design[30:40, :] = COPPER
    taken = np.zeros(w, bool)
    for _ in range(stubs):
        x = int(rng.integers(2, w - stub_width - 2))
        design[40:60, x:x + stub_width] = COPPER
        taken[max(0, x - 2):x + stub_width + 2] = True
    live, boxes = design.copy(), []
    for kind in kinds:
        if kind == 0:
            x = int(rng.integers(4, w - 20))
            live[7:23, x:x + 16] = LAMINATE
            boxes.append((0, x - 1, 6, x + 17, 24))
        else:
            x = int(rng.choice([x for x in range(2, w - 18) if not taken[x:x + 16].any()]))
            live[40:60, x:x + 16] = COPPER
            boxes.append((1, x - 1, 39, x + 17, 61))

    def shot(image: np.ndarray) -> np.ndarray:
        return np.clip(image + rng.normal(0, 4, image.shape), 0, 255).astype(np.uint8)
    return shot(live), shot(design), boxes


def golden_set(root: Path, boards: int, seed: int, stubs: tuple[int, ...], stub_width: int = 6,
               widths: tuple[int, ...] = (64, 80)) -> tuple[Path, Path]:
    """A VOC set (each .xml beside its image) and its golden tree: board b's design has stubs[b % len(stubs)]
    stubs."""
    rng = np.random.default_rng(seed)
    live_dir, golden_dir = root / "set" / "shots", root / "golden" / "shots"
    live_dir.mkdir(parents=True)
    golden_dir.mkdir(parents=True)
    (root / "set" / "classes.txt").write_text("void\nspur\n")
    for b in range(boards):
        live, golden, boxes = pair(rng, [[], [0], [1], [0, 1]][b % 4], stubs[b % len(stubs)], stub_width, widths)
        name = f"s{seed}b{b:03d}__top.png"
        cv2.imwrite(str(live_dir / name), live)
        cv2.imwrite(str(golden_dir / name), golden)
        h, w = live.shape[:2]
        (live_dir / name.replace(".png", ".xml")).write_text(
            voc_xml(name, (w, h), [(CLASSES[k], max(0, x1), y1, x2, y2) for k, x1, y1, x2, y2 in boxes]))
    return root / "set", root / "golden"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, encoding="utf-8",
                          cwd=cwd, timeout=900)


def test_a_detector_taught_beside_the_golden_board_finds_defects_on_a_design_it_never_saw(tmp_path: Path) -> None:
    """Taught on boards whose design has no stubs or one thin one, scored on a design with a stub shaped just like
    a spur: what the design has is in the golden image too, so only what differs is found. (A detector of the live
    image alone, taught the same way, flagged all 6 clean boards of that design: docs/pages/ml/labelled-images.md.)"""
    train, train_golden = golden_set(tmp_path / "train", 120, seed=1, stubs=(0, 1))
    test, test_golden = golden_set(tmp_path / "test", 24, seed=2, stubs=(1,), stub_width=16)
    r = cli("zoo", "train", "--new", "det-golden", "--kind", "detector", "--from", str(train), "--reference",
            str(train_golden), "--zoo", str(tmp_path / "zoo"), "--epochs", "30", "--patience", "30", "--false-calls",
            "0.1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "each image beside its golden image" in r.stdout
    entry = Zoo.load(tmp_path / "zoo").entries["det-golden"]
    assert entry.spec["reference"] == "composite" and entry.spec["mode"] == "find"
    assert entry.versions[0]["reference"] == str(train_golden)
    r = cli("zoo", "evaluate", "--expert", "det-golden", "--on", str(test), "--reference", str(test_golden),
            "--zoo", str(tmp_path / "zoo"), "--json", str(tmp_path / "eval.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    scores = json.loads((tmp_path / "eval.json").read_text())
    assert scores["per_class"]["spur"]["labelled"] == 12 and scores["per_class"]["void"]["labelled"] == 12
    assert scores["map"] > 0.75 and scores["defect_recall"] >= 0.85 and scores["false_call_rate"] <= 0.17, r.stdout
    assert min(c["ap"] for c in scores["per_class"].values()) > 0.5, r.stdout  # both classes learned
    # scored without its golden images it is refused, not fed the live image alone
    r = cli("zoo", "evaluate", "--expert", "det-golden", "--on", str(test), "--zoo", str(tmp_path / "zoo"),
            cwd=tmp_path)
    assert r.returncode == 1 and "pass the golden images (--reference DIR" in r.stderr


def test_a_golden_detector_is_taught_on_the_composite_and_refuses_a_golden_image_that_is_not_its_window(
        tmp_path: Path) -> None:
    """The training images are the composite the line serves (the difference channel bright where the defect is,
    and nowhere else); a golden image missing or of another size is named with what to do."""
    from inspector.experts.yolo import YoloDetector
    from inspector.experts.zoo import write_expert, write_manifest
    from inspector.ingest.photometric import INPUT_VERSION
    from inspector.training.labelled.detector_set import write_split
    from inspector.training.labelled.evaluate import evaluate_detector
    from inspector.training.labelled.golden_tree import golden_paths

    live, golden = np.full((64, 96, 3), 30, np.uint8), np.full((64, 96, 3), 30, np.uint8)
    live[5:25, 70:76] = golden[5:25, 70:76] = 230  # the design's own copper, in both
    live[40:46, 20:32] = 230  # a defect: only on the live board
    (tmp_path / "live").mkdir()
    (tmp_path / "gold").mkdir()
    cv2.imwrite(str(tmp_path / "live" / "b__1.png"), live)
    cv2.imwrite(str(tmp_path / "gold" / "b__1.png"), golden)
    image = BoxedImage(tmp_path / "live" / "b__1.png", (96, 64), (Box(1, 20, 40, 32, 46),), "b")
    arch = YoloDetector("yolov8n.yaml", 96, 2, 0.25, "find", "letterbox", "composite")
    paths = golden_paths(tmp_path / "live", [image.path], tmp_path / "gold")
    write_split(tmp_path / "set", "train", arch, [image], [0, 1], goldens=paths)
    served = cv2.imread(str(tmp_path / "set" / "images" / "train" / "000000.png"))  # BGR: the difference first
    difference = served[:, :, 0].astype(np.int16)
    top = 16  # the letterbox's band above the 64-px image in the 96-px square
    inside = difference[top + 40:top + 46, 20:32]
    outside = np.ones(difference.shape, bool)
    outside[top + 39:top + 47, 19:33] = False
    assert inside.min() > difference[outside].max() + 40, (inside.min(), difference[outside].max())
    assert served[:, :, 1].std() > 10 and served[:, :, 2].std() > 10  # the golden and live greys beside it

    with pytest.raises(FolderError, match=r"1 of 1 images have no golden image under .*elsewhere.*mirrors the "):
        golden_paths(tmp_path / "live", [image.path], tmp_path / "elsewhere")
    cv2.imwrite(str(tmp_path / "gold" / "b__1.png"), golden[:, :80])
    with pytest.raises(FolderError, match=r"b__1.png is 80x64 px but its live image is 96x64: a golden image is the "
                                          r"same window"):
        write_split(tmp_path / "again", "train", arch, [image], [0, 1], goldens=paths)

    # zoo evaluate gives a golden detector its golden images and a plain one none, or says which it lacks
    entries = []
    (tmp_path / "zoo").mkdir()
    for name, kind in (("det-golden", "composite"), ("det-plain", None)):
        det = YoloDetector("yolov8n.yaml", 96, 2, 0.25, "find", "letterbox", kind)
        entries.append(write_expert(tmp_path / "zoo", name, "detector", det.spec(), det.random_state(0),
                                    classes=CLASSES))
    loaded = write_manifest(tmp_path / "zoo", "golden-test", 0, entries, input_version=INPUT_VERSION)
    assert loaded.architecture("det-golden").reference == "composite"
    with pytest.raises(FolderError, match="compares each image with the golden board's: pass the golden images"):
        evaluate_detector(loaded, "det-golden", tmp_path / "live")
    with pytest.raises(FolderError, match="reads the live image alone; it was not taught with golden images"):
        evaluate_detector(loaded, "det-plain", tmp_path / "live", reference=tmp_path / "gold")


def test_reviews_retrain_a_golden_detector_beside_the_windows_the_line_compared(tmp_path: Path,
                                                                                box_models: Path) -> None:
    """A finding detector that compares with the golden board retrains from reviews: the export writes the golden
    window beside each of its crops, retraining reads them (and the golden images it was taught beside); an export
    without them is refused, naming what is missing."""
    from dataclasses import asdict

    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.app.verdict import classes_of, finding_detectors
    from inspector.experts.resnet import ResNetClassifier
    from inspector.experts.zoo import write_expert
    from inspector.ingest.crops import cut_board
    from inspector.ingest.golden import golden_image
    from inspector.results.dataset import export_dataset
    from inspector.results.reviews import ReviewRequest, record_review
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.routing.rules import parse_rules
    from inspector.training.labelled.demo_boards import PANEL_RULES, write_panels
    from inspector.training.labelled.detection import detect
    from inspector.training.labelled.evaluate import served_module
    from inspector.training.labelled.retrain_detector import retrain_taught_detector
    from inspector.training.labelled.teach_detector import DetectorPlan, teach_detector

    live, golden = golden_set(tmp_path, 16, seed=5, stubs=(0, 1))
    zoo_dir = tmp_path / "zoo"
    taught = teach_detector(DetectorPlan("det-g", live, zoo_dir, epochs=1, patience=1, reference=golden))
    manifest = json.loads((zoo_dir / "manifest.json").read_text())
    gate = ResNetClassifier(10, 32, 2, good_margin=-1e5, reference="composite")  # passes every window on
    manifest["experts"].append(asdict(write_expert(zoo_dir, "cls-WIN", "classifier", gate.spec(),
                                                   gate.random_state(0))))
    write_panels(tmp_path / "golden-panel", 1, seed=1, defective=0.0, look=0.0)
    text = PANEL_RULES.replace("DETECTOR", "det-g").replace("SIZE", str(taught.input_size))
    rules = parse_rules(text + "golden: golden-panel/panel000.png\n", str(tmp_path / "panel.yaml"))
    write_panels(tmp_path / "panels", 8, seed=2, defective=0.5, look=0.0)
    source = f"folder:{tmp_path / 'panels'}"
    # served at half its lowest best box on these windows (each beside the golden panel's), so it calls every one: a
    # one-epoch detector scores every window alike, and the line's batches differ from these in the last float bits
    crops = [c.image for f in open_source(source, rules, 0, 0) for c in cut_board(f.image, rules)]
    goldens = [c.image for c in cut_board(golden_image(rules), rules)] * (len(crops) // 2)
    arch, model = served_module(Zoo.load(zoo_dir), "det-g")
    best = sorted(max((f.score for f in fs), default=0.0) for fs in detect(arch, model, crops, goldens))
    det = next(e for e in manifest["experts"] if e["name"] == "det-g")
    det["spec"]["threshold"] = best[0] / 2
    (zoo_dir / "manifest.json").write_text(json.dumps(manifest))
    zoo = Zoo.load(zoo_dir)
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(rules, zoo, box_models, open_source(source, rules, 0, 0),
             ServiceConfig(LineConfig(device_mb=40), keep_crops="all"), store, tmp_path / "data", lambda _m: None)
    failed = [(i.uuid, p) for i in store.inspections() for p in i.parts if p.verdict == "fail"]
    assert len(failed) == len(crops)
    for u, p in failed:  # each a false call: a clean crop, beside its golden window, to the detector
        record_review(store, ReviewRequest(u, p.ref, "false_call", None, "qa"), classes_of(zoo))
    report = export_dataset(store, tmp_path / "dataset", [rules], classes_of=classes_of(zoo), heldout_percent=30,
                            finders=finding_detectors(zoo))
    items = [i for i in report.items if i["expert"] == "det-g"]
    assert items and all((tmp_path / "dataset" / i["golden"]).is_file() for i in items)
    r = retrain_taught_detector(zoo, "det-g", tmp_path / "dataset", 1, 0, lambda _m: None)
    assert Zoo.load(zoo_dir).entries["det-g"].versions[-1]["weights_sha256"] == r.version["weights_sha256"]
    assert r.scores["taught held-out"][0].defects > 0
    plain = parse_rules(text, str(tmp_path / "panel.yaml"))  # the same parts exported without the golden board
    export_dataset(store, tmp_path / "bare", [plain], classes_of=classes_of(zoo), heldout_percent=30,
                   finders=finding_detectors(zoo))
    with pytest.raises(ValueError, match="has no golden windows beside its crops"):
        retrain_taught_detector(zoo, "det-g", tmp_path / "bare", 1, 0, lambda _m: None)
