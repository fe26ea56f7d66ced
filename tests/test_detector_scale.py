"""A taught detector served windows far from the size of the images it was taught on is said (app/detector_scale.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from inspector.app.detector_scale import scale_notes
from inspector.experts.resnet import ResNetClassifier
from inspector.experts.yolo import YoloDetector
from inspector.experts.zoo import Zoo, write_expert, write_manifest
from inspector.ingest.photometric import INPUT_VERSION
from inspector.routing.rules import parse_rules
from inspector.training.labelled.boxes import Box, BoxedImage
from inspector.training.labelled.demo_boards import PANEL_RULES, write_panels
from inspector.training.labelled.detector_sizing import taught_scale

RULES = """\
recipe: scale-test
board: {width: 800, height: 400}
crop_margin: 2
classifier: {arch: resnet10, input_size: 32}
detectors:
  det-photo: {arch: yolov8n.yaml, input_size: 64}
  det-crop: {arch: yolov8n.yaml, input_size: 64}
  det-demo: {arch: yolov8n.yaml, input_size: 64}
components:
  CHIP: {shape: resistor, size: [60, 30], detector: det-photo, at: {R1: [40, 40], R2: [120, 40]}}
  CAP: {shape: resistor, size: [76, 40], detector: det-photo, at: {C1: [40, 120]}}
  CONN: {shape: resistor, size: [396, 120], detector: det-photo, at: {J1: [300, 300]}}
  QFP: {shape: resistor, size: [196, 196], detector: det-crop, at: {U1: [600, 120]}}
  SOT: {shape: resistor, size: [60, 30], detector: det-demo, at: {Q1: [200, 40]}}
