"""`inspector board install`: a taught board packed whole (its rule set, the files it names, its zoo) and installed
on the line's kiosk (app/board_package.py, kiosk/boards.py); `inspector board serve`: the line changed over to an
installed board now (app/board_switch.py); `inspector board profile`: what its first changeover would measure,
measured at a quiet moment; `inspector board next`: the installed board a kiosk starts with; `inspector board
remove`: one deleted."""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from ..experts.backends import AUTO
from .exits import UsageError
from .line import backend_flag


def add_install(sub: argparse._SubParsersAction) -> None:
    inst = sub.add_parser("install", help="install a taught board (its rule set and its own zoo) on the line's kiosk, "
                                          "or pack it into one file to carry there; the kiosk serves it from its "
                                          "next start once chosen")
    inst.add_argument("--rules", help="the taught rule set (board teach's RULES.taught.yaml)")
    inst.add_argument("--zoo", help="its zoo (board teach's WORK/zoo)")
    inst.add_argument("--package", help="a package packed before (--out), instead of --rules and --zoo")
    inst.add_argument("--out", help="write the package to this file (to carry to a kiosk with no network to this "
                                    "machine)")
    inst.add_argument("--name", help="the board's name on the kiosk (default: the rule file's name before its first "
                                     "dot)")
    inst.add_argument("--kiosk", metavar="URL", help="the line's kiosk (https://line-box:9108) to install it on")
    inst.add_argument("--local", action="store_true", help="install it in this box's data folder instead, where the "
                                                          "dashboard's own line (`inspector gui`) lists and serves it")
    inst.add_argument("--data", help="with --local: the data folder (default: $INSPECTOR_DATA, systemd's state "
                                     "directory, or the user's data directory, as `inspector gui` takes it)")
    backend_flag(inst)  # with --local: the dashboard line's, whose model files are made for the board now
    inst.add_argument("--token-file", help="your API token file (an engineer's)")
    inst.add_argument("--replace", action="store_true", help="replace a board of that name installed before (not "
                                                             "the one served)")
    inst.add_argument("--next-start", action="store_true", help="then choose it for the kiosk's next start")
    inst.add_argument("--serve", action="store_true", help="then change the line over to it now (at a board "
                                                           "boundary, without a restart)")
    inst.add_argument("--reason", help="why, for the audit trail")
    inst.add_argument("--json", help="also write the kiosk's answer as JSON")
    inst.set_defaults(func=cmd_install)
    srv = sub.add_parser("serve", help="change the line over to an installed board now, at a board boundary, "
                                       "without a restart (and start on it next time)")
    srv.add_argument("board", nargs="?", help="an installed board's name (`inspector board next --kiosk URL` lists "
                                              "them)")
    srv.add_argument("--configured", action="store_true", help="the board the kiosk's configuration names")
    _kiosk_call(srv, drain=True)
    srv.set_defaults(func=cmd_serve)
    prof = sub.add_parser("profile", help="measure now, at a quiet moment, what an installed board's first "
                                          "changeover would measure (the architectures the kiosk's box never "
                                          "profiled): new boards wait meanwhile")
    prof.add_argument("board", help="an installed board's name")
    _kiosk_call(prof, drain=True)
    prof.set_defaults(func=cmd_profile)
    nxt = sub.add_parser("next", help="the installed board a kiosk starts with from its next start")
    nxt.add_argument("board", nargs="?", help="an installed board's name (`inspector board next --kiosk URL` lists "
                                              "them)")
    nxt.add_argument("--configured", action="store_true", help="start on the board the kiosk's configuration "
                                                               "names again")
    nxt.add_argument("--kiosk", metavar="URL", required=True, help="the line's kiosk")
    nxt.add_argument("--token-file", help="your API token file (an engineer's; not needed to list)")
    nxt.add_argument("--reason", help="why, for the audit trail")
    nxt.set_defaults(func=cmd_next)
    rm = sub.add_parser("remove", help="delete a board installed on a kiosk (neither served nor chosen for its next "
                                       "start)")
    rm.add_argument("board", help="the installed board's name")
    _kiosk_call(rm)
    rm.set_defaults(func=cmd_remove)


