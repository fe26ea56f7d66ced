"""The line's commands: run, kiosk, gui (the dashboard), soak, accuracy, and the model beside the line."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

from ..extras import missing_extra, require
from ..ingest.queue import OVERFLOW_POLICIES
from ..results.crops import KEEP_MODES
from .common import (
    backend_of,
    comma_list,
    data_of,
    database_flags,
    default_rules,
    hermes_flags,
    hermes_of,
    line_setup,
    load_zoo,
    models_of,
    note_registration,
    plc_flags,
    plc_of,
    say,
    station_flags,
    zoo_of,
)
from .exits import FAILED, UsageError


def cmd_run(args: argparse.Namespace) -> int:
    from ..app.factory_events import FactoryEvents
    from ..app.run import nothing_inspected, run_line, summary

    rules, zoo, store, source, config, publisher, data = line_setup(args)
    plc = plc_of(args, data)
    hermes = hermes_of(args)
    say(f"inspecting {source.name} with rule set {rules.recipe} ({rules.version}), policy {args.policy}")
    events = FactoryEvents(publisher, args.line, args.station, say) if publisher else None
    service, seconds = run_line(rules, zoo, models_of(args), source, config, store, data, say, plc=plc,
                                hermes=hermes, events=events)
    print(summary(service, seconds))
    if publisher:
        st = publisher.status()
        print(f"mqtt: {st.published} boards acknowledged by {publisher.host}:{publisher.port}"
              + (f", {st.queued} not delivered: {st.last_error}" if st.queued else ""))
    failed = nothing_inspected(service)
    if failed:
        print(f"inspector: {failed}", file=sys.stderr)
        return FAILED
    return 0


def cmd_kiosk(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..app.factory_events import FactoryEvents
    from ..app.recipes import in_force
    from ..app.run import line_profiles
    from ..app.service import LineService
    from ..endpoint import read_token
    from ..kiosk.control import ALLOCATION_FILE, saved_allocation
    from ..kiosk.service import Kiosk
    from ..kiosk.systemd import Notifier, StartupKeeper

    token = read_token(args.token_file or os.environ.get("INSPECTOR_TOKEN_FILE") or None)
    notifier = Notifier()
    # training the zoo or profiling on a first start takes minutes: systemd hears each step (STATUS) and
    # gives more time while steps keep coming (EXTEND_TIMEOUT_USEC); a start that stops moving times out
    with StartupKeeper(notifier) as keeper:
        def step(message: str) -> None:
            say(message)
            keeper.progress(message)

        board_config = (args.rules, args.zoo)  # as the configuration names them
        chosen = board_at_start(args)  # an installed board chosen for this start: its rule file and zoo
        if chosen:
            say(chosen)
        configured = args.rules
        if configured:  # the rule file the last changeover put in force, while the configuration names the same
            kept = in_force(data_of(args), Path(configured))
            if kept is not None:
                args.rules = str(kept[0])
                say(kept[1])
        rules, zoo, store, source, config, publisher, data = line_setup(args, step)
        saved = saved_allocation(data)
        if saved is not None:
            config = replace(config, line=saved.applied_to(config.line))
            say(f"allocation from {data / ALLOCATION_FILE} (saved over the API): device {saved.device_mb:g} MiB, "
                f"expert pool {saved.expert_pool_mb:g} MiB, executors {saved.executors or 'default'}")
        profiles = line_profiles(zoo, models_of(args), step, config.line.backend, rules)
        hermes = hermes_of(args)
        if hermes is not None:
            source = hermes.wrap(source)
        service = LineService(rules, zoo, profiles, config, store, data, source, None, say)
        service.handoff = hermes
        events = FactoryEvents(publisher, args.line, args.station, say) if publisher else None
        if events is not None:
            events.attach(service)
    kiosk = Kiosk(service, kiosk_config(args, token), rules_path=rules.source, publisher=publisher, say=say,
                  data_dir=data, notifier=notifier, reread=lambda: reread_kiosk(args, token), plc=plc_of(args, data),
                  configured=configured, board_config=board_config,
                  opener=board_opener(args, board_config, config.line.backend))
    if hermes is not None:
        hermes.start()
    try:
        return kiosk.serve()
    finally:
        if hermes is not None:
            hermes.stop()
        if events is not None:
            events.close()


def board_at_start(args: argparse.Namespace) -> str | None:
    """Point --rules and --zoo at the installed board chosen for the kiosk's start (app/installed_boards.py) while
    the configuration names what it named then, and it can start; what to say of it (None: the configured board,
    nothing to say)."""
    from ..app.installed_boards import at_start, startable

    found = at_start(data_of(args), args.rules, args.zoo)
    if found is None:
        return None
    chosen, said = found
    if chosen is not None:
        why = startable(chosen)
        if why is not None:
            return (f"warning: board {chosen.name} chosen for this start cannot start ({why}): the configured "
                    "board starts")
        args.rules, args.zoo = str(chosen.rules), str(chosen.zoo)
    return said


def board_opener(args: argparse.Namespace, configured: tuple[str | None, str | None], backend: str):  # noqa: ANN201
    """How the kiosk opens another board live (a BoardOpener): the configured board's rule file, a zoo by its folder
    (the configuration's default zoo where it names none), profiles measured into this line's models folder."""
    from ..app.board_switch import BoardOpener
    from ..app.run import line_profiles, prepare_board, zoo_for

    models = models_of(args)
    return BoardOpener(Path(configured[0]) if configured[0] else default_rules(),
                       lambda path, rules: load_zoo(path) if path else zoo_for(models, rules, say),
                       lambda zoo, rules: line_profiles(zoo, models, say, backend, rules),
                       lambda zoo, rules: prepare_board(zoo, models, say, backend, rules))


def kiosk_config(args: argparse.Namespace, token: str | None):  # noqa: ANN201 - a KioskConfig
    from ..kiosk.service import KioskConfig

    return KioskConfig(listen=args.listen, stall_s=args.stall_s, log_every_s=args.log_every, silent_s=args.silent_s,
                       token=token, llm_mb=args.llm_mb, lease_s=args.grant_lease_s,
                       camera_settings=args.camera_settings,
                       tls_cert=args.tls_cert or os.environ.get("INSPECTOR_TLS_CERT") or None,
                       tls_key=args.tls_key or os.environ.get("INSPECTOR_TLS_KEY") or None,
                       tls_client_ca=args.tls_client_ca, session_hours=args.session_hours,
                       plain_listen=args.plain_listen or os.environ.get("INSPECTOR_PLAIN_LISTEN") or None)


def reread_kiosk(args: argparse.Namespace, token: str | None):  # noqa: ANN201 - a Reread
    """The kiosk's options as the config file says now, the command line still winning (SIGHUP)."""
    from ..kiosk.service import Reread
    from ..logs import setup
    from . import parse

    fresh = parse(args.argv)
    board_at_start(fresh)  # the installed board the kiosk started with is no change of the configuration
    if fresh.log_level != args.log_level:
        setup(fresh.log_level)
    live = {"stall_s", "log_every", "silent_s", "rules", "log_level", "func", "argv"}
    restart = tuple(sorted(f"--{k.replace('_', '-')}" for k, v in vars(fresh).items()
                           if k not in live and getattr(args, k, None) != v))
    return Reread(kiosk_config(fresh, token), fresh.rules, restart, fresh.zoo)


def cmd_soak(args: argparse.Namespace) -> int:
    from ..app.line import LineConfig
    from ..app.run import line_profiles
    from ..app.service import ServiceConfig
    from ..app.soak import soak
    from ..routing.rules import load_rules

    rules = load_rules(args.rules or default_rules())
    zoo = zoo_of(args, rules=rules)
    profiles = line_profiles(zoo, models_of(args), say)
    config = ServiceConfig(LineConfig(policy=args.policy, device_mb=args.device_mb))
    report = soak(rules, zoo, profiles, config, args.parts, Path(args.data) if args.data else None, say)
    print(f"soak: rule set {rules.recipe}, policy {args.policy}, {report.samples[-1].parts} parts, "
          f"{report.stored} boards stored")
    print(report.table())
    print(f"RSS growth after warm-up: {report.growth * 100:+.2f}%")
    return 0


def cmd_beside(args: argparse.Namespace) -> int:
    from ..app.beside import beside
    from ..app.line import LineConfig
    from ..app.run import line_profiles
    from ..app.service import ServiceConfig
    from ..moe.text import read_prompts
    from ..routing.rules import load_rules

    rules = load_rules(args.rules or default_rules())
    zoo = zoo_of(args, rules=rules)
    profiles = line_profiles(zoo, models_of(args), say)
    config = ServiceConfig(LineConfig(policy=args.policy, device_mb=args.device_mb))
    serve = ["--policy", args.llm_policy, "--cache-ratio", str(args.cache_ratio), "--threads", str(args.threads),
             "--nice", str(args.nice)] + (["--model", args.model] if args.model else [])
    report = beside(rules, zoo, profiles, config, models_of(args), serve, read_prompts(args.prompts),
                    args.seconds, args.line_load, args.max_tokens, say, args.omp_wait)
    print(report.table())
    return 0


def add_beside(llm_sub: argparse._SubParsersAction) -> None:
    p = llm_sub.add_parser("beside-line", help="the line and the model on this box: each one's rate alone and "
                                               "beside the other (the model in its own process)")
    p.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase (default 20)")
    p.add_argument("--line-load", type=float, default=0.5,
                   help="the line's production rate as a share of its capacity measured alone (default 0.5)")
    p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo)")
    p.add_argument("--policy", default="coserve", help="the line's engine policy")
    p.add_argument("--device-mb", type=float, default=160.0, help="the line's expert + batch memory")
    p.add_argument("--model", help="a local MoE checkpoint (default: the demo model)")
    p.add_argument("--llm-policy", default="daop", help="the model's offloading policy (default daop)")
    p.add_argument("--cache-ratio", type=float, default=0.25, help="the model's expert cache ratio")
    p.add_argument("--threads", type=int, default=1, help="the model process's torch threads (default 1)")
    p.add_argument("--nice", type=int, default=10, help="how much lower the model process's CPU priority is "
                                                          "(default 10: the line comes first)")
    p.add_argument("--max-tokens", type=int, default=16, help="tokens per completion the client asks for")
    p.add_argument("--omp-wait", choices=["passive", "active"], default="passive",
                   help="how the model's OpenMP threads wait between steps: passive, as the installed service runs "
                        "it (default), or active (spinning: OpenMP's own default)")
    p.add_argument("--prompts", help="prompt file (default: the built-in set)")
    p.set_defaults(func=cmd_beside)


