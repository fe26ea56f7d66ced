"""Teaching and a retraining choose the epoch on training items set aside, never on the held-out items their table
and gate read."""
from __future__ import annotations

import numpy as np

from inspector.experts.resnet import ResNetClassifier
from inspector.training.labelled.epoch_split import MIN_STRATUM, Origin, divide, set_aside
from inspector.training.labelled.metrics import logodds
from inspector.training.labelled.trainer import FALSE_CALL_BUDGET, Crops, served_threshold, train


def _origins(source: str, n: int, defective: bool, prefix: str) -> list[Origin]:
    return [Origin(source, f"{prefix}{i}", defective) for i in range(n)]


def test_each_kind_gives_up_a_share_by_identity_whatever_the_order() -> None:
    items = (_origins("taught", 40, False, "g") + _origins("taught", 40, True, "d")
             + _origins("reviewed", 8, True, "r") + _origins("reviewed", MIN_STRATUM - 1, False, "c"))
    aside = set_aside(items)
    picked = {(o.source, o.defective): 0 for o in items}
    for o, a in zip(items, aside):
        picked[(o.source, o.defective)] += a
    # every kind with enough identities gives at least one and keeps at least one; a kind too small gives none
    assert 0 < picked[("taught", False)] < 40 and 0 < picked[("taught", True)] < 40
    assert 0 < picked[("reviewed", True)] < 8 and picked[("reviewed", False)] == 0
    assert sum(aside) < 0.3 * len(items)
    # fixed by the identities: the same items fall the same way in any order
    order = np.random.default_rng(1).permutation(len(items))
    again = set_aside([items[i] for i in order])
    assert [aside[i] for i in order] == again


def test_each_kind_its_teacher_recorded_is_a_stratum_and_a_type_of_few_parts_keeps_them_to_train_on() -> None:
    # board teaching: the parts (identities) of a type of 12 parts and of twenty types of one part each
    parts = {f"C{i}": "0402" for i in range(12)} | {f"U{i}": f"type{i}" for i in range(20)}
    items = [Origin("taught", ref, bad, kind) for ref, kind in parts.items() for bad in (False, True)]
    picked = {o.identity for o, a in zip(items, set_aside(items)) if a}
    assert picked and all(parts[ref] == "0402" for ref in picked)
    # without the kinds the same parts are one stratum: one-part types are set aside like any part
    blind = set_aside([Origin(o.source, o.identity, o.defective) for o in items])
    assert any(parts[o.identity] != "0402" for o, a in zip(items, blind) if a)


def test_an_identitys_items_go_together_and_count_as_defective_when_any_is() -> None:
    # four windows of each of 12 boards: a board's windows (near-copies) are never split between the sides
    items = [Origin("taught", f"board{b}", w == 0) for b in range(12) for w in range(4)]
    aside = set_aside(items)
    by_board: dict[str, set[bool]] = {}
    for o, a in zip(items, aside):
        by_board.setdefault(o.identity, set()).add(a)
    assert all(len(sides) == 1 for sides in by_board.values()) and any(aside)


def test_a_set_aside_that_cannot_choose_is_trained_on() -> None:
    own = [("g", i) for i in range(10)]  # good only: a classifier's recall needs a defect among them
    sides = divide(own, [], lambda x: f"{x[0]}{x[1]}", lambda x: x[0] == "d",
                   lambda epoch: len({x[0] for x in epoch}) == 2, "crops")
    assert sides.epoch == [] and sides.train_own == own and "its last epoch kept" in sides.says
    both = own + [("d", i) for i in range(10)]
    sides = divide(both, [], lambda x: f"{x[0]}{x[1]}", lambda x: x[0] == "d",
                   lambda epoch: len({x[0] for x in epoch}) == 2, "crops")
    assert sides.epoch and set(sides.epoch).isdisjoint(sides.train_own)
    assert sorted(sides.epoch + sides.train_own) == sorted(both) and "set aside to choose the epoch by" in sides.says


def dark_and_light() -> tuple[Crops, Crops]:
    """Dark crops bad and light ones good, and the same crops labelled the other way round: every epoch trained on
    the first makes the second worse, so choosing on the second keeps the first epoch."""
    rng = np.random.default_rng(0)
    labels = np.array([0, 1] * 8)
    noise = rng.integers(0, 20, (len(labels), 16, 16, 3), dtype=np.uint8)
    images = [np.full((16, 16, 3), 40 if bad else 200, dtype=np.uint8) + n for bad, n in zip(labels, noise)]
    return Crops(images, labels), Crops(images, 1 - labels)


def test_keep_last_runs_every_epoch_and_keeps_the_last() -> None:
    crops, wrong = dark_and_light()  # watched: the crops labelled the other way round
    arch = ResNetClassifier(10, input_size=32)
    chosen = train(arch, ("ok", "bad"), crops, wrong, epochs=4, patience=1, epoch_size=64)
    last = train(arch, ("ok", "bad"), crops, wrong, epochs=4, patience=1, epoch_size=64, keep_last=True)
    assert chosen.best_epoch == 1 and last.best_epoch == last.epochs_run == 4 and len(last.history) == 4


def test_the_crops_set_aside_choose_the_epoch_and_the_held_out_ones_the_threshold() -> None:
    # the crops that choose are labelled the other way round: chosen on them, the first epoch is kept; the held-out
    # crops, labelled as trained, then get the threshold and the scores
    crops, wrong = dark_and_light()
    arch = ResNetClassifier(10, input_size=32)
    aside = train(arch, ("ok", "bad"), crops, crops, epochs=4, patience=1, epoch_size=64, choose_on=wrong)
    held = train(arch, ("ok", "bad"), crops, crops, epochs=4, patience=1, epoch_size=64)
    assert aside.best_epoch == 1 and held.best_epoch > 1
    assert {h["watched"] for h in aside.history} == {"set-aside"} and {h["watched"] for h in held.history} == {
        "held-out"}
    assert aside.heldout_logits is not None and len(aside.heldout_logits) == len(crops)
    odds = logodds(aside.heldout_logits)
    assert aside.threshold == served_threshold(odds, crops.labels, None, FALSE_CALL_BUDGET)  # chosen on the held-out


def test_a_detectors_epoch_is_as_long_as_its_training_side_was_before_the_epoch_set() -> None:
    from inspector.training.labelled.teach_detector import filled

    train = [f"img{i}" for i in range(10)]
    epoch = filled(train, 13, seed=0)  # three were set aside: three of the rest are drawn again
    assert len(epoch) == 13 and epoch[:10] == train and set(epoch[10:]) <= set(train) and len(set(epoch[10:])) == 3
    assert filled(train, 13, seed=0) == epoch and filled(train, 10, seed=0) == train  # seeded; nothing set aside
    assert len(filled(train[:2], 7, seed=1)) == 7  # more set aside than left: drawn with repeats
