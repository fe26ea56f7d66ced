"""`inspector zoo operate`: an expert's operating point, its weights unchanged (experts/operating.py).

A detector's threshold or a classifier's good margin, set by an engineer who has read the false calls and escapes:
through a running kiosk it is served from the next board on (POST /experts/operating), else in the zoo on disk for
the next start. Either way the served version is stamped with it (a rollback to it later serves it there) and the
audit trail records it as `expert.threshold`, before and after.
"""
from __future__ import annotations

import argparse

from .common import say
from .exits import USAGE


def _point(args: argparse.Namespace) -> dict[str, float]:
    return {k: float(v) for k, v in (("threshold", args.threshold), ("good_margin", args.good_margin))
            if v is not None}


def cmd_zoo_operate(args: argparse.Namespace) -> int:
    from ..experts.operating import operating_point, said

    point = _point(args)
    if not point:
        say("error: give the point: --threshold T (a detector's box confidence, 0 to 1) or --good-margin M (a "
            "classifier's log-odds of good)")
        return USAGE
    if args.kiosk:
        from ..endpoint import read_token, request_json

        done = request_json(args.kiosk.rstrip("/") + "/experts/operating", {"expert": args.expert, "operating": point},
                            read_token(args.token_file), timeout=90, reason=args.reason)
        print(f"{done['expert']} calls at {said(done['operating'])} on the running line (was "
              f"{said(done['operating_from'])})")
        return 0
    from ..access.audit import Change
    from ..experts.versions import entry_of, operate
    from .access import acting, record_here
    from .loop import _zoo

    who = acting(args)
    zoo = _zoo(args)
    before = operating_point(entry_of(zoo, args.expert).spec)
    entry = operate(zoo, args.expert, point)
    after = operating_point(entry.spec)
    record_here(args, who, Change("expert.threshold", args.expert, before, {**after, "next_start": True},
                                  args.reason))
    print(f"{args.expert} calls at {said(after)} (was {said(before)}) from the next start of a line on {zoo.root} "
          "(a running kiosk: pass --kiosk URL to serve it live)")
    return 0


def add_zoo_operate(zoo_sub: argparse._SubParsersAction) -> None:
    from .loop import zoo_change_flags

    p = zoo_sub.add_parser("operate", help="serve one expert at another operating point, its weights unchanged (a "
                                           "detector's threshold, a classifier's good margin)")
    p.add_argument("--expert", required=True, help="the expert (det-panel, cls-R0603)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--threshold", type=float, help="a detector's box confidence, 0 to 1: a finder flags a part "
                                                       "with a box at or above it, a verifier passes a good body "
                                                       "reaching it")
    which.add_argument("--good-margin", type=float, help="a classifier's log-odds of good: a part below it is called "
                                                         "a defect")
    zoo_change_flags(p)
    p.set_defaults(func=cmd_zoo_operate)
