"""Training a classifier with the folder's own classes, from scratch, on real crops.

Real crops are few and lopsided (good parts ten to a hundred times as common as any defect), so each epoch draws
its crops with **balanced sampling**: half good, half defects shared equally among the defect classes present,
every draw through a fresh **camera augmentation** (training/augment.py: exposure, light gradient, blur, noise,
JPEG, sub-pixel jitter) and then the line's own photometric normalisation and the expert's `preprocess`, so what
the expert learns on is what it is served. An epoch draws at least `MIN_EPOCH` crops: a small set (a board of a
dozen parts taught from one photo has a few hundred) would otherwise give the one-cycle schedule a handful of
steps an epoch, too few to warm up and anneal (four epochs of such a board were 20 steps, and its expert scored
every part alike).

After every epoch the crops that choose (training crops set aside for it, epoch_split.py; or, where a caller has
none, the held-out crops) pick the model: the epoch whose defect recall, at the threshold that keeps false calls
within the budget, is highest (the lower loss on them breaks ties) is kept, of the epochs whose loss on them is
below a uniform guess's (the log of the classes): one above it is confidently wrong on them, and its recall is the
luck of where its errors fall (a one-photo board once kept an epoch of held-out loss 22, its threshold at -32
log-odds). The operating threshold is then chosen on the held-out crops, and they are scored there. Training stops
when `patience` epochs bring nothing better, counted from the point where the schedule's step has fallen to half its
peak at the earliest: while the step is large, held-out scores jump about (a DeepPCB run once stopped at epoch 7 of
30 keeping epoch 1; a one-photo board stopped at 18 of 30, keeping an unannealed epoch). Every draw is seeded.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from ...experts.base import Architecture
from ...experts.resnet import ResNetClassifier
from ...ingest.golden import compose
from ...ingest.photometric import normalize_crop
from ..augment import augmented_stacks, camera_augmentation, turned
from ..batches import batch_slices
from .metrics import Evaluation, choose_threshold, evaluate, guarded_threshold, logodds
from .schedule import BATCH, LR, MIN_EPOCH, WARM_UP, patience_from

CHUNK = 2048  # crops augmented and preprocessed at once (memory: CHUNK x 3 x S x S floats)
FALSE_CALL_BUDGET = 0.01  # of the held-out good crops flagged at the operating point, unless a caller says


@dataclass
class Crops:
    """Crops in memory (HxWx3 BGR uint8, any sizes) and their labels (0 = good)."""

    images: list[np.ndarray]
    labels: np.ndarray
    references: list[np.ndarray] | None = None  # the golden board's window of each crop (golden comparison)
    identities: list[str] | None = None  # each crop's identity (folder.py): the served threshold resamples them

    def __len__(self) -> int:
        return len(self.images)


@dataclass
class Taught:
    state: dict[str, torch.Tensor]
    threshold: float
    # at the threshold, on the held-out crops (they chose it, and the epoch where no crops were set aside for that)
    heldout: Evaluation
    best_epoch: int
    epochs_run: int
    seconds: float
    history: list[dict[str, Any]] = field(default_factory=list)
    heldout_logits: np.ndarray | None = field(default=None, repr=False)  # the kept model's, N x classes


def balanced_draw(labels: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` indices: half of good crops, half of defect crops spread equally over the defect classes present
    (only good or only defects present: all of what there is)."""
    present = [k for k in np.unique(labels)]
    defect_classes = [k for k in present if k != 0]
    weight = np.zeros(len(labels))
    for k in present:
        members = labels == k
        share = (0.5 if defect_classes else 1.0) if k == 0 else (0.5 if 0 in present else 1.0) / len(defect_classes)
        weight[members] = share / members.sum()
    return rng.choice(len(labels), size=count, replace=True, p=weight / weight.sum())


