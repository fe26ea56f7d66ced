"""A rule set for the bottom side (`board import --side bottom`) is the board as the camera over its bottom sees it,
turned over about its vertical axis: each land where Eagle's own transform puts it, mirrored, and the renderer
drawing the lands there."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from inspector.board.eagle import read_eagle
from inspector.board.library import load_library
from inspector.board.to_rules import import_design
from inspector.routing.rules import parse_rules

from .eagle_files import eagle_board
from .test_board_import import _lands_drawn_where_the_geometry_puts_them

# a package asymmetric left to right (a DPAK's small gate pad and large tab), placed on top and mirrored twice to the
# bottom: Eagle turns the package by the angle, then mirrors it about the y axis
BOARD = eagle_board("""
<package name="TO-252">
<smd name="G" x="-1.5" y="0" dx="0.6" dy="0.6" layer="1"/>
<smd name="TAB" x="1" y="0" dx="2" dy="1.5" layer="1"/>
</package>
""", """
<element name="Q1" library="plant" package="TO-252" value="" x="10" y="15"/>
<element name="Q2" library="plant" package="TO-252" value="" x="30" y="10" rot="MR0"/>
<element name="Q3" library="plant" package="TO-252" value="" x="30" y="22" rot="MR90"/>
""")


def _eagle_lands(x: float, y: float, degrees: float) -> dict[str, tuple[float, float]]:
    """Where Eagle puts a mirrored element's pads on the board: each turned by the angle, then x negated."""
    out = {}
    for name, (lx, ly) in {"G": (-1.5, 0.0), "TAB": (1.0, 0.0)}.items():
        t = np.radians(degrees)
        rx, ry = lx * np.cos(t) - ly * np.sin(t), lx * np.sin(t) + ly * np.cos(t)
        out[name] = (x - rx, y + ry)
    return out


def test_the_bottom_sides_rule_set_is_the_board_seen_from_below(tmp_path: Path) -> None:
    from inspector.ingest.synthetic import render_board

    (tmp_path / "b.brd").write_text(BOARD, encoding="utf-8")
    design = read_eagle(tmp_path / "b.brd")
    imported = import_design(design, load_library(), 20.0, side="bottom", recipe="b-bottom")
    fates = {f.ref: f for f in imported.fates}
    assert {r for r, f in fates.items() if f.inspected} == {"Q2", "Q3"} and "top side" in fates["Q1"].reason
    assert (fates["Q2"].x_mm, fates["Q2"].y_mm) == (30.0, 10.0)  # the file's own place, as the import's JSON says
    ox, oy = imported.origin_mm
    for ref, (x, y, degrees) in {"Q2": (30.0, 10.0, 0.0), "Q3": (30.0, 22.0, 90.0)}.items():
        pads = imported.geometry.pads[ref]
        by_area = sorted(pads, key=lambda r: (r[2] - r[0]) * (r[3] - r[1]))
        for name, (x0, y0, x1, y1) in zip(("G", "TAB"), by_area):
            bx, by = _eagle_lands(x, y, degrees)[name]
            # seen from below: the board's x runs the other way (its y, up in Eagle, runs down the image as ever)
            u, v = (-bx - ox) * 20.0, (-by - oy) * 20.0
            assert abs((x0 + x1) / 2 - u) < 1.0 and abs((y0 + y1) / 2 - v) < 1.0, (ref, name, (x0, y0, x1, y1), u, v)
    # the part at the right of the top view is at the left of the view from below
    assert (imported.geometry.pads["Q2"][0][0] + imported.geometry.pads["Q2"][0][2]) / 2 < imported.board_px[0] / 2
    rules = parse_rules(imported.rules_text, str(tmp_path / "b-bottom.yaml"))
    image = render_board(rules, "B1", np.random.default_rng(0), rates={}).image
    assert _lands_drawn_where_the_geometry_puts_them(imported, rules, image) == 4
    # the top side's rule set is the top view, as before: Q1's tab to the right of its gate
    top = import_design(design, load_library(), 20.0, side="top")
    gate, tab = sorted(top.geometry.pads["Q1"], key=lambda r: (r[2] - r[0]) * (r[3] - r[1]))
    assert gate[0] < tab[0]
