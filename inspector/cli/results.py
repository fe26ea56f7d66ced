"""The results' commands: export to CSV, prune past the retention, back up and restore the database."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import data_of, database_flags, db_url, scope_flags, scope_of_args
from .exits import UsageError


def cmd_export(args: argparse.Namespace) -> int:
    from ..results.export import export_csv
    from ..results.store import Filters, ResultStore, parse_when
    from ..results.unit_export import export_units_csv

    store = ResultStore(db_url(args))
    filters = Filters(since=parse_when(args.since) if args.since else None,
                      until=parse_when(args.until) if args.until else None,
                      board=args.board, board_id=args.board_id, verdict=args.verdict, component=args.component,
                      scope=scope_of_args(args), reviewed=None if args.reviewed is None else args.reviewed == "yes")
    store.check_filters(filters)  # before the file is made: a refused search leaves no header-only CSV behind
    if args.units and (args.component or args.verdict or args.reviewed):
        raise UsageError("--units judges each board by all its parts: --component, --verdict and --reviewed select "
                         "parts; leave them out (filter by time, board, BoardId or line)")
    write = export_units_csv if args.units else export_csv
    if args.csv == "-":
        n = write(store, sys.stdout, filters)
    else:
        with open(args.csv, "w", newline="", encoding="utf-8") as out:
            n = write(store, out, filters)
    what = "units (boards, a panel's each)" if args.units else "component results"
    print(f"{n} {what} of {filters.scope.label()} exported to {args.csv}", file=sys.stderr)
    return 0


def cmd_db_prune(args: argparse.Namespace) -> int:
    from ..results.retention import prune
    from ..results.store import ResultStore

    data = data_of(args)
    store = ResultStore(db_url(args))
    report = prune(store, data / "crops", Path(args.archive) if args.archive else None, args.retain_days,
                   scope_of_args(args))
    print(report.line(args.retain_days))
    return 1 if report.errors else 0


def cmd_db_backup(args: argparse.Namespace) -> int:
    from ..results.backup import backup, is_sqlite

    url = db_url(args)
    if args.local_only and not is_sqlite(url):
        print("the results database is the plant's (not this box's SQLite file): its server backs it up; nothing "
              "done (--local-only)")
        return 0
    made, gone = backup(url, Path(args.to), args.keep)  # BackupFailed is a RuntimeError: main says it
    print(made.line() + (f"; {len(gone)} older deleted (--keep {args.keep})" if gone else ""))
    return 0


def cmd_db_restore(args: argparse.Namespace) -> int:
    from ..results.backup import restore

    print(restore(Path(args.backup), db_url(args), replace=args.replace))
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from ..results.revisions import read_state, upgrade
    from ..results.store import open_engine

    engine = open_engine(db_url(args))
    try:
        before, after = upgrade(engine, args.to)
        state = read_state(engine)
    finally:
        engine.dispose()
    safe = engine.url.render_as_string(hide_password=True)
    if before == after:
        print(f"{safe}: already at schema revision {after}; nothing to do")
    else:
        print(f"{safe}: schema {before or 'empty'} -> {after}")
    print(state.describe())
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from ..results.revisions import read_state
    from ..results.store import open_engine

    engine = open_engine(db_url(args))
    try:
        state = read_state(engine)
    finally:
        engine.dispose()
    print(f"{engine.url.render_as_string(hide_password=True)}: {state.describe()}")
    return 0 if state.runnable else 1


def cmd_db_bench(args: argparse.Namespace) -> int:
    from ..results.bench_db import IDLE_BOARDS, FillPlan, busiest_scope, fill, measure, table
    from ..results.store import ResultStore

    store = ResultStore(db_url(args))
    try:
        if not args.reuse:
            plan = FillPlan(parts=int(args.parts), lines=args.lines)
            took = fill(store, plan, lambda m: print(m, file=sys.stderr))
            print(f"filled {store.safe_url}: {plan.boards} boards, {plan.boards * plan.parts_per_board} parts of "
                  f"{plan.lines} lines, and {IDLE_BOARDS} boards of a line stopped 90 days ago, in {took:.0f} s")
        boards, parts = store.count()
        scope = busiest_scope(store)
        timings = measure(store, scope, args.repeats)
        print(f"{boards} boards, {parts} parts in the database; reads of {scope.label()} ({store.count(scope)[1]} "
              "parts):")
        print(table(timings, args.repeats))
        if args.plans:
            for t in timings:
                for plan in t.plans:
                    print(f"\n-- {t.name}\n{plan}")
    finally:
        store.close()
    return 0


def add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--csv", required=True, help="output file, or - for standard output")
    p.add_argument("--since", help="ISO time, inclusive; with an offset (+02:00, Z) or else the box's local time")
    p.add_argument("--until", help="ISO time, exclusive; with an offset (+02:00, Z) or else the box's local time")
    p.add_argument("--board", help="one board serial")
    p.add_argument("--board-id", help="one board by the Hermes BoardId the SMT line gave it")
    p.add_argument("--verdict", choices=["pass", "fail", "error"], help="component verdict")
    p.add_argument("--component", help="one component type (R0402, ...)")
    p.add_argument("--reviewed", choices=["yes", "no"],
                   help="parts an operator reviewed (yes) or not yet (no: with --verdict fail, the flagged parts "
                        "nobody has judged)")
    p.add_argument("--units", action="store_true",
                   help="one row per unit instead of per part: each board, a panel's boards each with its own verdict "
                        "and x-outs named (for an MES or a traceability sheet)")
    scope_flags(p)
    database_flags(p)
    p.set_defaults(func=cmd_export)


def add_db(p: argparse.ArgumentParser) -> None:
    db_sub = p.add_subparsers(dest="db_command", required=True)
    prune = db_sub.add_parser("prune", help="delete boards, kept crops and archived images older than the retention")
    prune.add_argument("--retain-days", type=float, required=True, help="keep this many days")
    prune.add_argument("--archive", help="a watched folder's archive (its inspected/ folder) to prune too")
    scope_flags(prune)
    database_flags(prune, "data directory holding crops/")
    prune.set_defaults(func=cmd_db_prune)
    bk = db_sub.add_parser("backup", help="a checked copy of the results database, taken while the kiosk runs "
                                          "(SQLite: its online backup; PostgreSQL: pg_dump)")
    bk.add_argument("--to", required=True, help="folder the backup goes in (a name with the time is made there)")
    bk.add_argument("--keep", type=int, default=0, help="then delete this database's older backups in the folder "
                                                        "but the newest N (default 0: delete none)")
    bk.add_argument("--local-only", action="store_true", help="back up only a SQLite file of this box's; a plant "
                                                              "database is its server's to back up (the daily unit)")
    database_flags(bk)
    bk.set_defaults(func=cmd_db_backup)
    rs = db_sub.add_parser("restore", help="make the results database from a backup, checked first (stop the kiosk "
                                           "and the dashboard before)")
    rs.add_argument("backup", help="a file `inspector db backup` wrote")
    rs.add_argument("--replace", action="store_true", help="replace a database that is there (SQLite: it is kept "
                                                           "beside it; PostgreSQL: its tables are dropped)")
    database_flags(rs)
    rs.set_defaults(func=cmd_db_restore)
    up = db_sub.add_parser("upgrade", help="bring the schema to this release's (the deploy step of a shared "
                                           "database; needs the owner's rights)")
    up.add_argument("--to", default="head", help="a revision (default: this release's newest)")
    database_flags(up)
    up.set_defaults(func=cmd_db_upgrade)
    st = db_sub.add_parser("status", help="the schema's revision and whether this release runs on it (exit 1 "
                                          "when it does not)")
    database_flags(st)
    st.set_defaults(func=cmd_db_status)
    bench = db_sub.add_parser("bench", help="fill an empty PostgreSQL database with a plant's millions of parts and "
                                            "time one line's reads (EXPLAIN ANALYZE)")
    bench.add_argument("--parts", type=float, default=10e6, help="parts to generate (default 10e6)")
    bench.add_argument("--lines", type=int, default=20, help="lines they come from (default 20)")
    bench.add_argument("--reuse", action="store_true", help="time the reads on what the database holds, fill nothing")
    bench.add_argument("--repeats", type=int, default=7, help="timed runs of each read (default 7)")
    bench.add_argument("--plans", action="store_true", help="print each statement's whole plan")
    database_flags(bench)
    bench.set_defaults(func=cmd_db_bench)


