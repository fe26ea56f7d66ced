"""The camera set up for each rule set before its first board: the station's settings with the set's `camera:` over
them (routing/camera.py), so a product that needs a longer exposure or another region gets it at its changeover,
and the next product the station's own again.

A Line set-up (Line.set_ups): a changeover of rule set or of board asks the camera first, while nothing of the new
set is inside; a camera that refuses the settings refuses the changeover (the line serves what it served, the camera
keeps what it had), and a board that cannot start after all puts the camera back. The station's settings are what
the kiosk's settings file says; an engineer's change (POST /camera/settings) changes them, never a key the set in
force asks for (that is the rule file's to say).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..camera.settings import CameraSettings, parse_settings
from ..routing.rules import RuleSet

Say = Callable[[str], None]
Keep = Callable[[CameraSettings], None]  # the station's settings kept for the next start (OSError: not kept)


class SetByRecipe(ValueError):
    """A camera setting the rule set in force asks for: its rule file's to change, not the station's."""


class CameraChangeover:
    def __init__(self, camera: Any, rules: RuleSet, say: Say = lambda _m: None) -> None:
        """`camera`: the line's source's origin (a camera takes settings where it has `apply`); `rules`: the set the
        line starts with, whose settings the camera opens with."""
        self.camera = camera if hasattr(camera, "apply") else None
        self.say = say
        self.station: CameraSettings | None = self.camera.settings if self.camera is not None else None
        self.rules = rules  # the set whose settings the camera holds
        self.lock = threading.RLock()  # a changeover's set-up, or an engineer's change of the station's settings
        self._not_a_camera: set[str] = set()  # recipes told that their settings have no camera to go to
        if self.camera is not None and rules.camera:  # before the first frame: the camera opens with them
            self.camera.settings = rules.camera.over(self.station)
        self._absent(rules)

    def __call__(self, rules: RuleSet) -> Callable[[], None]:
        """Set the camera up for `rules`; how to undo it. ValueError naming the settings when the camera refuses."""
        with self.lock:
            return self._set_up(rules)

    def _set_up(self, rules: RuleSet) -> Callable[[], None]:
        held = self.rules
        if self.camera is None or self.station is None:
            self._absent(rules)
            self.rules = rules
            return lambda: setattr(self, "rules", held)
        was, size = self.camera.settings, self.camera.board_size
        wanted = rules.camera.over(self.station)
        if wanted != was:
            refused = self.camera.apply(wanted)
            if refused:
                raise ValueError(f"the camera refused {rules.recipe}'s settings ({self._said(rules)}): {refused}; "
                                 f"the line serves {held.recipe} with the camera as it was")
            self.say(f"camera set up for {rules.recipe}: {self._said(rules)}")
        self.rules, self.camera.board_size = rules, rules.board_size  # a scaled frame is mapped to the set's size

        def undo() -> None:
            with self.lock:
                self.rules, self.camera.board_size = held, size
                if wanted != was:
                    self.camera.apply(was)
        return undo

    def change_station(self, asked: dict[str, Any], source: str,
                       keep: Keep = lambda _s: None) -> tuple[CameraSettings, CameraSettings]:
        """An engineer's change: the station's settings with `asked` (SFNC names) over them, taken by the camera
        with the set in force's over them, then kept (`keep`: the settings file; its OSError puts the camera back).
        (before, after) as the camera holds them. SetByRecipe for a key the set in force asks for at another value
        (a form sending every field sends the set's own unchanged); ConfigError naming a bad value; ValueError with
        the camera's refusal (the camera as it was)."""
        with self.lock:
            if self.camera is None or self.station is None:
                raise RuntimeError("this line's source has no camera settings (a GenICam camera has)")
            held = self.camera.settings
            ours = self.rules.camera.keys()
            own = [k for k, v in asked.items() if k in ours and v != getattr(held, k)]
            if own:
                raise SetByRecipe(_set_by(own, self.rules.recipe))
            station = parse_settings({**self.station.to_json(), **{k: v for k, v in asked.items() if k not in ours}},
                                     source)
            wanted = self.rules.camera.over(station)
            refused = self.camera.apply(wanted)
            if refused:
                raise ValueError(refused)
            try:
                keep(station)
            except OSError:  # not kept for the next start: the camera goes back, so it and the file agree
                self.camera.apply(held)
                raise
            self.station = station
            return held, wanted

    def to_json(self) -> dict[str, Any]:
        """The station's settings and what the set in force asks for, for GET /camera."""
        return {"station": self.station.to_json() if self.station is not None else None,
                "recipe": self.rules.recipe, "recipe_settings": self.rules.camera.to_json()}

    def _said(self, rules: RuleSet) -> str:
        return rules.camera.said() or "the station's own settings"

    def _absent(self, rules: RuleSet) -> None:
        """A set asking for camera settings on a line without a camera to take them: said once per recipe."""
        if self.camera is None and rules.camera and rules.recipe not in self._not_a_camera:
            self._not_a_camera.add(rules.recipe)
            self.say(f"{rules.recipe} asks for camera settings ({rules.camera.said()}); this line's source is not a "
                     "GenICam camera, so they are not applied")


def _set_by(keys: list[str], recipe: str) -> str:
    one = len(keys) == 1
    it = "it" if one else "them"
    return (f"{', '.join(keys)} {'is' if one else 'are'} set by the rule set in force ({recipe}, its camera: "
            f"section): change {it} in its rule file (an edited rule file is applied live), or take {it} out there "
            f"to set {it} for the station")
