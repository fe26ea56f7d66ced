"""Training many experts at once: one process per core, one torch thread each, longest jobs first.

Small models on small crops keep two threads of one process half idle (short
convolutions, Python between them, the YOLO trainer's own bookkeeping). On 2
cores, two experts trained side by side in two single-threaded processes
finish 1.5x (ResNet classifiers) to 1.7x (YOLO detectors) sooner than one
after the other on two threads. Each job seeds itself, so an expert's weights
do not depend on which worker trained it or when.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

import torch

from ..experts.registry import architecture_from_spec
from .classifier import TrainedClassifier, train_classifier
from .detector import TrainedDetector, train_detector
from .samples import PartSample

Trained = TrainedClassifier | TrainedDetector


@dataclass
class TrainJob:
    name: str
    role: str  # classifier | detector
    spec: dict[str, Any]
    train: list[PartSample] = field(repr=False)
    val: list[PartSample] = field(repr=False)
    epochs: int
    seed: int
    augment: float = 1.0
    copies: int = 1  # detector: each training crop written this many times, each freshly augmented
    floor: float | None = None  # validation accuracy below which the expert is trained again with another seed
    attempts: int = 1  # training runs at most, the best kept

    @property
    def work(self) -> float:
        """A rough size: the longest jobs start first, and a build's time left is its work left. A detector's
        crop-epoch costs about three of a classifier's (YOLOv8n at 64 px against ResNet10 at 32 px, one demo build
        on this project's 2-core box, 2026-11-27: 319 s for a detector's 1500 crops x 15 epochs, about 40 s for a
        classifier's 600 x 14)."""
        return self.epochs * len(self.train) * self.copies * (3.0 if self.role == "detector" else 1.0)


SEED_STEP = 1000  # attempt k trains with seed + k * SEED_STEP: far from the seeds neighbouring zoos use


def run_job(job: TrainJob) -> Trained:
    """Train the expert; while its validation accuracy is below the job's floor, again with the next seed, up to
    `attempts` runs, keeping the best. A small net trained from scratch now and then settles in a poor minimum for
    one seed (an expert at 0.94 where its other seeds reach 0.999 flags a fifth of good parts), and which seed does
    is chance, so a run that falls short is retried rather than shipped."""
    arch = architecture_from_spec(job.spec)
    runs: list[Trained] = []
    for k in range(max(1, job.attempts)):
        seed = job.seed + k * SEED_STEP
        if job.role == "detector":
            runs.append(train_detector(arch, job.train, job.val, job.epochs, seed, job.copies, job.augment))
        else:
            runs.append(train_classifier(arch, job.train, job.val, job.epochs, seed, job.augment))
        acc = runs[-1].val_accuracy
        if job.floor is None or acc >= job.floor or math.isnan(acc):  # no held-out crops: nothing to judge by
            break
    best = max(runs, key=lambda t: t.val_accuracy)  # the first of equals
    best.other_runs = tuple(t.val_accuracy for t in runs if t is not best)
    return best


def _one_thread() -> None:
    torch.set_num_threads(1)
    os.environ.setdefault("YOLO_OFFLINE", "1")


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def run_jobs(jobs: Iterable[TrainJob], workers: int | None = None,
             done: Callable[[TrainJob, Trained], None] = lambda _j, _t: None) -> dict[str, Trained]:
    """Train every job, `workers` at a time (default: one per core); `done` is called as each finishes."""
    ordered = sorted(jobs, key=lambda j: -j.work)
    workers = min(len(ordered), workers or default_workers())
    out: dict[str, Trained] = {}
    if workers <= 1:
        for job in ordered:
            out[job.name] = run_job(job)
            done(job, out[job.name])
        return out
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_one_thread)
    try:
        futures = {pool.submit(run_job, job): job for job in ordered}
        for future in as_completed(futures):
            job = futures[future]
            out[job.name] = future.result()
            done(job, out[job.name])
    except BaseException:
        # Ctrl+C, SIGTERM or a failed job: stop the workers now instead of waiting out their epochs; what was
        # done() is on disk already and a later build resumes from it
        for process in list(getattr(pool, "_processes", {}).values()):  # no public terminate before Python 3.14
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return out
