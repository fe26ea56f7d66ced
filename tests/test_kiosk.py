"""`inspector kiosk` as systemd would run it: a real process, its endpoints, notify socket, rule reloads, SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import text as sql

from inspector.hermes.peer import DownstreamPeer
from inspector.kiosk.health import health
from inspector.kiosk.systemd import Notifier
from inspector.results.store import ResultStore, sqlite_url

from .faults import drop
from .services import Mosquitto, free_port
from .test_mqtt import Subscriber
from .test_routing_rules import GOOD


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class NotifySocket:
    """What systemd listens on: a unix datagram socket whose reader thread collects the notifications."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.05)
        self.messages: list[str] = []
        self.reading = threading.Event()
        self.reading.set()
        self._closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while not self._closed:
            if not self.reading.wait(0.05):
                continue
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except (TimeoutError, OSError):
                pass

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in m for m in self.messages):
                return True
            time.sleep(0.02)
        return any(text in m for m in self.messages)

    def fill(self) -> None:
        """Stop reading and let the queue fill up, like a hung service manager."""
        self.reading.clear()
        time.sleep(0.1)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            try:
                while True:
                    s.sendto(b"X=1", str(self.path))
            except BlockingIOError:
                pass

    def close(self) -> None:
        self._closed = True
        self.sock.close()


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample `name` whose labels include `labels`, in a /metrics page (None: no such sample)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return None


def wait_until(check, timeout: float = 30.0, every: float = 0.1):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    return check()


