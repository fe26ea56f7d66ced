"""A plant: three kiosk processes (three lines) on loopback, one real PostgreSQL server and one mosquitto broker.

The plant upgrades while its lines run: `inspector db upgrade` of the next release moves the shared schema on
(one additive revision), then one box at a time restarts, one of them on the next release; boards keep coming
to every line throughout. Each line's boards are counted: sent, stored, stored twice, lost.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import func, select

from inspector.results.revisions import head_revision, read_state
from inspector.results.schema import Inspection
from inspector.results.scope import Scope
from inspector.results.store import ResultStore

from .faults import drop
from .people import person
from .services import Mosquitto, free_port
from .test_kiosk import get, wait_until
from .test_mqtt import Subscriber
from .test_routing_rules import GOOD

REPO = Path(__file__).resolve().parents[1]
NEXT_REVISION = '''"""the next release's additive revision: a nullable column nobody reads yet

Revision ID: 0099
Revises: {head}
"""
import sqlalchemy as sa
from alembic import op

revision = "0099"
down_revision = "{head}"
branch_labels = None
depends_on = None
runs_with = "{head}"


def upgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.add_column(sa.Column("operator_note", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.drop_column("operator_note")
'''


def next_release(root: Path) -> Path:
    """The next release of the product as its boxes get it: this tree, a new version, one more revision."""
    shutil.copytree(REPO / "inspector", root / "inspector", ignore=shutil.ignore_patterns("__pycache__"))
    init = root / "inspector" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "next-'))
    (root / "inspector/results/migrations/versions/0099_next.py").write_text(NEXT_REVISION.format(head=head_revision()))
    return root


@dataclass
class Box:
    """One line's kiosk process, started from a release's code."""

    line: str
    inbox: Path
    data: Path
    port: int
    sent: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    release: Path = REPO

    def start(self, argv: list[str], release: Path) -> None:
        self.release = release
        env = {**os.environ, "PYTHONPATH": str(release), "YOLO_OFFLINE": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", *argv, "--line", self.line,
                                      "--source", f"watch:{self.inbox}", "--data", str(self.data),
                                      "--listen", f"127.0.0.1:{self.port}"],
                                     env=env, cwd=self.data.parent, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, encoding="utf-8")

    def status(self) -> dict | None:
        try:
            code, body = get(f"http://127.0.0.1:{self.port}/status")
        except OSError:
            return None
        return json.loads(body) if code == 200 else None

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"the kiosk of {self.line} exited {self.proc.returncode}:\n{self.proc.stderr.read()[-4000:]}")
        return self.status() is not None

    def send(self, n: int, seed: int) -> None:
        names = [f"{self.line}-B{len(self.sent) + i}" for i in range(n)]
        drop(self.inbox, names, seed)
        self.sent += names

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the kiosk of {self.line} did not stop on SIGTERM")
        return self.proc.returncode


def plant_status(url: str, boxes: list[Box], cwd: Path) -> dict:
    """`inspector plant status` over the boxes, printed as the plant sees it; its JSON."""
    argv = [sys.executable, "-m", "inspector.cli", "plant", "status", "--db", url,
            "--kiosks", ",".join(f"http://127.0.0.1:{b.port}" for b in boxes),
            "--timeout-s", "20"]  # three kiosks that just inspected share two cores with the test: late, not down
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    shown = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, encoding="utf-8")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    print("\n" + shown.stdout)
    done = subprocess.run([*argv, "--json"], cwd=cwd, env=env, capture_output=True, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def stored_serials(store: ResultStore, line: str) -> list[str]:
    with store.engine.connect() as c:
        return list(c.scalars(Scope(line).where(select(Inspection.board_serial))))


def test_a_plant_upgrades_its_schema_and_boxes_while_three_lines_run(demo, postgres, tmp_path: Path) -> None:
    root, zoo = demo
    url = postgres.create_db("plant" + os.urandom(4).hex())
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD)
    broker = Mosquitto()
    mes = Subscriber(broker.port)
    nxt = next_release(tmp_path / "next-release")
    argv = ["--models", str(root / "models"), "kiosk", "--rules", str(rules), "--zoo", str(zoo.root),
            "--device-mb", "40", "--db", url, "--mqtt", f"127.0.0.1:{broker.port}", "--log-every", "1"]
    boxes = []
    for i in range(3):
        (tmp_path / f"l{i}" / "inbox").mkdir(parents=True)
        boxes.append(Box(f"line-{i + 1}", tmp_path / f"l{i}" / "inbox", tmp_path / f"l{i}" / "data", free_port()))
    store = ResultStore(url)
    try:
        for box in boxes:
            box.start(argv, REPO)
        assert wait_until(lambda: all(b.ready() for b in boxes), 240)

        def all_stored() -> bool:
            return all(len(stored_serials(store, b.line)) >= len(b.sent) for b in boxes)

        for seed, box in enumerate(boxes):
            box.send(3, seed)
        assert wait_until(all_stored, 120)
        plant = plant_status(url, boxes, tmp_path)
        assert [(r["line"], r["state"], r["health"]) for r in plant["lines"]] == \
            [(b.line, "running", "ok") for b in boxes]
        assert len({r["experts"] for r in plant["lines"]}) == 1  # every line serves the same expert versions
        assert all(r["boards_per_min"] > 0 and r["yield_percent"] is not None for r in plant["lines"])
        # the deploy step, from the next release, while every line runs
        done = subprocess.run([sys.executable, "-m", "inspector.cli", "db", "upgrade", "--db", url],
                              env={**os.environ, "PYTHONPATH": str(nxt)}, cwd=tmp_path, capture_output=True,
                              encoding="utf-8")
        assert done.returncode == 0, done.stderr
        assert f"schema {head_revision()} -> 0099" in done.stdout
        state = read_state(store.engine)  # this release has never seen 0099, and runs on it
        assert (state.revision, state.known, state.runnable, state.release) == ("0099", False, True, "next-0.1.0")
        for seed, box in enumerate(boxes, 10):
            box.send(3, seed)
        assert wait_until(all_stored, 120)
        # the boxes one at a time: line 3 onto the next release, line 2 restarted on this one (an old box
        # starting on the newer schema); boards arrive while each is down
        for box, release, seed in ((boxes[2], nxt, 20), (boxes[1], REPO, 21)):
            assert box.stop() == 0
            box.send(2, seed)
            box.start(argv, release)
            assert wait_until(box.ready, 240)
        for seed, box in enumerate(boxes, 30):
            box.send(3, seed)
        assert wait_until(all_stored, 120)
        sent = {name for b in boxes for name in b.sent}
        assert wait_until(lambda: {b["board_serial"] for b in mes.boards()} >= sent, 60)  # MQTT: at least once
        codes = [box.stop() for box in boxes]
    finally:
        for box in boxes:
            if box.proc is not None and box.proc.poll() is None:
                box.proc.kill()
    published = [b["board_serial"] for b in mes.boards()]
    mes.close()
    broker.close()
    rows = []
    for box in boxes:
        stored = stored_serials(store, box.line)
        lost = sorted(set(box.sent) - set(stored))
        rows.append((box.line, "next" if box.release == nxt else "this", len(box.sent), len(stored),
                     len(stored) - len(set(stored)), len(lost)))
        assert sorted(set(stored)) == sorted(box.sent) and len(stored) == len(set(stored)), (box.line, lost)
        assert store.latest(Scope(box.line)).line == box.line
        assert {s for s in published if s.startswith(box.line + "-")} == set(box.sent)
    print("\nline     release  sent  stored  duplicated  lost")
    for r in rows:
        print(f"{r[0]:8} {r[1]:8} {r[2]:5} {r[3]:7} {r[4]:11} {r[5]:5}")
    assert codes == [0, 0, 0]
    # one box's retention deletes its own line's boards only
    with store.engine.connect() as c:
        before = dict(c.execute(select(Inspection.line, func.count()).group_by(Inspection.line)).all())
    done = subprocess.run([sys.executable, "-m", "inspector.cli", "db", "prune", "--retain-days", "1e-9", "--line",
                           "line-2", "--db", url, "--data", str(boxes[1].data)], cwd=tmp_path, capture_output=True,
                          encoding="utf-8", env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    with store.engine.connect() as c:
        after = dict(c.execute(select(Inspection.line, func.count()).group_by(Inspection.line)).all())
    assert after == {k: v for k, v in before.items() if k != "line-2"}
    store.close()


def _versions(zoo_root: Path, expert: str) -> tuple[str, str]:
    """(a version that calls what the serving one calls, a version that calls every part a defect) of `expert`,
    added to the zoo at `zoo_root`: a harmless release and one whose flag rate jumps."""
    from inspector.experts.versions import add_version
    from inspector.experts.zoo import Zoo
    from inspector.runtime.safetensors_io import parse

    zoo = Zoo.load(zoo_root)
    state = {k: v.clone() for k, v in parse(zoo.path_of(expert).read_bytes()).items()}
    same = dict(state, **{"fc.bias": state["fc.bias"] + 1e-6})
    bad = dict(state, **{"fc.bias": state["fc.bias"].clone()})
    bad["fc.bias"][0] -= 1e4  # "ok" can no longer win
    first = add_version(zoo, expert, same, origin="test: same calls")["weights_sha256"]
    return first, add_version(Zoo.load(zoo_root), expert, bad, origin="test: flags every part")["weights_sha256"]


def test_a_release_rolls_out_line_by_line_and_a_worse_one_is_rolled_back_after_the_first(
        demo, postgres, tmp_path: Path) -> None:
    import threading

    from inspector.results.rollouts import history

    root, zoo = demo
    url = postgres.create_db("rollout" + os.urandom(4).hex())
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD)
    token_file = tmp_path / "api-token"
    token_file.write_text("rollout-token-" + "x" * 24)
    token_file.chmod(0o600)
    release_zoo = tmp_path / "release-zoo"
    shutil.copytree(zoo.root, release_zoo)
    same, bad = _versions(release_zoo, "cls-R1K")
    cli = [sys.executable, "-m", "inspector.cli"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "YOLO_OFFLINE": "1"}
    for version in (same, bad):
        done = subprocess.run([*cli, "zoo", "publish", "--zoo", str(release_zoo), "--expert", "cls-R1K", "--version",
                               version[:12], "--db", url, "--by", "qa"], cwd=tmp_path, env=env, capture_output=True,
                              encoding="utf-8")
        assert done.returncode == 0 and f"released cls-R1K {version[:12]}" in done.stdout, done.stderr
    engineer_file = tmp_path / "engineer-token"  # a rollout changes lines: an engineer's token, not the boxes'
    engineer_file.write_text(person(url, "quinn", "engineer") + "\n")
    engineer_file.chmod(0o600)
    boxes = []
    for i in range(3):
        (tmp_path / f"l{i}" / "inbox").mkdir(parents=True)
        shutil.copytree(zoo.root, tmp_path / f"l{i}" / "zoo")  # each box's own zoo, as on a plant's boxes
        boxes.append(Box(f"line-{i + 1}", tmp_path / f"l{i}" / "inbox", tmp_path / f"l{i}" / "data", free_port()))
    store = ResultStore(url)
    feeding = threading.Event()

    def feed() -> None:  # boards keep coming to every line, as on a running plant
        seed = 100
        while not feeding.wait(0.4):
            for box in boxes:
                box.send(1, seed)
                seed += 1

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        for i, box in enumerate(boxes):
            box.start(["--models", str(root / "models"), "kiosk", "--rules", str(rules), "--zoo",
                       str(tmp_path / f"l{i}" / "zoo"), "--device-mb", "40", "--db", url, "--token-file",
                       str(token_file)], REPO)
        assert wait_until(lambda: all(b.ready() for b in boxes), 240)
        for seed, box in enumerate(boxes):
            box.send(8, seed)
        assert wait_until(lambda: all(len(stored_serials(store, b.line)) >= 8 for b in boxes), 120)
        feeder.start()
        kiosks = ",".join(f"http://127.0.0.1:{b.port}" for b in boxes)
        rollout = [*cli, "zoo", "rollout", "--expert", "cls-R1K", "--kiosks", kiosks, "--boards", "6", "--poll-s",
                   "0.3", "--timeout-s", "120", "--token-file", str(engineer_file), "--db", url, "--by", "qa"]
        good = subprocess.run([*rollout, "--version", same[:12]], cwd=tmp_path, env=env, capture_output=True,
                              encoding="utf-8")
        print("\n" + good.stdout)
        assert good.returncode == 0, good.stdout + good.stderr
        assert all(b.status()["experts"] and _serving(b, "cls-R1K") == same for b in boxes)
        worse = subprocess.run([*rollout, "--version", bad[:12], "--lines", "line-2,line-1,line-3"], cwd=tmp_path,
                               env=env, capture_output=True, encoding="utf-8")
        print(worse.stdout)
        assert worse.returncode == 1, worse.stdout + worse.stderr
        assert "line-2/aoi-1: rolled_back: flag rate rose from" in worse.stdout
        assert [_serving(b, "cls-R1K") for b in boxes] == [same, same, same]  # line 2 back; 1 and 3 never moved
        # a kiosk killed while its line is watched: no rollback can reach it, so the step says to roll back by hand
        dying = subprocess.Popen([*rollout, "--version", bad[:12], "--lines", "line-3", "--boards", "1000"],
                                 cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 encoding="utf-8")
        assert wait_until(lambda: any(s.outcome == "switched" and s.line == "line-3" and s.to_sha256 == bad
                                      for s in history(store)), 60)
        boxes[2].proc.kill()
        out, err = dying.communicate(timeout=120)
        print(out)
        assert dying.returncode == 1 and "line-3/aoi-1: failed: the kiosk does not answer" in out, out + err
        assert "the rollback failed" in out and "roll the line back by hand" in out
        feeding.set()
        feeder.join(5)
        codes = [box.stop() for box in boxes[:2]]
    finally:
        feeding.set()
        for box in boxes:
            if box.proc is not None and box.proc.poll() is None:
                box.proc.kill()
    assert codes == [0, 0]
    steps = history(store)
    outcomes = [(s.line, s.outcome, s.to_sha256 == bad) for s in steps]
    assert outcomes == [("line-1", "switched", False), ("line-1", "kept", False),
                        ("line-2", "switched", False), ("line-2", "kept", False),
                        ("line-3", "switched", False), ("line-3", "kept", False),
                        ("line-2", "switched", True), ("line-2", "rolled_back", True),
                        ("line-1", "not_reached", True), ("line-3", "not_reached", True),
                        ("line-3", "switched", True), ("line-3", "failed", True)]
    assert {s.by for s in steps} == {"qa"} and len({s.rollout for s in steps}) == 3
    listed = subprocess.run([*cli, "zoo", "rollouts", "--db", url, "--json"], cwd=tmp_path, env=env,
                            capture_output=True, encoding="utf-8")
    assert listed.returncode == 0 and [d["outcome"] for d in json.loads(listed.stdout)] == [s.outcome for s in steps]
    judged = steps[7].detail
    assert judged["after"]["flagged"] == judged["after"]["parts"] > 0  # the bad release flagged every part
    # every install and rollback the rollouts made is in the plant's trail, under the engineer whose token it used,
    # by the line that made it
    from inspector.access.audit import AuditTrail

    trail = AuditTrail(store.engine)
    changes = [(e.kind, e.actor, e.line) for e in trail.events(newest_first=False)
               if e.kind in ("expert.install", "expert.rollback")]
    assert changes.count(("expert.install", "quinn", "line-2")) == 2 and ("expert.rollback", "quinn", "line-2") in \
        changes and {actor for _, actor, _ in changes} == {"quinn"}
    published = [e.actor for e in trail.events("expert.publish")]  # `zoo publish` without --as: the system account
    assert len(published) == 2 and all(a.startswith("system:") for a in published)
    assert trail.verify().intact
    print("rollout steps as recorded (inspector zoo rollouts):")
    for s in steps:
        print(f"  {s.rollout[:8]} {s.line} {(s.from_sha256 or '-')[:12]} -> {s.to_sha256[:12]} {s.outcome}")
    store.close()


def _serving(box: Box, expert: str) -> str | None:
    return next(r["weights_sha256"] for r in box.status()["experts"] if r["expert"] == expert)
