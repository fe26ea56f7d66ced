"""The plant's commands: every line at a glance."""
from __future__ import annotations

import argparse
import json
import time
from datetime import timedelta

from .common import comma_list, database_flags, db_url
from .exits import UsageError


def cmd_plant_status(args: argparse.Namespace) -> int:
    from ..app.plant import plant_status, table
    from ..results.store import ResultStore, StoreUnavailable

    kiosks = comma_list(args.kiosks)
    if args.window_min <= 0:
        raise UsageError(f"--window-min must be positive, got {args.window_min:g}")
    started = time.perf_counter()
    store = None
    if not args.no_db:
        store = ResultStore(db_url(args), connect=False)
        try:
            store.ready()
        except StoreUnavailable as exc:
            print(f"warning: {exc}; the kiosks' own answers only")
            store = None
    try:
        rows = plant_status(store, kiosks, timedelta(minutes=args.window_min), args.timeout_s)
    finally:
        if store is not None:
            store.close()
    took = time.perf_counter() - started
    if args.json:
        print(json.dumps({"lines": [r.to_json() for r in rows], "seconds": took}, indent=1))
    else:
        print(table(rows))
        print(f"{len(rows)} line(s); boards/min and yield over the last {args.window_min:g} min; answered in "
              f"{took:.2f} s")
    return 1 if any(r.state == "unreachable" for r in rows) else 0


def add_plant(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="plant_command", required=True)
    st = sub.add_parser("status", help="every line: running, health, boards/min, yield, false calls, expert "
                                       "versions (exit 1 when a kiosk does not answer)")
    st.add_argument("--kiosks", help="the lines' kiosks, comma-separated URLs (http://line1-box:9108,...); in "
                                     "inspector.yaml: 'plant status': {kiosks: ...}")
    st.add_argument("--window-min", type=float, default=60.0, help="minutes boards/min and yield are over (60)")
    st.add_argument("--timeout-s", type=float, default=2.0, help="how long one kiosk may take to answer; a box busy "
                                                                  "inspecting answers late, not never (2)")
    st.add_argument("--no-db", action="store_true", help="ask the kiosks only")
    st.add_argument("--json", action="store_true", help="as JSON")
    database_flags(st)
    st.set_defaults(func=cmd_plant_status)
