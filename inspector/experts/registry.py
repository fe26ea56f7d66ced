"""Architecture specs as written in workloads and manifests -> Architecture objects."""
from __future__ import annotations

import json
from typing import Any

from .base import Architecture
from .resnet import ResNetClassifier
from .spec import RESNET, check_spec
from .yolo import VERIFY_THRESHOLD, YoloDetector

_SHARED: dict[str, Architecture] = {}


def architecture_from_spec(spec: dict[str, Any]) -> Architecture:
    """The Architecture for {"arch": ..., "input_size": ..., "classes": ...}, one per distinct spec.

    Shared, so every expert of an architecture uses one meta skeleton and one
    activation estimate however many places ask. Raises UnknownArchitecture
    naming what is accepted.
    """
    key = json.dumps(spec, sort_keys=True)
    arch = _SHARED.get(key)
    if arch is None:
        arch = _SHARED.setdefault(key, _build(spec))
    return arch


def _build(spec: dict[str, Any]) -> Architecture:
    check_spec(spec)  # a name or setting this build does not know, named as a rule set's reader names it
    name = str(spec.get("arch", "")).strip()
    size = int(spec.get("input_size", 64))
    m = RESNET.match(name)
    if m:
        margin = spec.get("good_margin")
        return ResNetClassifier(int(m.group(1)), input_size=size, classes=int(spec.get("classes", 2)),
                                fit=str(spec.get("fit", "squash")),
                                good_margin=None if margin is None else float(margin),
                                reference=spec.get("reference"), head=str(spec.get("head", "classes")))
    return YoloDetector(  # check_spec let through a ResNet or a detector's file alone
        name, input_size=size, classes=int(spec.get("classes", 4)),
        threshold=float(spec.get("threshold", VERIFY_THRESHOLD)), mode=str(spec.get("mode", "verify")),
        fit=str(spec.get("fit", "squash")), reference=spec.get("reference"),
    )
