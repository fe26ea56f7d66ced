"""`inspector board tune`: pass a taught board's false calls on good boards by lower thresholds (app/board_tune.py),
each served threshold in the audit trail; `--restore` serves teaching's own again. With `--kiosk` a running line
serves them from its next board on (POST /experts/operating, one expert at a time, each at a board boundary)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import database_flags, photos_given, station_flags
from .exits import UsageError


def add_tune(sub: argparse._SubParsersAction) -> None:
    tune = sub.add_parser("tune", help="pass the flags of boards known good by lowering their types' thresholds, "
                                       "within the held-out recall you allow (planned, or served with --apply)")
    tune.add_argument("photos", nargs="*", help="photos of boards known good (the line's camera, as the line sees "
                                                "them)")
    tune.add_argument("--rules", required=True, help="the taught rule set (board teach's RULES.taught.yaml)")
    tune.add_argument("--zoo", required=True, help="its zoo (board teach's WORK/zoo): its thresholds are what moves")
    tune.add_argument("--most-lost", type=float, default=5.0,
                      help="the most a type's held-out recall may fall, in percentage points (default 5)")
    tune.add_argument("--margin", type=float,
                      help="log-odds of good left between a passed part and its type's new threshold (default 0.5): "
                           "a part passed by a hair is flagged again on the next board")
    tune.add_argument("--apply", action="store_true",
                      help="serve the new thresholds (written to the zoo, recorded in the audit trail) and check "
                           "the boards again; without it the plan is printed and nothing changes")
    tune.add_argument("--restore", action="store_true",
                      help="serve the thresholds teaching chose again (no photos; with --apply)")
    tune.add_argument("--reason", help="why (goes into the audit trail with each change)")
    tune.add_argument("--kiosk", metavar="URL",
                      help="with --apply: the running kiosk of this board (https://line-box:9108) serves them from "
                           "its next board on, through its API as the person whose --token-file it is (its zoo must "
                           "serve the weights --zoo holds)")
    tune.add_argument("--token-file", help="your API token file (`inspector user token NAME --out F`; with --kiosk)")
    tune.add_argument("--work", help="where the overlays go (default: beside the zoo)")
    tune.add_argument("--json", help="also write the plan (and the check after it) as JSON")
    database_flags(tune)
    station_flags(tune)
    from .access import as_flag

    as_flag(tune)
    tune.set_defaults(func=cmd_tune)


def _serving(args: argparse.Namespace):  # noqa: ANN202 - (an Identity, a ChangeLog)
    """Who serves the thresholds, asked before anything changes (the person of --as, who needs the experts'
    permission, or the system account running the command), and the box's trail that records it."""
    from ..access.roles import Permission
    from ..app.changes import ChangeLog
    from ..results.store import ResultStore
    from .access import acting
    from .common import db_url, say

    who = acting(args)
    if who.role != "system":
        who.require(Permission.EXPERTS)
    return who, ChangeLog(ResultStore(db_url(args)), args.line, args.station, say)


def _kiosk(args: argparse.Namespace) -> tuple[str, str | None] | None:
    """(the kiosk's URL, the token to ask it with) of --kiosk, read before anything slow; None without one."""
    if not args.kiosk:
        return None
    if not args.apply:
        raise UsageError("--kiosk serves a tune: it goes with --apply")
    from ..endpoint import read_token

    return args.kiosk.rstrip("/"), read_token(args.token_file)


def _served(args: argparse.Namespace, kiosk: tuple[str, str | None] | None, zoo_root: Path,
            changes: dict[str, tuple[float, float]], why: str) -> bool:
    """Serve each entry's new good margin (entry -> (served, new)): through the running `kiosk`, else in the zoo
    on disk, each change audited. Whether the zoo at `zoo_root` now holds them (a kiosk on another disk: not)."""
    from ..app.board_tune import serve_audited
    from ..experts.zoo import Zoo

    if kiosk is None:
        who, log = _serving(args)
        serve_audited(zoo_root, changes, log, who, why)
        return True
    from ..endpoint import request_json

    url, token = kiosk
    serving = request_json(url + "/experts", token=token, timeout=30)["experts"]
    local = Zoo.load(zoo_root).entries
    other = [e for e in sorted(changes) if e not in serving or serving[e]["serving"] != local[e].weights_sha256]
    if other:  # a tune is of these weights: serving it on others would move thresholds nobody measured
        raise ValueError(f"the kiosk at {url} does not serve the weights {zoo_root} holds of {', '.join(other)}: "
                         "tune the board its line runs (its --zoo), or serve this zoo's weights there first")
    for expert, (_before, new) in sorted(changes.items()):
        done = request_json(url + "/experts/operating", {"expert": expert, "operating": {"good_margin": new}}, token,
                            timeout=90, reason=why)
        print(f"  {expert}: good margin {done['operating_from'].get('good_margin'):.2f} -> "
              f"{done['operating'].get('good_margin'):.2f} on the running line")
    now = Zoo.load(zoo_root).entries
    return all(now[e].spec.get("good_margin") == new for e, (_b, new) in changes.items())