def to_inputs(arch: Architecture, images: list[np.ndarray], pipeline: Any = None,  # noqa: ANN401
              references: list[np.ndarray] | None = None) -> torch.Tensor:
    """Crops as the expert is served them: the live crop (augmented: the camera varies, the golden photo does not),
    composed with its golden crop when there is one, normalised, fitted to its input."""
    x = torch.empty(len(images), 3, arch.input_size, arch.input_size)
    for idx, stack in augmented_stacks(images, pipeline):
        if references is not None:
            golden = torch.stack([torch.from_numpy(np.ascontiguousarray(references[i][:, :, ::-1].transpose(2, 0, 1)))
                                  for i in idx])
            stack = compose(stack, golden, getattr(arch, "reference", None) or "composite")
        x[idx] = arch.preprocess_batch(normalize_crop(stack))
    return x


def turn_all(images: list[np.ndarray], refs: list[np.ndarray] | None,
             rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Each crop (and its golden crop, the same way) under a random one of the square's 8 symmetries."""
    ks = rng.integers(0, 8, len(images))
    return ([turned(im, int(k)) for im, k in zip(images, ks)],
            None if refs is None else [turned(r, int(k)) for r, k in zip(refs, ks)])


def part(crops: Crops, idx: Any) -> tuple[list[np.ndarray], list[np.ndarray] | None]:  # noqa: ANN401
    """The images and (with a golden comparison) references at these indices (a slice or an index array)."""
    if isinstance(idx, slice):
        return crops.images[idx], None if crops.references is None else crops.references[idx]
    return [crops.images[i] for i in idx], None if crops.references is None else [crops.references[i] for i in idx]


def logits_of(arch: ResNetClassifier, model: nn.Module, crops: Crops) -> tuple[np.ndarray, float]:
    """Logits per crop (N x classes) and the mean cross-entropy, in chunks."""
    out, loss = [], 0.0
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(crops), CHUNK):
            images, refs = part(crops, slice(i, i + CHUNK))
            x = to_inputs(arch, images, None, refs)
            logits = torch.cat([model(x[j:j + 256]).float() for j in range(0, len(x), 256)])
            y = torch.from_numpy(crops.labels[i:i + CHUNK]).long()
            loss += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
            out.append(logits.numpy())
    return np.concatenate(out), loss / max(1, len(crops))


def operating_point(logits: np.ndarray, labels: np.ndarray, false_call_budget: float) -> float:
    lo = logodds(logits)
    return choose_threshold(lo[labels == 0], lo[labels != 0], false_call_budget)


def served_threshold(odds: np.ndarray, labels: np.ndarray, identities: list[str] | None, false_call_budget: float,
                     seed: int = 0) -> float:
    """The margin a taught classifier is served at, from held-out log-odds of good (`odds`): the budget's operating
    point, and where the crops' identities are known, no higher than where the budget held for 95% of resamples of
    them (metrics.guarded_threshold). Teaching chooses it so, and a retraining chooses its new weights' so again."""
    threshold = choose_threshold(odds[labels == 0], odds[labels != 0], false_call_budget)
    if identities is None:
        return threshold
    good = labels == 0
    return min(threshold, guarded_threshold(odds[good], [i for i, g in zip(identities, good) if g], false_call_budget,
                                            seed=seed))


def epoch_score(loss: float, defect_recall: float | None, classes: int) -> tuple[bool, float, float]:
    """How an epoch ranks (higher is kept): a loss on the crops that choose no worse than a uniform guess's first,
    then recall, then the lower loss."""
    return loss <= math.log(classes), defect_recall or 0.0, -loss


