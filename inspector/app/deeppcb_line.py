"""DeepPCB's pairs as boards of the line: each pair a bare-board rule set, inspected by the line's own engine.

Each pair becomes a rule set (written under WORK/rules/<pair>.yaml, what a plant would keep for its board): the
tested image's size, its template as the golden board, windows of WINDOW px tiling it, and the `compare:` boxing
fitted on the training pairs. Every window is of one type, `bare-board`, so every difference on every board is
named by one shared expert, `cls-bare-board` (the one the teaching made), served by the CoServe engine like any
other. The line's results (its part records: each difference's box on the board, its class and its log-odds of
good) are what the benchmark scores; the boards/s are the line's, from the first image read to the last record.
"""
from __future__ import annotations

import math
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from ..experts.zoo import Zoo, set_operating_point
from ..ingest.difference import Boxing
from ..ingest.images import BadImage, image_size
from ..results.records import BoardRecord
from ..routing.compare import WINDOW, tiles
from ..routing.rules import load_rules
from ..training.deeppcb import CLASSES, IOU_MATCH, DatasetError, Pair
from ..training.deeppcb_bench import (
    CONTEXT,
    GOOD,
    SELECTION_BUDGET,
    DeepPCBResult,
    f_threshold,
    fit_boxing,
    heldout_logits,
    load_boards,
    one_per_place,
    proposal_recall,
    truth_of,
    write_candidates,
)
from ..training.deeppcb_split import choose_split
from ..training.labelled.detection import Found, score
from ..training.labelled.evaluate import served_module
from ..training.labelled.teach import TeachPlan, teach
from .line import Line, LineConfig
from .run import line_profiles

TYPE = "bare-board"
EXPERT = f"cls-{TYPE}"  # the type's expert, shared by every window of every pair's rule set
WINDOW_PX = 160  # 4 x 4 windows tile DeepPCB's 640 px images


def rule_text(pair: Pair, size: tuple[int, int], boxing: Boxing, context: float, spec: dict,
              window: int = WINDOW_PX) -> str:
    """One pair's rule set: its template as the golden board, windows tiling the tested image."""
    width, height = size
    side = min(window, width, height)
    at = ", ".join(f"{ref}: [{x}, {y}]" for ref, x, y in tiles(width, height, side))
    return (f"# DeepPCB pair {pair.name} (group {pair.group}) as a bare board of the line: routing_rules/README.md\n"
            f"recipe: deeppcb-{pair.name}\n"
            f"board: {{width: {width}, height: {height}}}\n"
            f"golden: {pair.template.resolve()}\n"
            f"compare: {{opening: {boxing.opening}, margin: {boxing.margin}, least_side: {boxing.least_side}, "
            f"context: {context}}}\n"
            f"classifier: {{arch: {spec['arch']}, input_size: {spec['input_size']}}}\n"
            f"components:\n"
            f"  {TYPE}:\n"
            f"    shape: {WINDOW}\n"
            f"    size: [{side}, {side}]\n"
            f"    at: {{{at}}}\n")


def found_on(record: BoardRecord) -> list[Found]:
    """The boxes a board's record holds: every difference the shared expert named, ranked by its P(defect)."""
    out = []
    for part in record.parts:
        if part.at is None or part.good_logodds is None or part.likeliest not in CLASSES:
            continue
        odds = max(-60.0, min(60.0, part.good_logodds))
        out.append(Found(CLASSES.index(part.likeliest), 1.0 / (1.0 + math.exp(odds)), *part.at))
    return out


