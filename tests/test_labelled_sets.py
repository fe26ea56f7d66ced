"""Labelled box sets as exporters write them (training/labelled/*_set.py, own_split.py): Roboflow's and Ultralytics'
YOLO layouts with their own split, polygon rows, COCO split folders with a grouping category and crowd boxes, VOC
split folders with difficult objects, and how teaching and scoring use a set's own split and its ignored boxes."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.training.labelled.box_sets import read_boxes
from inspector.training.labelled.boxes import Box
from inspector.training.labelled.detection import Found, score, table
from inspector.training.labelled.folder import FolderError, identity_of
from inspector.training.labelled.own_split import teaching_sides, to_score
from inspector.training.labelled.yolo_set import label_path

from .test_labelled_detector import voc_xml


def picture(path: Path, size: tuple[int, int] = (80, 60)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((size[1], size[0], 3), 90, np.uint8))


def labelled(image: Path, rows: list[str]) -> None:
    label = label_path(image)
    label.parent.mkdir(parents=True, exist_ok=True)
    label.write_text("".join(r + "\n" for r in rows))


def roboflow_yolo(root: Path) -> Path:
    """Roboflow's YOLOv8 export: data.yaml beside train/, valid/ and test/, each with images/ and labels/, paths
    written `../train/images`; every file renamed `<stem>_<ext>.rf.<hash>`, augmented copies only in train."""
    root.mkdir(parents=True)
    (root / "data.yaml").write_text("train: ../train/images\nval: ../valid/images\ntest: ../test/images\n\nnc: 2\n"
                                    "names: ['void', 'spur']\n\nroboflow:\n  workspace: plant\n  version: 3\n")
    for side, stem, digest, rows in (
            ("train", "IMG_0001", "0a1b", ["0 0.5 0.5 0.25 0.5"]),
            ("train", "IMG_0001", "9f8e", ["0 0.5 0.5 0.25 0.5"]),  # the same photo, augmented
            ("train", "IMG_0002", "77aa", ["1 0.1 0.2 0.3 0.2 0.3 0.6 0.1 0.5"]),  # a polygon
            ("valid", "IMG_0003", "c0de", ["1 0.25 0.25 0.5 0.5"]),
            ("test", "IMG_0004", "beef", [])):
        image = root / side / "images" / f"{stem}_jpg.rf.{digest}.jpg"
        picture(image)
        labelled(image, rows)
    return root


def test_a_roboflow_yolo_export_is_read_with_its_own_split_polygons_and_the_copies_of_one_photo(tmp_path: Path) -> None:
    s = read_boxes(roboflow_yolo(tmp_path / "rf"))
    assert s.layout == "yolo" and s.classes == ("void", "spur")
    assert s.splits() == {"train": 3, "val": 1, "test": 1}
    assert [im.identity for im in s.images if im.split == "train"] == ["IMG_0001", "IMG_0001", "IMG_0002"]
    polygon = next(im for im in s.images if im.identity == "IMG_0002")
    assert polygon.boxes == (Box(1, pytest.approx(0.1 * 80), pytest.approx(0.2 * 60), pytest.approx(0.3 * 80),
                                 pytest.approx(0.6 * 60)),)  # the polygon's bounds
    sides = teaching_sides(s.images)
    assert [len(sides.train), len(sides.heldout), len(sides.kept_back)] == [3, 1, 1] and sides.warning is None
    assert "the set's own split: 3 train, 1 val images; 1 test images kept back" in sides.how
    aside = teaching_sides(s.images, 0.5)  # --heldout sets the own split aside; the test images stay kept back
    assert len(aside.train) + len(aside.heldout) == 4 and len(aside.kept_back) == 1 and "set aside" in aside.how
    with pytest.raises(FolderError, match=r"has its own split \(test 1, train 3, val 1\): say which to score with "
                                          r"--split"):
        to_score(s.root, s.images, None)
    assert [im.split for im in to_score(s.root, s.images, "test")] == ["test"]
    assert len(to_score(s.root, s.images, "all")) == 5
    # one photo's copies on both sides of the exporter's split: said, not hidden
    (tmp_path / "rf" / "valid" / "images" / "IMG_0003_jpg.rf.c0de.jpg").rename(
        tmp_path / "rf" / "valid" / "images" / "IMG_0001_jpg.rf.c0de.jpg")
    (tmp_path / "rf" / "valid" / "labels" / "IMG_0003_jpg.rf.c0de.txt").rename(
        tmp_path / "rf" / "valid" / "labels" / "IMG_0001_jpg.rf.c0de.txt")
    warned = teaching_sides(read_boxes(tmp_path / "rf").images).warning
    assert warned and "1 identities" in warned and "'IMG_0001'" in warned and "--heldout" in warned
    assert identity_of(Path("board7__R12_png.rf.00ff.png")) == "board7"  # both conventions at once


def test_an_ultralytics_yolo_set_reads_its_keys_lists_and_split_folders(tmp_path: Path) -> None:
    root = tmp_path / "u"
    for side, n in (("train", 3), ("val", 2), ("extra", 1)):
        for i in range(n):
            image = root / "images" / side / f"{side}{i}.png"
            picture(image)
            labelled(image, ["0 0.5 0.5 0.2 0.2"])
    (root / "test.txt").write_text("./images/extra/extra0.png\n")
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nval: [images/val]\ntest: test.txt\nnames:\n"
                                    "  0: short\n")
    s = read_boxes(root)
    assert s.splits() == {"train": 3, "val": 2, "test": 1} and s.images[0].boxes[0].kind == 0
    (root / "data.yaml").write_text("path: /home/someone/datasets/pcb\ntrain: images/train\nval: [images/val]\n"
                                    "names: [short]\n")  # the exporting machine's path: read from here
    assert read_boxes(root).splits() == {"train": 3, "val": 2}
    assert label_path(root / "images" / "train" / "a.png") == root / "labels" / "train" / "a.txt"
    # without the keys, split folders under images/ are the split; an image outside them is refused
    (root / "data.yaml").write_text("names: [short]\n")
    with pytest.raises(FolderError, match=r"is split into folders \(train, val\) but 1 images lie outside them, e.g. "
                                          r".*extra0.png"):
        read_boxes(root)
    (root / "images" / "extra" / "extra0.png").unlink()
    assert read_boxes(root).splits() == {"train": 3, "val": 2}
    for spoilt, said in (("names: [short]\ntrain: images/train\nval: images/train\n",
                          r"is listed under both `train` and `val`"),
                         ("names: [short]\ntrain: images/gone\n", r"`train: images/gone` is not there"),
                         ("names: [short\ntrain: images/train\n", r"data.yaml: line \d: not readable YAML"),
                         ("names: [short]\ntrain: images/train\ntest: test.txt\n",
                          r"test.txt:1: the image './images/extra/extra0.png' is not there")):
        (root / "data.yaml").write_text(spoilt)
        with pytest.raises(FolderError, match=said):
            read_boxes(root)
    (root / "data.yaml").write_text("names: [short]\ntrain: images/train\n")
    label = root / "labels" / "train" / "train0.txt"
    for row, said in (("0 0.5 0.5 0.2 0.2 0.9", "a sixth field: is it a prediction file"),
                      ("0 0.1 0.1 0.5 0.5 0.9 0.9", "the polygon encloses nothing"),
                      ("0 0.1 0.1 0.5 0.5 0.9", r"expected `class cx cy w h` or a polygon")):
        label.write_text(row + "\n")
        with pytest.raises(FolderError, match=said):
            read_boxes(root)


def coco_file(images: list[tuple[int, str]], notes: list[tuple[int, int, int, list[float], int]]) -> str:
    """Roboflow's COCO: the project's name as category 0, the supercategory of the real ones."""
    return json.dumps({"images": [{"id": i, "file_name": f, "width": 80, "height": 60} for i, f in images],
                       "categories": [{"id": 0, "name": "pcb-defects", "supercategory": "none"},
                                      {"id": 1, "name": "short", "supercategory": "pcb-defects"},
                                      {"id": 2, "name": "open", "supercategory": "pcb-defects"}],
                       "annotations": [{"id": n, "image_id": i, "category_id": c, "bbox": b, "iscrowd": crowd,
                                        "area": b[2] * b[3], "segmentation": []} for n, i, c, b, crowd in notes]})


def test_a_coco_set_split_into_folders_leaves_out_its_grouping_category_and_ignores_crowds(tmp_path: Path) -> None:
    root = tmp_path / "c"
    for side, notes in (("train", [(1, 1, 1, [10, 10, 20, 10], 0), (2, 1, 2, [40, 30, 10, 10], 1)]),
                        ("valid", [(3, 1, 2, [5, 5, 10, 10], 0)]), ("test", [])):
        picture(root / side / f"{side}_a.jpg")
        (root / side / "_annotations.coco.json").write_text(coco_file([(1, f"{side}_a.jpg")], notes))
    s = read_boxes(root)
    assert s.layout == "coco" and s.classes == ("short", "open") and s.splits() == {"train": 1, "val": 1, "test": 1}
    train = next(im for im in s.images if im.split == "train")
    assert train.boxes == (Box(0, 10, 10, 30, 20), Box(1, 40, 30, 50, 40, ignore=True))
    assert s.counts() == {"short": 1, "open": 1} and s.ignored() == 1
    doc = json.loads((root / "test" / "_annotations.coco.json").read_text())
    doc["categories"][2]["name"] = "opens"
    (root / "test" / "_annotations.coco.json").write_text(json.dumps(doc))
    with pytest.raises(FolderError, match=r"test/_annotations.coco.json: its classes \(opens, short\) are not those "
                                          r"of .*train/_annotations.coco.json \(open, short\)"):
        read_boxes(root)


def test_a_voc_set_split_into_folders_ignores_difficult_objects_and_finds_an_upper_case_image(tmp_path: Path) -> None:
    root = tmp_path / "v"
    for side in ("train", "valid"):
        picture(root / side / f"{side}_1.JPG")
        xml = voc_xml("", (80, 60), [("short", 10, 10, 30, 20), ("short", 40, 30, 50, 40)])  # no <filename>
        marked = xml.replace("<difficult>0</difficult>", "<difficult>1</difficult>", 2).replace(
            "<difficult>1</difficult>", "<difficult>0</difficult>", 1)  # the second object difficult
        (root / side / f"{side}_1.xml").write_text(marked)
    s = read_boxes(root)
    assert s.layout == "voc" and s.splits() == {"train": 1, "val": 1}
    assert s.images[0].path.name == "train_1.JPG" and [b.ignore for b in s.images[0].boxes] == [False, True]
    assert s.counts() == {"short": 2} and s.ignored() == 2
    (root / "loose.xml").write_text((root / "train" / "train_1.xml").read_text())
    picture(root / "loose.png")
    with pytest.raises(FolderError, match=r"split into folders \(train, val\) but 1 images lie outside them"):
        read_boxes(root)


def test_a_box_found_on_an_ignored_box_counts_for_nothing_and_an_image_of_ignored_boxes_is_in_no_count() -> None:
    truth = [(Box(0, 0, 0, 10, 10), Box(0, 50, 50, 70, 70, ignore=True)),  # one to find, one difficult
             (Box(0, 0, 0, 10, 10, ignore=True),),  # nothing but a difficult one
             ()]  # clean
    found = [[Found(0, 0.9, 0, 0, 10, 10), Found(0, 0.8, 52, 52, 68, 68)],  # a hit; one on the difficult box
             [Found(0, 0.7, 0, 0, 10, 10)],
             [Found(0, 0.1, 0, 0, 5, 5)]]
    s = score(("short",), truth, found, 0.5)
    c = s.per_class["short"]
    assert (c["labelled"], c["given"], c["hits"], c["ap"]) == (1, 1, 1, 1.0)  # no false box, nothing missed
    assert (s.with_defects, s.flagged_with_defects, s.clean, s.flagged_clean, s.ignored_images) == (1, 1, 1, 0, 1)
    assert "1 with ignored boxes only (difficult, crowd) left out" in table(s)
    plain = score(("short",), [tuple(Box(b.kind, b.x1, b.y1, b.x2, b.y2) for b in t) for t in truth], found, 0.5)
    assert plain.per_class["short"]["labelled"] == 3 and plain.per_class["short"]["hits"] == 3  # as a plain set


def test_a_detector_taught_from_a_set_with_its_own_split_holds_out_its_val_images_and_keeps_its_test_ones(
        tmp_path: Path) -> None:
    """The exporter's split decides what is taught, held out and kept back (one epoch: the sides, not the skill);
    an ignored box is not written among the labels the trainer reads."""
    from inspector.experts.yolo import YoloDetector
    from inspector.experts.zoo import Zoo
    from inspector.training.labelled.boxes import BoxedImage
    from inspector.training.labelled.detector_set import write_split
    from inspector.training.labelled.teach_detector import DetectorPlan, teach_detector

    said: list[str] = []
    taught = teach_detector(DetectorPlan("det-rf", roboflow_yolo(tmp_path / "rf"), tmp_path / "zoo", epochs=1,
                                         patience=1, batch=4), said.append)
    assert "3 to train on, 1 held out (the set's own split: 3 train, 1 val images; 1 test images kept back for " \
           "`zoo evaluate --split test`)" in said[0]
    assert taught.heldout.images == 1
    version = Zoo.load(tmp_path / "zoo").entries["det-rf"].versions[0]
    assert version["split"].startswith("the set's own split") and version["heldout_share"] is None
    picture(tmp_path / "b__1.png")
    image = BoxedImage(tmp_path / "b__1.png", (80, 60), (Box(0, 8, 6, 24, 18), Box(0, 40, 30, 56, 42, ignore=True)),
                       "b")
    write_split(tmp_path / "set", "train", YoloDetector("yolov8n.yaml", 96, 1, 0.25, "find", "squash"), [image], [0])
    rows = (tmp_path / "set" / "labels" / "train" / "000000.txt").read_text().splitlines()
    assert len(rows) == 1 and rows[0].split()[1:3] == ["0.200000", "0.200000"]  # the difficult box is not taught


def test_a_classifier_folder_split_into_train_valid_and_test_is_taught_and_held_out_by_its_own_split(
        tmp_path: Path) -> None:
    """torchvision's and Roboflow's classification layout, DIR/<split>/<class>/: taught from train, held out on
    valid, test kept back (one short epoch: the sides, not the skill); a folder mixing the layouts is refused."""
    from inspector.experts.zoo import Zoo
    from inspector.training.labelled.folder import read_folder
    from inspector.training.labelled.teach import TeachPlan, split, teach

    from .test_labelled import cli, make_folder

    root = tmp_path / "crops"
    for side, boards, seed in (("train", 6, 1), ("valid", 3, 2), ("test", 2, 3)):
        make_folder(root / side, boards, {"ok": 3, "blob": 1}, seed=seed)
    folder = read_folder(root)
    assert folder.classes == ("ok", "blob") and folder.counts() == {"ok": 33, "blob": 11}
    sides = split(folder, None)
    assert (len(sides.train), len(sides.heldout), len(sides.kept_back)) == (24, 12, 8)
    assert {c.split for c in sides.heldout} == {"val"}
    r = cli("zoo", "train", "--new", "cls-rf", "--from", str(root), "--zoo", str(tmp_path / "zoo"), "--epochs", "1",
            "--epoch-size", "64", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "24 crops to train on, 12 held out (the set's own split: 24 train, 12 val crops; 8 test crops kept back" \
           in r.stderr
    assert "held out (ok 9, blob 3): the set's own split" in r.stdout
    assert Zoo.load(tmp_path / "zoo").entries["cls-rf"].versions[0]["heldout_share"] is None
    said: list[str] = []  # --heldout sets the own split aside
    teach(TeachPlan("cls-id", root, tmp_path / "zoo", epochs=1, epoch_size=64, heldout_share=0.5), said.append)
    assert "(a share of 0.5 of the identities held out (the set's own train/val split set aside by --heldout); 8 " \
           "test crops kept back" in said[0]
    (root / "blob").mkdir()
    with pytest.raises(FolderError, match=r"mixes split folders \(test, train, valid\) with class folders \(blob\)"):
        read_folder(root)


def test_darknet_style_yolo_exports_and_a_yaml_named_otherwise_are_read(tmp_path: Path) -> None:
    """CVAT's "YOLO 1.1" (obj.names, obj_train_data/ with each label beside its image), LabelImg's YOLO mode
    (classes.txt, labels beside, a class written 0.0) and an Ultralytics yaml not called data.yaml."""
    cvat = tmp_path / "cvat"
    picture(cvat / "obj_train_data" / "frame_000001.png")
    (cvat / "obj_train_data" / "frame_000001.txt").write_text("1 0.5 0.5 0.5 0.5\n")
    picture(cvat / "obj_train_data" / "frame_000002.png")  # clean: no label file
    (cvat / "obj.names").write_text("short\nopen\n")
    (cvat / "obj.data").write_text("classes = 2\ntrain = data/train.txt\nnames = data/obj.names\n")
    (cvat / "train.txt").write_text("data/obj_train_data/frame_000001.png\ndata/obj_train_data/frame_000002.png\n")
    s = read_boxes(cvat)
    assert s.layout == "yolo" and s.classes == ("short", "open") and s.splits() == {}
    assert [len(im.boxes) for im in s.images] == [1, 0] and s.images[0].boxes[0] == Box(1, 20, 15, 60, 45)
    labelimg = tmp_path / "labelimg"
    picture(labelimg / "b1.jpg")
    (labelimg / "b1.txt").write_text("0.0 0.5 0.5 0.25 0.5\n")
    (labelimg / "classes.txt").write_text("void\n")
    assert read_boxes(labelimg).images[0].boxes == (Box(0, 30, 15, 50, 45),)
    (labelimg / "b1.txt").write_text("0.5 0.5 0.5 0.25 0.5\n")
    with pytest.raises(FolderError, match=r"b1.txt:1: expected `class cx cy w h`"):
        read_boxes(labelimg)
    named = tmp_path / "named"
    picture(named / "images" / "a.png")
    labelled(named / "images" / "a.png", ["0 0.5 0.5 0.5 0.5"])
    (named / "pcb-defects.yaml").write_text("names: [short]\n")
    assert read_boxes(named).classes == ("short",)
    (named / "other.yml").write_text("names: [open]\n")
    with pytest.raises(FolderError, match=r"holds 2 YAML files naming classes \(other.yml, pcb-defects.yaml\)"):
        read_boxes(named)


def test_coco_sets_as_cvat_and_coco_itself_lay_them_out_find_their_images_and_splits(tmp_path: Path) -> None:
    cvat = tmp_path / "cvat"  # CVAT's COCO 1.0: annotations/instances_default.json, images/
    picture(cvat / "images" / "frame_1.jpg")
    (cvat / "annotations").mkdir()
    (cvat / "annotations" / "instances_default.json").write_text(coco_file([(1, "frame_1.jpg")],
                                                                           [(1, 1, 1, [1, 2, 3, 4], 0)]))
    s = read_boxes(cvat)
    assert s.layout == "coco" and s.splits() == {} and s.images[0].boxes == (Box(0, 1, 2, 4, 6),)
    coco = tmp_path / "coco"  # COCO's own: annotations/instances_<split>2017.json, images in <split>2017/
    (coco / "annotations").mkdir(parents=True)
    for side in ("train", "val"):
        picture(coco / f"{side}2017" / f"0000{side}.jpg")
        (coco / "annotations" / f"instances_{side}2017.json").write_text(
            coco_file([(1, f"0000{side}.jpg")], [(1, 1, 2, [5, 5, 10, 10], 0)]))
    (coco / "annotations" / "person_keypoints_train2017.json").write_text("{}")  # another kind: left aside
    s = read_boxes(coco)
    assert s.splits() == {"train": 1, "val": 1} and [im.path.parent.name for im in s.images] == ["train2017", "val2017"]
    picture(coco / "val2017" / "0000train.jpg")  # two images of one name: which one is meant is asked, not guessed
    with pytest.raises(FolderError, match=r"image '0000train.jpg' is not at that path, and 2 images under .* bear "
                                          r"its name"):
        read_boxes(coco)
    (coco / "annotations" / "instances_extra.json").write_text("{}")
    with pytest.raises(FolderError, match=r"holds 3 annotation files .* each names its own split"):
        read_boxes(coco)


def test_a_voc_annotation_naming_its_image_by_the_labelling_machines_path_finds_it_by_name(tmp_path: Path) -> None:
    root = tmp_path / "v"
    picture(root / "JPEGImages" / "board_7.png")
    (root / "Annotations").mkdir()
    (root / "Annotations" / "seven.xml").write_text(voc_xml(r"C:\Users\aoi\labelling\board_7.png", (80, 60),
                                                            [("short", 10, 10, 30, 20)]))
    assert read_boxes(root).images[0].path == root / "JPEGImages" / "board_7.png"


def test_check_says_what_teaching_would_do_and_writes_nothing(tmp_path: Path) -> None:
    """`zoo train --new --check`: the set's layout, split, input and tiles said, then a stop: no zoo is made."""
    from .test_labelled import cli, make_folder

    rf = roboflow_yolo(tmp_path / "rf")
    r = cli("zoo", "train", "--new", "det-rf", "--kind", "detector", "--from", str(rf), "--tile", "64", "--zoo",
            str(tmp_path / "zoo"), "--check", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "(yolo): 5 images, boxes {'void': 2, 'spur': 2}; 3 to train on, 1 held out (the set's own split" in r.stderr
    assert "taught in tiles of 64 px" in r.stderr and "checked: det-rf would be taught" in r.stdout
    crops = make_folder(tmp_path / "crops" / "train", 12, {"ok": 2, "blob": 1}, seed=1).parent
    r = cli("zoo", "train", "--new", "cls-c", "--from", str(crops), "--zoo", str(tmp_path / "zoo"), "--check",
            cwd=tmp_path)
    assert r.returncode == 0 and "input: " in r.stderr and "checked: cls-c" in r.stdout, r.stderr[-3000:]
    assert "has no val crops: a share of 0.2 of its train identities held out" in r.stderr
    assert "training crops set aside to choose the epoch by" in r.stderr  # what will choose the epoch, said first
    assert not (tmp_path / "zoo").exists()
    for flag, value, said in (("--epoch-share", "1", "--epoch-share 1 is a share of the training identities"),
                              ("--heldout", "1.5", "--heldout 1.5 is a share of the identities: above 0, below 1")):
        r = cli("zoo", "train", "--new", "cls-c", "--from", str(crops), "--zoo", str(tmp_path / "zoo"), flag, value,
                "--check", cwd=tmp_path)
        assert r.returncode == 2 and said in r.stderr, r.stderr[-2000:]
    r = cli("zoo", "train", "--expert", "cls-c", "--from", str(crops), "--zoo", str(tmp_path / "zoo"), "--check",
            cwd=tmp_path)
    assert r.returncode == 2 and "--check and --tile go with --new" in r.stderr
    for flags, said in ((("--expert", "cls-c", "--tolerate", "150"), "in points from 0 to 100 (2 for two points)"),
                        (("--new", "cls-c", "--tolerate", "2"), "--tolerate goes with --expert"),
                        (("--new", "cls-c", "--tolerate", "2", "--taught-point"),
                         "--tolerate and --taught-point go with --expert")):
        r = cli("zoo", "train", *flags, "--from", str(crops), "--zoo", str(tmp_path / "zoo"), cwd=tmp_path)
        assert r.returncode == 2 and said in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "zoo").exists()
    # the plant's rule for every retraining, kept in the config file, does not stop a new expert being taught
    config = tmp_path / "inspector.yaml"
    for rule in ("tolerate: 2\n  taught_point: true", "tolerate: 0"):
        config.write_text(f'"zoo train":\n  {rule}\n')
        r = cli("--config", str(config), "zoo", "train", "--new", "cls-c", "--from", str(crops), "--zoo",
                str(tmp_path / "zoo"), "--check", cwd=tmp_path)
        assert r.returncode == 0 and "checked: cls-c" in r.stdout, r.stderr[-2000:]
    from inspector.cli import parse
    from inspector.cli.config import from_config

    config.write_text('"zoo train":\n  taught_point: true\n')  # one retraining keeps the move the rule leaves
    for flag, taught, filed in ((), True, f"{config}:2"), (("--no-taught-point",), False, None):
        args = parse(["--config", str(config), "zoo", "train", "--expert", "cls-c", "--from", str(crops), *flag])
        assert (args.taught_point, from_config(args, "taught_point")) == (taught, filed)
    config.write_text('"zoo train":\n  tolerate: 150\n')
    r = cli("--config", str(config), "zoo", "train", "--expert", "cls-c", "--from", str(crops), "--zoo",
            str(tmp_path / "zoo"), cwd=tmp_path)
    assert r.returncode == 2 and f"the config's tolerate ({config}:2) is the fall of recall" in r.stderr


