"""One component type's ResNet classifier, trained from scratch on its crops.

Inputs go through the architecture's own `preprocess`, the function the engine
uses at inspection time, so there is no train/serve skew.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..experts.resnet import ResNetClassifier
from ..ingest.crops import crop_tensor
from ..ingest.synthetic import classifier_label
from .samples import PartSample


@dataclass
class TrainedClassifier:
    state: dict[str, torch.Tensor]
    val_accuracy: float
    train_samples: int


def to_batch(arch: ResNetClassifier, samples: list[PartSample]) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.stack([arch.preprocess(crop_tensor(s.crop))
                     for s in samples])
    y = torch.tensor([classifier_label(s.defect) for s in samples])
    return x, y


def train_classifier(arch: ResNetClassifier, train: list[PartSample], val: list[PartSample], epochs: int = 12,
                     seed: int = 0) -> TrainedClassifier:
    torch.manual_seed(seed)
    model = arch.build()
    x, y = to_batch(arch, train)
    # balance the classes: the rare defects weigh as much as "ok"
    counts = torch.bincount(y, minlength=arch.classes).clamp(min=1).float()
    loss_fn = nn.CrossEntropyLoss(weight=(counts.sum() / counts) / arch.classes)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    steps = epochs * max(1, (len(x) + 63) // 64)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(x))
        for i in range(0, len(x), 64):
            idx = order[i:i + 64]
            xb = x[idx]
            if torch.rand(()) < 0.5:  # lighting jitter
                xb = (xb * torch.empty(len(xb), 1, 1, 1).uniform_(0.85, 1.15)).clamp(0, 1)
            opt.zero_grad()
            loss_fn(model(xb), y[idx]).backward()
            opt.step()
            sched.step()
    model.eval()
    return TrainedClassifier({k: v.detach().clone() for k, v in model.state_dict().items()},
                             accuracy(arch, model, val), len(train))


def accuracy(arch: ResNetClassifier, model: nn.Module, samples: list[PartSample]) -> float:
    if not samples:
        return float("nan")
    x, y = to_batch(arch, samples)
    preds = arch.run(model, x)
    return sum(int(p.label == t) for p, t in zip(preds, y.tolist())) / len(samples)
