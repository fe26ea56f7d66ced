"""The engine's commands: bench (policies side by side), plan, profile, and the expert zoos."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..paths import shipped_boxes
from .common import comma_list, models_of, say
from .exits import UsageError

DEFAULT_POLICIES = "samba,samba-fifo,samba-parallel,coserve-paper,coserve"


def cmd_bench(args: argparse.Namespace) -> int:
    from ..coserve.evaluation.report import format_backends, format_costs, format_table, format_time_shares
    from ..coserve.online.policies import ABLATION, BASELINES, get_policy

    if args.ablation:
        policies = [BASELINES[0], *ABLATION]
    else:
        policies = comma_list(args.policies)
    for p in policies:
        get_policy(p)
    twice = sorted({p for p in policies if policies.count(p) > 1})
    if twice:
        raise UsageError(f"--policies names {', '.join(twice)} more than once; name each once and use --repeat N to "
                         "run every policy N times (medians and spread)")
    if args.repeat < 1:
        raise UsageError("--repeat must be 1 or more")
    if args.save_box and not args.check_sim:
        raise UsageError("--save-box writes the costs a --check-sim run served: add --check-sim")
    workload = bench_workload(args)
    backends = backends_of(args)
    simulated = [f for f, on in (("--simulate", args.simulate), ("--check-sim", args.check_sim),
                                 ("--sweep", args.sweep), ("--paper-tasks", args.paper_tasks)) if on]
    if simulated and len(backends) > 1:
        raise UsageError(f"{simulated[0]} runs on one backend's profile: name one with --backend, or bench the "
                         "backends for real: inspector bench --backend " + ",".join(backends))
    if args.box and backends != ["torch"]:
        raise UsageError("--box carries its own devices' costs; leave --backend out with it")
    if args.feed is not None and args.feed <= 0:
        raise UsageError(f"--feed must be a positive multiple of the ceiling (2: twice it), got {args.feed:g}")
    if len(backends) > 1 and args.planned:
        raise UsageError("--planned plans for one backend: name one with --backend")
    if args.check_sim:
        from ..coserve.evaluation.preparation import prepare
        from ..coserve.evaluation.simcheck import Served, compare, format_agreement, with_feed

        zoo, profiles = prepare(workload, models_of(args), progress=say, backend=backends[0])
        offered = None
        if args.feed is not None:
            workload, offered = with_feed(workload, zoo, profiles, args.feed, backends[0], say)
        served = Served()
        table = format_agreement(compare(workload, zoo, profiles, policies, progress=say, backend=backends[0],
                                         pooled=served))
        print(table if offered is None else f"{offered}\n{table}")
        if args.save_box:
            save_served_box(Path(args.save_box), served.profiles(profiles), workload, policies, backends[0],
                            served.runs)
        return 0
    if args.planned:
        from ..coserve.offline.planner import make_plan

        _, zoo, profiles, evaluate, workload = planning_inputs(args, workload)
        workload = make_plan(workload, zoo, profiles, evaluate).workload
        say(f"planned: executors {workload.executors}, experts {workload.expert_pool_bytes / 2**20:.0f} MiB")

    def bench(w, backend: str = backends[0]):  # noqa: ANN001, ANN202 - one side-by-side bench of workload w
        if args.simulate:
            from ..coserve.evaluation.bench import run_simulated_bench

            return run_simulated_bench(w, policies, models_of(args), box=args.box, progress=say,
                                       ceiling=not args.no_ceiling, feed=args.feed, backend=backend)
        from ..coserve.evaluation.bench import run_bench

        return run_bench(w, policies, models_of(args), progress=say, ceiling=not args.no_ceiling,
                         drop_page_cache=not args.keep_page_cache, repeat=args.repeat, backend=backend,
                         feed=args.feed)

    if args.paper_tasks:
        from ..coserve.evaluation.paper import format_tasks, run_tasks

        if not args.simulate or args.box not in ("paper-numa", "paper-uma"):
            raise UsageError("--paper-tasks needs --simulate --box paper-numa or --box paper-uma")
        reports, rows = run_tasks(bench)
        for report in reports:
            print(format_table(report))
        print(format_tasks(rows, args.box))
        return 0
    if args.sweep:
        from ..coserve.evaluation.sweep import format_sweep, parse_sweep, run_sweep

        parameter, values = parse_sweep(args.sweep)
        sweep = run_sweep(workload, parameter, values, bench)
        for report in sweep.reports:
            print(format_table(report))
        print(format_sweep(sweep))
        if args.plot:
            from ..coserve.evaluation.plots import plot_sweep

            say(f"wrote {plot_sweep(sweep, Path(args.plot))}")
        if args.json:
            Path(args.json).write_text(json.dumps({"parameter": parameter, "values": values,
                                                   "reports": [r.to_json() for r in sweep.reports]}, indent=1),
                                       encoding="utf-8")
            say(f"wrote {args.json}")
        return 0
    reports = []
    for backend in backends:
        report = bench(workload, backend)
        reports.append(report)
        print(format_table(report))
        print(format_time_shares(report))
        print(format_costs(report))
    if len(reports) > 1:
        print(format_backends(reports))
    if args.plot:
        from ..coserve.evaluation.plots import plot_bench

        for report in reports:
            path = Path(args.plot) if len(reports) == 1 else Path(args.plot).with_stem(
                f"{Path(args.plot).stem}-{report.backend}")
            say(f"wrote {plot_bench(report, path)}")
    if args.json:
        data = reports[0].to_json() if len(reports) == 1 else {"backends": [r.to_json() for r in reports]}
        Path(args.json).write_text(json.dumps(data, indent=1), encoding="utf-8")
        say(f"wrote {args.json}")
    return 0


def save_served_box(path: Path, profiles: dict, workload, policies: list[str], backend: str,  # noqa: ANN001
                    runs: int) -> None:
    """Write this machine as a box (the check's served refit) and say where its figures came from."""
    import datetime
    import os

    from .. import __version__
    from ..coserve.evaluation.boxes import write_box
    from ..runtime.devices import Device

    devices = ", ".join(Device.parse(key).describe() for key in profiles)
    measured = (f"{devices}, {os.cpu_count()} cores; written by `inspector bench --check-sim --save-box` on "
                f"{datetime.date.today().isoformat()} (inspector {__version__}, backend {backend}): "
                f"{', '.join(policies)} on the workload {workload.name} x {workload.requests}")
    sources = {"devices": f"this machine's offline profiles with each architecture's K, B and load latencies refit "
                          f"from what the check's {runs} real runs served (time shared with other executors turned "
                          "back into solo time by the profile's concurrency curve); what no run served keeps its "
                          "offline figure",
               "executors": "left to the workload"}
    write_box(path, profiles, measured, sources)
    say(f"box written: {path} (simulate on it: inspector bench --simulate --box {path})")


def bench_workload(args: argparse.Namespace):  # noqa: ANN201 - a Workload
    """The workload `--workload` names, or the boards of `--rules` (app/rules_workload.py), or the built-in one."""
    from ..coserve.online.workload import load_workload

    if args.rules:
        from ..app.rules_workload import workload_of_rules
        from ..routing.rules import load_rules

        if args.workload:
            raise UsageError("give --workload or --rules, not both")
        if args.requests is not None:
            raise UsageError("--requests goes with a workload; a rule set's stream is its boards: use --boards")
        return workload_of_rules(load_rules(args.rules), args.boards or 20, args.device_mb)
    if args.boards is not None or args.device_mb is not None:
        raise UsageError("--boards and --device-mb go with --rules (a workload file sets its own)")
    workload = load_workload(Path(args.workload) if args.workload else None)
    return workload if args.requests is None else with_requests(workload, args.requests)


def with_requests(workload, requests: int):  # noqa: ANN001, ANN201 - a Workload
    """The workload's stream cut or lengthened to `requests` (its boards, mix and memory unchanged): every
    expert's first load from the start is paid once, so a longer stream shows the engine past its cold start."""
    from dataclasses import replace

    if requests < 1:
        raise UsageError(f"--requests must be 1 or more, got {requests}")
    return replace(workload, requests=requests)


def planning_inputs(args: argparse.Namespace, workload):  # noqa: ANN001, ANN202 - CLI glue
    """(label, zoo, profiles, evaluate, workload as the box runs it), on this box or a box profile (simulated)."""
    from ..coserve.evaluation.boxes import box_profiles
    from ..coserve.evaluation.preparation import prepare
    from ..coserve.offline.planner import engine_evaluator, sim_evaluator

    if args.box or args.simulate:
        label, zoo, profiles, workload = box_profiles(args.box, models_of(args), workload, say)
        return label, zoo, profiles, sim_evaluator(zoo, profiles), workload
    backend = backends_of(args)[0]
    zoo, profiles = prepare(workload, models_of(args), progress=say, backend=backend)
    return "this box", zoo, profiles, engine_evaluator(zoo, profiles, backend=backend), workload


def backends_of(args: argparse.Namespace) -> list[str]:
    """The --backend list, each name checked (one at most where the command measures no real runs)."""
    from ..experts.backends import BACKENDS

    names = comma_list(getattr(args, "backend", "torch")) or ["torch"]
    for name in names:
        if name not in BACKENDS:
            raise UsageError(f"--backend {name!r} is not a backend; use one or more of {', '.join(BACKENDS)}, "
                             "comma-separated")
    if len(set(names)) < len(names):
        raise UsageError("--backend names a backend twice; name each once")
    return names


def cmd_plan(args: argparse.Namespace) -> int:
    from ..coserve.evaluation.bench import run_policy, simulate_policy
    from ..coserve.evaluation.report import format_table
    from ..coserve.evaluation.simulation import rate_oracle
    from ..coserve.offline.planner import format_plan, make_plan
    from ..coserve.online.policies import get_policy
    from ..coserve.online.workload import load_workload

    workload = load_workload(Path(args.workload) if args.workload else None)
    label, zoo, profiles, evaluate, workload = planning_inputs(args, workload)
    say(f"planning {workload.name} on {label}")
    plan = make_plan(workload, zoo, profiles, evaluate)
    print(format_plan(plan))
    if args.compare:
        from ..coserve.evaluation.report import BenchReport

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
    from ..coserve.evaluation.preparation import prepare
    from ..coserve.online.workload import load_workload

    if args.demo or args.rules:
        from ..app.run import demo_zoo, starter_zoo
        from ..routing.rules import load_rules

        if args.rules:
            zoo = starter_zoo(models_of(args), load_rules(args.rules), say, args.seed)
            print(f"starter zoo {zoo.root} (seed {args.seed})")
        else:
            zoo = demo_zoo(models_of(args), say, args.seed)
            print(f"demo zoo {zoo.root} (seed {args.seed})")
        for e in zoo.entries.values():
            print(f"  {e.name:<18} {e.role:<10} validation accuracy {e.val_accuracy:.3f} ({e.train_samples} crops)")
        return 0

    workload = load_workload(Path(args.workload) if args.workload else None)
    zoo, _ = prepare(workload, models_of(args), progress=say)
    total = sum(e.weight_bytes for e in zoo.entries.values())
    print(f"zoo {zoo.root}: {len(zoo.entries)} experts, {total / 2**20:.0f} MiB")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from ..coserve.evaluation.preparation import zoo_for
    from ..coserve.offline.profiler import load_or_profile
    from ..coserve.online.workload import load_workload
    from ..experts.backends import get_backend
    from ..experts.backends.ahead import prepare_zoo
    from ..runtime.devices import available_devices

    workload = load_workload(Path(args.workload) if args.workload else None)
    zoo = zoo_for(workload, models_of(args), progress=say)
    if args.switch_ways:
        from ..experts.backends.switch_ways import format_ways, switch_ways

        expert = next(n for n in zoo.entries if zoo.entries[n].role == "classifier")
        print(format_ways(switch_ways(zoo, expert, backends_of(args)), expert))
        return 0
    for name in backends_of(args):
        backend = get_backend(name)
        if name != "torch":
            prepare_zoo(zoo, backend, say)
        for device in available_devices():
            prof = load_or_profile(zoo, device, models_of(args) / "profiles", force=args.force, progress=say,
                                   backend=backend)
            print(f"{device.key}, backend {name}: {prof.fingerprint.get('name')}")
            print(f"  {'architecture':<28}{'K ms':>8}{'B ms':>8}{'max batch':>10}{'load ms':>26}{'cold ms':>9}"
                  f"{'MiB':>8}{'pool MiB':>10}")
            for key, p in prof.archs.items():
                loads = " ".join(f"{t}={s * 1000:.1f}" for t, s in p.load_s.items())
                print(f"  {key:<28}{p.k_s * 1000:>8.2f}{p.b_s * 1000:>8.2f}{p.max_batch:>10}{loads:>26}"
                      f"{p.cold_s * 1000:>9.2f}{p.weight_bytes / 2**20:>8.1f}{p.pool_bytes() / 2**20:>10.1f}")
            print("  cold ms: what the first batch after a switch takes beyond the same batch back to back")
    return 0


def add_bench(p: argparse.ArgumentParser) -> None:
    from ..coserve.online.policies import POLICY_NAMES, get_policy

    p.add_argument("--policies", default=DEFAULT_POLICIES, help="comma list of: " + "; ".join(
        f"{name} ({get_policy(name).summary})" for name in POLICY_NAMES))
    p.add_argument("--workload", help="workload YAML (default: the built-in task-a-small)")
    p.add_argument("--rules", help="bench a rule set's own boards instead (an imported board: its types, counts "
                                   "and routes; the built-in workload's line rate and memory)")
    p.add_argument("--boards", type=int, help="with --rules: how many boards (default 20)")
    p.add_argument("--requests", type=int, metavar="N",
                   help="a stream of N requests instead of the workload's own (the same boards, mix and memory): "
                        "a longer one shows the engine past its cold start, whose loads every policy pays once")
    p.add_argument("--device-mb", type=float, help="with --rules: the device memory for experts and batches "
                                                   "(default: the built-in workload's)")
    p.add_argument("--json", help="also write the report as JSON to this path")
    p.add_argument("--no-ceiling", action="store_true", help="skip the all-resident ceiling run")
    p.add_argument("--feed", type=float, metavar="X", help="offer X times the engine's uncapped all-resident ceiling "
                   "(measured first, every request queued at once) instead of the workload's arrival_interval_ms, "
                   "so no policy is held by arrivals (e.g. --feed 2; with --check-sim too)")
    p.add_argument("--simulate", action="store_true",
                   help="run the same scheduler and policies on a virtual clock instead of running models")
    p.add_argument("--box", help=f"with --simulate: a box profile file or a shipped one ({', '.join(shipped_boxes())})"
                                 "; default: this machine's measured profile on --backend")
    p.add_argument("--planned", action="store_true",
                   help="plan executors and memory first (inspector plan) and bench the planned configuration")
    p.add_argument("--check-sim", action="store_true",
                   help="run each policy for real and simulated, and print how well they agree")
    p.add_argument("--save-box", metavar="FILE",
                   help="with --check-sim: write this machine as a box profile, its costs refit from what the "
                        "check's real runs served, for --simulate --box FILE elsewhere")
    p.add_argument("--ablation", action="store_true",
                   help="the ablation ladder instead of --policies: samba, the paper's steps up to coserve-paper, "
                        "then our extras one at a time up to coserve")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run every policy N times, interleaved run by run; report medians and the spread")
    p.add_argument("--sweep", metavar="PARAM=V1,V2,...",
                   help="a whole bench at each memory size: device_mb=... or expert_pool_mb=... (MiB)")
    p.add_argument("--paper-tasks", action="store_true",
                   help="with --simulate --box paper-numa|paper-uma: tasks A1-B2 against the paper's bands")
    p.add_argument("--plot", metavar="PNG", help="write a chart: the policies' bars, or the sweep's curves")
    p.add_argument("--backend", default="torch", metavar="B[,B...]",
                   help="what runs the experts: torch, onnxruntime, or several (comma-separated: a whole bench per "
                        "backend in one process, then the backends side by side)")
    p.add_argument("--keep-page-cache", action="store_true",
                   help="let expert files stay in the OS page cache (disk switches then read RAM)")
    p.set_defaults(func=cmd_bench)


def add_zoo(p: argparse.ArgumentParser) -> None:
    zoo_sub = p.add_subparsers(dest="zoo_command", required=True)
    build = zoo_sub.add_parser("build", help="write a workload's benchmark experts to disk (cached)")
    build.add_argument("--workload", help="workload YAML (default: the built-in one)")
    build.add_argument("--demo", action="store_true",
                       help="train the demo experts of routing_rules/board_a and board_b on synthetic boards")
    build.add_argument("--rules", help="train starter experts for this rule set (a board of the plant's own, "
                                       "imported by `board import`) on boards the renderer draws of it, into "
                                       "models/starter/<recipe>")
    build.add_argument("--seed", type=int, default=0, help="--demo: the training's seed (default 0, the line's zoo "
                                                           "models/demo; another seed builds models/demo-seed<N>)")
    build.set_defaults(func=cmd_zoo_build)
    from .loop import add_zoo_parsers
    from .operate import add_zoo_operate
    from .rollout import add_rollout_parsers

    add_zoo_parsers(zoo_sub)
    add_zoo_operate(zoo_sub)
    add_rollout_parsers(zoo_sub)


def add_plan(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", help="workload YAML or shipped name (default: the built-in one)")
    p.add_argument("--simulate", action="store_true", help="evaluate candidates on the simulator")
    p.add_argument("--box", help=f"plan for a box profile ({', '.join(shipped_boxes())} or a file); implies --simulate")
    from ..experts.backends import BACKENDS

    p.add_argument("--backend", default="torch", choices=BACKENDS,
                   help="plan for experts on this backend (its profile: switch, batch and memory costs)")
    p.add_argument("--compare", action="store_true",
                   help="then run the whole workload with the casual and the planned configuration")
    p.set_defaults(func=cmd_plan)


def add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", help="workload YAML (default: the built-in one)")
    p.add_argument("--force", action="store_true", help="re-profile even if a profile exists")
    p.add_argument("--backend", default="torch", metavar="B[,B...]",
                   help="profile on these backends (torch, onnxruntime, onnxruntime-int8, openvino): a runtime's "
                        "switch is a session's creation")
    p.add_argument("--switch-ways", action="store_true",
                   help="instead: a switch of one classifier from disk on each --backend, each way the runtime "
                        "allows (plain or pre-optimised model files, a model cache, kept sessions)")
    p.set_defaults(func=cmd_profile)


