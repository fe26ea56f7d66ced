"""Synthetic boards, cropping, and each source through its real code path (a video file for the camera)."""
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from inspector.app.run import DEMO_RULES, RULES_DIR
from inspector.camera.opencv import CameraSource
from inspector.ingest.crops import BoardSizeMismatch, crop_tensors, cut_board
from inspector.ingest.queue import IngestQueue, feed
from inspector.ingest.silkscreen import SILK_MARGIN, clips_silkscreen, draw_silkscreen
from inspector.ingest.sources import FolderSource, Frame, ReplaySource, SyntheticSource
from inspector.ingest.synthetic import render_board
from inspector.routing.rules import body_box, load_rules, parse_rules

from .test_routing_rules import GOOD

RULES = parse_rules(GOOD, "mini.yaml")


def test_render_is_deterministic_and_forced_defects_apply() -> None:
    a = render_board(RULES, "S1", np.random.default_rng(3), forced={"D1": "missing"})
    b = render_board(RULES, "S1", np.random.default_rng(3), forced={"D1": "missing"})
    assert np.array_equal(a.image, b.image) and a.truth == b.truth
    assert a.truth["D1"] == "missing" and a.image.shape == (120, 200, 3)


CLOSE = GOOD.replace("at: {R1: [30, 30], R2: [70, 30, 90]}", "at: {R1: [30, 30], R2: [30, 42], R3: [150, 90]}")


def test_a_parts_outline_stays_out_of_its_neighbours_windows() -> None:
    """R1 and R2 sit 4 px apart, like two 0805s side by side: neither's outline is drawn in the other's window
    (there it read as a solder bridge), while a part with room keeps its whole outline."""
    rules = parse_rules(CLOSE, "close.yaml")
    image = np.zeros((*rules.board_size[::-1], 3), np.uint8)
    draw_silkscreen(image, rules)
    silk = image.any(axis=2)
    for comp, place in rules.placements():
        own = np.zeros_like(silk, np.uint8)
        x0, y0, x1, y1 = body_box(comp, place, SILK_MARGIN)
        cv2.rectangle(own, (x0, y0), (x1, y1), 1, 1)
        wx0, wy0, wx1, wy1 = body_box(comp, place, rules.crop_margin)
        window = np.zeros_like(silk)
        window[wy0:wy1, wx0:wx1] = True
        assert not (silk & window & (own == 0)).any(), place.ref  # nobody else's line in its window
        if place.ref == "R3":
            assert (silk & (own > 0)).sum() == own.sum()  # room around it: the whole outline
    r1, r2 = (rules.component("R1K").placements[i] for i in (0, 1))
    between = silk[body_box(rules.component("R1K"), r1)[3]:body_box(rules.component("R1K"), r2)[1], 20:40]
    assert not between.any()  # nothing printed in the 4 px between them
    assert clips_silkscreen(rules) and not clips_silkscreen(parse_rules(GOOD, "mini.yaml"))
    # the demo boards' parts have room: their boards draw as before, so the demo zoo's key stands
    assert not any(clips_silkscreen(load_rules(RULES_DIR / name)) for name in DEMO_RULES)


def test_crops_undo_rotation_and_follow_the_layout() -> None:
    board = render_board(RULES, "S1", np.random.default_rng(0), rates={})
    crops = {c.ref: c for c in cut_board(board.image, RULES)}
    assert set(crops) == {"R1", "R2", "D1"}
    margin = RULES.crop_margin
    # R2 is placed at 90 degrees: its crop comes back landscape, like R1's
    assert crops["R1"].image.shape == crops["R2"].image.shape == (8 + 2 * margin, 16 + 2 * margin, 3)
    x0, y0, x1, y1 = body_box(RULES.component("R1K"), RULES.component("R1K").placements[0], margin)
    assert np.array_equal(crops["R1"].image, board.image[y0:y1, x0:x1])
    t = crops["D1"].tensor()
    assert t.shape == (3, 10 + 2 * margin, 18 + 2 * margin) and t.dtype.is_floating_point is False