def test_a_byte_order_mark_and_a_phone_photos_turn_are_read_as_the_tools_meant(tmp_path: Path) -> None:
    """Windows editors start a text file with a byte-order mark; a phone photo stores its pixels unturned with an
    EXIF orientation, which OpenCV (and every labelling tool) applies: the size its boxes refer to is the turned one."""
    from PIL import Image

    root = tmp_path / "phone"
    root.mkdir()
    exif = Image.Exif()
    exif[0x0112] = 6  # turned a quarter clockwise to be seen upright
    Image.fromarray(np.zeros((20, 40, 3), np.uint8)).save(root / "p1.jpg", exif=exif)  # stored 40 wide, 20 high
    assert cv2.imread(str(root / "p1.jpg")).shape[:2] == (40, 20)  # read upright: 20 wide, 40 high
    (root / "p1.txt").write_text("0 0.5 0.5 0.5 0.25\n")
    (root / "classes.txt").write_text("\ufeffvoid\n", encoding="utf-8")
    s = read_boxes(root)
    assert s.classes == ("void",) and s.images[0].size == (20, 40)
    assert s.images[0].boxes == (Box(0, 5, 15, 15, 25),)
    coco = tmp_path / "coco"
    picture(coco / "a.jpg")
    (coco / "set.json").write_bytes(b"\xef\xbb\xbf" + coco_file([(1, "a.jpg")], []).encode())
    assert read_boxes(coco).classes == ("short", "open")


