"""IPC-7351 land-pattern names: the body a name states, for a file without footprints (a centroid file).

Altium's libraries and many plants' name packages by IPC-7351B's convention, and the name carries the package's
size: `RESC1005X40N` a chip 1.0 x 0.5 mm, `QFN50P400X400X100-25N` a 4.00 x 4.00 mm body, `QFP50P1200X1200X160-64N`
12.00 mm across its leads both ways. A body is given only where the name states it; a gull-wing package's name
(`SOIC127P600X175-8N`) gives its span across the leads but not its length, so its body is asked for as any other
package's is (the library's `body:`), never made up. Which class each family is lives in packages.yaml's patterns,
with the other names. Rotation 0 is IPC's zero: a chip's length along x, a QFN's width along x.
"""
from __future__ import annotations

import re

# two-terminal and molded bodies: PREFIX + body length and width in 0.1 mm (an even count of digits, halved) + X ...
_BODY_TENTHS = re.compile(r"^(RESC|RESM|RESMELF|CAPC|CAPCP|CAPM|CAPMP|INDC|INDM|INDP|BEADC|DIOC|DIOM|DIOMELF|LEDC|"
                          r"LEDM|FUSC|FUSM|SOD|SODFL)(\d{4}|\d{6})X\d", re.IGNORECASE)
# aluminium electrolytic: CAPAE + base (square) in 0.01 mm + X + height
_BASE_HUNDREDTHS = re.compile(r"^CAPAE(\d{3,4})X\d", re.IGNORECASE)
# no-lead and array bodies: PREFIX + pitch P + width X length X height (0.01 mm) - pins
_BODY_PITCHED = re.compile(r"^(QFN|SON|DFN|PQFN|PSON|LGA|RESCAV|RESCAF|CAPCAV|CAPCAF|INDCAV)\d+P"
                           r"(\d{3,5})X(\d{3,5})X\d+-", re.IGNORECASE)
# quad flat packs: PREFIX + pitch P + lead span X lead span X height (0.01 mm) - pins: the extent a window must show
_SPAN_QUAD = re.compile(r"^(QFP|CQFP|BQFP|PQFP|TQFP)\d+P(\d{3,5})X(\d{3,5})X\d+-", re.IGNORECASE)
# ball grid arrays: BGA + pins + C|N + pitch P + columns X rows _ body length X body width X height (0.01 mm)
_BGA = re.compile(r"^BGAS?\d+[CN]\d+(?:X\d+)?P\d+X\d+_(\d{3,5})X(\d{3,5})X\d+", re.IGNORECASE)


def stated_body(package: str) -> tuple[float, float] | None:
    """The body (w, h) in mm at IPC's zero rotation that an IPC-7351 name states, or None."""
    name = package.strip()
    m = _BODY_TENTHS.match(name)
    if m:
        digits = m.group(2)
        half = len(digits) // 2
        return int(digits[:half]) / 10, int(digits[half:]) / 10
    m = _BASE_HUNDREDTHS.match(name)
    if m:
        side = int(m.group(1)) / 100
        return side, side
    for pattern in (_BODY_PITCHED, _SPAN_QUAD):
        m = pattern.match(name)
        if m:
            return int(m.group(2)) / 100, int(m.group(3)) / 100
    m = _BGA.match(name)
    if m:
        return int(m.group(1)) / 100, int(m.group(2)) / 100
    return None