def cmd_dataset_accuracy(args: argparse.Namespace) -> int:
    """`accuracy --dataset deeppcb:DIR`: a real public dataset scored by its own protocol. The dataset and its split
    are checked before the trainer is imported: a mistyped folder or group is refused at once, not after seconds."""
    from ..training.deeppcb_split import choose_split

    kind, _, root = args.dataset.partition(":")
    if kind != "deeppcb" or not root:
        raise UsageError(f"--dataset {args.dataset!r}: the datasets known are deeppcb:DIR (a DeepPCB folder, its "
                         "trainval.txt or test.txt beside the group folders)")
    if not Path(root).is_dir():
        raise ValueError(f"--dataset {args.dataset!r}: {root} is not a folder")
    choose_split(Path(root), Path(args.list) if args.list else None, args.heldout_share, args.hold_out_group, [],
                 Path(args.score_on) if args.score_on else None)  # raises DatasetError naming what cannot split
    from ..app.deeppcb_line import run_deeppcb
    from ..training.deeppcb_bench import report, write_json

    kept = contextlib.nullcontext(args.work) if args.work else tempfile.TemporaryDirectory(prefix="deeppcb-")
    with kept as work:  # kept only where --work says
        result = run_deeppcb(Path(root), Path(work), models_of(args), Path(args.list) if args.list else None,
                             args.heldout_share, args.hold_out_group, args.epochs, args.patience, args.seed, say,
                             Path(args.score_on) if args.score_on else None)
    print(report(result))
    if args.json:
        write_json(result, Path(args.json))
        print(f"wrote {args.json}")
    return 0


