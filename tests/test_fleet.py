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