def cmd_tune(args: argparse.Namespace) -> int:
    from ..app.board_check import check_photos, format_checked
    from ..app.board_costs import read_heldout
    from ..app.board_tune import MARGIN, changes_of, format_tune, restore_plan, tune_boards
    from ..experts.zoo import Zoo
    from ..routing.rules import load_rules
    from .common import models_of, say

    zoo_root, rules_path = Path(args.zoo), Path(args.rules)
    kiosk = _kiosk(args)
    if args.restore:
        if args.photos:
            raise UsageError("--restore takes no photos: it serves the thresholds teaching chose")
        held = read_heldout(zoo_root)
        if held is None:
            raise ValueError(f"{zoo_root} keeps no held-out record of its teaching: there is nothing to restore from")
        back, retrained = restore_plan(load_rules(rules_path), Zoo.load(zoo_root), held)
        if retrained:
            print(f"left as served (retrained since teaching: its taught threshold is of other weights): "
                  f"{', '.join(retrained)}")
        for expert, (served, taught) in sorted(back.items()):
            print(f"{expert}: served {served:.2f}, taught {taught:.2f}")
        if not back:
            print("every type is served at the threshold teaching chose: nothing to restore")
        elif args.apply:
            _served(args, kiosk, zoo_root, back, args.reason or "restored the thresholds teaching chose")
            print(f"served the taught thresholds of {len(back)} types (recorded in the audit trail)")
        else:
            print("nothing changed: add --apply to serve these")
        return 0
    if not args.photos:
        raise UsageError("name the photos of boards known good (or --restore)")
    margin = MARGIN if args.margin is None else args.margin
    if not 0 <= args.most_lost <= 100 or margin < 0:
        raise UsageError("--most-lost is percentage points (0 to 100) and --margin log-odds (0 or more)")
    work = Path(args.work) if args.work else zoo_root.parent / "tune"
    photos = photos_given(args.photos)
    checked, tune = tune_boards(rules_path, zoo_root, photos, work, models_of(args), args.most_lost / 100,
                                margin, say)
    print(format_checked(checked))
    if tune is None:
        raise ValueError("no good board was registered and inspected (above, why): there is nothing to tune on")
    print(format_tune(tune))
    doc = {"plan": tune.to_json(), "photos": [str(p) for p in photos]}
    moved = changes_of(tune)
    if not moved:
        print("no threshold moves: nothing to serve")
    elif not args.apply:
        print("nothing changed: add --apply to serve these thresholds (each recorded in the audit trail)")
    else:
        passed = ", ".join(ref for t in tune.types if t.changed for ref in t.passed)
        boards = ", ".join(p.name for p in photos)
        why = (f"passes {passed} of good boards ({boards}); held-out recall {100 * tune.recall_before:.1f}% -> "
               f"{100 * tune.recall_after:.1f}%")
        if _served(args, kiosk, zoo_root, moved, args.reason or why):
            again, _o, _s = check_photos(rules_path, zoo_root, photos, work, models_of(args), say)
            left = sum(len(c.flagged) for c in again)
            print(f"served {len(moved)} thresholds; the good boards checked again on the line: {left} flagged "
                  f"(planned {len(tune.left)})")
            for c in again:
                if c.flagged:
                    print(f"  {c.board.name}: {', '.join(f'{ref} ({kind})' for ref, kind in c.flagged)}")
            doc["after"] = [c.to_json() for c in again]
        else:
            print(f"served {len(moved)} thresholds on the kiosk's line; {zoo_root} is not the zoo it keeps, so the "
                  "good boards are not checked again here (tune on the line box, or check them through the line)")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
