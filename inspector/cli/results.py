"""The results' commands: export to CSV, prune past the retention."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import data_of, database_flags, db_url


def cmd_export(args: argparse.Namespace) -> int:
    from ..results.export import export_csv
    from ..results.store import Filters, ResultStore, parse_when

    store = ResultStore(db_url(args))
    filters = Filters(since=parse_when(args.since) if args.since else None,
                      until=parse_when(args.until) if args.until else None,
                      board=args.board, verdict=args.verdict, component=args.component)
    if args.csv == "-":
        n = export_csv(store, sys.stdout, filters)
    else:
        with open(args.csv, "w", newline="", encoding="utf-8") as out:
            n = export_csv(store, out, filters)
    print(f"{n} component results exported to {args.csv}", file=sys.stderr)
    return 0


def cmd_db_prune(args: argparse.Namespace) -> int:
    from ..results.retention import prune
    from ..results.store import ResultStore

    data = data_of(args)
    store = ResultStore(db_url(args))
    report = prune(store, data / "crops", Path(args.archive) if args.archive else None, args.retain_days)
    print(report.line(args.retain_days))
    return 1 if report.errors else 0


def add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--csv", required=True, help="output file, or - for standard output")
    p.add_argument("--since", help="ISO time, inclusive; with an offset (+02:00, Z) or else the box's local time")
    p.add_argument("--until", help="ISO time, exclusive; with an offset (+02:00, Z) or else the box's local time")
    p.add_argument("--board", help="one board serial")
    p.add_argument("--verdict", choices=["pass", "fail", "error"], help="component verdict")
    p.add_argument("--component", help="one component type (R0402, ...)")
    database_flags(p)
    p.set_defaults(func=cmd_export)


def add_db(p: argparse.ArgumentParser) -> None:
    db_sub = p.add_subparsers(dest="db_command", required=True)
    prune = db_sub.add_parser("prune", help="delete boards, kept crops and archived images older than the retention")
    prune.add_argument("--retain-days", type=float, required=True, help="keep this many days")
    prune.add_argument("--archive", help="a watched folder's archive (its inspected/ folder) to prune too")
    database_flags(prune, "data directory holding crops/")
    prune.set_defaults(func=cmd_db_prune)


