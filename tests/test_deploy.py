"""Deployment as a plant does it: a lean CLI, the headless kiosk without the optional parts, the config file,
journald priorities, SIGHUP, the metrics a Grafana dashboard reads, and a zoo build that resumes."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inspector.cli import parse
from inspector.cli.config import from_config
from inspector.kiosk.systemd import Notifier, StartupKeeper
from inspector.yamlio import ConfigError

from .faults import drop
from .services import free_port
from .test_kiosk import NotifySocket, get, kiosk_files, metric, wait_until

REPO = Path(__file__).resolve().parents[1]
EXTRAS = ("PySide6", "pyqtgraph", "transformers", "fastapi", "uvicorn", "accelerate", "psycopg2", "pypylon")
# a base install: the optional parts cannot be imported (a meta-path finder refuses them, as if not installed)
BLOCKER = """
import importlib.abc, os, sys
class _NotInstalled(importlib.abc.MetaPathFinder):
    blocked = set(os.environ["BLOCK_IMPORTS"].split(","))
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    site = tmp_path / "base-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "BLOCK_IMPORTS": ",".join(EXTRAS), "YOLO_OFFLINE": "1",
            "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **extra}


def test_help_builds_no_command_and_imports_nothing_heavy() -> None:
    code = ("import sys\nfrom inspector.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'transformers', 'PySide6', 'sqlalchemy', 'cv2', 'numpy') "
            "if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, encoding="utf-8", cwd=REPO)
    assert r.returncode == 0 and r.stdout.strip().endswith("[]"), r.stdout + r.stderr
    assert "kiosk" in r.stdout and "llm" in r.stdout


def test_a_missing_extra_says_what_to_install(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    for argv, extra in ((["llm", "chat"], "llm"), (["gui"], "gui"),
                        (["export", "--csv", "-", "--db", "postgresql+psycopg2://u@127.0.0.1:1/x"], "postgres")):
        r = subprocess.run([sys.executable, "-m", "inspector.cli", *argv], capture_output=True, encoding="utf-8",
                           env=env)
        assert r.returncode == 1 and f"pip install 'inspector[{extra}]'" in r.stderr, (argv, r.stderr)


def test_config_file_values_are_checked_with_their_line_and_flags_win(tmp_path: Path) -> None:
    config = tmp_path / "inspector.yaml"
    config.write_text("data: /srv/data\nkiosk:\n  device_mb: 96\n  stall_s: 20\n  keep_crops: all\n")
    args = parse(["--config", str(config), "kiosk", "--stall-s", "45"])
    assert (args.device_mb, args.stall_s, args.keep_crops, args.data) == (96.0, 45.0, "all", "/srv/data")
    # where each value in force came from: the file's line, or the command line's (none)
    assert (from_config(args, "device_mb"), from_config(args, "data")) == (f"{config}:3", f"{config}:1")
    assert from_config(args, "stall_s") is None and from_config(args, "listen") is None
    for text, line, words in (("kiosk:\n  device_mb: 96\n  stal_s: 20\n", 3, "did you mean 'stall_s'"),
                              ("kiosk:\n  device_mb: lots\n", 2, "'lots' is not valid"),
                              ("kiosk:\n  keep_crops: some\n", 2, "is not one of: failed, all, none"),
                              ("log_level: info\nkisok:\n  listen: x\n", 2, "did you mean 'kiosk'"),
                              ("kiosk:\n  start: yes please\n", 2, "has no option --start")):
        config.write_text(text)
        with pytest.raises(ConfigError) as err:
            parse(["--config", str(config), "kiosk"])
        assert f"{config}:{line}:" in str(err.value) and words in str(err.value), str(err.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        parse(["--config", str(tmp_path / "missing.yaml"), "kiosk"])


def test_a_long_jobs_plain_progress_says_what_is_left_at_this_machines_pace() -> None:
    from inspector.logs import Progress

    said: list[str] = []
    bar = Progress(3, "training experts", said.append, every_s=0.0)  # not a terminal here: plain lines
    bar.step(note="cls-a")
    bar.step(note="cls-b")
    bar.step(note="cls-c")
    assert re.fullmatch(r"training experts: 1/3 \(cls-a\), about \d+ s left", said[0]), said
    assert said[-1] == "training experts: 3/3 (cls-c)"  # done: nothing left to estimate
    sized = Progress(3, "training experts", said.append, work=10.0)  # a big step and two small ones
    sized.step(size=1.0)
    assert sized.left(sized.started + 10.0) == ", about 2 min left"  # 10 s for 1 of 10 units: 90 s to go


def test_startup_keeper_extends_the_start_only_while_it_moves(tmp_path: Path) -> None:
    sock = NotifySocket(tmp_path / "n.sock")
    notifier = Notifier({"NOTIFY_SOCKET": str(sock.path)})
    with StartupKeeper(notifier, every_s=0.05, extend_s=1.0, stale_s=0.3) as keeper:
        keeper.progress("training cls-R0402")
        assert sock.wait_for("EXTEND_TIMEOUT_USEC=1000000", 2)
        assert any("STATUS=training cls-R0402" in m for m in sock.messages)
        time.sleep(0.5)  # no progress for longer than stale_s: no more extensions
        count = keeper.extensions
        time.sleep(0.3)
        assert keeper.extensions == count
    sock.close()


def test_headless_kiosk_without_the_extras_serves_reloads_and_logs_for_journald(demo, tmp_path: Path) -> None:
    root, zoo = demo
    rules, inbox, data = kiosk_files(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = tmp_path / "inspector.yaml"
    body = (f"data: {data}\nmodels: {root / 'models'}\nkiosk:\n  rules: {rules}\n  zoo: {zoo.root}\n"
            f"  source: watch:{inbox}\n  listen: 127.0.0.1:{port}\n  device_mb: 40\n  log_every: 1\n")
    config.write_text(body + "  stall_s: 60\n")
    notify = NotifySocket(tmp_path / "notify.sock")
    log = (tmp_path / "journal.log").open("w+")
    st = os.fstat(log.fileno())
    env = base_env(tmp_path, INSPECTOR_CONFIG=str(config), NOTIFY_SOCKET=str(notify.path),
                   JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", "kiosk"], env=env, stdout=subprocess.DEVNULL,
                            stderr=log, encoding="utf-8")
    try:
        assert notify.wait_for("READY=1", 120), Path(log.name).read_text()[-4000:]
        drop(inbox, ["D0", "D1"], seed=3)
        assert wait_until(lambda: json.loads(get(f"{base}/status")[1])["results"]["written"] >= 2, 60)
        metrics = get(f"{base}/metrics")[1].decode()
        for name in ("inspector_board_latency_seconds_bucket", "inspector_part_latency_seconds_count",
                     "inspector_build_info", "inspector_last_board_timestamp_seconds",
                     "process_resident_memory_bytes", "process_cpu_seconds_total"):
            assert name in metrics, name
        assert metric(metrics, "inspector_board_latency_seconds_bucket", le="+Inf", line="line-1") == 2.0
        stamp = float(re.search(r"^inspector_last_board_timestamp_seconds\{[^}]*\} (\S+)$", metrics, re.M).group(1))
        assert abs(time.time() - stamp) < 120
        # every metric the shipped Grafana dashboard asks for is one the kiosk serves
        names = set(re.findall(r"^([a-z_]+)(?:\{|\s)", metrics, re.M))  # samples, and families with none yet
        names |= {n + s for n in re.findall(r"^# TYPE (\S+)", metrics, re.M) for s in ("", "_total", "_info")}
        dashboard = json.loads((REPO / "installer/grafana-inspector.json").read_text())
        wanted = {n for p in dashboard["panels"] for t in p["targets"]
                  for n in re.findall(r"\b((?:inspector|process)_[a-z_]+)", t["expr"])}
        alerts = (REPO / "installer/prometheus-alerts.yml").read_text()  # and every one the alerts ask for
        wanted |= {n for expr in re.findall(r"expr: (.+)", alerts) + re.findall(r"^ {10}(\S.+)$", alerts, re.M)
                   for n in re.findall(r"\b(inspector_[a-z_]+)\{?", expr)}
        optional = {"inspector_mqtt_connected", "inspector_mqtt_queued", "inspector_registration_residual_max_px"}
        assert wanted and not (wanted - names - optional), wanted - names

        # systemctl reload: the file's live options apply at once; the others are named, waiting for a restart
        config.write_text(body.replace("device_mb: 40", "device_mb: 48") + "  stall_s: 25\n")
        proc.send_signal(signal.SIGHUP)
        assert notify.wait_for("RELOADING=1", 10)
        assert wait_until(lambda: "reload: stall_s is now 25.0" in Path(log.name).read_text(), 20)
        assert "--device-mb changed; it takes effect at the next start" in Path(log.name).read_text()
        config.write_text(body + "  stall_s: [oops\n")  # a broken file: refused, the kiosk keeps running
        proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "reload refused" in Path(log.name).read_text(), 20)
        drop(inbox, ["D2"], seed=4)
        assert wait_until(lambda: json.loads(get(f"{base}/status")[1])["results"]["written"] >= 3, 60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()
    journal = Path(log.name).read_text().splitlines()
    # journald reads each line's priority from its prefix: info <6>, warning <4>, error <3>
    assert journal and all(re.match(r"<[0-7]>", ln) for ln in journal if ln.strip()), journal[:5]
    assert any(ln.startswith("<6>kiosk serving") for ln in journal)
    assert any(ln.startswith("<4>warning: reload: --device-mb changed") for ln in journal)
    assert any(ln.startswith("<3>error: reload refused") for ln in journal)


def test_an_interrupted_zoo_build_resumes_from_the_experts_it_finished(tmp_path: Path) -> None:
    root = tmp_path / "zoo"
    script = (
        "import sys\nfrom pathlib import Path\nfrom tests.conftest import DEMO_RULES, TINY_RECIPE\n"
        "from inspector.training.demo_zoo import build_demo_zoo\n"
        "recipe = {**TINY_RECIPE, 'per_type': 40, 'classifier_cap': 40, 'classifier_epochs': 1, 'detector_cap': 16,"
        " 'detector_epochs': 1, 'val_per_type': 6}\n"
        "build_demo_zoo(Path(sys.argv[1]), [DEMO_RULES], recipe=recipe, progress=print, workers=1)\n")
    first = subprocess.Popen([sys.executable, "-c", script, str(root)], cwd=REPO, stdout=subprocess.PIPE,
                             encoding="utf-8", env={**os.environ, "YOLO_OFFLINE": "1"})
    partial = wait_until(lambda: next(iter(root.glob("partial-*.json")), None), 300, 0.05)
    assert partial is not None, "no expert finished"
    first.send_signal(signal.SIGKILL)  # a power cut in the middle of the next expert
    first.wait(30)
    kept = {e["name"]: e["weights_sha256"] for e in json.loads(partial.read_text())["experts"]}
    assert kept and not (root / "manifest.json").exists()
    second = subprocess.run([sys.executable, "-c", script, str(root)], cwd=REPO, capture_output=True, encoding="utf-8",
                            env={**os.environ, "YOLO_OFFLINE": "1"}, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"{len(kept)} experts trained before are kept" in second.stdout
    assert not list(root.glob("partial-*.json"))
    manifest = json.loads((root / "manifest.json").read_text())
    served = {e["name"]: e["weights_sha256"] for e in manifest["experts"]}
    assert len(served) == 3 and all(served[n] == h for n, h in kept.items())
