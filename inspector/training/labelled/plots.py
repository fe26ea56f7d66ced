"""The accuracy report's pictures: the confusion matrix and precision-recall curves, as PNGs beside the tables.

Precision-recall per defect class is one class against the rest, scored by the expert's probability of that
class; the "any defect" curve scores by the log-odds against good (the line's own decision), and marks the
operating point the expert serves at. Average precision is the area under each curve (as scikit-learn's
average_precision: precision summed at each recall step).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: the box has no display, and this must never open a window

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .metrics import Evaluation, logodds  # noqa: E402


def pr_curve(positive: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(recall, precision, average precision) of calling positive every crop scoring at least each threshold."""
    order = np.argsort(-score, kind="stable")
    hits = positive[order].astype(np.float64)
    tp = np.cumsum(hits)
    called = np.arange(1, len(hits) + 1)
    total = hits.sum()
    if total == 0:
        return np.zeros(1), np.ones(1), float("nan")
    recall, precision = tp / total, tp / called
    ap = float(np.sum(np.diff(np.concatenate([[0.0], recall])) * precision))
    return recall, precision, ap


def write_plots(ev: Evaluation, truth: np.ndarray, logits: np.ndarray, out: Path, title: str) -> list[Path]:
    """confusion.png and pr.png under `out`; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "confusion.png", out / "pr.png"]
    n = len(ev.classes)
    fig, ax = plt.subplots(figsize=(1.1 * n + 2.5, 1.0 * n + 2))
    rows = ev.confusion / np.maximum(ev.confusion.sum(axis=1, keepdims=True), 1)
    ax.imshow(rows, cmap="Blues", vmin=0, vmax=1)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, str(ev.confusion[i, j]), ha="center", va="center",
                    color="white" if rows[i, j] > 0.5 else "black", fontsize=9)
    ax.set_xticks(range(n), ev.classes, rotation=45, ha="right")
    ax.set_yticks(range(n), ev.classes)
    ax.set_xlabel("called")
    ax.set_ylabel("true class")
    ax.set_title(f"{title}: confusion (colour: share of the row)", fontsize=10)
    fig.tight_layout()
    fig.savefig(written[0], dpi=110)
    plt.close(fig)

    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    fig, ax = plt.subplots(figsize=(7, 5.5))
    recall, precision, ap = pr_curve(truth != 0, -logodds(logits))
    ax.plot(recall, precision, color="black", lw=2.2, label=f"any defect (AP {ap:.3f})")
    if ev.defect_recall is not None and ev.threshold is not None:
        flagged = int(ev.confusion[:, 1:].sum())
        ax.plot([ev.defect_recall], [ev.confusion[1:, 1:].sum() / max(1, flagged)], "o", color="red",
                label="operating point")
    for k in range(1, n):
        if (truth == k).any():
            r, p, a = pr_curve(truth == k, probs[:, k])
            ax.plot(r, p, lw=1.2, label=f"{ev.classes[k]} (AP {a:.3f})")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.01)
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(f"{title}: precision-recall, one class against the rest", fontsize=10)
    fig.tight_layout()
    fig.savefig(written[1], dpi=110)
    plt.close(fig)
    return written