def cmd_accuracy(args: argparse.Namespace) -> int:
    if args.dataset:
        return cmd_dataset_accuracy(args)
    from ..app.accuracy import CONDITIONS, format_table, run_suite
    from ..app.line import LineConfig
    from ..routing.rules import load_rules

    rules = load_rules(args.rules or default_rules())
    note_registration(rules, args.no_register)
    if args.timing:
        from ..app.accuracy import cut_timing

        print(f"rule set {rules.recipe}: {len(rules.placements())} parts a board, ms per board (best of 5)")
        for what, ms in cut_timing(rules).items():
            print(f"  {what:<20}{ms:>8.2f} ms")
        return 0
    from ..ingest.camera_model import parse_camera

    names = comma_list(args.conditions) if args.conditions else list(CONDITIONS)
    if args.camera and not args.conditions:
        names = []  # only the cameras asked for
    cameras = {spec: parse_camera(spec) for spec in args.camera or []}
    identity = []
    if args.identity_boards:
        from ..app.identity_check import format_identity, identity_suite

        identity = identity_suite(rules, CONDITIONS, names, args.identity_boards, say)
        print(f"serial codes of rule set {rules.recipe} (its own and its panel boards'): {args.identity_boards} "
              "held-out boards per condition")
        print(format_identity(identity))
        if args.identity_only:
            return 0
    zoo = zoo_of(args, rules=rules)
    config = LineConfig(policy=args.policy, device_mb=args.device_mb, register=not args.no_register,
                        backend=backend_of(args))
    results = run_suite(rules, zoo, models_of(args), names, args.boards, config, args.seed, say=say, cameras=cameras)
    print(f"rule set {rules.recipe} ({rules.version}), zoo {zoo.root}, policy {args.policy}, backend "
          f"{config.backend}, registration "
          f"{'off' if args.no_register else 'on'}, seed {args.seed}")
    print(format_table(results))
    if args.json:
        doc = [r.to_json() for r in results]
        if identity:
            doc = {"conditions": doc, "identity": [r.to_json() for r in identity]}
        Path(args.json).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        say(f"wrote {args.json}")
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    """The dashboard lives in the ui package (the only one that imports Qt); imported here by name only."""
    import importlib

    require("gui")
    try:
        app = importlib.import_module("ui.app")
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and missing_extra(exc):
            raise  # main() names the extra to install
        raise RuntimeError(f"the dashboard cannot start: {exc}; on a box without a screen run it under Xvfb "
                           "(QT_QPA_PLATFORM=offscreen for no window at all)") from None
    return app.run(args)


