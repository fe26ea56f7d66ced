"""A shared YOLO detector trained with ultralytics' own trainer, from a model yaml, offline.

Crops are written as a YOLO dataset already normalised and squashed to the
detector's input size, the way the line normalises them and the engine's
`preprocess` squashes them, so the trainer's letterboxing is a no-op. Each
training crop is written `copies` times, each through a fresh draw of the camera
augmentation (training/augment.py). Augmentations that would change the answer
are off: no left-right flips (polarity is left vs right), no mosaic.
"""
from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch

from ..experts.yolo import YoloDetector
from ..ingest.crops import crop_tensor
from ..ingest.photometric import normalize_crop
from ..routing.rules import DETECTOR_CLASSES
from .augment import camera_augmentation, seen_stacks
from .samples import PartSample, body_label


@dataclass
class TrainedDetector:
    state: dict[str, torch.Tensor]
    val_accuracy: float  # share of held-out crops whose best box has the right class and confidence
    train_samples: int
    seed: int = 0  # the training run's seed (jobs.run_job may try more than one)
    other_runs: tuple[float, ...] = ()  # validation accuracy of the other runs tried (each below the floor)


def detector_class(sample: PartSample) -> int:
    return DETECTOR_CLASSES.index("reversed" if sample.defect == "polarity" else "in_place")


def write_dataset(root: Path, split: str, samples: list[PartSample], size: int, copies: int = 1,
                  augment: float = 0.0) -> None:
    images, labels = root / "images" / split, root / "labels" / split
    images.mkdir(parents=True, exist_ok=True)
    labels.mkdir(parents=True, exist_ok=True)
    pipeline = camera_augmentation(augment) if augment > 0 else None
    for k in range(copies):
        for idx, seen in seen_stacks([s.crop for s in samples], pipeline):
            for i, t in zip(idx, seen):
                image = np.ascontiguousarray(t.numpy().transpose(1, 2, 0)[:, :, ::-1])  # as the line sees it, BGR
                cv2.imwrite(str(images / f"{i:06d}-{k}.png"), cv2.resize(image, (size, size),
                                                                        interpolation=cv2.INTER_LINEAR))
                cx, cy, w, h = body_label(samples[i])
                (labels / f"{i:06d}-{k}.txt").write_text(f"{detector_class(samples[i])} {cx:.5f} {cy:.5f} {w:.5f} "
                                                         f"{h:.5f}\n")

def train_detector(arch: YoloDetector, train: list[PartSample], val: list[PartSample], epochs: int = 12,
                   seed: int = 0, copies: int = 1, augment: float = 1.0) -> TrainedDetector:
    with tempfile.TemporaryDirectory(prefix="inspector-yolo-") as tmp:
        root = Path(tmp)
        torch.manual_seed(seed)
        write_dataset(root, "train", train, arch.input_size, copies, augment)
        write_dataset(root, "val", val, arch.input_size)
        state = ultralytics_train(arch, root, DETECTOR_CLASSES, epochs, seed, batch=64)
    module = arch.materialize(state, torch.device("cpu"))
    return TrainedDetector(state, accuracy(arch, module, val), len(train), seed)


def ultralytics_train(arch: YoloDetector, root: Path, names: tuple[str, ...] | list[str], epochs: int, seed: int,
                      batch: int = 64, patience: int = 0, validate: bool = False,
                      flips: bool = False, imgsz: int | None = None, init: dict[str, torch.Tensor] | None = None,
                      lr: float = 0.004, say: Callable[[str], None] | None = None) -> dict[str, torch.Tensor]:
    """Ultralytics' own trainer on the YOLO set under `root` (images/train, images/val, labels/...), offline, on the
    CPU, from the model yaml; the weights of its best epoch (by its validation fitness when `validate`), else the
    last. Its images are already what the expert is served (normalised, fitted to the input), so the trainer's
    letterbox is a no-op; augmentations that would change the answer are off (mosaic, colour, and flips unless
    `flips`: classes that do not depend on a mirror, the trainer mirroring each box with its image). `patience`:
    epochs without a better validation fitness before stopping (0: never). `imgsz`: the side of the images written
    when it is not the expert's input (tiles of its served images, labelled/tiles.py). `init`: weights to train on
    from (a fine-tune: no warm-up, whose first steps would shake what they know), handed to the trainer as a
    checkpoint file, the way every Ultralytics version takes pretrained weights. `say`: told which epoch was kept
    of how many run."""
    from ultralytics import YOLO  # heavy import, only when training

    listed = "\n".join(f"  {i}: {n}" for i, n in enumerate(names))
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n{listed}\n",
                                    encoding="utf-8")  # class names are the plant's, in any script
    os.environ.setdefault("YOLO_OFFLINE", "1")
    logging.getLogger("ultralytics").setLevel(logging.WARNING)
    if init is None:
        model = YOLO(arch.model)
    else:
        start = arch.build()
        start.load_state_dict(init)
        torch.save({"model": start, "train_args": {}}, root / "init.pt")
        model = YOLO(str(root / "init.pt"))
    model.train(data=str(root / "data.yaml"), epochs=epochs, imgsz=imgsz or arch.input_size, batch=batch, device="cpu",
                workers=0, amp=False, plots=False, seed=seed, deterministic=True, project=str(root / "runs"),
                name="train", exist_ok=True, verbose=False, mosaic=0.0, fliplr=0.5 if flips else 0.0,
                flipud=0.5 if flips else 0.0, mixup=0.0,
                translate=0.0, scale=0.1, degrees=0.0, hsv_h=0.0, hsv_s=0.0, hsv_v=0.0, val=validate,
                close_mosaic=0, warmup_epochs=1 if init is None else 0, patience=patience, save=True, cache=False,
                optimizer="AdamW", lr0=lr)
    trainer = model.trainer
    best = trainer.best is not None and Path(trainer.best).is_file()
    weights = Path(trainer.best if best else trainer.last)
    if say is not None:
        run = trainer.epoch + 1
        kept = trainer.stopper.best_epoch if best and validate else run
        say(f"kept epoch {kept} of {run} run" + (f" (its validation fitness: none better for {patience} epochs)"
                                                 if validate and run < epochs else ""))
    ckpt = torch.load(weights, map_location="cpu", weights_only=False)
    net = (ckpt.get("ema") or ckpt["model"]).float()
    return {k: v.detach().clone().contiguous() for k, v in net.state_dict().items()}


def accuracy(arch: YoloDetector, module: torch.nn.Module, samples: list[PartSample]) -> float:
    if not samples:
        return float("nan")
    x = torch.stack([arch.preprocess(normalize_crop(crop_tensor(s.crop))) for s in samples])
    right = 0
    for i in range(0, len(x), 128):
        for p, s in zip(arch.run(module, x[i:i + 128]), samples[i:i + 128]):
            right += int(p.score >= arch.threshold and p.label == detector_class(s))
    return right / len(samples)
