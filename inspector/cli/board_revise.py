"""`inspector board revise`: a taught board carried to a new revision of its CAD or BOM (app/board_revise.py), on this
machine or, with `--kiosk`, on the line's kiosk, which revises the board it serves (app/line_revision.py)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .exits import UsageError


def add_revise(sub: argparse._SubParsersAction) -> None:
    from .common import photo_board_flags

    rev = sub.add_parser("revise", help="carry a taught board to a new revision of its CAD or BOM (an engineering "
                                        "change): the taught experts serve it, and only the places it changes get "
                                        "golden windows, from a photo of a board built to it")
    rev.add_argument("--rules", help="the taught rule set the line serves (board teach's RULES.taught.yaml; not with "
                                     "--kiosk, which revises its own)")
    rev.add_argument("--revision", required=True, help="the new revision imported by `board import` (its own CAD, "
                                                       "BOM and options; the taught scale and side)")
    rev.add_argument("--zoo", help="the taught set's zoo (board teach's WORK/zoo): every type of the revision must "
                                   "have its expert there (without it: every type the taught set inspects)")
    rev.add_argument("--photo", help="a photo (or the line's frame) of a board built to the revision: the windows of "
                                     "parts fitted now, moved, or of another part number or package come from it, "
                                     "and the places of parts left off; with --kiosk, `line` takes the newest board "
                                     "its line inspected")
    photo_board_flags(rev)
    rev.add_argument("--looks-alike", default="", help="parts whose new part number looks as the old one (another "
                                                       "value of an unmarked chip: R3,R7 or R3-R7): their golden "
                                                       "windows are kept")
    rev.add_argument("--out", help="the revision's taught rule set (default: REVISION.taught.yaml; not with --kiosk)")
    rev.add_argument("--json", help="also write every change and what was done as JSON")
    kiosk = rev.add_argument_group("on the line's kiosk")
    kiosk.add_argument("--kiosk", metavar="URL", help="the running kiosk (https://line-box:9108) revises the board it "
                                                      "serves with its zoo and writes the revised set into its rule "
                                                      "folder, as a recipe; nothing is served without --serve")
    kiosk.add_argument("--token-file", help="your API token file (`inspector user token NAME --out F`; an engineer's)")
    kiosk.add_argument("--name", help="the revised set's name there (NAME.taught.yaml; default: the revision's file "
                                      "name)")
    kiosk.add_argument("--replace", action="store_true", help="write over a revised set of that name not in force")
    kiosk.add_argument("--serve", action="store_true", help="then change the line over to it, from its next board "
                                                            "(and at the kiosk's next start)")
    kiosk.add_argument("--reason", help="why, for the audit trail")
    rev.set_defaults(func=cmd_revise)


def cmd_revise(args: argparse.Namespace) -> int:
    if args.kiosk:
        return _on_kiosk(args)
    for flag in ("name", "replace", "serve", "token_file", "reason"):
        if getattr(args, flag):
            raise UsageError(f"--{flag.replace('_', '-')} goes with --kiosk")
    if not args.rules:
        raise UsageError("name the taught rule set (--rules), or the line's kiosk that serves it (--kiosk URL)")
    if args.photo == "line":
        raise UsageError("--photo line takes the newest board a kiosk's line inspected: it goes with --kiosk")
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


def _on_kiosk(args: argparse.Namespace) -> int:
    """The kiosk revises the board it serves; with --serve, the line is changed over to the revised set."""
    from ..app.kiosk_client import KioskClient
    from ..app.line_revision import revision_request
    from ..endpoint import read_token

    for flag in ("rules", "zoo", "out"):
        if getattr(args, flag):
            raise UsageError(f"--{flag} is not given with --kiosk: the kiosk revises the taught set it serves, with "
                             "its zoo, into its own rule folder")
    photo = args.photo if args.photo in (None, "line") else Path(args.photo)
    body = revision_request(Path(args.revision), args.name, photo, args.board, args.looks_alike, args.replace,
                            Path(args.correction) if args.correction else None)
    client = KioskClient(args.kiosk, read_token(args.token_file))
    done = client.revise(body, args.reason)
    print(done["table"])
    for line in done["notes"]:
        print(line)
    print(f"the kiosk wrote {done['file']} (recipe {done['recipe']}, version {done['version']}) into its rule folder")
    if done.get("same_recipe"):
        print(f"note: {', '.join(done['same_recipe'])} there name the same recipe {done['recipe']}: a PLC naming it "
              "gets the first; put the revision in force by its file name, or import it with --recipe NAME")
    if args.json:
        Path(args.json).write_text(json.dumps(done, indent=1), encoding="utf-8")
    if not args.serve:
        print(f"not served: `inspector board revise ... --serve`, the dashboard, or a changeover to "
              f"{Path(done['file']).stem} puts it in force")
        return 0
    served = client.changeover(Path(done["file"]).stem, args.reason or f"the revision {done['file']}")
    print(f"served: {served['recipe']} {served['version']} ({served['file']}) from the line's next board on")
    for note in served.get("notes") or []:
        print(f"note: {note}")
    return 0
