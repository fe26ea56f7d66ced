"""The line's I/O commands: camera (list the industrial cameras, write a conveyor video) and bench-io."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import backend_of, default_rules, models_of, say, zoo_of
from .exits import UsageError


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


def cmd_camera_photos(args: argparse.Namespace) -> int:
    import sys

    from ..app.kiosk_client import KioskClient
    from ..camera.photos import photos_from_kiosk, take_photos
    from ..camera.settings import CameraSettings, load_settings
    from ..routing.rules import load_rules

    def ask(i: int) -> None:
        print(f"photo {i + 1} of {args.count}: put the board in place and press Enter", file=sys.stderr, flush=True)
        if not sys.stdin.readline():
            raise UsageError("no Enter came (stdin closed): leave out --ask to take the photos back to back")

    if bool(args.source) == bool(args.kiosk):
        raise UsageError("give the camera (--source genicam:SERIAL) or the kiosk whose line holds it (--kiosk URL)")
    if args.kiosk:
        if args.camera_settings or args.rules or args.correction:
            raise UsageError("--camera-settings, --rules and --correction are for a camera opened here; a kiosk's "
                             "camera runs at the settings of its station and of the product it serves, its frames "
                             "corrected as its line corrects them")
        written = photos_from_kiosk(KioskClient(args.kiosk).camera_photo, args.count, Path(args.out), args.name,
                                    args.timeout, ask if args.ask else None, say)
        return _photos_written(args, written)
    kind, _, device = args.source.partition(":")
    if kind != "genicam" or not device:
        raise UsageError(f"--source {args.source}: photos that say their settings come from a GenICam camera "
                         "(genicam:SERIAL|INDEX, `inspector camera list`); a folder's photos are files already")
    from ..camera.correction import CameraCorrection
    from ..camera.genicam import GenICamSource

    settings = load_settings(args.camera_settings) if args.camera_settings else CameraSettings()
    rules = load_rules(args.rules) if args.rules else None
    if rules is not None and rules.camera:
        settings = rules.camera.over(settings)
        say(f"the camera at the station's settings with {rules.recipe}'s over them: {rules.camera.said()}")
    source = GenICamSource(device, settings, max_reconnects=0,
                           board_size=rules.board_size if rules is not None else None)
    correction = CameraCorrection.load(args.correction) if args.correction else None
    written = take_photos(source, args.count, Path(args.out), args.name, args.timeout,
                          ask if args.ask else None, say, correction)
    return _photos_written(args, written)


def _photos_written(args: argparse.Namespace, written: list[Path]) -> int:
    from ..camera.photo_settings import taken_with

    said = sum(taken_with(p) is not None for p in written)
    what = ("each saying the settings it was taken with" if said == len(written) else
            f"{said} saying the settings they were taken with (the camera cannot say them)")
    print(f"{len(written)} photo(s) in {args.out}, {what}: inspector board teach --golden "
          f"{' '.join(str(p) for p in written[:3])}{' ...' if len(written) > 3 else ''}")
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


def cmd_camera_render(args: argparse.Namespace) -> int:
    import cv2

    from ..ingest.camera_model import parse_camera
    from ..ingest.sources import SyntheticSource
    from ..routing.rules import load_rules

    rules = load_rules(args.rules or default_rules())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = SyntheticSource(rules, args.boards, seed=args.seed, camera=parse_camera(args.camera or "none"))
    for i, frame in enumerate(source):
        name = out / f"{i:05d}.png"
        if not cv2.imwrite(str(name), frame.image):
            raise OSError(f"{name}: OpenCV could not write it (disk full or not writable?)")
    print(f"{out}: {args.boards} boards of {rules.recipe} as camera {args.camera or 'none'} sees them (PNG; each "
          f"board's serial is printed on it as its code); inspector run --source folder:{out}")
    return 0


def _pattern(text: str) -> tuple[int, int]:
    cols, _, rows = text.lower().partition("x")
    try:
        pattern = int(cols), int(rows)
    except ValueError:
        raise UsageError(f"--pattern wants the target's inner corners as COLSxROWS (e.g. 9x6), got {text!r}") from None
    if min(pattern) < 3:
        raise UsageError(f"--pattern {text}: a chessboard target has at least 3x3 inner corners")
    return pattern


def _views(args: argparse.Namespace, synthetic) -> tuple[list, list[str]]:  # noqa: ANN001
    """Images from the files given, or made by the synthetic camera `--synthetic SPEC` (ingest/camera_model.py)."""
    import numpy as np

    from ..camera.lens import load_views
    from ..ingest.camera_model import parse_camera
    from ..routing.rules import load_rules

    if args.synthetic is not None:
        if args.images:
            raise UsageError("give image files or --synthetic, not both")
        size = load_rules(args.rules or default_rules()).board_size
        images = synthetic(parse_camera(args.synthetic), size, np.random.default_rng(args.seed))
        return images, [f"synthetic {i + 1}" for i in range(len(images))]
    if not args.images:
        raise UsageError("give the captures as image files (or --synthetic SPEC to try it on the synthetic camera)")
    return load_views([Path(p) for p in args.images])


def cmd_camera_calibrate(args: argparse.Namespace) -> int:
    import numpy as np

    from ..camera.correction import CameraCorrection
    from ..camera.lens import calibrate, load_views
    from ..camera.targets import plane_view, target_views
    from ..ingest.camera_model import parse_camera
    from ..routing.rules import load_rules

    pattern = _pattern(args.pattern)
    images, names = _views(args, lambda cam, size, rng: target_views(cam, size, pattern, args.views, rng))
    plane = None
    if args.plane:
        plane = load_views([Path(args.plane)])[0][0]
    elif args.synthetic is not None:
        size = load_rules(args.rules or default_rules()).board_size
        plane = plane_view(parse_camera(args.synthetic), size, pattern, np.random.default_rng(args.seed + 1))
    lens = calibrate(images, pattern, names, plane)
    out = Path(args.out)
    correction = CameraCorrection.load_or_new(out)
    correction.lens = lens
    correction.save(out)
    k = lens.camera_matrix
    print(f"{out}: lens from {lens.views} of {len(images)} views, reprojection {lens.rms_px:.3f} px rms; focal "
          f"{k[0][0]:.1f} x {k[1][1]:.1f} px, centre ({k[0][2]:.1f}, {k[1][2]:.1f}), k1 {lens.distortion[0]:+.4f}, "
          f"k2 {lens.distortion[1]:+.4f}; inspector run --correction {out}")
    if lens.left_out:
        print(f"left out {len(lens.left_out)} view(s) whose corners fit the solved lens far worse than the rest "
              f"(a corner found wrongly: squares too small, a reflection, a bent target): "
              + ", ".join(f"{name} {err:.2f} px" for name, err in lens.left_out.items()))
    if lens.rectify is not None:
        print(f"the camera's tilt to the conveyor from the flat view: rectified, the target's corners lie "
              f"{lens.plane_rms_px:.3f} px rms from a square grid")
    else:
        print("no --plane view: the lens is corrected, the camera's tilt is not (a rule set then needs transform: "
              "homography)")
    if lens.rms_px > 0.5:
        print(f"warning: {lens.rms_px:.2f} px rms is high; check that the target is flat and in focus in every view")
    return 0


def cmd_camera_reference(args: argparse.Namespace) -> int:
    from ..camera.correction import CameraCorrection
    from ..camera.flatfield import FlatField
    from ..camera.targets import grey_card_views

    images, _ = _views(args, lambda cam, size, rng: grey_card_views(cam, size, args.views, rng))
    out = Path(args.out)
    correction = CameraCorrection.load_or_new(out)
    if correction.lens is not None:
        images = [correction.lens.undistort(im) for im in images]
    correction.flat = FlatField.from_reference(images)
    correction.save(out)
    g = correction.flat.gains_small
    print(f"{out}: white balance and flat field from {len(images)} capture(s) at level {correction.flat.level:.0f}; "
          f"gains {g.min():.2f} to {g.max():.2f} (blue {g[..., 0].mean():.2f}, green {g[..., 1].mean():.2f}, red "
          f"{g[..., 2].mean():.2f} on average); inspector run --correction {out}")
    return 0


def cmd_bench_io(args: argparse.Namespace) -> int:
    from ..app.bench_io import PhaseResult, bench_io, format_table
    from ..app.bench_lane import LaneResult, format_lane
    from ..app.line import LineConfig
    from ..routing.rules import load_rules

    if args.boards < 1:
        raise UsageError(f"--boards must be 1 or more, got {args.boards}")
    rules = load_rules(args.rules or default_rules())
    zoo = zoo_of(args, rules=rules)
    config = LineConfig(policy=args.policy, device_mb=args.device_mb, backend=backend_of(args))
    phases = () if args.lane_only else ("up",) if args.db_up_only else ("up", "down")
    phases += ("conveyor",) if args.conveyor and not args.lane_only else ()
    phases += ("lane",) if args.hermes or args.lane_only else ()
    results = bench_io(rules, zoo, models_of(args), args.boards, config, args.deadline_ms, phases, say, args.mqtt)
    print(f"rule set {rules.recipe} ({len(rules.placements())} parts a board), policy {args.policy}, backend "
          f"{config.backend}, {args.device_mb:g} MiB, emulated "
          f"GenICam camera (software trigger, BGR8 {rules.board_size[0]}x{rules.board_size[1]})")
    plc = [r for r in results if isinstance(r, PhaseResult)]
    if plc:
        print(format_table(plc, args.deadline_ms))
    for lane in (r for r in results if isinstance(r, LaneResult)):
        print(format_lane(lane))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_json() for r in results], indent=1), encoding="utf-8")
    return 0


def add_camera(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="camera_command", required=True, metavar="WHAT")
    ls = sub.add_parser("list", help="the GenICam cameras this box sees (what --source genicam: takes)")
    ls.set_defaults(func=cmd_camera_list)
    photos = sub.add_parser("photos", help="photos of boards through the line's camera, each saying the settings it "
                                           "was taken with (golden photos: `board teach` keeps the settings)")
    photos.add_argument("--source", metavar="genicam:SERIAL|INDEX", help="the line's camera, opened here")
    photos.add_argument("--kiosk", metavar="URL", help="or the kiosk whose line holds the camera: each photo the "
                                                       "first frame it takes after the photo is asked for")
    photos.add_argument("--camera-settings", metavar="FILE", help="the station's camera settings (YAML), as the "
                                                                   "kiosk's --camera-settings")
    photos.add_argument("--rules", help="the product's rule set: its `camera:` over the station's settings, its "
                                        "board size for a camera's Scale")
    photos.add_argument("--correction", metavar="FILE", help="the line camera's correction file (lens, flat field), "
                                                             "as the kiosk's --correction: each photo as the line "
                                                             "sees its frames")
    photos.add_argument("--count", type=int, default=1, help="photos to take (default 1)")
    photos.add_argument("--out", required=True, help="the folder to write NAME-NN.png in (numbering goes on after "
                                                     "those there)")
    photos.add_argument("--name", default="golden", help="the photos' name (default golden)")
    photos.add_argument("--ask", action="store_true", help="wait for Enter before each photo (a board put in place)")
    photos.add_argument("--timeout", type=float, default=30.0,
                        help="seconds each photo may wait for its frame (a triggered camera: a board passing its "
                             "sensor; default 30)")
    photos.set_defaults(func=cmd_camera_photos)
    video = sub.add_parser("video", help="a fixed camera's free-running video of boards on a conveyor, to try "
                                         "the board gate (inspector run --source camera:FILE)")
    video.add_argument("--out", required=True, help="the video file to write (.avi, MJPG)")
    video.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    video.add_argument("--boards", type=int, default=6, help="boards that pass under the camera (default 6)")
    video.add_argument("--still", type=int, default=6, help="frames each board lies still (default 6)")
    video.add_argument("--gap", type=int, default=6, help="frames of empty conveyor between boards (default 6)")
    video.add_argument("--fps", type=int, default=18, help="the video's frame rate (default 18)")
    video.add_argument("--seed", type=int, default=5, help="the seed of the boards drawn and where they lie")
    video.set_defaults(func=cmd_camera_video)
    render = sub.add_parser("render", help="synthetic boards as a camera sees them, into a folder of frames "
                                           "(benchmarks read frames, not the renderer)")
    render.add_argument("--out", required=True, help="the folder to write (NNNNN.png)")
    render.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    render.add_argument("--boards", type=int, default=30, help="boards to render, one frame each (default 30)")
    render.add_argument("--camera", help="camera settings as `inspector run --camera` takes them (default none)")
    render.add_argument("--seed", type=int, default=1000, help="the seed of the boards drawn and their defects")
    render.set_defaults(func=cmd_camera_render)
    cal = sub.add_parser("calibrate", help="the lens (intrinsics, distortion) from views of a chessboard target, into "
                                           "the camera's correction file (inspector run --correction FILE)")
    cal.add_argument("images", nargs="*", help="the target's views: image files, the target tilted and moved about")
    cal.add_argument("--pattern", default="9x6", help="the target's inner corners, COLSxROWS (default 9x6)")
    cal.add_argument("--plane", metavar="IMAGE", help="a view of the target lying flat where boards lie: the camera's "
                                                      "tilt is then rectified too (boards stay similarity fits)")
    cal.add_argument("--out", required=True, help="the camera's correction file (JSON; a flat field in it is kept)")
    ref = sub.add_parser("reference", help="white balance and flat field (vignetting, uneven light) from captures of "
                                           "a grey card filling the view, into the camera's correction file")
    ref.add_argument("images", nargs="*", help="captures of a grey card filling the view, under the line's light")
    ref.add_argument("--out", required=True, help="the camera's correction file (JSON; a lens in it is applied "
                                                  "first and kept)")
    for q, views in ((cal, 25), (ref, 4)):
        q.add_argument("--synthetic", metavar="SPEC", help="instead of files: the synthetic camera SPEC's captures "
                                                           "(e.g. tilt=2,k1=-0.1,vignette=0.3,cast=0.15)")
        q.add_argument("--rules", help="with --synthetic: the rule set whose board size the frames have")
        q.add_argument("--views", type=int, default=views, help=f"with --synthetic: captures (default {views})")
        q.add_argument("--seed", type=int, default=0, help="with --synthetic: the seed of the captures")
    cal.set_defaults(func=cmd_camera_calibrate)
    ref.set_defaults(func=cmd_camera_reference)


def add_bench_io(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    p.add_argument("--boards", type=int, default=100, help="measured boards per phase (default 100)")
    p.add_argument("--policy", default="coserve", help="the engine's scheduling policy (default coserve)")
    p.add_argument("--device-mb", type=float, default=160.0,
                   help="the line's expert + batch memory, MiB (default 160)")
    p.add_argument("--deadline-ms", type=float, default=2000.0, help="the station's fail-safe deadline")
    p.add_argument("--db-up-only", action="store_true", help="skip the phase with the database down")
    p.add_argument("--hermes", action="store_true",
                   help="also run the box on a Hermes lane between two peers (IPC-HERMES-9852): --boards boards in "
                        "from the machine before, out to the machine after; identities, FailedBoard, handover times")
    p.add_argument("--lane-only", action="store_true", help="only the Hermes lane phase")
    p.add_argument("--conveyor", action="store_true",
                   help="also a conveyor 1.5x faster than the line sustained (triggers that do not wait): boards "
                        "past their deadline are rejected late, uninspected, and none is inspected after it")
    p.add_argument("--mqtt", metavar="HOST[:PORT]",
                   help="also publish the factory events through this broker (under a topic of their own) and measure "
                        "them at a subscriber: every board's message, its order, duplicates, verdict-to-message time")
    from .line import backend_flag

    backend_flag(p)
    p.add_argument("--json", help="also write the results as JSON here")
    p.set_defaults(func=cmd_bench_io)