def line_flags(p: argparse.ArgumentParser, boards: int = 30) -> None:
    p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    p.add_argument("--source", default="synthetic",
                   help="synthetic[:N] (default), folder:DIR, watch:DIR, replay:FILE, camera:URI (index, URL, file), "
                        "genicam:SERIAL|INDEX (an industrial camera through pypylon; `inspector camera list`)")
    p.add_argument("--camera-settings", metavar="FILE",
                   help="genicam: the camera's settings, a YAML file of GenICam SFNC names (ExposureTime, Gain, "
                        "PixelFormat, TriggerMode, TriggerSource, ...; the manual: A production line)")
    p.add_argument("--correction", metavar="FILE",
                   help="the camera's correction file: its lens undistorted and its light flattened on every frame "
                        "before registration (inspector camera calibrate / inspector camera reference)")
    p.add_argument("--gate", default="auto", choices=("auto", "on", "off"),
                   help="the board gate: one inspection per board from a free-running stream, empty frames counted "
                        "and dropped (default auto: on for free-running cameras, off for triggered ones and files)")
    p.add_argument("--reconnects", type=int, default=5,
                   help="a camera that vanishes is reopened this many times in a row, with backoff, before the "
                        "source gives up (default 5)")
    p.add_argument("--serial-pattern", metavar="REGEX",
                   help="folders: the board serial from the file name, a regular expression with a `serial` group "
                        "(a sidecar NAME.json with {\"serial\": ...} beside an image wins over it)")
    p.add_argument("--boards", type=int, default=boards,
                   help=f"boards of the synthetic source (default {boards}; 0: endless)")
    p.add_argument("--seed", type=int, default=1000, help="synthetic source seed (held out from training)")
    p.add_argument("--defect-rate", type=float, default=0.005,
                   help="fraction of synthetic parts with a defect (default 0.005; the demo zoo trains at ~0.4)")
    p.add_argument("--camera", help="render synthetic boards as a camera sees them: a preset (realistic: placement "
                                    "within 6 px and 0.4 deg, light, a soft lens, noise, JPEG) or settings "
                                    "shift=PX,rotation=DEG,scale=FRAC,gain=LO:HI,contrast=LO:HI,gradient=FRAC,"
                                    "blur=SIGMA,noise=SIGMA,jpeg=QUALITY and a real lens's tilt=DEG,k1=K,vignette=FRAC,"
                                    "cast=FRAC,motion=PX (the manual: A real camera)")
    p.add_argument("--glare", metavar="TYPE[:STRENGTH]",
                   help="synthetic boards under a light the experts never saw: a highlight on every body of one "
                        "component type (strength 0.5 of full scale by default): a systematic false call to review")
    p.add_argument("--no-register", action="store_true",
                   help="cut boards at the recipe's nominal positions, without registering them on their fiducials")
    p.add_argument("--interval", type=float, default=0.0,
                   help="seconds between synthetic boards, like a conveyor (default 0: as fast as the line takes)")
    p.add_argument("--policy", default="coserve", help="engine policy (coserve, samba, ...)")
    p.add_argument("--device-mb", type=float, default=160.0, help="expert + batch memory of the main device")
    backend_flag(p)
    database_flags(p)
    p.add_argument("--db-retry-max-s", type=float, default=30.0,
                   help="longest wait between retries while the database is down (default 30; the first is 1 s, "
                        "then doubling)")
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    station_flags(p)
    p.add_argument("--queue", type=int, default=8, help="boards the ingest queue holds (default 8)")
    p.add_argument("--overflow", default=None, choices=OVERFLOW_POLICIES,
                   help="when the ingest queue is full: wait (folders, replay), drop-oldest (cameras) or drop-newest; "
                        "default: drop-oldest for a camera, wait otherwise")
    p.add_argument("--keep-crops", default="failed", choices=KEEP_MODES, help="crops kept as PNG (default: failed)")
    p.add_argument("--min-free-mb", type=float, default=512.0,
                   help="free disk below which crops are not kept (default 512 MiB; the spool and database need it)")
    p.add_argument("--max-pixels", type=float, default=40e6,
                   help="images larger than this many pixels are refused as board-level errors (default 40e6)")
    p.add_argument("--mqtt", help="publish per-board results to this MQTT broker (HOST[:PORT])")
    p.add_argument("--mqtt-prefix", default="inspector", help="MQTT topic prefix (default inspector)")
    p.add_argument("--mqtt-username", help="MQTT user; the password comes from $INSPECTOR_MQTT_PASSWORD or the "
                                           "systemd credential mqtt-password, never the command line")
    p.add_argument("--mqtt-tls", action="store_true", help="connect to the broker over TLS (port 8883 usually)")
    p.add_argument("--mqtt-ca", help="CA certificate file the broker's certificate is checked against (implies TLS)")
    plc_flags(p)
    hermes_flags(p)


