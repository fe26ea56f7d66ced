"""A bench workload of a rule set's own boards: its component types, counts, routes and experts.

`inspector bench` measures policies on a workload; a plant asks how they do on *its* board (an imported one brings
dozens of component types, CoServe's many-experts regime). The workload keeps everything the engine sees of the
board (one classifier a type at the rule set's architecture and input size, the shared detectors, how many of each
type a board carries, which pass on to a detector) and takes the line rate and memory from the built-in workload,
so the same box and memory are compared; `--device-mb` sets the memory instead.
"""
from __future__ import annotations

from dataclasses import replace

from ..coserve.online.workload import MiB, Recipe, Workload, load_workload
from ..routing.rules import RuleSet

CASUAL_SHARE = 0.75  # of device memory to experts until a plan splits it (the built-in workload's casual split)


def workload_of_rules(rules: RuleSet, boards: int = 20, device_mb: float | None = None) -> Workload:
    """`boards` boards of `rules` in scan order, on the built-in workload's line rate and memory (or `device_mb`)."""
    if boards < 1:
        raise ValueError("--boards must be 1 or more")
    if not rules.components:
        raise ValueError(f"{rules.source}: the rule set has no component types to bench")
    base = load_workload(None)
    kinds = tuple(c.kind for c in rules.components)
    board = Recipe(rules.recipe, tuple((k.name, k.count) for k in kinds))
    memory = {}
    if device_mb is not None:
        if device_mb <= 0:
            raise ValueError("--device-mb must be above 0")
        pool = int(CASUAL_SHARE * device_mb * MiB)
        memory = {"device_bytes": int(device_mb * MiB), "expert_pool_bytes": pool, "cpu_pool_bytes": pool,
                  "pool_fixed": False}
    return replace(base, name=rules.recipe, seed=rules.seed, classifier=dict(rules.classifier_spec),
                   detectors=tuple(rules.detectors), components=kinds, requests=board.parts_per_board * boards,
                   recipes=(board,), boards_per_lot=1, source=rules.source, **memory)
