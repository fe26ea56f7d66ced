"""The plant's expert releases: publish a version to the plant's database, roll it out line by line, and what
every rollout did."""
from __future__ import annotations

import argparse
import getpass
import json
import sys

from .access import as_flag
from .common import comma_list, database_flags, db_url, say


def _who(args: argparse.Namespace) -> str:
    return args.by or getpass.getuser()


def cmd_zoo_publish(args: argparse.Namespace) -> int:
    from ..experts.versions import entry_of, find_version
    from ..results.releases import publish
    from ..results.store import ResultStore
    from .common import zoo_of

    zoo = zoo_of(args)
    version = find_version(entry_of(zoo, args.expert), args.version)
    data = (zoo.root / version["file"]).read_bytes()
    from ..access.audit import Change
    from .access import acting, record_here

    who = acting(args)
    release = publish(ResultStore(db_url(args)), args.expert, data, args.by or who.name, args.note)
    record_here(args, who, Change("expert.publish", args.expert, None,
                                  {"weights_sha256": release.weights_sha256, "size_bytes": release.size_bytes},
                                  args.note))
    print(f"released {args.expert} {release.weights_sha256[:12]} ({release.size_bytes} bytes) to the plant's "
          f"database, by {release.published_by}: `inspector zoo rollout --expert {args.expert} --version "
          f"{release.weights_sha256[:12]} --kiosks ...` serves it line by line")
    return 0


def cmd_zoo_rollout(args: argparse.Namespace) -> int:
    from ..app.rollout import Rollout, RolloutConfig, targets_of
    from ..endpoint import read_token
    from ..results.releases import find
    from ..results.store import ResultStore

    store = ResultStore(db_url(args))
    release = find(store, args.expert, args.version)
    targets = targets_of(comma_list(args.kiosks), comma_list(args.lines) if args.lines else None)
    config = RolloutConfig(args.expert, release.weights_sha256, boards=args.boards, timeout_s=args.timeout_s,
                           alpha=args.alpha, poll_s=args.poll_s, by=_who(args))
    say(f"rollout of {args.expert} {release.weights_sha256[:12]} to {', '.join(t.line for t in targets)}: "
        f"{args.boards} boards watched a line")
    rollout = Rollout(store, config, targets, read_token(args.token_file), say)
    results = rollout.run()
    print(f"rollout {rollout.id}:")
    for r in results:
        print(f"  {r.target.line}/{r.target.station}: {r.outcome}: {r.reason}")
    return 0 if all(r.outcome == "kept" for r in results) else 1


def cmd_zoo_rollouts(args: argparse.Namespace) -> int:
    from ..results.rollouts import history
    from ..results.store import ResultStore

    steps = history(ResultStore(db_url(args)), args.rollout, args.limit)
    if args.json:
        json.dump([{**s.__dict__, "at": s.at.isoformat()} for s in steps], sys.stdout, indent=1)
        print()
        return 0
    for s in steps:
        print(f"{s.at.isoformat(timespec='seconds')}  {s.rollout[:8]}  {s.by:10}  {s.expert:12}  "
              f"{s.line}/{s.station:8}  {(s.from_sha256 or '-')[:12]} -> {s.to_sha256[:12]}  {s.outcome:11}  "
              f"{s.detail.get('reason', '')}")
    return 0


def add_rollout_parsers(zoo_sub: argparse._SubParsersAction) -> None:
    """zoo publish, rollout, rollouts."""
    pub = zoo_sub.add_parser("publish", help="release a version of an expert to the plant's database (its lines "
                                             "install it from there, checking its hash)")
    pub.add_argument("--expert", required=True, help="the expert whose version to release (cls-R0603)")
    pub.add_argument("--version", required=True, help="its weights hash in the zoo (8+ hex digits)")
    pub.add_argument("--zoo", help="zoo directory holding the version (default: the demo zoo)")
    pub.add_argument("--note", help="what it is (retrained on ..., for ...)")
    pub.add_argument("--by", help="who releases it (default: the login name)")
    database_flags(pub)
    as_flag(pub)
    pub.set_defaults(func=cmd_zoo_publish)

    ro = zoo_sub.add_parser("rollout", help="serve a released version on the lines one at a time, each watched "
                                            "against its own rates before; rolled back on a worse rate or an "
                                            "unhealthy kiosk (exit 1 unless every line kept it)")
    ro.add_argument("--expert", required=True, help="the expert whose released version to roll out (cls-R0603)")
    ro.add_argument("--version", required=True, help="the release's weights hash (8+ hex digits)")
    ro.add_argument("--kiosks", required=True, help="the plant's kiosks, comma-separated URLs")
    ro.add_argument("--lines", help="the lines to roll out to, in order (default: every kiosk's, in --kiosks order)")
    ro.add_argument("--boards", type=int, default=200, help="boards watched on each line after its switch (200)")
    ro.add_argument("--timeout-s", type=float, default=3600.0,
                    help="a line that stores fewer boards in this time is rolled back (3600)")
    ro.add_argument("--alpha", type=float, default=0.01,
                    help="how unlikely by chance a rise in a rate must be to count as worse (0.01)")
    ro.add_argument("--poll-s", type=float, default=2.0, help="seconds between looks at a line (2)")
    ro.add_argument("--token-file", required=True,
                    help="an engineer's API token file (`inspector user token NAME --out F`)")
    ro.add_argument("--by", help="who rolls it out (default: the login name)")
    database_flags(ro)
    ro.set_defaults(func=cmd_zoo_rollout)

    hist = zoo_sub.add_parser("rollouts", help="every rollout step recorded in the plant's database")
    hist.add_argument("--rollout", help="one rollout's id")
    hist.add_argument("--limit", type=int, default=100, help="the newest this many steps (100)")
    hist.add_argument("--json", action="store_true", help="print the steps as JSON, one object each")
    database_flags(hist)
    hist.set_defaults(func=cmd_zoo_rollouts)
