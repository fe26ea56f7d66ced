"""An expert's operating point: the fields of its spec that say where it calls a part, not what the expert is.

A detector's box threshold, a classifier's good margin. Choosing them again moves no weight and changes no
architecture, profile or runtime file, but it belongs to the weights it was chosen for: a retrained detector's box
scores sit on their own scale, so the threshold its old weights were served at may flag every part or none. A
version of an expert's weights therefore carries its point (experts/versions.py: the one it was chosen at, or the one
it was last served at), and putting a version into service, on disk or on a running line (the engine's
replace_weights), serves it at that point.
"""
from __future__ import annotations

import math
from typing import Any

from .registry import architecture_from_spec

OPERATING = ("threshold", "good_margin")  # the spec fields that are an operating point (yolo.py, resnet.py)
Point = dict[str, float | None]


def operating_point(spec: dict[str, Any]) -> Point:
    """The point an expert of `spec` calls at, defaults included (a demo detector's 0.25 is written nowhere; a
    classifier without a margin, None: it calls its top class)."""
    arch = architecture_from_spec(spec)
    return {k: getattr(arch, k) for k in OPERATING if hasattr(arch, k)}


def at_point(spec: dict[str, Any], point: Point) -> dict[str, Any]:
    """`spec` calling at `point`, its other fields as they are (a default the spec did not write stays unwritten).
    ValueError for a field its architecture has not, or a value out of its range."""
    own = operating_point(spec)
    for name, value in point.items():
        if name not in own:
            raise ValueError(f"an expert of {spec.get('arch')} has no operating field {name!r} (it has "
                             f"{', '.join(own) or 'none'})")
        if value is not None and not math.isfinite(float(value)):
            raise ValueError(f"the operating point's {name} must be a finite number, not {value}")
    out = {k: v for k, v in spec.items() if k not in point}
    default = operating_point(out)  # where the spec says nothing: a default the spec leaves unwritten stays so
    out.update({k: float(v) for k, v in point.items() if v is not None and (k in spec or v != default[k])})
    architecture_from_spec(out)  # a value out of its range refused here, naming it
    return out


def same_expert(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two specs are one architecture, whatever their operating points."""
    return {k: v for k, v in a.items() if k not in OPERATING} == {k: v for k, v in b.items() if k not in OPERATING}


def said(point: Point) -> str:
    """An operating point as a person reads it: "threshold 0.292" ("" for none, or a classifier calling its top
    class)."""
    return ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in point.items() if v is not None)
