"""The camera settings a board's photos were taken with, held against what its rule set asks of the camera.

Teaching learns good parts from the golden photos as their camera made them; the line should see boards the same
way. Golden photos taken through the line's camera (`inspector camera photos`) say their settings
(camera/photo_settings.py), and the taught rule set asks the camera for those (`camera:`, taken at the product's
changeover): the first golden photo that says them decides, over what the imported set asked, and every photo taken
otherwise is named. A check's photos taken at other settings than the set asks are named too: their flags may be
the camera's, not the board's. Photos that say nothing (a phone's) change nothing and are not guessed at.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..camera.photo_settings import TakenWith, taken_with
from ..camera.settings import features_said
from ..routing.rules import RuleSet


@dataclass
class PhotoCamera:
    """What teaching writes under `camera:` (None: the set's own, left as it was) and why, for the engineer."""
    camera: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    source: str = ""  # `golden-01.png, by camera 40012345 (acA1920) at 2026-12-07T...`: the head comment's


def taught_camera(rules: RuleSet, photos: list[Path]) -> PhotoCamera:
    """The camera settings a set taught from `photos` asks for: the rule set's own with the first photo's that says
    its settings over them."""
    said = [(p, taken_with(p)) for p in photos]
    first = next(((p, t) for p, t in said if t is not None), None)
    if first is None:
        note = ("the golden photos do not say the camera settings they were taken with (not taken by `inspector "
                "camera photos`): the taught set asks the camera for "
                + (f"what the rule set asked ({rules.camera.said()})" if rules.camera else "nothing of its own"))
        return PhotoCamera(None, [note])
    path, taken = first
    asked = rules.camera.to_json()
    camera = {**asked, **taken.values()}
    source = (f"{path.name}, by {taken.by()}" + (f" at {taken.taken_at}" if taken.taken_at else "")
              + (f", corrected ({taken.corrected})" if taken.corrected else ""))
    notes = [f"camera: the taught set asks {taken.said()}, as {source} was taken"]
    replaced = taken.differs(asked)
    if replaced:
        notes.append("the rule set asked " + features_said((k, a) for k, _v, a in replaced)
                     + "; the golden photos were taken otherwise, and the line takes its boards as they were")
    for p, t in said:
        if p == path:
            continue
        if t is None:
            notes.append(f"{p.name} does not say its camera settings: teaching used it as it is")
            continue
        other = t.differs(taken.values())
        if other:
            notes.append(f"{p.name} was taken at " + features_said((k, v) for k, v, _a in other)
                         + f" (the taught set asks {features_said((k, a) for k, _v, a in other)}): the experts "
                         "learn its look too, but the line runs at the first photo's")
        if dict(t.camera).get("serial") != dict(taken.camera).get("serial"):
            notes.append(f"{p.name} was taken by {t.by()}, {path.name} by {taken.by()}")
        if t.corrected != taken.corrected:
            notes.append(f"{p.name} was {_correction(t)}, {path.name} {_correction(taken)}: the line corrects its "
                         "frames one way")
    return PhotoCamera(camera, notes, source)


def checked_camera(rules: RuleSet, photos: list[Path]) -> list[str]:
    """A note per photo taken at other settings than the rule set asks of the camera (none where it asks none)."""
    if not rules.camera:
        return []
    asked = rules.camera.to_json()
    notes = []
    for p in photos:
        t: TakenWith | None = taken_with(p)
        if t is None:
            continue
        other = t.differs(asked)
        if other:
            notes.append(f"{p.name} was taken at " + features_said((k, v) for k, v, _a in other)
                         + f"; {rules.recipe} asks " + features_said((k, a) for k, _v, a in other)
                         + ": what it flags may be the camera's, not the board's")
    return notes


def _correction(taken: TakenWith) -> str:
    return f"corrected ({taken.corrected})" if taken.corrected else "not corrected"