def test_a_board_normalised_in_stacks_gives_each_crop_its_own_tensor() -> None:
    crops = []
    for seed in range(4):
        board = render_board(RULES, f"S{seed}", np.random.default_rng(seed))
        crops += cut_board(board.image, RULES)
    stacked = crop_tensors(crops)
    assert len(stacked) == len(crops) and len({c.image.shape for c in crops}) > 1
    for crop, tensor in zip(crops, stacked):
        assert torch.equal(tensor, crop.tensor())  # the same numbers as one crop at a time


def test_a_missing_part_changes_its_crop_only() -> None:
    ok = render_board(RULES, "S", np.random.default_rng(5), rates={})
    bad = render_board(RULES, "S", np.random.default_rng(5), rates={}, forced={"D1": "missing"})
    c_ok, c_bad = cut_board(ok.image, RULES), cut_board(bad.image, RULES)
    diff = {a.ref: float(np.abs(a.image.astype(int) - b.image.astype(int)).mean()) for a, b in zip(c_ok, c_bad)}
    assert diff["D1"] > 2 * max(diff["R1"], diff["R2"])  # the rest differ only by sensor noise


def test_wrong_board_size_is_refused_with_what_to_check() -> None:
    with pytest.raises(BoardSizeMismatch, match="camera's resolution"):
        cut_board(np.zeros((100, 100, 3), np.uint8), RULES)


def test_synthetic_source_knows_its_truth() -> None:
    frames = list(SyntheticSource(RULES, 3, seed=1))
    assert len(frames) == 3 and all(set(f.truth) == {"R1", "R2", "D1"} for f in frames)
    assert len({f.serial for f in frames}) == 3


def _boards(tmp_path: Path, n: int) -> list[np.ndarray]:
    return [render_board(RULES, f"S{i}", np.random.default_rng(i)).image for i in range(n)]


def test_folder_source_reads_in_order_and_counts_unreadable(tmp_path: Path) -> None:
    for i, img in enumerate(_boards(tmp_path, 3)):
        cv2.imwrite(str(tmp_path / f"board-{i}.png"), img)
    (tmp_path / "board-9.png").write_bytes(b"not a png")
    source = FolderSource(tmp_path)
    frames = list(source)
    # the bad file is a frame too, carrying why: the line stores it as a board-level error, nothing goes unseen
    assert [f.serial for f in frames] == ["board-0", "board-1", "board-2", "board-9"]
    assert frames[0].image.shape == (120, 200, 3) and frames[0].error is None
    assert frames[3].image is None and "not an image" in frames[3].error
    assert source.counters.unreadable == 1 and "board-9.png" in source.counters.last_error


def test_watched_folder_picks_up_new_files(tmp_path: Path) -> None:
    import threading

    source = FolderSource(tmp_path, watch=True, poll_s=0.05, idle_stop_s=1.0)
    img = _boards(tmp_path, 1)[0]
    threading.Timer(0.2, lambda: cv2.imwrite(str(tmp_path / "late.png"), img)).start()
    frames = list(source)
    assert [f.serial for f in frames] == ["late"]
    # an image stays until its result is safe (a kill before then inspects it again, under the same id) ...
    assert (tmp_path / "late.png").is_file() and source.unarchived == 1
    again = list(FolderSource(tmp_path))
    assert again[0].inspection_id == frames[0].inspection_id
    # ... then moves aside, so a restarted kiosk does not inspect it again
    frames[0].on_stored()
    assert not (tmp_path / "late.png").exists() and (tmp_path / "inspected" / "late.png").is_file()
    assert source.unarchived == 0


def _encoded(img: np.ndarray, ext: str) -> bytes:
    ok, data = cv2.imencode(ext, img)
    assert ok
    return data.tobytes()


