"""ResNet classifiers (the network: resnet_net.py), any standard depth, input size and class count."""
from __future__ import annotations

import torch
from torch import nn

from .base import Architecture, Prediction
from .resnet_net import BasicBlock, Bottleneck, ResNet
from .spec import HEADS, check_choice, check_depth

# depth -> (block, blocks per stage), for every depth spec.py names; 10 is the small member of tests and tiny zoos.
DEPTHS: dict[int, tuple[type[nn.Module], list[int]]] = {
    10: (BasicBlock, [1, 1, 1, 1]),
    18: (BasicBlock, [2, 2, 2, 2]),
    34: (BasicBlock, [3, 4, 6, 3]),
    50: (Bottleneck, [3, 4, 6, 3]),
    101: (Bottleneck, [3, 4, 23, 3]),
    152: (Bottleneck, [3, 8, 36, 3]),
}


class AnomalyHead(nn.Module):
    """Good crops alone make it: the pooled features whitened by the good crops' mean and covariance (`proj`), their
    squared length (a Mahalanobis distance), and a line from it to the log-odds of good (`calib`: zero at the
    threshold, falling as the crop moves away from every good one). Two logits, [good, anomalous], so the line
    decodes it as any classifier."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.proj = nn.Linear(features, features)
        self.calib = nn.Linear(1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        distance = self.proj(x).pow(2).mean(dim=1, keepdim=True)
        return torch.cat([self.calib(distance), torch.zeros_like(distance)], dim=1)


class ResNetClassifier(Architecture):
    """A component's classifier; class 0 means the part is fine and the route goes on."""

    role = "classifier"

    def __init__(self, depth: int, input_size: int = 64, classes: int = 2, fit: str = "squash",
                 good_margin: float | None = None, reference: str | None = None, head: str = "classes") -> None:
        """`good_margin`: the operating point, chosen on held-out crops when the expert was taught (training/
        labelled): a part passes when the log-odds of class 0 (its logit less the log-sum-exp of the others')
        reaches it. Log-odds, not a probability: a float32 softmax rounds every confident crop to exactly 1.0, and a
        threshold among equal numbers would choose nothing. None: a part passes when class 0 is the top class.
        `head`: classes (a linear layer to the class logits), or anomaly (AnomalyHead: taught from good crops alone,
        two classes)."""
        check_depth(depth)
        if classes < 2:
            raise ValueError("a classifier needs at least 2 classes (0 = ok, others = defects)")
        check_choice("head", head, HEADS)
        if head == "anomaly" and classes != 2:
            raise ValueError("an anomaly head has two classes: good and anomalous")
        if good_margin is not None and not -1e6 < good_margin < 1e6:
            raise ValueError(f"good_margin must be a finite log-odds, got {good_margin}")
        super().__init__(input_size, classes, fit, reference)
        self.depth = depth
        self.good_margin = good_margin
        self.head = head

    @property
    def name(self) -> str:
        return f"resnet{self.depth}"

    @property
    def key(self) -> str:
        base = super().key
        return base if self.head == "classes" else f"{base}+{self.head}"  # its own weights, its own profile

    def spec(self) -> dict:
        spec = super().spec()
        if self.good_margin is not None:
            spec["good_margin"] = self.good_margin
        if self.head != "classes":
            spec["head"] = self.head
        return spec

    def build(self) -> nn.Module:
        block, layers = DEPTHS[self.depth]
        net = ResNet(block, layers, num_classes=self.classes)
        if self.head == "anomaly":
            net.fc = AnomalyHead(net.fc.in_features)
        return net

    def forward(self, module: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return module(batch).float()

    def decode(self, raw: torch.Tensor) -> list[Prediction]:
        """Logits (N x classes) -> the top class and its softmax probability per crop; with an operating point,
        class 0 when its log-odds reach it, else the likeliest other class."""
        raw = raw.float().cpu()
        probs = torch.softmax(raw, dim=1)
        if self.good_margin is not None:
            other, defect = probs[:, 1:].max(dim=1)
            odds = good_logodds(raw)
            good = odds >= self.good_margin
            label = torch.where(good, 0, defect + 1)
            top = torch.where(good, probs[:, 0], other)
            return [Prediction(label=int(lbl), score=float(p), passed=int(lbl) == 0, good_logodds=float(o),
                               likeliest_defect=int(d) + 1)
                    for p, lbl, o, d in zip(top.tolist(), label.tolist(), odds.tolist(), defect.tolist())]
        top, label = probs.max(dim=1)
        return [
            Prediction(label=int(lbl), score=float(p), passed=int(lbl) == 0)
            for p, lbl in zip(top.tolist(), label.tolist())
        ]

    def pass_bias_shift(self, module: nn.Module, samples: torch.Tensor, pass_rate: float) -> float:
        """Shift for the "ok" logit's bias that makes `pass_rate` of `samples` pass.

        Used by the zoo builder so that random benchmark experts pass parts at
        the workload's rate while the verdict is still the model's own output.
        """
        with torch.inference_mode():
            logits = module(samples).float()
        margin = logits[:, 0] - logits[:, 1:].max(dim=1).values
        q = torch.quantile(margin, min(max(1.0 - pass_rate, 0.0), 1.0))
        return float(-q)


def good_logodds(logits: torch.Tensor) -> torch.Tensor:
    """log(P(class 0) / P(any other)) per row of N x classes logits, without rounding through a softmax."""
    return logits[:, 0] - torch.logsumexp(logits[:, 1:], dim=1)
