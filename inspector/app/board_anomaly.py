"""Experts from good crops alone: an anomaly score over the features of a ResNet trained here, per component type.

Made defects cannot carry every type (a connector's made bridge is not its real one; a type seen once has no held-
out part). AOI tools then teach from good boards alone: how far a crop lies from every good crop of its type. Here
the features are those of the golden-comparison classifier this teaching trained (no pretrained weights can be
downloaded), pooled before its last layer; each type's good crops (the golden ones as other photos would show them)
give a mean and a covariance, shrunk towards its own scale (a few dozen crops cannot fill 512 dimensions), and a
crop's score is its Mahalanobis distance. The type's threshold is the distance that keeps the false-call budget on
the good crops of parts the fit did not see (each part left out in turn; a type of one part takes the ratio the
board's other types show between unseen and seen distances); the served expert is the same trunk with that head
(experts/resnet.py AnomalyHead), two classes, good and anomalous, decoded by the line like any classifier.
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..experts.resnet import ResNetClassifier
from ..experts.zoo import ExpertEntry, write_expert
from ..training.labelled.trainer import Crops, to_inputs

SHRINK = 0.5  # weight of the isotropic part in the shrunk covariance
CHUNK = 256
CLASSES = ("good", "anomaly")


def features(arch: ResNetClassifier, model: nn.Module, crops: Crops) -> np.ndarray:
    """N x F pooled features of the crops as the expert is served them (composed with their golden windows)."""
    trunk = copy.deepcopy(model).eval()
    trunk.fc = nn.Identity()
    out = []
    with torch.inference_mode():
        for i in range(0, len(crops.images), CHUNK):
            refs = crops.references[i:i + CHUNK] if crops.references is not None and arch.reference else None
            out.append(trunk(to_inputs(arch, crops.images[i:i + CHUNK], None, refs)).float().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def whitening(good: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) with W f + b the good crops' features centred and whitened under the shrunk covariance."""
    mu = good.mean(axis=0)
    centred = good - mu
    cov = centred.T @ centred / max(1, len(good) - 1)
    d = cov.shape[0]
    scale = float(np.trace(cov)) / d or 1.0
    cov = (1 - SHRINK) * cov + SHRINK * scale * np.eye(d)
    values, vectors = np.linalg.eigh(cov)
    w = (vectors / np.sqrt(np.maximum(values, 1e-9 * scale))).T
    return np.ascontiguousarray(w, dtype=np.float32), np.ascontiguousarray(-w @ mu, dtype=np.float32)


def distances(w: np.ndarray, b: np.ndarray, feats: np.ndarray) -> np.ndarray:
    return ((feats @ w.T + b) ** 2).mean(axis=1)


def unseen_distances(feats: np.ndarray, parts: np.ndarray) -> np.ndarray | None:
    """Each good crop's distance under a fit that never saw its part (leave one part out): what a new board's part
    scores, not what the fitted crops score (those sit closer, and a threshold on them calls every new part).
    None with fewer than two parts."""
    names = np.unique(parts)
    if len(names) < 2:
        return None
    out = np.empty(len(feats))
    for name in names:
        mine = parts == name
        w, b = whitening(feats[~mine])
        out[mine] = distances(w, b, feats[mine])
    return out


def threshold_of(good_distances: np.ndarray, false_call_budget: float) -> tuple[float, float]:
    """(distance at which a crop is called, spread): the budget's quantile of the good crops' distances, and their
    spread (the calibration's slope: a log-odds of -1 one spread beyond the threshold)."""
    tau = float(np.quantile(good_distances, 1.0 - false_call_budget))
    spread = float(max(np.std(good_distances), 1e-3 * max(tau, 1e-6)))
    return tau, spread


def anomaly_state(model: nn.Module, w: np.ndarray, b: np.ndarray, tau: float, spread: float) -> dict[str, torch.Tensor]:
    """The served weights: the classifier's trunk, then the anomaly head (log-odds of good = (tau - d) / spread)."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if not k.startswith("fc.")}
    state["fc.proj.weight"] = torch.from_numpy(w)
    state["fc.proj.bias"] = torch.from_numpy(b)
    state["fc.calib.weight"] = torch.tensor([[-1.0 / spread]])
    state["fc.calib.bias"] = torch.tensor([tau / spread])
    return state


def write_anomaly_expert(zoo_root: Path, name: str, arch: ResNetClassifier, state: dict[str, torch.Tensor],
                         good: int, seed: int) -> ExpertEntry:
    served = ResNetClassifier(arch.depth, arch.input_size, 2, arch.fit, 0.0, arch.reference, head="anomaly")
    digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in state.values())).hexdigest()[:16]
    return write_expert(zoo_root, name, "classifier", served.spec(), state, digest=True, classes=CLASSES,
                        data_hash=digest, train_samples=good, train_seed=seed)
