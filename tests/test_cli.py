"""The real `inspector` command: bench with JSON output, zoo build, profile, errors."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import TINY


def run(args: list[str], models: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, INSPECTOR_MODELS=str(models), YOLO_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "inspector.cli", *args], capture_output=True, encoding="utf-8",
                          env=env, cwd=cwd, timeout=600)


def test_bench_prints_table_and_writes_json(models_dir: Path, tmp_path: Path, tiny) -> None:
    wl = tmp_path / "tiny.yaml"
    wl.write_text(TINY.replace("requests: 48", "requests: 24"))
    out = tmp_path / "bench.json"
    proc = run(["bench", "--workload", str(wl), "--policies", "samba,coserve-em-ra,coserve", "--json", str(out)],
               models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "all-resident ceiling" in proc.stdout and "verdicts identical across policies: yes" in proc.stdout
    data = json.loads(out.read_text())
    assert set(data) >= {"workload", "ceiling_rps", "runs"} and data["ceiling_rps"] > 0
    assert [r["policy"] for r in data["runs"]] == ["samba", "coserve-em-ra", "coserve"]
    for r in data["runs"]:
        for key, kind in [("throughput_rps", float), ("switches", int), ("completed", int), ("failed", int),
                          ("mean_latency_s", float), ("p99_latency_s", float), ("sched_overhead_pct", float),
                          ("em_overhead_pct", float)]:
            assert isinstance(r[key], kind), key
        assert r["completed"] == 24 and r["failed"] == 0


def test_version_and_the_exit_codes_kept(models_dir: Path, tmp_path: Path) -> None:
    from inspector import __version__

    proc = run(["--version"], models_dir, tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(f"inspector {__version__}")
    assert run(["bench", "--no-such-flag"], models_dir, tmp_path).returncode == 2  # argparse's usage error
    proc = run(["bench", "--workload", str(tmp_path / "gone.yaml")], models_dir, tmp_path)
    assert proc.returncode == 1 and "gone.yaml" in proc.stderr  # found wrong while doing the job: a failure
    help_text = run(["--help"], models_dir, tmp_path).stdout
    assert "exit codes: 0 done; 1" in help_text and "--version" in help_text


def test_unknown_policy_and_bad_workload_are_clear_errors(models_dir: Path, tmp_path: Path) -> None:
    proc = run(["bench", "--policies", "samba,fastest"], models_dir, tmp_path)
    assert proc.returncode == 2 and "unknown policy 'fastest'" in proc.stderr
    proc = run(["bench", "--policies", "samba,coserve,samba"], models_dir, tmp_path)
    assert proc.returncode == 2 and "names samba more than once" in proc.stderr and "--repeat" in proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.replace("requests: 48", "requests: -1"))
    proc = run(["bench", "--workload", str(bad)], models_dir, tmp_path)
    assert proc.returncode == 1 and "bad.yaml:13: requests: must be at least 1" in proc.stderr


def test_profile_command_prints_measured_table(models_dir: Path, tmp_path: Path, tiny) -> None:
    wl = tmp_path / "tiny.yaml"
    wl.write_text(TINY)
    proc = run(["profile", "--workload", str(wl)], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "resnet10@32/c2" in proc.stdout and "disk=" in proc.stdout


def test_plan_and_simulated_bench_commands(models_dir: Path, tmp_path: Path, tiny) -> None:
    wl = tmp_path / "auto.yaml"
    wl.write_text(TINY.replace("memory: {expert_pool_mb: 45}", "memory: {device_mb: 80}").replace(
        "executors: {cpu: 2}\n", ""))
    proc = run(["plan", "--workload", str(wl), "--simulate"], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "searched (Figure 17)" in proc.stdout and "memory:" in proc.stdout and "placement pool 0" in proc.stdout
    proc = run(["bench", "--workload", str(wl), "--simulate", "--policies", "samba,coserve", "--no-ceiling"],
               models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(simulated)" in proc.stdout and "coserve" in proc.stdout
    assert "6 component types, 48 requests" in proc.stdout, proc.stdout
    proc = run(["bench", "--workload", str(wl), "--simulate", "--policies", "coserve", "--no-ceiling",
                "--requests", "120"], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "6 component types, 120 requests" in proc.stdout and " 120    0 " in proc.stdout, proc.stdout
    for args, message in ((["--workload", str(wl), "--requests", "0"], "--requests must be 1 or more"),
                          (["--rules", str(wl), "--requests", "9"], "use --boards")):
        proc = run(["bench", *args], models_dir, tmp_path)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_bench_repeats_plots_sweeps_and_the_ablation(models_dir: Path, tmp_path: Path, tiny) -> None:
    wl = tmp_path / "tiny.yaml"
    wl.write_text(TINY.replace("requests: 48", "requests: 24"))
    png = tmp_path / "bench.png"
    proc = run(["bench", "--workload", str(wl), "--policies", "samba,coserve-paper,coserve", "--repeat", "2",
                "--no-ceiling", "--plot", str(png)], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "medians of 2 interleaved runs" in proc.stdout and "spread" in proc.stdout
    assert "where the executors' time goes" in proc.stdout and "(round 2 of 2)" in proc.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"
    proc = run(["bench", "--workload", str(wl), "--simulate", "--ablation", "--no-ceiling"], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split()[0] for line in proc.stdout.splitlines() if line.startswith(("samba", "coserve"))]
    assert rows[:10] == ["samba", "coserve-none", "coserve-em", "coserve-em-ra", "coserve-paper", "coserve-paper+qe",
                         "coserve-paper+qe+lane", "coserve-paper+qe+lane+pf", "coserve", "samba"]
    sweep_png = tmp_path / "sweep.png"
    proc = run(["bench", "--workload", str(wl), "--simulate", "--policies", "samba,coserve", "--sweep",
                "expert_pool_mb=40,60", "--plot", str(sweep_png)], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sweep of expert_pool_mb (MiB)" in proc.stdout and sweep_png.is_file()
    for args, message in ((["--sweep", "pool=3"], "PARAMETER one of"), (["--paper-tasks"], "needs --simulate"),
                          (["--repeat", "0"], "--repeat must be 1 or more")):
        proc = run(["bench", "--workload", str(wl), *args], models_dir, tmp_path)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_bench_runs_each_backend_and_sets_them_side_by_side(models_dir: Path, tmp_path: Path, tiny) -> None:
    """One process, the same stream and memory: a whole bench per backend, the backend's profiled costs (a
    runtime's switch is a session's creation), then the backends side by side with their verdicts compared."""
    wl = tmp_path / "tiny.yaml"
    wl.write_text(TINY.replace("requests: 48", "requests: 24"))
    out = tmp_path / "bench.json"
    proc = run(["bench", "--workload", str(wl), "--policies", "samba,coserve", "--backend", "torch,onnxruntime",
                "--json", str(out)], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "backend onnxruntime (base: samba)" in proc.stdout
    assert "profiled costs on" in proc.stdout and "backends side by side" in proc.stdout
    assert "verdicts of onnxruntime equal to torch's: 24/24 requests (100.00%)" in proc.stdout
    data = json.loads(out.read_text())
    assert [b["backend"] for b in data["backends"]] == ["torch", "onnxruntime"]
    for b in data["backends"]:
        assert all(r["completed"] == 24 and r["failed"] == 0 for r in b["runs"]) and b["ceiling_rps"] > 0
    ort = {c["key"]: c for c in data["backends"][1]["costs"] if c["threads"] == 1}
    assert ort["resnet10@32/c2"]["switch_ms"] > 0 and ort["resnet10@32/c2"]["resident_mib"] > 0
    proc = run(["bench", "--workload", str(wl), "--backend", "torch,tensorrt"], models_dir, tmp_path)
    assert proc.returncode == 2 and "--backend 'tensorrt' is not a backend" in proc.stderr
    sim = tmp_path / "sim.json"  # the simulator on the runtime's own profile: its switches and batches, not torch's
    proc = run(["bench", "--workload", str(wl), "--simulate", "--policies", "samba,coserve", "--backend", "onnxruntime",
                "--json", str(sim)], models_dir, tmp_path)
    assert proc.returncode == 0 and "(simulated), backend onnxruntime" in proc.stdout, proc.stderr
    simulated = json.loads(sim.read_text())
    assert simulated["backend"] == "onnxruntime" and simulated["costs"] == data["backends"][1]["costs"]
    assert simulated["costs"] != data["backends"][0]["costs"]
    proc = run(["bench", "--workload", str(wl), "--simulate", "--backend", "torch,onnxruntime"], models_dir, tmp_path)
    assert proc.returncode == 2 and "--simulate runs on one backend's profile" in proc.stderr
    proc = run(["bench", "--workload", str(wl), "--simulate", "--box", "paper-uma", "--backend", "onnxruntime"],
               models_dir, tmp_path)
    assert proc.returncode == 2 and "--box carries its own devices' costs" in proc.stderr


def test_profile_measures_a_switch_each_way_the_runtimes_allow(models_dir: Path, tmp_path: Path, tiny) -> None:
    wl = tmp_path / "tiny.yaml"
    wl.write_text(TINY)
    backends = "torch,onnxruntime,openvino"
    proc = run(["profile", "--workload", str(wl), "--switch-ways", "--backend", backends], models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {line[:66].strip(): float(line[66:75]) for line in proc.stdout.splitlines()[3:]}  # from disk, ms
    assert rows["torch         weights read into a reused shell *"] > 0
    assert rows["onnxruntime   weights read for the shared graph *"] > 0  # the engine's way on the CPU
    assert rows["onnxruntime   pre-optimised ORT file"] > 0
    assert rows["onnxruntime   plain ONNX, optimised at creation"] > 0
    assert rows["onnxruntime   a session kept in the host tier"] < rows["onnxruntime   pre-optimised ORT file"]
    cached = {line[:66].strip(): line[75:].strip() for line in proc.stdout.splitlines()[3:]}
    assert float(cached["torch         weights read into a reused shell *"]) > 0  # and from the page cache
    if importlib.util.find_spec("openvino"):
        assert rows["openvino      compiled through its model cache *"] > 0


def test_a_table_prints_on_a_plain_ascii_locale(tmp_path: Path) -> None:
    """A service or terminal with LC_ALL=C (no UTF-8, Python not coercing it): `±` comes out as `?`, the command
    does not stop."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONUTF8", "PYTHONIOENC"))}
    env.update(LC_ALL="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0")
    code = "from inspector.cli import printable_anywhere; printable_anywhere(); import sys; " \
           "print(sys.stdout.encoding, 'spread \\u00b11.7%')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode("ascii")
    assert "utf" not in out.lower() and "spread ?1.7%" in out


