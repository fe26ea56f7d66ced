"""`inspector` command line: argument parsing only; the work lives in the packages."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

DEFAULT_POLICIES = "samba,samba-fifo,samba-parallel,coserve-paper,coserve"


def _models_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("INSPECTOR_MODELS", "models"))


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_bench(args: argparse.Namespace) -> int:
    from .coserve.evaluation.report import format_table, format_time_shares
    from .coserve.online.policies import ABLATION, BASELINES, get_policy
    from .coserve.online.workload import load_workload

    if args.ablation:
        policies = [BASELINES[0], *ABLATION]
    else:
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    for p in policies:
        get_policy(p)
    if args.repeat < 1:
        raise ValueError("--repeat must be 1 or more")
    workload = load_workload(Path(args.workload) if args.workload else None)
    if args.check_sim:
        from .coserve.evaluation.bench import prepare
        from .coserve.evaluation.simcheck import compare, format_agreement

        zoo, profiles = prepare(workload, _models_dir(args.models), progress=_say)
        print(format_agreement(compare(workload, zoo, profiles, policies, progress=_say)))
        return 0
    if args.planned:
        from .coserve.offline.planner import make_plan

        _, zoo, profiles, evaluate, workload = _planning_inputs(args, workload)
        workload = make_plan(workload, zoo, profiles, evaluate).workload
        _say(f"planned: executors {workload.executors}, experts {workload.expert_pool_bytes / 2**20:.0f} MiB")

    def bench(w):  # noqa: ANN001, ANN202 - one side-by-side bench of workload w
        if args.simulate:
            from .coserve.evaluation.bench import run_simulated_bench

            return run_simulated_bench(w, policies, _models_dir(args.models), box=args.box, progress=_say,
                                       ceiling=not args.no_ceiling)
        from .coserve.evaluation.bench import run_bench

        return run_bench(w, policies, _models_dir(args.models), progress=_say, ceiling=not args.no_ceiling,
                         drop_page_cache=not args.keep_page_cache, repeat=args.repeat)

    if args.paper_tasks:
        from .coserve.evaluation.paper import format_tasks, run_tasks

        if not args.simulate or args.box not in ("paper-numa", "paper-uma"):
            raise ValueError("--paper-tasks needs --simulate --box paper-numa or --box paper-uma")
        reports, rows = run_tasks(bench)
        for report in reports:
            print(format_table(report))
        print(format_tasks(rows, args.box))
        return 0
    if args.sweep:
        from .coserve.evaluation.sweep import format_sweep, parse_sweep, run_sweep

        parameter, values = parse_sweep(args.sweep)
        sweep = run_sweep(workload, parameter, values, bench)
        for report in sweep.reports:
            print(format_table(report))
        print(format_sweep(sweep))
        if args.plot:
            from .coserve.evaluation.plots import plot_sweep

            _say(f"wrote {plot_sweep(sweep, Path(args.plot))}")
        if args.json:
            Path(args.json).write_text(json.dumps({"parameter": parameter, "values": values,
                                                   "reports": [r.to_json() for r in sweep.reports]}, indent=1),
                                       encoding="utf-8")
            _say(f"wrote {args.json}")
        return 0
    report = bench(workload)
    print(format_table(report))
    print(format_time_shares(report))
    if args.plot:
        from .coserve.evaluation.plots import plot_bench

        _say(f"wrote {plot_bench(report, Path(args.plot))}")
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1), encoding="utf-8")
        _say(f"wrote {args.json}")
    return 0


def _planning_inputs(args: argparse.Namespace, workload):  # noqa: ANN001, ANN202 - CLI glue
    """(label, zoo, profiles, evaluate, workload as the box runs it), on this box or a box profile (simulated)."""
    from .coserve.evaluation.bench import prepare
    from .coserve.evaluation.boxes import box_profiles
    from .coserve.offline.planner import engine_evaluator, sim_evaluator

    if args.box or args.simulate:
        label, zoo, profiles, workload = box_profiles(args.box, _models_dir(args.models), workload, _say)
        return label, zoo, profiles, sim_evaluator(zoo, profiles), workload
    zoo, profiles = prepare(workload, _models_dir(args.models), progress=_say)
    return "this box", zoo, profiles, engine_evaluator(zoo, profiles), workload


def cmd_plan(args: argparse.Namespace) -> int:
    from .coserve.evaluation.bench import run_policy, simulate_policy
    from .coserve.evaluation.report import format_table
    from .coserve.evaluation.simulation import rate_oracle
    from .coserve.offline.planner import format_plan, make_plan
    from .coserve.online.policies import get_policy
    from .coserve.online.workload import load_workload

    workload = load_workload(Path(args.workload) if args.workload else None)
    label, zoo, profiles, evaluate, workload = _planning_inputs(args, workload)
    _say(f"planning {workload.name} on {label}")
    plan = make_plan(workload, zoo, profiles, evaluate)
    print(format_plan(plan))
    if args.compare:
        from .coserve.evaluation.report import BenchReport

        runs = []
        for name, w in (("casual", workload), ("planned", plan.workload)):
            if args.box or args.simulate:
                report, _ = simulate_policy(w, zoo, get_policy("coserve"), profiles, rate_oracle(w, w.seed))
            else:
                report, _ = run_policy(w, zoo, get_policy("coserve"), profiles)
            report.policy = f"coserve {name}"
            runs.append(report)
        total = sum(e.weight_bytes for e in zoo.entries.values())
        print(format_table(BenchReport(workload.describe(total), label, float("nan"), runs, True),
                           baseline="coserve casual"))
    return 0


def cmd_zoo_build(args: argparse.Namespace) -> int:
    from .coserve.evaluation.bench import prepare
    from .coserve.online.workload import load_workload

    if args.demo:
        from .app.run import demo_zoo

        zoo = demo_zoo(_models_dir(args.models), _say)
        for e in zoo.entries.values():
            print(f"  {e.name:<18} {e.role:<10} validation accuracy {e.val_accuracy:.3f} ({e.train_samples} crops)")
        return 0

    workload = load_workload(Path(args.workload) if args.workload else None)
    zoo, _ = prepare(workload, _models_dir(args.models), progress=_say)
    total = sum(e.weight_bytes for e in zoo.entries.values())
    print(f"zoo {zoo.root}: {len(zoo.entries)} experts, {total / 2**20:.0f} MiB")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from .coserve.evaluation.bench import zoo_for
    from .coserve.offline.profiler import load_or_profile
    from .coserve.online.workload import load_workload
    from .runtime.devices import available_devices

    workload = load_workload(Path(args.workload) if args.workload else None)
    zoo = zoo_for(workload, _models_dir(args.models), progress=_say)
    for device in available_devices():
        prof = load_or_profile(zoo, device, _models_dir(args.models) / "profiles", force=args.force, progress=_say)
        print(f"{device.key}: {prof.fingerprint.get('name')}")
        print(f"  {'architecture':<28}{'K ms':>8}{'B ms':>8}{'max batch':>10}{'load ms':>22}{'MiB':>8}")
        for key, p in prof.archs.items():
            loads = " ".join(f"{t}={s * 1000:.1f}" for t, s in p.load_s.items())
            print(f"  {key:<28}{p.k_s * 1000:>8.2f}{p.b_s * 1000:>8.2f}{p.max_batch:>10}{loads:>22}"
                  f"{p.weight_bytes / 2**20:>8.1f}")
    return 0


def _data_dir(path: str | None) -> Path:
    return Path(path or os.environ.get("INSPECTOR_DATA", "inspector-data"))


def _db_url(args: argparse.Namespace) -> str:
    from .results.credentials import database_url
    from .results.store import sqlite_url

    return database_url(args.db, sqlite_url(_data_dir(args.data) / "results.sqlite"))


def note_registration(rules, off: bool) -> None:  # noqa: ANN001 - a RuleSet
    """Say when boards will be cut at their nominal positions: right only on a fixture that places them exactly."""
    if off:
        _say("note: registration is off (--no-register): boards are cut at their recipe's nominal positions")
    elif rules.fiducials is None:
        _say(f"note: rule set {rules.recipe} declares no fiducials, so boards are cut at their nominal positions; "
             f"add fiducials (routing_rules/README.md) unless a fixture places every board to the pixel")


def _line_setup(args: argparse.Namespace):  # noqa: ANN202 - CLI glue shared by run and kiosk
    """(rules, zoo, store, source, service config, MQTT publisher or None, data dir) from the common flags."""
    from .app.line import LineConfig
    from .app.run import RULES_DIR, demo_zoo, open_source
    from .app.service import ServiceConfig
    from .results.store import ResultStore, SchemaTooNew, StoreUnavailable
    from .routing.rules import load_rules

    models, data = _models_dir(args.models), _data_dir(args.data)
    data.mkdir(parents=True, exist_ok=True)
    rules = load_rules(args.rules or RULES_DIR / "board_a.yaml")
    note_registration(rules, args.no_register)
    source = open_source(args.source, rules, args.boards, args.seed, args.interval, args.defect_rate, args.camera,
                         int(args.max_pixels), args.glare)
    zoo = demo_zoo(models, _say) if args.zoo is None else _load_zoo(args.zoo)
    store = ResultStore(_db_url(args), connect=False)
    try:
        store.ready()
    except SchemaTooNew:
        raise
    except StoreUnavailable as exc:  # the line starts anyway and spools from its first board
        _say(f"warning: {exc}; results are spooled in {data} and stored when the database is back")
    line = LineConfig(line=args.line, station=args.station, policy=args.policy, device_mb=args.device_mb,
                      register=not args.no_register)
    overflow = args.overflow or ("drop-oldest" if args.source.startswith("camera:") else "wait")
    config = ServiceConfig(line, queue_capacity=args.queue, overflow=overflow, keep_crops=args.keep_crops,
                           min_free_mb=args.min_free_mb, db_retry_max_s=args.db_retry_max_s)
    publisher = None
    if args.mqtt:
        from .results.credentials import MQTT_CREDENTIAL, MQTT_PASSWORD_ENV, credential
        from .results.mqtt import MqttPublisher

        publisher = MqttPublisher(args.mqtt, args.line, args.station, prefix=args.mqtt_prefix,
                                  username=args.mqtt_username, password=credential(MQTT_PASSWORD_ENV, MQTT_CREDENTIAL),
                                  tls=args.mqtt_tls, ca_file=args.mqtt_ca)
        publisher.start()
    return rules, zoo, store, source, config, publisher, data


def cmd_run(args: argparse.Namespace) -> int:
    from .app.run import run_line, summary

    rules, zoo, store, source, config, publisher, data = _line_setup(args)
    _say(f"inspecting {source.name} with rule set {rules.recipe} ({rules.version}), policy {args.policy}")
    service, seconds = run_line(rules, zoo, _models_dir(args.models), source, config, store, data, _say,
                                published=[publisher] if publisher else None)
    print(summary(service, seconds))
    if publisher:
        st = publisher.status()
        print(f"mqtt: {st.published} boards acknowledged by {publisher.host}:{publisher.port}"
              + (f", {st.queued} not delivered: {st.last_error}" if st.queued else ""))
    return 0


def cmd_kiosk(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .app.run import line_profiles
    from .app.service import LineService
    from .endpoint import read_token
    from .kiosk.control import ALLOCATION_FILE, saved_allocation
    from .kiosk.service import Kiosk, KioskConfig

    token = read_token(args.token_file or os.environ.get("INSPECTOR_TOKEN_FILE") or None)
    rules, zoo, store, source, config, publisher, data = _line_setup(args)
    saved = saved_allocation(data)
    if saved is not None:
        config = replace(config, line=saved.applied_to(config.line))
        _say(f"allocation from {data / ALLOCATION_FILE} (saved over the API): device {saved.device_mb:g} MiB, "
             f"expert pool {saved.expert_pool_mb:g} MiB, executors {saved.executors or 'default'}")
    profiles = line_profiles(zoo, _models_dir(args.models), _say)
    service = LineService(rules, zoo, profiles, config, store, data, source,
                          [publisher] if publisher else None, _say)
    kiosk_config = KioskConfig(listen=args.listen, stall_s=args.stall_s, log_every_s=args.log_every,
                               silent_s=args.silent_s, token=token, llm_mb=args.llm_mb, lease_s=args.grant_lease_s)
    kiosk = Kiosk(service, kiosk_config, rules_path=rules.source, publisher=publisher, say=_say,
                  data_dir=data)  # rules_path: the file the rules were read from
    return kiosk.serve()


def _load_zoo(path: str):  # noqa: ANN202
    from .experts.zoo import Zoo

    return Zoo.load(Path(path))


def cmd_export(args: argparse.Namespace) -> int:
    from .results.export import export_csv
    from .results.store import Filters, ResultStore, parse_when

    store = ResultStore(_db_url(args))
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
    from .results.retention import prune
    from .results.store import ResultStore

    data = _data_dir(args.data)
    store = ResultStore(_db_url(args))
    report = prune(store, data / "crops", Path(args.archive) if args.archive else None, args.retain_days)
    print(report.line(args.retain_days))
    return 1 if report.errors else 0


def cmd_soak(args: argparse.Namespace) -> int:
    from .app.line import LineConfig
    from .app.run import RULES_DIR, demo_zoo, line_profiles
    from .app.service import ServiceConfig
    from .app.soak import soak
    from .routing.rules import load_rules

    rules = load_rules(args.rules or RULES_DIR / "board_a.yaml")
    zoo = demo_zoo(_models_dir(args.models), _say) if args.zoo is None else _load_zoo(args.zoo)
    profiles = line_profiles(zoo, _models_dir(args.models), _say)
    config = ServiceConfig(LineConfig(policy=args.policy, device_mb=args.device_mb))
    report = soak(rules, zoo, profiles, config, args.parts, Path(args.data) if args.data else None, _say)
    print(f"soak: rule set {rules.recipe}, policy {args.policy}, {report.samples[-1].parts} parts, "
          f"{report.stored} boards stored")
    print(report.table())
    print(f"RSS growth after warm-up: {report.growth * 100:+.2f}%")
    return 0


def cmd_beside(args: argparse.Namespace) -> int:
    from .app.beside import beside
    from .app.line import LineConfig
    from .app.run import RULES_DIR, demo_zoo, line_profiles
    from .app.service import ServiceConfig
    from .moe.text import read_prompts
    from .routing.rules import load_rules

    rules = load_rules(args.rules or RULES_DIR / "board_a.yaml")
    zoo = demo_zoo(_models_dir(args.models), _say) if args.zoo is None else _load_zoo(args.zoo)
    profiles = line_profiles(zoo, _models_dir(args.models), _say)
    config = ServiceConfig(LineConfig(policy=args.policy, device_mb=args.device_mb))
    serve = ["--policy", args.llm_policy, "--cache-ratio", str(args.cache_ratio), "--threads", str(args.threads),
             "--nice", str(args.nice)] + (["--model", args.model] if args.model else [])
    report = beside(rules, zoo, profiles, config, _models_dir(args.models), serve, read_prompts(args.prompts),
                    args.seconds, args.line_load, args.max_tokens, _say)
    print(report.table())
    return 0


def add_beside_parser(llm_sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--prompts", help="prompt file (default: the built-in set)")
    p.set_defaults(func=cmd_beside)


def cmd_accuracy(args: argparse.Namespace) -> int:
    from .app.accuracy import CONDITIONS, format_table, run_suite
    from .app.line import LineConfig
    from .app.run import RULES_DIR, demo_zoo
    from .routing.rules import load_rules

    rules = load_rules(args.rules or RULES_DIR / "board_a.yaml")
    note_registration(rules, args.no_register)
    if args.timing:
        from .app.accuracy import cut_timing

        print(f"rule set {rules.recipe}: {len(rules.placements())} parts a board, ms per board (best of 5)")
        for what, ms in cut_timing(rules).items():
            print(f"  {what:<20}{ms:>8.2f} ms")
        return 0
    zoo = demo_zoo(_models_dir(args.models), _say) if args.zoo is None else _load_zoo(args.zoo)
    names = [c.strip() for c in args.conditions.split(",") if c.strip()] if args.conditions else list(CONDITIONS)
    config = LineConfig(policy=args.policy, device_mb=args.device_mb, register=not args.no_register)
    results = run_suite(rules, zoo, _models_dir(args.models), names, args.boards, config, args.seed, say=_say)
    print(f"rule set {rules.recipe} ({rules.version}), zoo {zoo.root}, policy {args.policy}, registration "
          f"{'off' if args.no_register else 'on'}, seed {args.seed}")
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_json() for r in results], indent=1), encoding="utf-8")
        _say(f"wrote {args.json}")
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    """The dashboard lives in the ui package (the only one that imports Qt); imported here by name only."""
    import importlib

    try:
        app = importlib.import_module("ui.app")
    except ImportError as exc:
        raise RuntimeError(f"the dashboard cannot start: {exc}; install the project with its GUI dependencies "
                           "(pip install -e .), and on a box without a screen run it under Xvfb") from None
    return app.run(args)


def _database_flags(p: argparse.ArgumentParser, data: str = "data directory") -> None:
    """--db and --data, the same for every command that reads or writes results."""
    p.add_argument("--db", help="SQLAlchemy URL without a password (default: $INSPECTOR_DB_URL, the systemd credential "
                                "db-url, or SQLite in the data directory)")
    p.add_argument("--data", help=f"{data} (default: ./inspector-data or $INSPECTOR_DATA)")


def _line_flags(p: argparse.ArgumentParser, boards: int = 30) -> None:
    from .ingest.queue import OVERFLOW_POLICIES
    from .results.crops import KEEP_MODES

    p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    p.add_argument("--source", default="synthetic",
                   help="synthetic[:N] (default), folder:DIR, watch:DIR, replay:FILE, camera:URI (index, URL, file)")
    p.add_argument("--boards", type=int, default=boards,
                   help=f"boards of the synthetic source (default {boards}; 0: endless)")
    p.add_argument("--seed", type=int, default=1000, help="synthetic source seed (held out from training)")
    p.add_argument("--defect-rate", type=float, default=0.005,
                   help="fraction of synthetic parts with a defect (default 0.005; the demo zoo trains at ~0.4)")
    p.add_argument("--camera", help="render synthetic boards as a camera sees them: a preset (realistic: placement "
                                    "within 6 px and 0.4 deg, light, a soft lens, noise, JPEG) or settings "
                                    "shift=PX,rotation=DEG,scale=FRAC,gain=LO:HI,contrast=LO:HI,gradient=FRAC,"
                                    "blur=SIGMA,noise=SIGMA,jpeg=QUALITY (README)")
    p.add_argument("--glare", metavar="TYPE[:STRENGTH]",
                   help="synthetic boards under a light the experts never saw: a highlight on every body of one "
                        "component type (strength 0.5 of full scale by default): a systematic false call to review")
    p.add_argument("--no-register", action="store_true",
                   help="cut boards at the recipe's nominal positions, without registering them on their fiducials")
    p.add_argument("--interval", type=float, default=0.0,
                   help="seconds between synthetic boards, like a conveyor (default 0: as fast as the line takes)")
    p.add_argument("--policy", default="coserve", help="engine policy (coserve, samba, ...)")
    p.add_argument("--device-mb", type=float, default=160.0, help="expert + batch memory of the main device")
    _database_flags(p)
    p.add_argument("--db-retry-max-s", type=float, default=30.0,
                   help="longest wait between retries while the database is down (default 30; the first is 1 s, "
                        "then doubling)")
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    p.add_argument("--line", default="line-1")
    p.add_argument("--station", default="aoi-1")
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


def build_parser() -> argparse.ArgumentParser:
    from .coserve.online.policies import POLICY_NAMES, get_policy

    parser = argparse.ArgumentParser(prog="inspector", description="Circuit-board inspection appliance")
    parser.add_argument("--models", help="models directory (default: ./models or $INSPECTOR_MODELS)")
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("bench", help="run one workload under several policies side by side")
    bench.add_argument("--policies", default=DEFAULT_POLICIES, help="comma list of: " + "; ".join(
        f"{name} ({get_policy(name).summary})" for name in POLICY_NAMES))
    bench.add_argument("--workload", help="workload YAML (default: the built-in task-a-small)")
    bench.add_argument("--json", help="also write the report as JSON to this path")
    bench.add_argument("--no-ceiling", action="store_true", help="skip the all-resident ceiling run")
    bench.add_argument("--simulate", action="store_true",
                       help="run the same scheduler and policies on a virtual clock instead of running models")
    bench.add_argument("--box", help="with --simulate: a box profile file or a shipped one (paper-numa, paper-uma); "
                                     "default: this machine's measured profile")
    bench.add_argument("--planned", action="store_true",
                       help="plan executors and memory first (inspector plan) and bench the planned configuration")
    bench.add_argument("--check-sim", action="store_true",
                       help="run each policy for real and simulated, and print how well they agree")
    bench.add_argument("--ablation", action="store_true",
                       help="the ablation ladder instead of --policies: samba, the paper's steps up to coserve-paper, "
                            "then our extras one at a time up to coserve")
    bench.add_argument("--repeat", type=int, default=1, metavar="N",
                       help="run every policy N times, interleaved run by run; report medians and the spread")
    bench.add_argument("--sweep", metavar="PARAM=V1,V2,...",
                       help="a whole bench at each memory size: device_mb=... or expert_pool_mb=... (MiB)")
    bench.add_argument("--paper-tasks", action="store_true",
                       help="with --simulate --box paper-numa|paper-uma: tasks A1-B2 against the paper's bands")
    bench.add_argument("--plot", metavar="PNG", help="write a chart: the policies' bars, or the sweep's curves")
    bench.add_argument("--keep-page-cache", action="store_true",
                       help="let expert files stay in the OS page cache (disk switches then read RAM)")
    bench.set_defaults(func=cmd_bench)

    zoo = sub.add_parser("zoo", help="expert zoos")
    zoo_sub = zoo.add_subparsers(dest="zoo_command", required=True)
    build = zoo_sub.add_parser("build", help="write a workload's benchmark experts to disk (cached)")
    build.add_argument("--workload", help="workload YAML (default: the built-in one)")
    build.add_argument("--demo", action="store_true",
                       help="train the demo experts of routing_rules/board_a and board_b on synthetic boards")
    build.set_defaults(func=cmd_zoo_build)
    from .app.loop_commands import add_parsers as add_loop_parsers

    add_loop_parsers(sub, zoo_sub, _db_url, _models_dir, _database_flags)

    run = sub.add_parser("run", help="the main job: inspect a board stream into the results database")
    _line_flags(run)
    run.set_defaults(func=cmd_run)

    kiosk = sub.add_parser("kiosk", help="run the line as a headless service (systemd notify, metrics, health)")
    _line_flags(kiosk, boards=0)
    kiosk.add_argument("--listen", default="127.0.0.1:9108", help="metrics/health/status address (default "
                                                                    "127.0.0.1:9108)")
    kiosk.add_argument("--stall-s", type=float, default=60.0,
                       help="boards inside and none finished this long counts as stalled (default 60)")
    kiosk.add_argument("--log-every", type=float, default=30.0, help="seconds between progress lines (default 30)")
    kiosk.add_argument("--silent-s", type=float, default=None,
                       help="no image for this many seconds makes health degraded (default: off)")
    kiosk.add_argument("--token-file", help="API token file (mode 0600) that POST /rules and /allocation require "
                                            "(default $INSPECTOR_TOKEN_FILE; none: the kiosk takes no changes)")
    kiosk.add_argument("--llm-mb", type=float, default=0.0,
                       help="memory set aside for a language model beside the line, lent to `inspector llm serve "
                            "--ledger` on a lease over the API (default 0: none)")
    kiosk.add_argument("--grant-lease-s", type=float, default=15.0,
                       help="a memory grant not renewed for this long is taken back (default 15)")
    kiosk.set_defaults(func=cmd_kiosk)

    export = sub.add_parser("export", help="export results")
    export.add_argument("--csv", required=True, help="output file, or - for standard output")
    export.add_argument("--since", help="ISO time, inclusive; with an offset (+02:00, Z) or else the box's local time")
    export.add_argument("--until", help="ISO time, exclusive; with an offset (+02:00, Z) or else the box's local time")
    export.add_argument("--board", help="one board serial")
    export.add_argument("--verdict", choices=["pass", "fail", "error"], help="component verdict")
    export.add_argument("--component", help="one component type (R0402, ...)")
    _database_flags(export)
    export.set_defaults(func=cmd_export)

    db = sub.add_parser("db", help="the results database: retention")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    prune = db_sub.add_parser("prune", help="delete boards, kept crops and archived images older than the retention")
    prune.add_argument("--retain-days", type=float, required=True, help="keep this many days")
    prune.add_argument("--archive", help="a watched folder's archive (its inspected/ folder) to prune too")
    _database_flags(prune, "data directory holding crops/")
    prune.set_defaults(func=cmd_db_prune)

    soak_p = sub.add_parser("soak", help="run the line on synthetic boards for a long time and report memory (RSS)")
    soak_p.add_argument("--parts", type=int, default=100_000, help="parts to inspect (default 100000)")
    soak_p.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    soak_p.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    soak_p.add_argument("--policy", default="coserve", help="engine policy")
    soak_p.add_argument("--device-mb", type=float, default=160.0, help="expert + batch memory of the main device")
    soak_p.add_argument("--data", help="where the soak's database and crops go (default: a temporary folder)")
    soak_p.set_defaults(func=cmd_soak)

    plan = sub.add_parser("plan", help="offline configuration: executor counts, memory split, placement")
    plan.add_argument("--workload", help="workload YAML or shipped name (default: the built-in one)")
    plan.add_argument("--simulate", action="store_true", help="evaluate candidates on the simulator")
    plan.add_argument("--box", help="plan for a box profile (paper-numa, paper-uma or a file); implies --simulate")
    plan.add_argument("--compare", action="store_true",
                      help="then run the whole workload with the casual and the planned configuration")
    plan.set_defaults(func=cmd_plan)

    prof = sub.add_parser("profile", help="profile the workload's architectures on every device")
    prof.add_argument("--workload", help="workload YAML (default: the built-in one)")
    prof.add_argument("--force", action="store_true", help="re-profile even if a profile exists")
    prof.set_defaults(func=cmd_profile)

    from .app.accuracy import CONDITIONS, HELD_OUT_SEED

    acc = sub.add_parser("accuracy", help="recall and false alarms on held-out boards under camera conditions")
    acc.add_argument("--rules", help="rule set YAML (default: routing_rules/board_a.yaml)")
    acc.add_argument("--zoo", help="zoo directory (default: the demo zoo, trained on first use)")
    acc.add_argument("--boards", type=int, help="boards per condition (default: enough for 2000 good parts and 100 "
                                                "defects at 5%% defective parts)")
    acc.add_argument("--conditions", help="comma list (default: all): " + ", ".join(CONDITIONS))
    acc.add_argument("--json", help="also write the results as JSON to this path")
    acc.add_argument("--seed", type=int, default=HELD_OUT_SEED, help=f"held-out board seed (default {HELD_OUT_SEED})")
    acc.add_argument("--policy", default="coserve", help="engine policy (verdicts do not depend on it)")
    acc.add_argument("--device-mb", type=float, default=160.0, help="expert + batch memory of the main device")
    acc.add_argument("--no-register", action="store_true", help="cut boards at nominal positions (to compare)")
    acc.add_argument("--timing", action="store_true",
                     help="only time registration and cutting (nominal, one warp per crop, one per board) per board")
    acc.set_defaults(func=cmd_accuracy)

    gui = sub.add_parser("gui", help="the operator dashboard (PySide6): run a line here, or --attach to a kiosk")
    _line_flags(gui, boards=0)
    gui.add_argument("--attach", metavar="URL", help="show a running kiosk (its /status; --db names its results "
                                                      "database) instead of running a line")
    gui.add_argument("--token-file", help="with --attach: the kiosk's API token file, to edit its rules and memory")
    gui.add_argument("--start", action="store_true", help="start the line at once")
    gui.add_argument("--llm-model", help="the LLM tab's checkpoint directory (default: the built demo model)")
    gui.set_defaults(func=cmd_gui)

    from .moe.commands import add_llm_parser

    llm_sub = add_llm_parser(sub)
    add_beside_parser(llm_sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("YOLO_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, KeyError, RuntimeError) as exc:
        print(f"inspector: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