def _kiosk_call(parser: argparse.ArgumentParser, drain: bool = False) -> None:
    """The flags of an engineer's call to the line's kiosk (`drain`: one that waits for the boards inside)."""
    parser.add_argument("--kiosk", metavar="URL", required=True, help="the line's kiosk")
    parser.add_argument("--token-file", help="your API token file (an engineer's)")
    if drain:
        parser.add_argument("--drain-s", type=float, default=60.0, help="how long the boards inside may take to "
                                                                        "finish (default 60)")
    parser.add_argument("--reason", help="why, for the audit trail")


def cmd_install(args: argparse.Namespace) -> int:
    from ..app.board_package import pack_board
    from ..app.board_switch import served_line
    from ..app.kiosk_client import KioskClient
    from ..endpoint import read_token

    if bool(args.package) == bool(args.rules or args.zoo):
        raise UsageError("name the taught board (--rules and --zoo) or a package packed before (--package)")
    if args.rules and not args.zoo or args.zoo and not args.rules:
        raise UsageError("a taught board is its rule set and its zoo: give both --rules and --zoo")
    if not args.kiosk and not args.out and not args.local:
        raise UsageError("say where the board goes: the line's kiosk (--kiosk URL), this box's own line (--local) or "
                         "a file to carry there (--out)")
    if args.local and args.kiosk:
        raise UsageError("--local installs it on this box, --kiosk on the kiosk's: one of them")
    if (args.data or args.backend != AUTO) and not args.local:
        raise UsageError("--data and --backend go with --local (a kiosk prepares a board for its own backend)")
    if args.local and args.replace:  # a dashboard's line in another process may serve it: its files stay
        raise UsageError("--replace goes with --kiosk, which knows the board its line serves: on this box remove the "
                         "board on the dashboard's Routing rules tab first, or install this one under another name "
                         "(--name)")
    if args.package and args.out:
        raise UsageError("--out writes a package packed from --rules and --zoo; --package is one packed already")
    if args.serve and args.next_start:
        raise UsageError("--serve changes over now and keeps the board for the next start: --next-start is not needed")
    if not args.kiosk:
        for flag in ("token_file", "replace", "next_start", "serve", "reason"):
            if getattr(args, flag):
                raise UsageError(f"--{flag.replace('_', '-')} goes with --kiosk")
    with tempfile.TemporaryDirectory(prefix="inspector-board-") as scratch:
        package = Path(args.package) if args.package else Path(args.out or Path(scratch) / "board.tar")
        if not args.package:
            with open(package, "wb") as f:
                doc = pack_board(Path(args.rules), Path(args.zoo), f, args.name)
            print(f"packed board {doc['name']} (recipe {doc['recipe']}, version {doc['version']}): "
                  f"{len(doc['files'])} files, {package.stat().st_size / 2**20:.1f} MiB"
                  + (f" in {package}" if args.out else ""))
        elif args.name:
            raise UsageError("--name is the package's when packed: pack again with --name")
        if args.local:
            return _install_here(args, package)
        if not args.kiosk:
            return 0
        client = KioskClient(args.kiosk, read_token(args.token_file))
        done = client.install_board(package, args.replace, args.reason)
    print(f"installed on {args.kiosk}: board {done['board']} (recipe {done['recipe']}, version {done['version']}, "
          f"{done['experts']} expert(s){', replacing the one installed before' if done['replaced'] else ''})"
          + ("" if args.serve else "; not served"))
    if done.get("same_recipe"):
        print(f"note: board(s) {', '.join(done['same_recipe'])} installed here answer to recipe {done['recipe']} too: "
              "a PLC or Hermes naming it is refused (which board is meant is not the line's to guess) unless one of "
              "them is served; serve this one by `board serve`, or remove the others")
    if done.get("unprofiled"):
        print(f"its first changeover profiles {', '.join(done['unprofiled'])}, which this kiosk's box has not measured "
              f"(seconds, while boards wait): `inspector board profile {done['board']} --kiosk {args.kiosk}` at a "
              "quiet moment measures them before a PLC names it")
    if done.get("not_prepared"):
        print(f"warning: not prepared for its changeover ({done['not_prepared']}): its changeover prepares it")
    if args.serve:
        done["served"] = served = client.serve_board(done["board"], args.reason)
        print(served_line(served))
    elif args.next_start:
        chosen = client.next_board(done["board"], args.reason)
        done["next"] = chosen["next"]
        print(chosen["note"])
    else:
        print(f"to serve it at the line's changeover: `inspector board serve {done['board']} --kiosk {args.kiosk} "
              "--token-file F` (or `board next`, then restart the kiosk)")
    if args.json:
        Path(args.json).write_text(json.dumps(done, indent=1), encoding="utf-8")
    return 0


