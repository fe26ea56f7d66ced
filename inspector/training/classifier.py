"""One component type's ResNet classifier, trained from scratch on its crops.

Inputs go through the architecture's own `preprocess`, the function the engine
uses at inspection time, so there is no train/serve skew.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torchvision.transforms import v2

from ..experts.resnet import ResNetClassifier, good_logodds
from ..ingest.synthetic import classifier_label
from .augment import camera_augmentation, seen_stacks
from .batches import batch_slices
from .labelled.metrics import separating_threshold
from .samples import PartSample


@dataclass
class TrainedClassifier:
    state: dict[str, torch.Tensor]
    val_accuracy: float
    train_samples: int
    seed: int = 0  # the training run's seed (jobs.run_job may try more than one)
    other_runs: tuple[float, ...] = ()  # validation accuracy of the other runs tried (each below the floor)
    good_margin: float | None = None  # the operating point chosen on the validation crops (operating_margin)


def to_batch(arch: ResNetClassifier, samples: list[PartSample],
             pipeline: v2.Compose | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Crops as the engine feeds them (normalised, preprocessed), first augmented when a pipeline is given.

    Crops are stacked by size (an expert's crops share one) so augmentation and preprocessing run per stack."""
    x = torch.empty(len(samples), 3, arch.input_size, arch.input_size)
    for idx, stack in seen_stacks([s.crop for s in samples], pipeline):
        x[idx] = arch.preprocess_batch(stack)
    y = torch.tensor([classifier_label(s.defect) for s in samples])
    return x, y


LR = 4e-3


def batch_size(crops: int) -> int:
    """128 trains a third faster per crop than 64 on CPU; below 512 crops it leaves too few steps an epoch."""
    return 128 if crops >= 512 else 64


def train_classifier(arch: ResNetClassifier, train: list[PartSample], val: list[PartSample], epochs: int = 12,
                     seed: int = 0, augment: float = 1.0, init: dict[str, torch.Tensor] | None = None,
                     lr: float = LR) -> TrainedClassifier:
    """`augment` is the camera augmentation's strength (0: none); every epoch draws it afresh for every crop.
    `init`: start from these weights (fine-tuning an expert in service) instead of from scratch."""
    torch.manual_seed(seed)
    model = arch.build()
    if init is not None:
        model.load_state_dict(init)
    model = model.to(memory_format=torch.channels_last)  # faster convolutions on CPU, same arithmetic
    pipeline = camera_augmentation(augment) if augment > 0 else None
    y = torch.tensor([classifier_label(s.defect) for s in train])
    # balance the classes: the rare defects weigh as much as "ok"
    counts = torch.bincount(y, minlength=arch.classes).clamp(min=1).float()
    loss_fn = nn.CrossEntropyLoss(weight=(counts.sum() / counts) / arch.classes)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    batch = batch_size(len(train))
    steps = epochs * max(1, -(-len(train) // batch))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    model.train()
    x = None if pipeline else to_batch(arch, train)[0]
    for _ in range(epochs):
        if pipeline:
            x = to_batch(arch, train, pipeline)[0]
        x = x.contiguous(memory_format=torch.channels_last)
        order = torch.randperm(len(x))
        for piece in batch_slices(len(x), batch):
            idx = order[piece]
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
            sched.step()
    model.eval()
    model = model.to(memory_format=torch.contiguous_format)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if not val:
        return TrainedClassifier(state, float("nan"), len(train), seed)
    x, y = to_batch(arch, val)
    with torch.inference_mode():
        logits = model(x).float()  # one pass over the validation crops: its accuracy and its operating margin
    acc = float((logits.argmax(dim=1) == y).float().mean())  # the top class, as arch.run decodes without a margin
    return TrainedClassifier(state, acc, len(train), seed, good_margin=operating_margin(logits, y))


def operating_margin(logits: torch.Tensor, labels: torch.Tensor) -> float | None:
    """The log-odds of "ok" a part needs to pass, midway between the validation's good parts and its defects.

    The top class (a margin of 0) sits wherever training happened to leave it: one build's smallest part passed
    fresh renders with a log-odds of 0.9 or more for its good parts and -4.2 or less for its defects, and flagged
    1.2% of good parts once a board was turned, dimmed and blurred at once; the middle of the gap keeps both sides
    as far from the edge as the validation crops allow. None without good and defective validation crops."""
    logodds, y = good_logodds(logits).numpy(), labels.numpy()
    return separating_threshold(logodds[y == 0], logodds[y != 0])