def test_a_reader_gone_stops_the_command_quietly(tmp_path: Path) -> None:
    """`inspector ... | head`: the reader closes the pipe; the command stops with exit 1 and no traceback."""
    env = {**os.environ, "INSPECTOR_CONFIG": str(tmp_path / "none.yaml")}
    (tmp_path / "none.yaml").write_text("{}\n")
    proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", "config", "paths"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=Path(__file__).parents[1], env=env)
    proc.stdout.close()  # gone before the command prints its first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and err == ""


def test_bench_with_a_feed_the_arrivals_cannot_cap(models_dir: Path, tmp_path: Path, tiny) -> None:
    """--feed 2: the ceiling is measured first with every request queued at once, and every policy is offered
    twice that rate, so neither the ratios nor the share of the ceiling measure the feed."""
    wl = tmp_path / "tiny.yaml"
    wl.write_text(TINY.replace("requests: 48", "requests: 24"))
    out = tmp_path / "fed.json"
    proc = run(["bench", "--workload", str(wl), "--policies", "samba,coserve", "--feed", "2", "--json", str(out)],
               models_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    ceiling, interval_ms = data["ceiling_rps"], data["workload"]["arrival_interval_ms"]
    assert ceiling > 0 and abs(1000 / interval_ms - 2 * ceiling) < 0.01 * ceiling  # offered: 2x the ceiling
    assert data["workload"]["feed"].startswith("2x the uncapped ceiling")
    assert "offered: 2x the uncapped ceiling" in proc.stdout and "warning: the feed offers" not in proc.stdout
    assert "every request queued at once (--feed)" in proc.stderr
    assert [r["completed"] for r in data["runs"]] == [24, 24] and "identical across policies: yes" in proc.stdout
    # coserve at the switch floor: coserve's start and arrivals, room for all; each missing expert loaded once
    floor, coserve = data["floor_run"], data["runs"][1]
    assert floor["policy"] == "coserve (at the floor)" and floor["completed"] == 24
    assert floor["switches"] == floor["floor"] == coserve["floor"]
    assert "at the switch floor: " in proc.stdout and "coserve (at the floor)" in proc.stdout
    proc = run(["bench", "--workload", str(wl), "--simulate", "--policies", "samba,coserve", "--feed", "1.5"],
               models_dir, tmp_path)  # the simulator's clock too
    assert proc.returncode == 0 and "offered: 1.5x the uncapped ceiling" in proc.stdout, proc.stderr
    assert "at the switch floor: " in proc.stdout
    proc = run(["bench", "--workload", str(wl), "--feed", "0"], models_dir, tmp_path)
    assert proc.returncode == 2 and "--feed must be a positive multiple" in proc.stderr  # a usage error, at once
