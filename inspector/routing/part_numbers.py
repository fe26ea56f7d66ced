"""What the plant buys for each place: `part_numbers: {REF: PART_NUMBER}`, the bill of materials' part number of
every inspected part (written by `inspector board import --bom`, board/bom_parts.py), so a finding names the part
that rework fetches and an MES counts defects by (results/cfx.py's `PartNumber`; without one, the component type).

    part_numbers:
      R7: RC0402FR-075K1L
      U3: "PRTR5V0U2AX,235"
"""
from __future__ import annotations

from ..yamlio import Fields


def parse_part_numbers(f: Fields, refs: set[str]) -> dict[str, str]:
    """`part_numbers: {REF: PART_NUMBER}` -> REF -> part number, every error at its line."""
    out: dict[str, str] = {}
    for ref, number in f.data.items():
        if str(ref) not in refs:
            raise f.error(ref, "is no inspected part of this board: a part number names a placement's reference "
                               "(REF under a component type's `at:`)")
        if not isinstance(number, (str, int)) or isinstance(number, bool) or not str(number).strip():
            raise f.error(ref, f"must be the part's number as the BOM gives it (text), got {number!r}")
        out[str(ref)] = str(number).strip()
    return out