def test_vocs_own_image_set_lists_are_its_split_and_an_annotation_they_do_not_name_is_left_out(tmp_path: Path) -> None:
    root = tmp_path / "VOC"
    (root / "Annotations").mkdir(parents=True)
    for stem in ("000001", "000002", "000003", "000004"):
        picture(root / "JPEGImages" / f"{stem}.jpg")
        (root / "Annotations" / f"{stem}.xml").write_text(voc_xml(f"{stem}.jpg", (80, 60),
                                                                  [("short", 10, 10, 30, 20)]))
    lists = root / "ImageSets" / "Main"
    lists.mkdir(parents=True)
    (lists / "train.txt").write_text("000001\n000002\n")
    (lists / "val.txt").write_text("000003\n")
    (lists / "short_train.txt").write_text("000001  1\n000002 -1\n")  # a per-class list: left aside
    # an unlisted annotation is not of the set before anything of it is read: its image may be missing, and its
    # class shapes no class list
    (root / "JPEGImages" / "000004.jpg").unlink()
    (root / "Annotations" / "000004.xml").write_text(voc_xml("000004.jpg", (80, 60), [("aeroplane", 1, 1, 9, 9)]))
    s = read_boxes(root)
    assert {im.path.stem: im.split for im in s.images} == {"000001": "train", "000002": "train", "000003": "val"}
    assert "1 annotations are in none of" in s.note and "000004.xml" in s.note
    assert s.classes == ("short",)
    (lists / "test.txt").write_text("000004\n000003\n")
    with pytest.raises(FolderError, match=r"test.txt:2: 000003 is listed for test and for val"):
        read_boxes(root)