@pytest.mark.parametrize("case", ["empty", "text", "truncated-jpeg", "truncated-png", "damaged-header", "too-large"])
def test_bad_image_files_are_refused_with_the_reason(case: str) -> None:
    from inspector.ingest.images import BadImage, read_image

    img = _boards(Path("."), 1)[0]
    jpeg, png = _encoded(img, ".jpg"), _encoded(img, ".png")
    data, limit, why = {
        "empty": (b"", 10**9, "empty file"),
        "text": (b"hello, this is not a picture", 10**9, "not an image"),
        "truncated-jpeg": (jpeg[: len(jpeg) * 2 // 3], 10**9, "truncated JPEG"),
        "truncated-png": (png[: len(png) - 20], 10**9, "truncated PNG"),
        "damaged-header": (png[:8] + b"\0" * 40 + png[48:], 10**9, "damaged PNG header"),
        "too-large": (png, 1000, "over the limit"),
    }[case]
    with pytest.raises(BadImage, match=why):
        read_image(data, "x", max_pixels=limit)
    assert read_image(jpeg, "x").shape == img.shape and np.array_equal(read_image(png, "x"), img)


def test_replay_list(tmp_path: Path) -> None:
    imgs = _boards(tmp_path, 2)
    for i, img in enumerate(imgs):
        cv2.imwrite(str(tmp_path / f"b{i}.png"), img)
    (tmp_path / "list.txt").write_text("# replay\nb1.png\nb0.png\nmissing.png\n")
    source = ReplaySource(tmp_path / "list.txt")
    frames = list(source)
    assert [f.serial for f in frames] == ["b1", "b0", "missing"] and source.counters.unreadable == 1
    assert "cannot read the file" in frames[2].error


def test_camera_path_with_a_video_file(tmp_path: Path) -> None:
    video = tmp_path / "line.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5, (200, 120))
    for img in _boards(tmp_path, 4):
        writer.write(img)
    writer.release()
    frames = list(CameraSource(str(video)))
    assert len(frames) == 4 and frames[0].image.shape == (120, 200, 3)
    assert len(cut_board(frames[0].image, RULES)) == 3


def test_dropped_camera_reconnects_with_backoff_then_says_what_to_check() -> None:
    source = CameraSource("rtsp://127.0.0.1:9/none", max_reconnects=2, backoff_s=0.01)
    assert list(source) == []
    assert source.counters.reconnects == 2 and "check the cable" in source.counters.last_error


def _frames(n: int) -> list[Frame]:
    return [Frame(np.zeros((4, 4, 3), np.uint8), f"B{i}", "test") for i in range(n)]


def test_wait_policy_holds_the_source_until_the_line_takes_a_board() -> None:
    import threading

    q = IngestQueue(capacity=2, overflow="wait")
    frames = _frames(3)
    assert q.put(frames[0]) and q.put(frames[1])
    third = threading.Thread(target=q.put, args=(frames[2],))
    third.start()
    third.join(0.3)
    assert third.is_alive() and len(q) == 2  # waiting, nothing lost
    assert q.get().serial == "B0"
    third.join(2)
    assert not third.is_alive() and [f.serial for f in (q.get(), q.get())] == ["B1", "B2"]
    assert q.counters.dropped == 0 and q.counters.accepted == 3


def test_drop_policies_keep_the_right_boards_and_count_the_rest() -> None:
    oldest = IngestQueue(capacity=2, overflow="drop-oldest")
    newest = IngestQueue(capacity=2, overflow="drop-newest")
    for f in _frames(5):
        oldest.put(f)
        newest.put(f)
    oldest.close()
    newest.close()
    assert [f.serial for f in oldest.drain()] == ["B3", "B4"]
    assert [f.serial for f in newest.drain()] == ["B0", "B1"]
    assert oldest.counters.dropped == newest.counters.dropped == 3
    assert oldest.counters.last_dropped == "B2" and newest.counters.last_dropped == "B4"


def test_feed_stops_on_close_and_names_a_broken_source() -> None:
    def broken():
        yield from _frames(2)
        raise OSError("capture card vanished")

    q = IngestQueue(capacity=4)
    feed(broken(), q)
    assert [f.serial for f in q.drain()] == ["B0", "B1"]
    assert q.counters.source_error == "OSError: capture card vanished"
    with pytest.raises(ValueError, match="drop-oldest"):
        IngestQueue(overflow="drop-everything")