def inspect_on_line(zoo: Zoo, pairs: list[Pair], boxing: Boxing, context: float, work: Path, models: Path,
                    say: Callable[[str], None], config: LineConfig | None = None) -> tuple[dict[str, BoardRecord],
                                                                                         float]:
    """Every pair through the line (its rule set applied before its board, as a changeover would): the board
    records by pair name, and the seconds from the first image read to the last record. The line runs on the
    profiles under `models` (the box's, as `inspector run`'s); the pairs' rule sets go under `work`."""
    if not pairs:
        return {}, 0.0
    spec = zoo.entries[EXPERT].spec
    folder = work / "rules"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for pair in pairs:
        try:
            size = image_size(pair.test)  # the header alone: the image is decoded once, when it is inspected
        except (BadImage, OSError) as exc:
            raise DatasetError(f"{pair.test} cannot be read as an image ({exc})") from None
        path = folder / f"{pair.name}.yaml"
        path.write_text(rule_text(pair, size, boxing, context, spec), encoding="utf-8")
        paths.append(path)
    records: dict[str, BoardRecord] = {}
    done = threading.Lock()

    def keep(record: BoardRecord) -> None:
        with done:
            records[record.board_serial] = record

    profiles = line_profiles(zoo, models, say)
    rules = [load_rules(p) for p in paths]
    line = Line(rules[0], zoo, profiles, config or LineConfig(), sinks=[keep])
    line.start()
    try:
        t0 = time.perf_counter()
        for pair, r in zip(pairs, rules):
            live = cv2.imread(str(pair.test), cv2.IMREAD_COLOR)
            if live is None:
                raise DatasetError(f"{pair.test} cannot be read as an image")
            line.apply_rules(r)
            line.inspect(live, pair.name, source=str(pair.test), serial_origin="filename")
        line.drain()
        seconds = time.perf_counter() - t0
    finally:
        line.stop()
    errors = [f"{name}: {r.error}" for name, r in records.items() if r.error]
    if errors:
        raise DatasetError(f"{len(errors)} boards the line refused, the first: {errors[0]}")
    return records, seconds


def run_deeppcb(root: Path, work: Path, models: Path, list_file: Path | None = None, share: float = 0.1,
                group: str | None = None, epochs: int = 30, patience: int = 6, seed: int = 0,
                say: Callable[[str], None] = print, score_on: Path | None = None,
                config: LineConfig | None = None) -> DeepPCBResult:
    """Teach the shared expert on the training pairs' differences, then run the scored pairs through the line and
    score its records by the dataset's protocol (the line on the box's profiles under `models`)."""
    missing: list[str] = []
    train_pairs, scored_pairs, split = choose_split(root, list_file, share, group, missing, score_on)
    say(f"DeepPCB at {root}: {split}")
    for m in missing:
        say(f"  left out: {m}")
    boards = load_boards(train_pairs, "aligning training pairs")
    boxing, recall_train = fit_boxing(boards, say)
    folder, golden = work / "candidates", work / "candidates-golden"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(golden, ignore_errors=True)
    counts = write_candidates(boards, boxing, folder, golden)
    say("training candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    del boards
    zoo_dir = work / "zoo"
    shutil.rmtree(zoo_dir, ignore_errors=True)
    t0 = time.perf_counter()
    plan = TeachPlan(EXPERT, folder, zoo_dir, good=GOOD, epochs=epochs, patience=patience, seed=seed,
                     reference=golden, false_call_budget=SELECTION_BUDGET,
                     any_orientation=True,  # DeepPCB's six classes are what they are whichever way a trace runs
                     epoch_share=0)  # its held-out candidates are a validation split: the scored pairs are elsewhere
    taught = teach(plan, say)
    teach_s = time.perf_counter() - t0
    zoo = Zoo.load(zoo_dir)
    arch, model = served_module(zoo, EXPERT)
    cut = f_threshold(*heldout_logits(arch, model, folder, golden, plan.heldout_share))
    zoo = set_operating_point(zoo, EXPERT, cut)
    say(f"operating point: log-odds of good below {cut:.3f} call a defect (the best F-score on the teaching's "
        f"held-out candidates), served by {EXPERT}")
    records, seconds = inspect_on_line(zoo, scored_pairs, boxing, CONTEXT, work, models, say, config)
    found = [one_per_place(found_on(records[p.name])) for p in scored_pairs]
    boxes = [[part.at for part in records[p.name].parts if part.at is not None] for p in scored_pairs]
    truths = [truth_of(p) for p in scored_pairs]
    recall_scored, _ = proposal_recall(truths, boxes)
    result = score(CLASSES, truths, found, float(1.0 / (1.0 + np.exp(cut))), IOU_MATCH)
    n = len(scored_pairs)
    return DeepPCBResult(split, len(train_pairs), n, boxing, recall_train, recall_scored,
                         sum(map(len, boxes)) / max(1, n), result, n / seconds if seconds else 0.0, teach_s,
                         {"name": EXPERT, "zoo": str(zoo_dir), "input": taught.fit.describe(),
                          "epochs_run": taught.taught.epochs_run, "best_epoch": taught.taught.best_epoch,
                          "rules": str(work / "rules")},
                         missing)
