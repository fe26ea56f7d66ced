"""KiCad library convention (KLC) footprint names: the body a name states, for a file without footprints.

A KiCad position file names each part's footprint, and KiCad's own libraries put the body's size in the name:
`QFN-32-1EP_5x5mm_P0.5mm_EP3.45x3.45mm` is a 5 x 5 mm body, `CP_EIA-3528-21_Kemet-B` a tantalum of EIA size 3528
(3.5 x 2.8 mm). A body is taken from the name only where the body is what the window must show: a leadless package
(QFN, DFN, SON, LGA, BGA: its lands lie under it) or an EIA-sized two-terminal part (as a chip size is, library.py's
CHIP_BODY). A gull-wing package's name (`SOIC-8_3.9x4.9mm_P1.27mm`, `LQFP-48_7x7mm_P0.5mm`) states its
plastic, not its span across the leads, so it is asked for as any other package is, never made up. Rotation 0 is
the footprint's own: the first size along x.
"""
from __future__ import annotations

import re

# leadless families and their variants (VQFN, WDFN, TFBGA, X2SON ...): FAMILY-pins[-nEP]_WxLmm
_LEADLESS = re.compile(r"^(?:X2|[A-Z]{1,2})?(?:QFN|DFN|SON|LGA|BGA|MLF)-\d+(?:-\d+EP)?_"
                       r"(\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)mm", re.IGNORECASE)
# a tantalum's EIA size code, metric (length and width in 0.1 mm), and its height: `CP_EIA-3528-21_Kemet-B`
_EIA = re.compile(r"_EIA-(\d{2})(\d{2})-\d{2}(?!\d)")


def stated_body(package: str) -> tuple[float, float] | None:
    """The body (w, h) in mm at the footprint's zero rotation that a KLC name states, or None."""
    name = package.strip()
    m = _LEADLESS.match(name)
    if m:
        return float(m.group(1)), float(m.group(2))
    m = _EIA.search(name)
    if m:
        return int(m.group(1)) / 10, int(m.group(2)) / 10
    return None


# any size a name states, `_3.9x4.9mm_` (a gull-wing's plastic, a connector's shell): where a part is, not its window
_SIZE = re.compile(r"_(\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)mm(?:_|$)", re.IGNORECASE)


def stated_size(package: str) -> tuple[float, float] | None:
    """The first size (w, h) in mm a KLC name states, whatever it measures (a SOIC's plastic, not its leads' span):
    enough to say which pads lie about a part (gerber_parts.py), never its window. None where the name states none."""
    m = _SIZE.search(package.strip())
    return (float(m.group(1)), float(m.group(2))) if m else None
