"""The YOLO set Ultralytics' trainer reads, written exactly as the line serves the detector its images.

Each image is normalised and fitted to the expert's input as on the line (composed with its golden image first
when the detector compares, ingest/golden.py), its boxes carried through the same fitting; ignored boxes are not
written. With `turned`, each also transposed (a quarter turn and a mirror), its boxes with it: with the trainer's
own flips that is every quarter turn and mirror, which it lacks. With a tiling (tiles.py), what is written is the
served image's tiles, each with the boxes it holds.
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ...experts.yolo import YoloDetector
from ...ingest.images import write_image
from .boxes import BoxedImage
from .folder import FolderError
from .golden_tree import read_golden
from .tiles import PixelBox, Tiling, cut
from .trainer import to_inputs


def served_image(arch: YoloDetector, image: np.ndarray, golden: np.ndarray | None = None) -> np.ndarray:
    """The image as the expert is served it (composed with its golden image when it compares, normalised, fitted
    to its input), HxWx3 BGR uint8."""
    x = to_inputs(arch, [image], references=None if golden is None else [golden])[0]
    return np.ascontiguousarray((x * 255).round().clamp(0, 255).byte().numpy().transpose(1, 2, 0)[:, :, ::-1])


def served_boxes(arch: YoloDetector, im: BoxedImage, order: list[int]) -> list[PixelBox]:
    """The image's taught boxes in the served image's pixels (through the line's fitting), with the expert's
    class indices."""
    sx, sy, ox, oy = arch.unfit(im.size)
    s = float(arch.input_size)
    return [(order[b.kind], *(min(s, max(0.0, v)) for v in ((b.x1 - ox) / sx, (b.y1 - oy) / sy, (b.x2 - ox) / sx,
                                                            (b.y2 - oy) / sy))) for b in im.scored]


def yolo_rows(boxes: list[PixelBox], side: int) -> list[list[str]]:
    """YOLO label rows (class cx cy w h, normalised) of boxes in an image of `side` px."""
    return [[str(k), f"{(x1 + x2) / 2 / side:.6f}", f"{(y1 + y2) / 2 / side:.6f}", f"{(x2 - x1) / side:.6f}",
             f"{(y2 - y1) / side:.6f}"] for k, x1, y1, x2, y2 in boxes]


def read_pair(image: Path, golden: Path | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """An image (HxWx3 BGR) and, when the detector compares, its golden image, checked to match it."""
    picture = cv2.imread(str(image), cv2.IMREAD_COLOR)
    if picture is None:
        raise FolderError(f"{image} cannot be read as an image")
    return picture, None if golden is None else read_golden(golden, picture)


def write_split(root: Path, side: str, arch: YoloDetector, images: list[BoxedImage], order: list[int],
                turned: bool = False, goldens: list[Path] | None = None, tiling: Tiling | None = None,
                pairs: list[tuple[np.ndarray, np.ndarray | None]] | None = None) -> int:
    """The images as served (or their tiles) and their YOLO labels under root/images/<side>, root/labels/<side>;
    the number of images written. `pairs`: the images (and golden images) already read, else read here."""
    (root / "images" / side).mkdir(parents=True)
    (root / "labels" / side).mkdir(parents=True)
    written = 0
    for n, im in enumerate(images):
        picture, golden = pairs[n] if pairs is not None else read_pair(im.path, None if goldens is None else
                                                                       goldens[n])
        served = served_image(arch, picture, golden)
        boxes = served_boxes(arch, im, order)
        pieces = [("", served, boxes)] if tiling is None else [
            (f"_{i:03d}", tile, inside) for i, (tile, inside) in enumerate(cut(served, boxes, tiling))]
        for name, image, held in pieces:
            rows = yolo_rows(held, image.shape[0])
            copies = [("", image, rows)]
            if turned:  # served images and tiles are square: x and y change places, and width and height
                copies.append(("t", np.ascontiguousarray(image.transpose(1, 0, 2)),
                               [[k, cy, cx, h, w] for k, cx, cy, w, h in rows]))
            for tag, copy, labels in copies:
                write_image(root / "images" / side / f"{n:06d}{name}{tag}.png", copy)
                (root / "labels" / side / f"{n:06d}{name}{tag}.txt").write_text(
                    "".join(" ".join(r) + "\n" for r in labels))
                written += 1
    return written