def backend_flag(p: argparse.ArgumentParser) -> None:
    from ..experts.backends import AUTO, BACKENDS

    p.add_argument("--backend", default=AUTO, choices=(AUTO, *BACKENDS),  # auto resolved by the command (backend_of):
                   # resolving it at parse time imported torch before any option was checked
                   help="what runs the experts: auto (default: onnxruntime on a CPU-only box where it is installed, "
                        "else torch), torch, onnxruntime (exported and checked against torch ahead of the line; on "
                        "the CPU one graph an architecture, a switch reads the expert's weights), onnxruntime-int8 "
                        "(quantised per expert where its verdicts hold, calibrated on the rule set's boards) or "
                        "openvino")


def add_run(p: argparse.ArgumentParser) -> None:
    line_flags(p)
    p.set_defaults(func=cmd_run)


def add_kiosk(p: argparse.ArgumentParser) -> None:
    line_flags(p, boards=0)
    p.add_argument("--listen", default="127.0.0.1:9108", help="metrics/health/status address (default "
                                                                "127.0.0.1:9108)")
    p.add_argument("--stall-s", type=float, default=60.0,
                   help="boards inside and none finished this long counts as stalled (default 60)")
    p.add_argument("--log-every", type=float, default=30.0, help="seconds between progress lines (default 30)")
    p.add_argument("--silent-s", type=float, default=None,
                   help="no image for this many seconds makes health degraded (default: off)")
    p.add_argument("--token-file", help="the box's service token file (mode 0600): the machine routes (a model "
                                        "server's memory lease, results reads); people use their own tokens or sign "
                                        "in (`inspector user`) (default $INSPECTOR_TOKEN_FILE)")
    p.add_argument("--tls-cert", help="serve the API over HTTPS with this certificate (PEM; required off loopback; "
                                      "default $INSPECTOR_TLS_CERT; `inspector tls make` makes a pair)")
    p.add_argument("--tls-key", help="... and its private key (default $INSPECTOR_TLS_KEY)")
    p.add_argument("--tls-client-ca", help="also demand client certificates signed by this CA")
    p.add_argument("--plain-listen", help="also serve the API in plain HTTP here, loopback only, for this box's own "
                                          "clients beside a TLS --listen (default $INSPECTOR_PLAIN_LISTEN)")
    p.add_argument("--session-hours", type=float, default=12.0,
                   help="how long a dashboard's sign-in lasts (default 12)")
    p.add_argument("--llm-mb", type=float, default=0.0,
                   help="memory set aside for a language model beside the line, lent to `inspector llm serve "
                        "--ledger` on a lease over the API (default 0: none)")
    p.add_argument("--grant-lease-s", type=float, default=15.0,
                   help="a memory grant not renewed for this long is taken back (default 15)")
    p.set_defaults(func=cmd_kiosk)


