"""How a bottom part wears its footprint is read from where the file places its pins (board/bottom_fit.py).

The pins' board places here are worked out by each reading's own words (turn the package, then mirror it; mirror,
then turn; ...), not by the module's arithmetic, and the chosen footprint is checked by where the design's own
convention (design.py: the footprint frame turned counter-clockwise, y up) puts its pads.
"""
from __future__ import annotations

import math

import pytest

from inspector.board.bottom_fit import (
    DRAWN_MIRRORED,
    DRAWN_MIRRORED_BELOW,
    MIRRORED_THEN_TURNED,
    READINGS,
    TURNED_THEN_MIRRORED,
    bottom_footprints,
)
from inspector.board.design import Pad, PlacedPart

SOT23 = (Pad(-0.95, -1.1, 0.6, 0.7), Pad(0.95, -1.1, 0.6, 0.7), Pad(0.0, 1.1, 0.6, 0.7))  # three pins, no symmetry
CHIP = (Pad(-0.8, 0.0, 0.9, 0.95), Pad(0.8, 0.0, 0.9, 0.95))


def _turn(p: tuple[float, float], ccw: float) -> tuple[float, float]:
    a = math.radians(ccw)
    return p[0] * math.cos(a) - p[1] * math.sin(a), p[0] * math.sin(a) + p[1] * math.cos(a)


def _mirror(p: tuple[float, float]) -> tuple[float, float]:
    return -p[0], p[1]


# each reading in its own words: a package pin (x, y) of a part rotated `ccw` -> its place about the part's origin
IN_WORDS = {
    TURNED_THEN_MIRRORED: lambda p, ccw: _mirror(_turn(p, ccw)),
    MIRRORED_THEN_TURNED: lambda p, ccw: _turn(_mirror(p), ccw),
    DRAWN_MIRRORED: lambda p, ccw: _turn(p, ccw),
    DRAWN_MIRRORED_BELOW: lambda p, ccw: _turn(p, -ccw),
}


def _part(ref: str, pads: tuple[Pad, ...], x: float, y: float, ccw: float, side: str = "bottom") -> PlacedPart:
    return PlacedPart(ref, "", "pkg", x, y, ccw, side, pads, (-1.5, -0.7, 1.0, 0.9))


def _placed(part: PlacedPart, reading) -> list[tuple[tuple[float, float], tuple[float, float]]]:  # noqa: ANN001
    out = []
    for q in part.pads:
        dx, dy = IN_WORDS[reading]((q.x, q.y), part.rotation)
        out.append(((q.x, q.y), (part.x_mm + dx, part.y_mm + dy)))
    return out


def _where(part: PlacedPart) -> list[tuple[float, float]]:
    """The design's own convention: each pad of the footprint frame turned counter-clockwise, about the origin."""
    return [(part.x_mm + _turn((q.x, q.y), part.rotation)[0], part.y_mm + _turn((q.x, q.y), part.rotation)[1])
            for q in part.pads]


@pytest.mark.parametrize("reading", READINGS, ids=lambda r: r.says.split(" (")[0])
def test_each_reading_is_recovered_from_the_pins_and_puts_every_pad_where_the_file_says(reading) -> None:  # noqa: ANN001
    parts = [_part("U1", SOT23, 30.0, 10.0, 90.0), _part("U2", SOT23, 12.0, 4.0, 30.0),
             _part("R1", CHIP, 5.0, 5.0, 90.0), _part("R9", CHIP, 8.0, 5.0, 0.0, side="top")]
    pins = {p.ref: _placed(p, reading) for p in parts if p.side == "bottom"}
    out, notes = bottom_footprints(parts, pins, TURNED_THEN_MIRRORED, "unused", "job")
    by = {p.ref: p for p in out}
    for ref in ("U1", "U2", "R1"):
        want = [b for _a, b in pins[ref]]
        assert max(math.dist(a, b) for a, b in zip(_where(by[ref]), want)) < 1e-9, ref
    assert by["R9"] == parts[3]  # a top part is left as it was read
    assert notes == [f"job: bottom parts read as {reading.says}: where the file places their pins says so (3 of the 3 "
                     "bottom parts whose pins tell the readings apart)"]
    # the body is worn as the pads are: mirrored with them where the reading mirrors the package
    assert by["U1"].body == ((-1.0, -0.7, 1.5, 0.9) if reading.mirror else (-1.5, -0.7, 1.0, 0.9))