def kiosk_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(rule file, watched inbox, data directory) for a kiosk started by a test."""
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD)
    inbox, data = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    return rules, inbox, data


def test_kiosk_serves_reloads_rules_and_drains_on_sigterm(demo, tmp_path: Path) -> None:
    root, zoo = demo
    rules, inbox, data = kiosk_files(tmp_path)
    notify = NotifySocket(tmp_path / "notify.sock")
    broker = Mosquitto()
    mes = Subscriber(broker.port)
    port, hermes_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "1000000", "YOLO_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector.cli", "--models", str(root / "models"), "kiosk", "--rules", str(rules),
         "--zoo", str(zoo.root), "--source", f"watch:{inbox}", "--data", str(data), "--device-mb", "40",
         "--listen", f"127.0.0.1:{port}", "--mqtt", f"127.0.0.1:{broker.port}", "--log-every", "1",
         "--hermes-downstream", f"127.0.0.1:{hermes_port}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8")
    next_machine = DownstreamPeer(("127.0.0.1", hermes_port)).start()  # the machine after the box, on Hermes
    try:
        assert notify.wait_for("READY=1", 120), proc.stderr.read() if proc.poll() is not None else "no READY"
        code, body = get(f"{base}/health")
        assert code == 200 and json.loads(body)["status"] == "ok"

        drop(inbox, ["K0", "K1", "K2"], seed=5)
        status = wait_until(lambda: (s := json.loads(get(f"{base}/status")[1]))["results"]["written"] >= 3 and s)
        assert status["boards"] == 3 and status["parts"] == 9 and status["line"]["recipe"] == "mini"
        status = wait_until(lambda: (s := json.loads(get(f"{base}/status")[1]))["hermes"]["handed_on"] >= 3 and s)
        assert status["hermes"]["downstream"]["connected"] and status["late"] == {"rejected": 0, "inspected": 0}
        _, metrics = get(f"{base}/metrics")
        text = metrics.decode()
        here = {"line": "line-1", "station": "aoi-1"}  # every sample says which line and station it is of
        assert metric(text, "inspector_parts_total", **here) == 9.0 and "inspector_expert_switches_total" in text
        assert metric(text, "inspector_boards_registered_total", **here) == 3.0  # the mini recipe has fiducials
        assert metric(text, "inspector_boards_registration_failed_total", **here) == 0.0
        assert metric(text, "process_resident_memory_bytes", **here) is not None
        assert status["registration"]["registered"] == 3 and status["registration"]["residual_px_max"] < 1.0
        assert metric(text, "inspector_pool_capacity_bytes", pool="cpu/pool", **here) is not None
        handed = {q: metric(text, "inspector_hermes_boards_handed_on_total", quality=q, **here)
                  for q in ("good", "failed")}
        assert sum(handed.values()) == status["hermes"]["handed_on"] >= 3  # the lane to the machine after
        assert handed["failed"] == status["hermes"]["handed_failed"]
        assert metric(text, "inspector_hermes_lane_connected", lane="downstream", **here) == 1.0
        assert metric(text, "inspector_hermes_boards_taken_total", **here) == 0.0  # no lane from the machine before
        assert metric(text, "inspector_hermes_lane_connected", lane="upstream", **here) is None
        assert notify.wait_for("WATCHDOG=1", 5)  # work is flowing: the watchdog is pinged

        # a broken edit is refused with its line; the running set stays in force
        first_version = status["line"]["ruleset_version"]
        rules.write_text(GOOD.replace("shape: resistor", "shape: resistr"))
        status = wait_until(lambda: (s := json.loads(get(f"{base}/status")[1]))["rules"]["refused"] and s, 20)
        assert "mini.yaml:" in status["rules"]["last_error"]
        assert status["line"]["ruleset_version"] == first_version
        assert json.loads(get(f"{base}/health")[1])["status"] == "degraded"
        # a good edit is applied without a restart
        rules.write_text(GOOD.replace("threshold: 0.5", "threshold: 0.4"))
        status = wait_until(lambda: (s := json.loads(get(f"{base}/status")[1]))["rules"]["applied"] and s, 20)
        assert status["line"]["ruleset_version"] != first_version and status["rules"]["last_error"] is None

        drop(inbox, ["K3", "K4", "K5", "K6"], seed=6)
        if not wait_until(lambda: json.loads(get(f"{base}/status")[1])["boards"] >= 4, 60):
            proc.send_signal(signal.SIGUSR1)  # every thread's stack to stderr, for the failure message
            time.sleep(1)
            proc.kill()
            pytest.fail("the kiosk took no new boards after the rule change:\n" + proc.communicate()[1][-6000:])
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.kill()
            pytest.fail("the kiosk did not stop on SIGTERM:\n" + proc.communicate()[1][-8000:])
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
        mes.close()
        broker.close()
        next_machine.stop()
    assert notify.wait_for("STOPPING=1", 2)
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    stored = sorted(i.board_serial for i in store.inspections())
    archived = sorted(p.stem for p in (inbox / "inspected").glob("*.png"))
    waiting = sorted(p.stem for p in inbox.glob("K*.png"))
    # every board the kiosk took is stored; any it had not taken yet waits in the inbox for the next start
    assert stored == archived and sorted(stored + waiting) == [f"K{i}" for i in range(7)]
    assert len(stored) >= 4
    versions = {i.ruleset_version for i in store.inspections()}
    assert len(versions) == 2  # boards before and after the rule change carry their own version
    assert sorted(b["board_serial"] for b in mes.boards()) == stored  # the MES got each stored board
    # the next machine got each board with its serial as the barcode, the BoardId stored with it, FailedBoard = verdict
    handed = {h.board.BoardId: h.board for h in next_machine.taken}
    with store.engine.connect() as c:
        rows = c.execute(sql("SELECT board_id, board_serial, verdict FROM inspections")).all()
    assert len(handed) == len(rows) and all(handed[r.board_id].TopBarcode == r.board_serial and
                                             (handed[r.board_id].FailedBoard == 1) == (r.verdict == "pass")
                                             for r in rows)
    assert "stopped:" in err and "SIGTERM" in err


def test_a_kiosk_starts_with_the_rule_file_its_last_changeover_put_in_force(demo, tmp_path: Path) -> None:
    """The rule file a changeover put in force (kept in the data directory) is the one a restarted kiosk runs, while
    its configuration names the file it named then; the configuration naming another file wins."""
    from inspector.app.recipes import save_in_force
    from inspector.routing.rules import load_rules

    root, zoo = demo
    rules, inbox, data = kiosk_files(tmp_path)
    revised = tmp_path / "mini-b.yaml"
    revised.write_text(GOOD.replace("recipe: mini\n", "recipe: mini-b\n"), encoding="utf-8")
    data.mkdir()
    save_in_force(data, rules, revised, load_rules(revised))

    def started(rule_file: Path) -> tuple[str, str]:
        """(the recipe a kiosk started on `rule_file` runs, what it said), stopped again."""
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "inspector.cli", "--models", str(root / "models"), "kiosk", "--rules",
             str(rule_file), "--zoo", str(zoo.root), "--source", f"watch:{inbox}", "--data", str(data),
             "--device-mb", "40", "--listen", f"127.0.0.1:{port}"],
            env={**os.environ, "YOLO_OFFLINE": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            encoding="utf-8")
        try:
            answer = wait_until(lambda: _rules_of(f"http://127.0.0.1:{port}"), 120)
            assert answer, proc.stderr.read() if proc.poll() is not None else "no /rules"
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=120)
            return answer["recipe"], err
        finally:
            if proc.poll() is None:
                proc.kill()

    recipe, said = started(rules)
    assert recipe == "mini-b" and "rules in force since the changeover" in said, said
    other = tmp_path / "other.yaml"
    other.write_text(GOOD.replace("recipe: mini\n", "recipe: other\n"), encoding="utf-8")
    recipe, said = started(other)
    assert recipe == "other" and "changeover" not in said


def _rules_of(base: str) -> dict | None:
    try:
        code, body = get(f"{base}/rules")
    except OSError:
        return None
    return json.loads(body) if code == 200 else None


def test_notifier_speaks_the_sd_notify_protocol(tmp_path: Path) -> None:
    sock = NotifySocket(tmp_path / "n.sock")
    n = Notifier({"NOTIFY_SOCKET": str(sock.path), "WATCHDOG_USEC": "4000000"})
    assert n.enabled and n.watchdog_s == 4.0
    assert n.ready("inspecting") and n.watchdog()
    assert sock.wait_for("WATCHDOG=1", 2) and sock.messages == ["READY=1\nSTATUS=inspecting", "WATCHDOG=1"]
    sock.fill()
    assert not n.watchdog()  # a full socket costs the notification, never a blocked line
    quiet = Notifier({})
    assert not quiet.enabled and not quiet.ready("x") and quiet.watchdog_s is None
    other = Notifier({"NOTIFY_SOCKET": str(sock.path), "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"})
    assert other.watchdog_s is None  # the watchdog is meant for another process


def _snap(**changes: object) -> dict:
    snap = {"state": "running", "in_flight": 2,
            "results": {"spooled": 0, "last_error": None, "crops_failed": 0, "crops_error": None},
            "ingest": {"source_error": None, "source": {"last_error": None, "last_error_age_s": None}},
            "mqtt": None, "rules": None}
    snap.update(changes)
    return snap


def test_health_names_what_needs_attention() -> None:
    assert health(_snap(), 0.0, 60)["status"] == "ok"
    stalled = health(_snap(), 75.0, 60)
    assert stalled["status"] == "stalled" and "2 board(s) inside" in stalled["reasons"][0]
    spooled = health(_snap(results={"spooled": 5, "last_error": "db down", "crops_failed": 0, "crops_error": None}),
                     0.0, 60)
    assert spooled["status"] == "degraded" and "5 board result(s) spooled" in spooled["reasons"][0]
    assert health(_snap(state="stopped"), 0.0, 60)["status"] == "stopping"
    old = _snap(ingest={"source_error": None, "source": {"last_error": "x.png unreadable", "last_error_age_s": 600}})
    assert health(old, 0.0, 60)["status"] == "ok"  # an old hiccup no longer counts


def test_health_is_critical_when_results_are_at_risk_and_names_the_rest() -> None:
    base = {"spooled": 0, "last_error": "spool: No space left on device", "crops_failed": 0, "crops_error": None,
            "pending": 40}
    full = health(_snap(results={**base, "disk_full": True}), 0.0, 60)
    assert full["status"] == "critical" and "disk full: 40 board result(s) held" in full["reasons"][0]
    dead = health(_snap(results={**base, "writer_alive": False}), 0.0, 60)
    assert dead["status"] == "critical" and "result writer has stopped" in dead["reasons"][0]
    quiet = {"source_error": None, "source": {"name": "camera:0", "last_error": None, "last_error_age_s": None,
                                              "last_frame_age_s": 95.0}}
    many = health(_snap(results={**base, "last_error": None, "dead_letters": 2, "low_disk": "300 MiB free"},
                        failed_experts={"cls-R0402": "weights ... not the weights this expert was trained with"},
                        ingest=quiet, rules={"watcher_alive": False, "last_error": None}), 0.0, 60, silent_limit_s=60)
    text = " | ".join(many["reasons"])
    assert many["status"] == "degraded"
    for expected in ("2 board result(s) refused", "300 MiB free", "expert cls-R0402 failed", "camera:0 silent",
                     "rule watcher has stopped"):
        assert expected in text, text
    assert health(_snap(ingest=quiet), 0.0, 60)["status"] == "ok"  # no --silent-s: silence is allowed


@pytest.mark.parametrize("listen", ["localhost", "127.0.0.1:http"])
def test_bad_listen_address_says_how_to_write_it(listen: str) -> None:
    from inspector.endpoint import parse_listen

    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(listen)


def test_the_route_table_describes_every_route_served_and_refuses_one_it_does_not(tmp_path: Path) -> None:
    """kiosk/routes.py is what the manual's API page is made from: the results and audit readers answer exactly
    its routes, and a handler without a line (or a line without its handler) stops the kiosk from starting."""
    from inspector.access.audit import AuditTrail
    from inspector.kiosk import routes
    from inspector.kiosk.audit_api import AuditApi
    from inspector.kiosk.http import HttpError
    from inspector.kiosk.results_api import ResultsApi
    from inspector.results.scope import Scope
    from inspector.results.store import ResultStore

    store = ResultStore(f"sqlite:///{tmp_path / 'r.sqlite'}")
    assert set(ResultsApi(store, Scope("line-1", "aoi-1"), tmp_path).routes) == routes.guarded_names("/results/")
    audit = AuditApi(AuditTrail(store.engine))
    for name in routes.guarded_names("/audit/"):
        audit.get(name, "")  # each described route answers
    with pytest.raises(HttpError):
        audit.get("nothing", "")
    posts = {r.path: (lambda _c: {}) for r in routes.ROUTES if r.method == "POST" and not r.when}
    served = routes.posts(posts)
    assert served["/rules"][0].value == "rules" and served["/auth/sign-in"][0] is None
    with pytest.raises(ValueError, match="served but not described \\['/rules/delete'\\]"):
        routes.posts({**posts, "/rules/delete": lambda _c: {}})
    with pytest.raises(ValueError, match="described but not served \\['/allocation'\\]"):
        routes.posts({p: h for p, h in posts.items() if p != "/allocation"})
    with pytest.raises(ValueError, match="described but not served"):
        routes.reads({"/rules": dict})
