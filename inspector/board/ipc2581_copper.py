"""The pads an IPC-2581 package lists once for a pin number its copper flashes several times, put back.

A package's `Pin`s are numbered, and KiCad 9's export writes one `Pin` per number: a connector's two mounting pads,
both numbered MP, become one, while the step's copper layers still flash both, each a `Pad` tied to its part and pin
by `PinRef`. The window and the lands drawn for teaching want every pad, so a pin the copper flashes more often than
the package lists gets the missing pads where the copper has them (each its flash's own shape, else the size of the
package's pad of that number), in the part's footprint frame once its bottom reading is settled (bottom_fit.py).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from .design import PlacedPart, in_frame, named_refs, on_board
from .ipc2581_xml import value

Point = tuple[float, float]
CONDUCTOR = ("CONDUCTOR", "SIGNAL", "PLANE", "MIXED")


@dataclass(frozen=True)
class Flash:
    """One pad a copper layer flashes: its centre (board frame, mm), its shape's size where the dictionary gives
    it, and its turn on the board (degrees, counter-clockwise)."""

    at: Point
    size: tuple[float, float] | None
    turn: float


def pin_pads(root: ET.Element, step: ET.Element, scale: float, primitives: dict[str, tuple[float, float]]
             ) -> tuple[dict[tuple[str, str], Point], dict[tuple[str, str], list[Flash]]]:
    """Every pad the step's layer features tie to a part's pin (`PinRef`), in one walk: (part, pin number) -> the
    first place met on any layer (every layer's pad of one pin is centred alike: bottom_fit.py's evidence), and
    (part, pin number) -> every pad one copper layer flashes for it, of the conductor layers the one that flashes it
    most often (a pin's pads on the outer layer; an inner layer flashes a through-hole pin once)."""
    copper = {layer.get("name", "") for layer in root.iter("Layer")
              if layer.get("layerFunction", "").upper() in CONDUCTOR}
    first: dict[tuple[str, str], Point] = {}
    flashed: dict[tuple[str, str], list[Flash]] = {}
    for feature in step.iter("LayerFeature"):
        on_copper = feature.get("layerRef", "") in copper
        here: dict[tuple[str, str], list[Flash]] = defaultdict(list)
        for pad in feature.iter("Pad"):
            loc, pin = pad.find("Location"), pad.find("PinRef")
            if loc is None or pin is None or not pin.get("componentRef") or not pin.get("pin"):
                continue
            key, at = (pin.get("componentRef", ""), pin.get("pin", "")), (value(loc, "x") * scale,
                                                                          value(loc, "y") * scale)
            first.setdefault(key, at)
            if on_copper:
                shape, xform = pad.find("StandardPrimitiveRef"), pad.find("Xform")
                here[key].append(Flash(at, primitives.get(shape.get("id", "")) if shape is not None else None,
                                       value(xform, "rotation") if xform is not None else 0.0))
        for key, places in here.items():
            if len(places) > len(flashed.get(key, ())):
                flashed[key] = places
    return first, flashed


def with_every_flash(parts: list[PlacedPart], numbers: dict[str, tuple[str, ...]],
                     flashes: dict[tuple[str, str], list[Flash]]) -> tuple[list[PlacedPart], list[str]]:
    """`parts` with the pads their packages list once put back where the copper flashes them again (`numbers`:
    reference -> each of its pads' pin number, in the pads' order), and the references of the parts that got
    some."""
    out, grown = [], []
    for part in parts:
        mine = numbers.get(part.ref, ())
        counts = Counter(mine)
        added = []
        for number, listed in counts.items():
            places = flashes.get((part.ref, number), [])
            if len(places) <= listed:
                continue
            pads = [q for q, n in zip(part.pads, mine) if n == number]
            spare = list(places)
            for q in pads:  # each listed pad takes the flash nearest where it lands
                here = on_board(part, q.x, q.y)
                spare.remove(min(spare, key=lambda f: math.dist(f.at, here)))
            for flash in spare:
                x, y = in_frame(part, flash.at)
                w, h = (pads[0].w, pads[0].h) if flash.size is None else flash.size
                if flash.size is not None and round((flash.turn - part.rotation) / 90) % 2:
                    w, h = h, w  # a flash turned a quarter from its part lies across the footprint's frame
                added.append(replace(pads[0], x=x, y=y, w=w, h=h))
        if added:
            grown.append(part.ref)
            part = replace(part, pads=part.pads + tuple(added))
        out.append(part)
    return out, grown


def flashed_note(grown: list[str]) -> str:
    """The import's note naming the parts whose pads were put back."""
    return (f"{len(grown)} part(s) whose package lists one pin number once where the copper flashes it several "
            f"times (a connector's mounting pads): the other pads added where the copper has them: "
            f"{named_refs(grown)}")
