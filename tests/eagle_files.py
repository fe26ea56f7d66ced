"""Eagle 9 boards as Eagle writes them, cut to what a test needs: one 40 x 30 mm outline on Dimension, the test's
own packages, elements and design rules."""
from __future__ import annotations

LAYERS = {1: ("Top", 4, 1), 16: ("Bottom", 1, 1), 20: ("Dimension", 24, 1), 29: ("tStop", 7, 3), 51: ("tDocu", 7, 1)}


def eagle_board(packages: str, elements: str, designrules: str = "") -> str:
    """A board file: the outline, a library named `plant` holding `packages`, then `designrules` and `elements`."""
    layers = "\n".join(f'<layer number="{n}" name="{name}" color="{colour}" fill="{fill}" visible="yes" active="yes"/>'
                       for n, (name, colour, fill) in LAYERS.items())
    return f"""<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE eagle SYSTEM "eagle.dtd">
<eagle version="9.6.2">
<drawing>
<settings><setting alwaysvectorfont="no"/></settings>
<grid distance="0.1" unitdist="inch" unit="inch"/>
<layers>
{layers}
</layers>
<board>
<plain>
<wire x1="0" y1="0" x2="40" y2="0" width="0" layer="20"/>
<wire x1="40" y1="0" x2="40" y2="30" width="0" layer="20"/>
<wire x1="40" y1="30" x2="0" y2="30" width="0" layer="20"/>
<wire x1="0" y1="30" x2="0" y2="0" width="0" layer="20"/>
</plain>
<libraries>
<library name="plant">
<packages>
{packages.strip()}
</packages>
</library>
</libraries>
{designrules.strip()}
<elements>
{elements.strip()}
</elements>
<signals/>
</board>
</drawing>
</eagle>
"""