def add_soak(p: argparse.ArgumentParser) -> None:
    p.add_argument("--parts", type=int, default=100_000, help="parts to inspect (default 100000)")
    p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    p.add_argument("--policy", default="coserve", help="engine policy")
    p.add_argument("--device-mb", type=float, default=160.0, help="expert + batch memory of the main device")
    p.add_argument("--data", help="where the soak's database and crops go (default: a temporary folder)")
    p.set_defaults(func=cmd_soak)


def add_accuracy(p: argparse.ArgumentParser) -> None:
    from ..app.conditions import CONDITIONS, HELD_OUT_SEED

    p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    p.add_argument("--boards", type=int, help="boards per condition (default: enough for 2000 good parts and 100 "
                                              "defects at 5%% defective parts)")
    p.add_argument("--conditions", help="comma list (default: all): " + ", ".join(CONDITIONS))
    p.add_argument("--camera", action="append", metavar="SPEC",
                   help="a condition of your own: camera settings as `inspector run --camera` takes them (e.g. "
                        "motion=4 or tilt=3:1,k1=-0.15; repeat for more; alone, only these run); a lens, tilt, "
                        "vignette or cast is calibrated first, as at a line's install")
    p.add_argument("--json", help="also write the results as JSON to this path")
    p.add_argument("--seed", type=int, default=HELD_OUT_SEED, help=f"held-out board seed (default {HELD_OUT_SEED})")
    p.add_argument("--policy", default="coserve", help="engine policy (verdicts do not depend on it)")
    p.add_argument("--device-mb", type=float, default=160.0, help="expert + batch memory of the main device")
    p.add_argument("--no-register", action="store_true", help="cut boards at nominal positions (to compare)")
    backend_flag(p)
    p.add_argument("--identity-boards", type=int, default=0,
                   help="also read the serial codes (the board's, and a panel's boards') of this many more held-out "
                        "boards per condition (a 99.9%% read "
                        "rate needs thousands to show; default 0: only the inspected boards' codes)")
    p.add_argument("--identity-only", action="store_true", help="with --identity-boards: only the code reads")
    p.add_argument("--timing", action="store_true",
                   help="only time registration and cutting (nominal, one warp per crop, one per board) per board")
    data = p.add_argument_group("a real dataset instead of the rendered boards")
    data.add_argument("--dataset", metavar="deeppcb:DIR",
                      help="DeepPCB pairs (a tested image and its golden template): experts taught on some, scored "
                           "on the others by the dataset's protocol (IoU > 0.33): per-class AP, mAP, precision, "
                           "recall, F-score, boards/s")
    data.add_argument("--list", help="with --dataset: train on the pairs this list names, score every other pair "
                                     "under DIR (default: DIR's trainval.txt less --heldout-share)")
    data.add_argument("--heldout-share", type=float, default=0.1,
                      help="with --dataset and no --list: pairs held out to score on, by a hash of their names "
                           "(default 0.1)")
    data.add_argument("--hold-out-group", metavar="G", help="with --dataset: score on board group G, held out whole")
    data.add_argument("--score-on", metavar="DIR", help="with --dataset: train on every pair of DIR's list (or "
                                                        "--list), score on every pair under this folder instead")
    data.add_argument("--epochs", type=int, default=30, help="with --dataset: teaching epochs at most (default 30)")
    data.add_argument("--patience", type=int, default=6, help="with --dataset: stop after N epochs without a better "
                                                              "held-out score (default 6)")
    data.add_argument("--work", help="with --dataset: keep the candidates and the taught expert here (default: a "
                                     "temporary folder)")
    p.set_defaults(func=cmd_accuracy)


