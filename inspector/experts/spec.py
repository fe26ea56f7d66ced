"""An expert's spec as a rule set, workload or manifest writes it, checked without building the expert.

Reading a rule set names its experts' architectures; a refused rule file and `board import` must not wait the
seconds torch takes to load for that, so what a spec may say is checked here, torch-free (`board approve` still
loads torch: it cuts the part's window with the line's crop code, inspector/ingest/crops.py). The
architectures (base.py, resnet.py, yolo.py) check their settings with the same functions, and registry.py builds one
only where an expert runs.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any


class UnknownArchitecture(ValueError):
    """An expert names an architecture this build does not know."""


RESNET_DEPTHS = (10, 18, 34, 50, 101, 152)  # resnet.py's DEPTHS gives each its blocks
RESNET = re.compile(r"^resnet(\d+)$")
DETECTOR_FILES = (".yaml", ".yml", ".pt")
HEADS = ("classes", "anomaly")  # a classifier's head: class logits, or taught from good crops alone (resnet.py)
MODES = ("verify", "find")  # a detector's verdict: the part in place, or no defect found (yolo.py)
# How a crop becomes the square input. squash: stretched to SxS (parts of one type share one aspect, so nothing is
# lost; every demo expert). letterbox: the crop's aspect kept, padded to a square with the normalised crops' mean
# grey (photometric.MEAN) before the resize, for experts whose crops come in many aspects (labelled real data).
FITS = ("squash", "letterbox")
# What an expert reads beside the live crop. None: the live crop alone. composite: the live crop, the same window of
# the golden board and their difference, as three greys (ingest/golden.py); the line must have a golden image.
# colour: the same, the difference also counting a change of colour (a bare board's mask beside the golden one's).
# matched: the composite with both greys on the golden window's scale, for photos brought to the golden board's light
# first (board/light.py): how dark a window is stays (a black resistor body against the dark mask of its bare lands).
REFERENCES = ("composite", "colour", "matched")


def check_depth(depth: int) -> None:
    if depth not in RESNET_DEPTHS:
        raise UnknownArchitecture(
            f"resnet{depth} is not a known depth; use one of " + ", ".join(f"resnet{d}" for d in RESNET_DEPTHS))


def check_detector_model(model: str) -> None:
    """A model yaml (ultralytics' own, or a path) or a local .pt: nothing is downloaded."""
    if model.endswith(".pt") and not Path(model).is_file():
        raise UnknownArchitecture(
            f"YOLO weights {model} not found; give a local .pt path or a model yaml such as yolov8n.yaml "
            "(nothing is downloaded)")
    if not model.endswith(DETECTOR_FILES):
        raise UnknownArchitecture(f"YOLO model must be a .yaml or a local .pt, got {model!r}")


def check_choice(what: str, value: object, allowed: tuple[str, ...], besides: str = "") -> None:
    """`besides`: what else may be given (" or none")."""
    if value not in allowed:
        raise UnknownArchitecture(f"unknown {what}={value!r}; use one of {', '.join(allowed)}{besides}")


def check_spec(spec: dict[str, Any]) -> None:
    """Raises UnknownArchitecture naming what is accepted where `spec` names an architecture or a setting this build
    does not know; the sizes and counts are the architectures' own to check when one is built."""
    name = str(spec.get("arch", "")).strip()
    check_choice("resize policy fit", spec.get("fit", "squash"), FITS)
    if spec.get("reference") is not None:  # a classifier's or a detector's golden comparison
        check_choice("reference", spec["reference"], REFERENCES, " or none")
    m = RESNET.match(name)
    if m:
        check_depth(int(m.group(1)))
        check_choice("head", spec.get("head", "classes"), HEADS)
        return
    if name.endswith(DETECTOR_FILES):
        check_detector_model(name)
        check_choice("detector mode", spec.get("mode", "verify"), MODES)
        return
    known = ", ".join(f"resnet{d}" for d in RESNET_DEPTHS)
    raise UnknownArchitecture(
        f"unknown architecture {name!r}: use a ResNet ({known}) or a YOLO model yaml / local .pt (e.g. yolov8n.yaml)")
