"""MoE expert policies: small objects the runtime asks what to keep, what to read ahead, what to evict.

- base.py       the questions (MoEPolicy) and what a policy sees of the pool (PoolView)
- baselines.py  ondemand, lru, fiddler, moesys
- daop.py       DAOP (DATE'25)
- fmoe.py       fMoE, over the expert-map store (../expert_maps.py)
- firm.py       FIRM-MoE, with heop.py
- duoserve.py   DuoServe-MoE, with its predictor (../offline/predictor.py)

A policy is named by a spec: `name` or `name:option=value:option=value` (e.g. `daop:predict_from=4`,
`firm:parts=1:heop=false`); `daop+degrade` is DAOP with graceful degradation (approximate).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable

from ...errors import UnknownChoice
from ..calibration import Calibration
from .base import MoEPolicy, PoolView, calibrated_placement
from .baselines import LRU, Fiddler, MoESys, OnDemand
from .daop import DAOP
from .duoserve import DuoServe
from .firm import FIRM
from .fmoe import FMoE

POLICIES: dict[str, type[MoEPolicy]] = {"ondemand": OnDemand, "lru": LRU, "fiddler": Fiddler, "moesys": MoESys,
                                        "daop": DAOP, "fmoe": FMoE, "firm": FIRM, "duoserve": DuoServe}
ALIASES = {"daop+degrade": ("daop", {"degrade": True})}
HIDDEN_OPTIONS = {"calibration", "log"}

__all__ = ["DAOP", "FIRM", "LRU", "POLICIES", "DuoServe", "FMoE", "Fiddler", "MoEPolicy", "MoESys", "OnDemand",
           "PoolView", "calibrated_placement", "get_policy", "options_of", "parse_spec"]


def options_of(cls: type[MoEPolicy]) -> dict[str, object]:
    """A policy's options and their defaults."""
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
            if name != "self" and name not in HIDDEN_OPTIONS}


def parse_spec(spec: str) -> tuple[str, dict[str, object]]:
    """`name:key=value:...` -> (name, options typed as the defaults are); errors name what is allowed."""
    name, *pairs = spec.strip().split(":")
    base, preset = ALIASES.get(name, (name, {}))
    cls = POLICIES.get(base)
    if cls is None:
        raise UnknownChoice(f"unknown MoE policy {name!r}: use one of {', '.join([*POLICIES, *ALIASES])}")
    allowed = options_of(cls)
    out: dict[str, object] = dict(preset)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or key not in allowed:
            choices = ", ".join(f"{k}={v}" for k, v in allowed.items()) or "none"
            raise UnknownChoice(f"policy {name!r}: bad option {pair!r}; its options (with defaults) are: {choices}")
        out[key] = _typed(name, key, raw, allowed[key])
    return base, out


def _typed(name: str, key: str, raw: str, default: object) -> object:
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes", "on")
        if isinstance(default, int) or default is None:
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        return raw
    except ValueError:
        raise ValueError(f"policy {name!r}: option {key} wants a {type(default).__name__}, got {raw!r}") from None


def get_policy(spec: str, calibration: Calibration | None = None,
               log: Callable[[str], None] | None = None) -> MoEPolicy:
    """A policy by spec (see the module's docstring)."""
    base, options = parse_spec(spec)
    cls = POLICIES[base]
    if "log" in inspect.signature(cls.__init__).parameters:
        options["log"] = log
    policy = cls(calibration, **options)
    if ":" in spec:
        policy.name = spec.strip()
    return policy