def _install_here(args: argparse.Namespace, package: Path) -> int:
    """The package installed in this box's data folder, for the dashboard's own line (its Routing rules tab)."""
    from ..app.installed_boards import boards_dir, install_package
    from .common import data_of

    boards = boards_dir(data_of(args))
    done = install_package(data_of(args), package)
    print(f"installed in {boards}: board {done.name} (recipe {done.recipe}, version {done.version}, {done.experts} "
          "expert(s)); the dashboard's own line (`inspector gui`) lists it on its Routing rules tab, where an engineer "
          "serves it")
    answer = {**done.to_json(), **_prepared_here(args, done)}
    if args.json:
        Path(args.json).write_text(json.dumps(answer, indent=1), encoding="utf-8")
    return 0


def _prepared_here(args: argparse.Namespace, done: Any) -> dict[str, Any]:
    """The board installed here made ready for its changeover on the dashboard's line, as a kiosk prepares one it
    installs (BoardSwitch.prepare): its backend's model files made now, and what its first changeover still profiles
    in this box's models folder said, with how to measure it at a quiet moment."""
    from ..app.run import prepare_board
    from ..experts.zoo import Zoo
    from ..routing.rules import load_rules
    from .common import backend_of, models_of

    backend = backend_of(args)
    try:
        left = prepare_board(Zoo.load(done.zoo), models_of(args), lambda _m: None, backend, load_rules(done.rules))
    except Exception as exc:  # noqa: BLE001 - installed all the same: its changeover prepares it, or says why not
        print(f"warning: not prepared for its changeover ({type(exc).__name__}: {exc}): its changeover prepares it")
        return {"not_prepared": f"{type(exc).__name__}: {exc}"}
    if left:
        print(f"its first changeover on {backend} profiles {', '.join(left)}, which this box has not measured "
              f"(seconds, while boards wait): *Profile now* on the Routing rules tab measures them at a quiet moment")
    return {"unprofiled": left, "backend": backend}


def cmd_next(args: argparse.Namespace) -> int:
    from ..app.kiosk_client import KioskClient
    from ..endpoint import read_token

    client = KioskClient(args.kiosk, read_token(args.token_file))
    if args.board is None and not args.configured:
        doc = client.boards()
        print(f"{'board':<24} {'recipe':<24} {'version':<13} {'packed':<26} now")
        for b in doc["boards"]:
            mark = ", ".join(w for w, name in (("served", doc["serving"]), ("next start", doc["next"]))
                             if name == b["board"])
            if "damaged" in b:
                print(f"{b['board']:<24} damaged: {b['damaged']}")
                continue
            print(f"{b['board']:<24} {str(b['recipe']):<24} {str(b['version']):<13} {str(b['packed']):<26} {mark}")
        if doc["next"] is None:
            print("next start: the configured board")
        return 0
    if args.board is not None and args.configured:
        raise UsageError("name an installed board, or --configured, not both")
    print(client.next_board(None if args.configured else args.board, args.reason)["note"])
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from ..app.board_switch import served_line
    from ..app.kiosk_client import KioskClient
    from ..endpoint import read_token

    if (args.board is None) == (not args.configured):
        raise UsageError("name an installed board, or --configured (the board the configuration names)")
    client = KioskClient(args.kiosk, read_token(args.token_file))
    print(served_line(client.serve_board(args.board, args.reason, args.drain_s)))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from ..app.board_switch import profiled_line
    from ..app.kiosk_client import KioskClient
    from ..endpoint import read_token

    done = KioskClient(args.kiosk, read_token(args.token_file)).profile_board(args.board, args.reason, args.drain_s)
    print(profiled_line(done, args.kiosk))
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from ..app.kiosk_client import KioskClient
    from ..endpoint import read_token

    done = KioskClient(args.kiosk, read_token(args.token_file)).remove_board(args.board, args.reason)
    print(f"board {done['removed']} removed from {args.kiosk}")
    return 0
