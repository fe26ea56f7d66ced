"""Glare: a light the experts were never trained for, catching the bodies of one component type.

A new lamp or a shinier part finish puts a bright highlight on every body of one type while the rest of the
board looks as before: the classic systematic false call of a line's first weeks, and what the review-and-
retrain loop (`inspector retrain-demo`) is shown on. The highlight is an elliptical Gaussian on the body, its
strength and place drawn per part, added before the camera sees the board (it is light on the board, not in
the lens).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..routing.rules import RuleSet, body_box


@dataclass(frozen=True)
class Glare:
    component: str  # the component type whose bodies catch the light
    strength: float = 0.5  # peak brightness added, a fraction of full scale (drawn from 0.75x to 1.25x per part)

    @classmethod
    def parse(cls, text: str) -> Glare:
        """`TYPE` or `TYPE:STRENGTH` (the --glare flag)."""
        name, _, value = text.partition(":")
        try:
            strength = float(value) if value else cls.strength
        except ValueError:
            raise ValueError(f"--glare {text!r}: write TYPE or TYPE:STRENGTH, STRENGTH a number (0.5)") from None
        if not name or not 0 < strength <= 2:
            raise ValueError(f"--glare {text!r}: write TYPE or TYPE:STRENGTH with 0 < STRENGTH <= 2")
        return cls(name, strength)

    def check(self, rules: RuleSet) -> None:
        if self.component not in {c.name for c in rules.components}:
            raise ValueError(f"--glare names component type {self.component!r}, which rule set {rules.recipe} does "
                             f"not have; its types: {', '.join(sorted(c.name for c in rules.components))}")

    def apply(self, image: np.ndarray, rules: RuleSet, rng: np.random.Generator) -> np.ndarray:
        out = image.astype(np.float32)
        h, w = image.shape[:2]
        for comp, place in rules.placements():
            if comp.name != self.component:
                continue
            x0, y0, x1, y1 = body_box(comp, place, 0)
            rx, ry = max(2.0, (x1 - x0) / 2.5), max(2.0, (y1 - y0) / 2.5)
            cx = (x0 + x1) / 2 + rng.uniform(-0.3, 0.3) * rx
            cy = (y0 + y1) / 2 + rng.uniform(-0.3, 0.3) * ry
            ys = slice(max(0, y0 - 4), min(h, y1 + 4))
            xs = slice(max(0, x0 - 4), min(w, x1 + 4))
            gy, gx = np.mgrid[ys, xs]
            spot = np.exp(-(((gx - cx) / rx) ** 2 + ((gy - cy) / ry) ** 2))
            peak = self.strength * rng.uniform(0.75, 1.25) * 255.0
            out[ys, xs] += peak * spot[..., None]
        return np.clip(out, 0, 255).astype(np.uint8)
