"""A panel's boards' own serials: each board's code read where the rule set puts it (routing/panel.py `codes:`), or
what the machine before said of it.

After depanelling an MES traces each board by its own code, so a panel's result names every board's serial beside
the panel's. A board whose code does not read goes by `NOREAD-<inspection id>-<position>`, the panel's NOREAD with
its position: never another board's serial, never a guess. Two boards that read the same text are both NOREAD (one
of them is misprinted and nothing says which), and a board whose code contradicts the serial the machine before
handed on for it is NOREAD too, with the reason, as the panel's own identity is treated (app/line.py).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..routing.identity import NOREAD, SerialCode
from .identity import CodeRead, read_code


def noread_unit(inspection_id: str, position: int) -> str:
    """The serial a panel's board goes by when its code cannot be read."""
    return f"{NOREAD}-{inspection_id[:8]}-{position}"


@dataclass
class UnitSerials:
    """Each board's serial by position, and why the unread ones were not read."""

    serials: dict[int, str] = field(default_factory=dict)
    unread: dict[int, str] = field(default_factory=dict)  # position -> the reason (its serial is NOREAD-...)
    mismatched: list[int] = field(default_factory=list)  # ... of which the code contradicted the machine before


def read_board_codes(image: np.ndarray, codes: Mapping[int, SerialCode], matrix: np.ndarray | None,
                     skip: Iterable[int] = ()) -> dict[int, CodeRead]:
    """Each board's code read through the registration `matrix` (recipe px -> image px, or None: as placed); the
    boards in `skip` (x-outs, not inspected) are not read."""
    gone = set(skip)
    return {k: read_code(image, code, matrix) for k, code in sorted(codes.items()) if k not in gone}


def unit_serials(reads: Mapping[int, CodeRead], inspection_id: str, upstream: Mapping[int, str] | None = None,
                 skip: Iterable[int] = ()) -> UnitSerials:
    """The boards' serials from their reads, and from `upstream` (position -> the serial the machine before handed
    on) for a board the rule set gives no code; x-outs in `skip` get none."""
    upstream, gone = upstream or {}, set(skip)
    out = UnitSerials()
    for k, serial in upstream.items():
        if k not in reads and k not in gone and serial:
            out.serials[k] = serial
    for k, code in reads.items():
        said = upstream.get(k)
        if not code.ok:
            out.unread[k] = code.reason
        elif said and said != code.text:
            out.unread[k] = f"upstream says {said!r}, the board's code reads {code.text!r}"
            out.mismatched.append(k)
        else:
            out.serials[k] = code.text  # type: ignore[assignment]
    texts: dict[str, list[int]] = {}
    for k, serial in out.serials.items():
        texts.setdefault(serial, []).append(k)
    for serial, where in texts.items():
        if len(where) > 1:
            for k in where:
                out.unread[k] = f"boards {', '.join(map(str, where))} read the same code {serial!r}"
    for k in out.unread:
        out.serials[k] = noread_unit(inspection_id, k)
    out.serials = dict(sorted(out.serials.items()))
    return out
