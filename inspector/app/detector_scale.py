"""Whether a taught detector reads a rule set's windows at the scale it was taught at.

Why: a detector taught from a plant's labelled images learns defects at the size they have at its input, each image
fitted to that input whole. The line fits each part's window (its body and the rule set's crop margin) to the same
input, so where the windows are much smaller than the images it was taught on, a defect the camera sees at the same
size reaches the input that many times larger (and smaller where they are larger), and the detector, whose cells are
fixed in input pixels, can miss on the line what it finds in its own held-out images. Nothing else says so: the line
just finds less. It is said, never refused: images taken at another scale than the line's camera (a microscope, a
dataset of another line) may match the windows although their pixels do not.

What teaching saw is each version's `taught_on` (training/labelled/detector_sizing.taught_scale); a detector without
it (the demo's, one taught before it was recorded) is not judged.
"""
from __future__ import annotations

from typing import Any

from ..experts.zoo import Zoo
from ..routing.rules import RuleSet

FACTOR = 2.0  # within this factor either way is one scale: YOLO's neighbouring strides differ by two


def taught_on(zoo: Zoo, expert: str) -> dict[str, Any] | None:
    """What the served weights were taught on (`taught_on` of their version), or None where it is not recorded."""
    entry = zoo.entries.get(expert)
    if entry is None or entry.role != "detector":
        return None
    served = next((v for v in entry.versions if v.get("weights_sha256") == entry.weights_sha256), None)
    seen = (served or {}).get("taught_on")
    return seen if seen and seen.get("image_px") else None


def scale_notes(rules: RuleSet, zoo: Zoo) -> list[str]:
    """One line for each taught detector that reads some of this rule set's windows at another scale than it was
    taught at (FACTOR), naming the types, their windows and what a taught defect becomes; [] where none does."""
    windows: dict[str, dict[str, int]] = {}
    for comp in rules.components:
        if comp.detector and not comp.window:  # a bare board's window serves each difference's own crop
            windows.setdefault(comp.detector, {})[comp.name] = max(comp.size) + 2 * rules.crop_margin
    notes = []
    for expert, sides in sorted(windows.items()):
        seen = taught_on(zoo, expert)
        if seen is None:
            continue
        image = float(seen["image_px"])
        off = {name: side for name, side in sides.items() if not 1 / FACTOR <= image / side <= FACTOR}
        if not off:
            continue
        low, high = min(off.values()), max(off.values())
        ratios = [image / side for side in off.values()]
        box, size = seen.get("box_px"), zoo.entries[expert].spec.get("input_size")
        became = "" if not box or not size else (
            f" (its taught defects, about {box * size / image:.0f} px at its {size}-px input, would be about "
            f"{_span([box * size / side for side in off.values()], ' px')} there)")
        types = ", ".join(sorted(off)) if len(off) <= 4 else f"{', '.join(sorted(off)[:4])} and {len(off) - 4} more"
        notes.append(f"note: {expert} was taught on images of about {image:.0f} px a side, each fitted to its input "
                     f"whole; rule set {rules.recipe} serves it the windows of {types} "
                     f"({_span([low, high], ' px')}), fitted to the same input: a defect the camera sees at the same "
                     f"size reaches it {_sized(ratios)} than taught{became}. It may miss them there: retrain it on "
                     f"reviewed windows this rule set cuts (`inspector dataset export`, then `zoo train --expert "
                     f"{expert} --from`), or route it windows near the size of its images; where those images were "
                     f"taken at another scale than this line's camera, this is no concern")
    return notes


def _span(values: list[float], unit: str = "") -> str:
    """'12 px' or '12-40 px'."""
    low, high = round(min(values)), round(max(values))
    return f"{low}{unit}" if low == high else f"{low}-{high}{unit}"


def _sized(ratios: list[float]) -> str:
    """How much larger or smaller a defect reaches the input: '3.2x larger', '2.5-4x smaller', or both."""
    def times(values: list[float]) -> str:
        low, high = round(min(values), 1), round(max(values), 1)
        return f"{low:g}x" if low == high else f"{low:g}-{high:g}x"

    larger, smaller = [r for r in ratios if r > 1], [1 / r for r in ratios if r < 1]
    said = ([f"{times(larger)} larger"] if larger else []) + ([f"{times(smaller)} smaller"] if smaller else [])
    return " or ".join(said)
