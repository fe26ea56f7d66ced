"""`inspector board revise`: a taught board carried to a new revision of its CAD or BOM (app/board_revise.py)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_revise(sub: argparse._SubParsersAction) -> None:
    from .common import photo_board_flags

    rev = sub.add_parser("revise", help="carry a taught board to a new revision of its CAD or BOM (an engineering "
                                        "change): the taught experts serve it, and only the places it changes get "
                                        "golden windows, from a photo of a board built to it")
    rev.add_argument("--rules", required=True, help="the taught rule set the line serves (board teach's "
                                                    "RULES.taught.yaml)")
    rev.add_argument("--revision", required=True, help="the new revision imported by `board import` (its own CAD, "
                                                       "BOM and options; the taught scale and side)")
    rev.add_argument("--zoo", help="the taught set's zoo (board teach's WORK/zoo): every type of the revision must "
                                   "have its expert there (without it: every type the taught set inspects)")
    rev.add_argument("--photo", help="a photo (or the line's frame) of a board built to the revision: the windows of "
                                     "parts fitted now, moved, or of another part number or package come from it, "
                                     "and the places of parts left off")
    photo_board_flags(rev)
    rev.add_argument("--looks-alike", default="", help="parts whose new part number looks as the old one (another "
                                                       "value of an unmarked chip: R3,R7 or R3-R7): their golden "
                                                       "windows are kept")
    rev.add_argument("--out", help="the revision's taught rule set (default: REVISION.taught.yaml)")
    rev.add_argument("--json", help="also write every change and what was done as JSON")
    rev.set_defaults(func=cmd_revise)


def cmd_revise(args: argparse.Namespace) -> int:
    from ..app.board_revise import RevisePlan, revise_board

    revision = Path(args.revision)
    out = Path(args.out) if args.out else revision.with_name(revision.stem + ".taught.yaml")
    plan = RevisePlan(Path(args.rules), revision, out, Path(args.photo) if args.photo else None, args.board,
                      Path(args.correction) if args.correction else None, args.looks_alike,
                      Path(args.zoo) if args.zoo else None)
    revised = revise_board(plan, print)
    print(revised.summary())
    if args.json:
        Path(args.json).write_text(json.dumps(revised.to_json(), indent=1), encoding="utf-8")
    return 0