def test_one_reading_holds_for_the_file_and_symmetric_and_pinless_parts_follow_it() -> None:
    # a two-pin chip at 0 degrees fits both mirroring readings; at 90 it fits one of them and a drawn-mirrored one:
    # only the file's reading fits both, and the part whose file gives no pins wears it too
    parts = [_part("R1", CHIP, 5.0, 5.0, 0.0), _part("R2", CHIP, 9.0, 5.0, 90.0), _part("U1", SOT23, 20.0, 9.0, 90.0)]
    pins = {"R1": _placed(parts[0], MIRRORED_THEN_TURNED), "R2": _placed(parts[1], MIRRORED_THEN_TURNED)}
    out, notes = bottom_footprints(parts, pins, TURNED_THEN_MIRRORED, "unused", "job")
    assert "read as mirrored about the y axis, then turned" in notes[0] and "(2 of the 2" in notes[0]
    by = {p.ref: p for p in out}
    want = [b for _a, b in _placed(parts[2], MIRRORED_THEN_TURNED)]
    assert max(math.dist(a, b) for a, b in zip(_where(by["U1"]), want)) < 1e-9


def test_no_pins_take_the_formats_reading_and_the_note_says_to_check() -> None:
    parts = [_part("U1", SOT23, 30.0, 10.0, 90.0)]
    out, notes = bottom_footprints(parts, {}, TURNED_THEN_MIRRORED, "as the standard has it", "job")
    assert out[0].rotation == 270.0 and [q.x for q in out[0].pads] == [0.95, -0.95, 0.0]
    assert notes == ["job: the file does not say where its bottom parts' pins land in a way that tells how to read "
                     f"them: read as {TURNED_THEN_MIRRORED.says}, as the standard has it; check a bottom part's "
                     "window in the preview"]
    assert bottom_footprints([_part("R1", CHIP, 0, 0, 0, side="top")], {}, TURNED_THEN_MIRRORED, "", "job") == (
        [_part("R1", CHIP, 0, 0, 0, side="top")], [])


def test_a_part_whose_own_pins_say_otherwise_wears_its_own_and_one_no_reading_fits_is_put_on_its_pins() -> None:
    # an exporter that drew U3's package mirrored already (its pins fit only that), and U4's pins where no reading of
    # its package puts them (stretched): U3 wears its own reading, U4's pads go where the file places its pins
    parts = [_part("U1", SOT23, 30.0, 10.0, 90.0), _part("U2", SOT23, 10.0, 10.0, 90.0),
             _part("U3", SOT23, 20.0, 10.0, 90.0), _part("U4", SOT23, 40.0, 10.0, 90.0)]
    stretched = [((q.x, q.y), (40.0 + q.x * 1.3, 10.0 + q.y)) for q in SOT23]
    pins = {"U1": _placed(parts[0], TURNED_THEN_MIRRORED), "U2": _placed(parts[1], TURNED_THEN_MIRRORED),
            "U3": _placed(parts[2], DRAWN_MIRRORED), "U4": stretched}
    out, notes = bottom_footprints(parts, pins, MIRRORED_THEN_TURNED, "unused", "job")
    assert f"read as {TURNED_THEN_MIRRORED.says}" in notes[0] and "(2 of the 3" in notes[0]
    assert notes[1:] == ["job: 1 bottom part(s) read otherwise, as their own pins show (their packages drawn another "
                         "way): U3",
                         "job: 1 bottom part(s) whose package no reading puts on the pins the file places: their "
                         "pads put where the file's pins are: U4; check their windows in the preview"]
    by = {p.ref: p for p in out}
    for ref, want in (("U3", [b for _a, b in pins["U3"]]), ("U4", [b for _a, b in stretched])):
        assert max(math.dist(a, b) for a, b in zip(_where(by[ref]), want)) < 1e-9, ref
    assert {p.ref: p.rotation for p in out if p.ref != "U4"} == {"U1": 270.0, "U2": 270.0, "U3": 90.0}
