"""The board's own identity in a rule set: where its serial code is printed and what a failed read does.

PCBs carry their serial as a DataMatrix (ECC200), sometimes a QR code, printed or lasered on free board
space. This module is only the schema; reading is ingest/identity.py, printing (synthetic boards)
ingest/synthetic.py. A read that fails is a NOREAD, the term line staff know: the rule set says whether such
a board is still inspected under `NOREAD-<inspection id>` and flagged, or refused as one board-level error.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..yamlio import Fields

SYMBOLOGIES = ("datamatrix", "qr")
NOREAD_POLICIES = ("flag", "refuse")  # flag: inspect as NOREAD-<id>, flagged; refuse: a board-level error
NOREAD = "NOREAD"


def is_noread(serial: str) -> bool:
    """A serial the line gave a board (or a panel's board) whose code it could not read."""
    return serial.startswith(f"{NOREAD}-")


@dataclass(frozen=True)
class SerialCode:
    """Where the code is (its centre in recipe px and the side of the square searched), or None: the whole board."""

    symbology: str = "datamatrix"
    at: tuple[int, int] | None = None
    size: int = 64  # side of the square region searched, px: the code and its quiet zone fit in it
    module_px: int = 3  # one module's side as printed (the synthetic renderer prints at this size)
    on_noread: str = "flag"

    def box(self) -> tuple[int, int, int, int] | None:
        """x0, y0, x1, y1 of the region on the recipe's board; None when the whole board is searched."""
        if self.at is None:
            return None
        half = self.size // 2
        return self.at[0] - half, self.at[1] - half, self.at[0] + half, self.at[1] + half


_KEYS = {"symbology", "at", "size", "module_px", "on_noread"}


def parse_serial_code(f: Fields, board: tuple[int, int]) -> SerialCode:
    """The `serial_code:` block of a rule set, every error at its line."""
    f.unknown(_KEYS)
    at = f.get("at")
    if at is not None and not (isinstance(at, list) and len(at) == 2
                               and all(isinstance(v, int) and not isinstance(v, bool) for v in at)):
        raise f.error("at", f"must be [x, y], the code's centre in integer board pixels, got {at!r}")
    code = parse_code_style(f, tuple(at) if at is not None else None)  # type: ignore[arg-type]
    if not fits(code, board):
        raise f.error("at", f"the code's region {code.size}x{code.size} px around {code.at} does not fit on the "
                            f"{board[0]}x{board[1]} board; move it inwards or make size smaller")
    return code


def parse_code_style(f: Fields, at: tuple[int, int] | None) -> SerialCode:
    """A code's symbology, region size, module size and NOREAD policy from `f` (a board's `serial_code:` or a
    panel's `codes:`), placed at `at`; every error at its line."""
    symbology = f.text("symbology", "datamatrix")
    if symbology not in SYMBOLOGIES:
        raise f.error("symbology", f"must be one of {', '.join(SYMBOLOGIES)}, got {symbology!r}")
    policy = f.text("on_noread", "flag")
    if policy not in NOREAD_POLICIES:
        raise f.error("on_noread", f"must be flag (inspect as NOREAD-<id> and flag it) or refuse (a board-level "
                                   f"error), got {policy!r}")
    return SerialCode(symbology, at, f.number("size", 64, minimum=16, integer=True),
                      f.number("module_px", 3, minimum=1, maximum=16, integer=True), policy)


def fits(code: SerialCode, board: tuple[int, int]) -> bool:
    """The code's region lies on the board (or the code is searched on the whole board)."""
    box = code.box()
    return box is None or (box[0] >= 0 and box[1] >= 0 and box[2] < board[0] and box[3] < board[1])