def train(arch: ResNetClassifier, classes: tuple[str, ...], train_set: Crops, heldout: Crops, epochs: int = 30,
          patience: int = 6, seed: int = 0, augment: float = 1.0, false_call_budget: float = FALSE_CALL_BUDGET,
          epoch_size: int | None = None, say: Callable[[str], None] = lambda _m: None,
          init: dict[str, torch.Tensor] | None = None, lr: float = LR, any_orientation: bool = False,
          keep_last: bool = False, choose_on: Crops | None = None) -> Taught:
    """Train from scratch, or on from `init` (weights that already work: with a smaller `lr`); keep the epoch the
    `choose_on` crops prefer (training crops set aside for it; None: the held-out crops), or with `keep_last` run
    every epoch and keep the last (the crops only watched: no crops to spare for choosing); the threshold is chosen
    on the held-out crops and they are scored. `epoch_size`: crops drawn an epoch (default: as many as the training
    set has, at least MIN_EPOCH).
    `any_orientation`: the classes do not depend on how a crop is turned, so each is drawn turned or mirrored at
    random (with its golden crop alike): a board design's traces run its own ways, another design's others."""
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = arch.build()
    if init is not None:
        model.load_state_dict(init)
    model = model.to(memory_format=torch.channels_last)
    pipeline = camera_augmentation(augment) if augment > 0 else None
    per_epoch = epoch_size or max(len(train_set), MIN_EPOCH)
    steps = math.ceil(per_epoch / BATCH)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps, pct_start=WARM_UP)
    settled = patience_from(epochs)
    watch, watched = (heldout, "held-out") if choose_on is None else (choose_on, "set-aside")
    best: tuple[bool, float, float] | None = None
    best_state, best_epoch, history = None, 0, []
    bar = tqdm(total=epochs * steps, unit="batch", desc="training", disable=None, dynamic_ncols=True)
    epoch = 0
    for epoch in range(1, epochs + 1):
        model.train()
        draw = balanced_draw(train_set.labels, per_epoch, rng)
        for c in range(0, len(draw), CHUNK):
            chunk = draw[c:c + CHUNK]
            images, refs = part(train_set, chunk)
            if any_orientation:
                images, refs = turn_all(images, refs, rng)
            x = to_inputs(arch, images, pipeline, refs).contiguous(memory_format=torch.channels_last)
            y = torch.from_numpy(train_set.labels[chunk]).long()
            for piece in batch_slices(len(chunk), BATCH):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x[piece]), y[piece]).backward()
                opt.step()
                sched.step()
                bar.update(1)
        logits, loss = logits_of(arch, model, watch)
        t = operating_point(logits, watch.labels, false_call_budget)
        ev = evaluate(classes, watch.labels, logits, t)
        score = epoch_score(loss, ev.defect_recall, len(classes))
        history.append({"epoch": epoch, "draws": len(draw), "watched": watched, "loss": loss,
                        "defect_recall": ev.defect_recall, "false_call_rate": ev.false_call_rate,
                        "macro_f1": ev.macro_f1, "threshold": t})
        better = best is None or score > best or keep_last
        if better:
            best, best_epoch = score, epoch
            best_state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        say(f"epoch {epoch}/{epochs}: {watched} loss {loss:.4f}, defect recall {100 * (ev.defect_recall or 0):.2f}% "
            f"at {100 * (ev.false_call_rate or 0):.2f}% false calls, macro F1 {100 * (ev.macro_f1 or 0):.1f}%"
            + ("" if keep_last else " (best so far)" if better else f" (best: epoch {best_epoch})"))
        bar.set_postfix(recall=f"{ev.defect_recall or 0:.3f}", best=best_epoch)
        if not keep_last and epoch < epochs and epoch - max(best_epoch, settled) >= patience:  # the last: no stop
            say(f"no better {watched} recall for {patience} epochs: stopped early, keeping epoch {best_epoch}")
            break
    bar.close()
    assert best_state is not None
    model.load_state_dict(best_state)
    model = model.to(memory_format=torch.contiguous_format)
    logits, _ = logits_of(arch, model, heldout)
    threshold = served_threshold(logodds(logits), heldout.labels, heldout.identities, false_call_budget, seed)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    return Taught(state, threshold, evaluate(classes, heldout.labels, logits, threshold), best_epoch, epoch,
                  time.perf_counter() - t0, history, logits)
