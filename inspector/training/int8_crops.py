"""Crops to calibrate an INT8 runtime on: each expert's own, rendered from the rule sets it serves and seen as the
line sees them (a training camera's variation, registered, normalised, preprocessed by the expert's own
architecture), so its activation ranges are the ones the line will meet."""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..experts.zoo import Zoo
from ..routing.rules import RuleSet

PER_EXPERT = 64
SEED = 8089  # its own boards: none of training's or the accuracy suite's


def rules_calibration(rule_sets: list[RuleSet], zoo: Zoo,
                      per_expert: int = PER_EXPERT) -> Callable[[str], torch.Tensor | None]:
    """calibration(expert) -> N x 3 x S x S preprocessed crops of it, or None for an expert no rule set routes to.
    Boards are rendered on the first call only (all experts' crops come from the same boards)."""
    cache: dict[str, torch.Tensor] = {}
    done = False

    def calibration(expert: str) -> torch.Tensor | None:
        nonlocal done
        if not done:  # only an INT8 runtime calls it: the renderer and augmentation (torchvision's) are loaded now
            from .augment import seen_stacks
            from .samples import collect

            samples = collect(rule_sets, per_expert, SEED, cap=per_expert)
            for table in (samples.by_classifier, samples.by_detector):
                for name, items in table.items():
                    if name not in zoo.entries or not items:
                        continue
                    arch = zoo.architecture(name)
                    x = torch.empty(len(items), 3, arch.input_size, arch.input_size)
                    for idx, stack in seen_stacks([s.crop for s in items]):
                        x[idx] = arch.preprocess_batch(stack)
                    cache[name] = x
            done = True
        return cache.get(expert)

    return calibration
