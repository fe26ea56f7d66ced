"""The line's I/O commands: camera (list the industrial cameras, write a conveyor video) and bench-io."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import default_rules, models_of, say, zoo_of


def cmd_camera_list(args: argparse.Namespace) -> int:
    from ..camera.genicam import list_cameras

    cams = list_cameras()
    if not cams:
        print("no GenICam camera found (check the cable, power and, for GigE Vision, the network); "
              "PYLON_CAMEMU=1 shows the emulator")
        return 1
    for c in cams:
        print(f"{c['serial']:<16}{c['vendor']} {c['model']} ({c['class']})  -> --source genicam:{c['serial']}")
    return 0


def cmd_camera_video(args: argparse.Namespace) -> int:
    from ..camera.conveyor import conveyor_frames, write_video
    from ..routing.rules import load_rules

    rules = load_rules(args.rules or default_rules())
    frames, serials = conveyor_frames(rules, args.boards, seed=args.seed, still=args.still, gap=args.gap)
    write_video(Path(args.out), frames, fps=args.fps)
    print(f"{args.out}: {len(frames)} frames, {args.boards} boards of {rules.recipe} ({', '.join(serials)}), each "
          f"lying still {args.still} frames with {args.gap} frames of empty conveyor between; "
          f"inspector run --source camera:{args.out}")
    return 0


def cmd_bench_io(args: argparse.Namespace) -> int:
    from ..app.bench_io import bench_io, format_table
    from ..app.line import LineConfig
    from ..routing.rules import load_rules

    rules = load_rules(args.rules or default_rules())
    zoo = zoo_of(args)
    config = LineConfig(policy=args.policy, device_mb=args.device_mb, backend=args.backend)
    phases = ("up",) if args.db_up_only else ("up", "down")
    results = bench_io(rules, zoo, models_of(args), args.boards, config, args.deadline_ms, phases, say)
    print(f"rule set {rules.recipe} ({len(rules.placements())} parts a board), policy {args.policy}, backend "
          f"{args.backend}, {args.device_mb:g} MiB, emulated "
          f"GenICam camera (software trigger, BGR8 {rules.board_size[0]}x{rules.board_size[1]})")
    print(format_table(results, args.deadline_ms))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_json() for r in results], indent=1), encoding="utf-8")
    return 0


def add_camera(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="camera_command", required=True, metavar="WHAT")
    ls = sub.add_parser("list", help="the GenICam cameras this box sees (what --source genicam: takes)")
    ls.set_defaults(func=cmd_camera_list)
    video = sub.add_parser("video", help="a fixed camera's free-running video of boards on a conveyor, to try "
                                         "the board gate (inspector run --source camera:FILE)")
    video.add_argument("--out", required=True, help="the video file to write (.avi, MJPG)")
    video.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    video.add_argument("--boards", type=int, default=6)
    video.add_argument("--still", type=int, default=6, help="frames each board lies still (default 6)")
    video.add_argument("--gap", type=int, default=6, help="frames of empty conveyor between boards (default 6)")
    video.add_argument("--fps", type=int, default=18)
    video.add_argument("--seed", type=int, default=5)
    video.set_defaults(func=cmd_camera_video)


def add_bench_io(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    p.add_argument("--boards", type=int, default=100, help="measured boards per phase (default 100)")
    p.add_argument("--policy", default="coserve")
    p.add_argument("--device-mb", type=float, default=160.0)
    p.add_argument("--deadline-ms", type=float, default=2000.0, help="the station's fail-safe deadline")
    p.add_argument("--db-up-only", action="store_true", help="skip the phase with the database down")
    from .line import backend_flag

    backend_flag(p)
    p.add_argument("--json", help="also write the results as JSON here")
    p.set_defaults(func=cmd_bench_io)