def add_gui(p: argparse.ArgumentParser) -> None:
    line_flags(p, boards=0)
    p.add_argument("--attach", metavar="URL", help="show a running kiosk instead of running a line: its /status, "
                                                    "and its results and crops over its API (with --token-file) or "
                                                    "from --db")
    p.add_argument("--token-file", help="with --attach: the kiosk's service token file (its results and crops, memory "
                                        "for the LLM tab); changes go in the signed-in person's name")
    p.add_argument("--idle-lock-min", type=float, default=5.0,
                   help="lock the dashboard after this many minutes without input (default 5)")
    p.add_argument("--plant-kiosks", help="the plant tab's kiosks, comma-separated URLs (as `plant status "
                                          "--kiosks`)")
    p.add_argument("--start", action="store_true", help="start the line at once")
    p.add_argument("--llm-model", help="the LLM tab's checkpoint directory (default: the built demo model)")
    p.add_argument("--llm-mb", type=float, default=None,
                   help="memory set aside beside the line for the LLM tab's in-process model (default 512 MiB); "
                        "attached, the kiosk lends it (its own --llm-mb)")
    p.set_defaults(func=cmd_gui)


def add_llm(p: argparse.ArgumentParser) -> None:
    require("llm")
    from ..moe.commands import add_llm_commands

    add_beside(add_llm_commands(p))