"""


def zoo_of(root: Path, taught: dict[str, dict | None], classifiers: tuple[str, ...] = ()) -> Zoo:
    """Detectors of random weights whose served version records `taught_on` (None: no version, as the demo's), and
    classifiers that pass every part on to them."""
    root.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, seen in taught.items():
        det = YoloDetector("yolov8n.yaml", 64, 2, 0.5, "find")
        entry = write_expert(root, name, "detector", det.spec(), det.random_state(0), digest=True,
                             classes=("void", "spur"))
        if seen is not None:
            entry = replace(entry, versions=({"weights_sha256": entry.weights_sha256, "file": entry.file,
                                              "origin": "taught from labelled boxes", "taught_on": seen},),
                            served=(entry.weights_sha256,))
        entries.append(entry)
    for name in classifiers:
        cls = ResNetClassifier(10, 32, 2, good_margin=-1e5)
        entries.append(write_expert(root, name, "classifier", cls.spec(), cls.random_state(0)))
    return write_manifest(root, "scale-test", 0, entries, input_version=INPUT_VERSION)


def test_teaching_records_what_its_images_and_boxes_measure() -> None:
    images = [BoxedImage(Path(f"b{i}.png"), size, boxes, f"b{i}") for i, (size, boxes) in enumerate((
        ((640, 480), (Box(0, 10, 10, 34, 30),)), ((600, 640), (Box(1, 0, 0, 20, 50), Box(0, 5, 5, 15, 45))),
        ((700, 500), ())))]
    assert taught_scale(images) == {"image_px": 640.0, "box_px": 40.0}  # medians of 640, 640, 700 and 24, 50, 40
    assert taught_scale(images[2:]) == {"image_px": 700.0, "box_px": None}


def test_windows_far_from_the_taught_images_are_said_with_what_a_defect_becomes(tmp_path: Path) -> None:
    """det-photo, taught on 640-px photos, is served 64- to 80-px windows (said, with its 24-px defects become 200 px
    and more) and a 400-px one (within a factor of two: not said); det-crop, taught on 40-px crops, a 200-px window
    (said: smaller); the demo's, which records nothing, is not judged."""
    rules = parse_rules(RULES, str(tmp_path / "scale.yaml"))
    zoo = zoo_of(tmp_path / "zoo", {"det-photo": {"image_px": 640.0, "box_px": 24.0},
                                    "det-crop": {"image_px": 40.0, "box_px": 12.0}, "det-demo": None})
    notes = scale_notes(rules, zoo)
    assert len(notes) == 2, notes
    crop, photo = notes
    assert photo.startswith("note: det-photo was taught on images of about 640 px a side") and \
        "serves it the windows of CAP, CHIP (64-80 px)" in photo and "CONN" not in photo
    assert "reaches it 8-10x larger than taught" in photo and "about 2 px at its 64-px input, would be about " \
        "19-24 px there" in photo and "zoo train --expert det-photo --from" in photo
    assert crop.startswith("note: det-crop was taught on images of about 40 px") and "QFP (200 px)" in crop
    assert "reaches it 5x smaller than taught" in crop and "about 19 px at its 64-px input, would be about 4 px " \
        "there" in crop
    # taught on images near the size of its windows (as `board teach` and a dataset export of the line's crops are):
    # quiet for those, said for the windows still far off
    near = zoo_of(tmp_path / "near", {"det-photo": {"image_px": 100.0, "box_px": None},
                                      "det-crop": {"image_px": 300.0, "box_px": None}, "det-demo": None})
    [conn] = scale_notes(rules, near)
    assert "the windows of CONN (400 px)" in conn and "reaches it 4x smaller than taught. It may" in conn, conn


def test_the_line_says_it_when_it_starts_and_when_a_rule_set_is_applied(tmp_path: Path, box_models: Path) -> None:
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.results.store import ResultStore, sqlite_url

    zoo = zoo_of(tmp_path / "zoo", {"det-p": {"image_px": 1024.0, "box_px": 30.0}}, classifiers=("cls-WIN",))
    rules = parse_rules(PANEL_RULES.replace("DETECTOR", "det-p").replace("SIZE", "64"), str(tmp_path / "p.yaml"))
    write_panels(tmp_path / "panels", 1, seed=1, defective=0.0, look=0.0)
    said: list[str] = []
    service, _ = run_line(rules, zoo, box_models, open_source(f"folder:{tmp_path / 'panels'}", rules, 0, 0),
                          ServiceConfig(LineConfig(device_mb=40)), ResultStore(sqlite_url(tmp_path / "r.sqlite")),
                          tmp_path / "data", said.append)
    notes = [m for m in said if m.startswith("note: det-p was taught on images of about 1024 px")]
    assert len(notes) == 1 and "the windows of WIN (64 px)" in notes[0] and "16x larger" in notes[0], said
    service.line.apply_rules(rules)  # a rule set applied later (an edit, a changeover) is judged again
    assert len([m for m in said if m.startswith("note: det-p")]) == 2


def test_the_dashboard_shows_it_beside_a_rule_edit_it_applied(tmp_path: Path, box_models: Path) -> None:
    """An engineer's edit applied from the rules tab answers with what the line says of the set it applied; so does a
    taught board activated for the next start."""
    import time

    from inspector.access.identity import Identity
    from inspector.app.controller import LineController, LineSetup
    from inspector.app.line import LineConfig
    from inspector.app.service import ServiceConfig
    from ui.backend import LocalBackend

    zoo = zoo_of(tmp_path / "zoo", {"det-p": {"image_px": 1024.0, "box_px": 30.0}}, classifiers=("cls-WIN",))
    text = PANEL_RULES.replace("DETECTOR", "det-p").replace("SIZE", "64")
    rules_path = tmp_path / "p.yaml"
    rules_path.write_text(text, encoding="utf-8")
    (tmp_path / "inbox").mkdir()
    setup = LineSetup(rules_path=rules_path, source=f"watch:{tmp_path / 'inbox'}", boards=0,
                      service=ServiceConfig(LineConfig(device_mb=40)))
    backend = LocalBackend(LineController(box_models, tmp_path / "data", zoo=zoo), setup)
    backend.start()
    try:
        deadline = time.monotonic() + 120
        while backend.controller.rules is None and time.monotonic() < deadline:
            time.sleep(0.2)
        backend.identity = Identity("erin", "engineer", "the tests")
        said = backend.apply_rules(text.replace("crop_margin: 0", "crop_margin: 2"), "a wider margin")
        first, *notes = said.split("\n")
        assert first.startswith("applied bare-panel") and len(notes) == 1, said
        assert notes[0].startswith("note: det-p was taught on images of about 1024 px") and "WIN (68 px)" in notes[0]
    finally:
        backend.stop()
        backend.close(30)
    # a taught board activated for the line's next start: said there too
    idle = LocalBackend(LineController(box_models, tmp_path / "data", zoo=zoo), setup)
    idle.identity = Identity("erin", "engineer", "the tests")
    first, *notes = idle.activate_board(rules_path, tmp_path / "zoo", "the new board").split("\n")
    assert first.startswith("bare-panel") and "next start" in first and len(notes) == 1
    assert notes[0].startswith("note: det-p was taught on images of about 1024 px")
    assert "WIN (68 px)" in notes[0]  # the file as the edit above saved it
