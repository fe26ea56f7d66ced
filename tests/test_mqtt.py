"""Per-board results through a real mosquitto broker: delivery, retained status, and an outage."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from inspector.results.mqtt import MqttPublisher, parse_broker

from .faults import wait_until
from .services import Mosquitto
from .test_results import board


@pytest.fixture
def broker():
    b = Mosquitto()
    yield b
    b.close()


class Subscriber:
    """A plant system listening on the broker (a persistent session, so an outage loses nothing)."""

    def __init__(self, port: int, topic: str = "inspector/#", client_id: str = "mes") -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.subscribed = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        self.client.on_connect = lambda c, *_: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_message = lambda _c, _u, m: self.messages.append((m.topic, m.payload, m.retain))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert self.subscribed.wait(5)

    def messages_of(self, kind: str = "board") -> list[dict]:
        return [json.loads(p) for t, p, _ in self.messages if t.endswith(f"/{kind}")]

    def boards(self) -> list[dict]:
        """The stored records the board messages carry (schema 2: beside the UnitsInspected body)."""
        out = []
        for message in self.messages_of():
            assert message["SchemaVersion"] == 3 and message["UniqueID"] == message["Record"]["inspection_id"]
            out.append(message["Record"])
        return out

    def wait_for(self, n: int, timeout: float = 10) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.boards()) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.boards()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_each_stored_board_reaches_a_subscriber_with_its_parts(broker: Mosquitto) -> None:
    sub = Subscriber(broker.port)
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-7", "aoi-2")
    pub.start()
    for i in range(3):
        pub(board(f"B{i}", i, defect="polarity" if i == 1 else None))
    assert pub.wait_published(10)
    got = sub.wait_for(3)
    assert [b["board_serial"] for b in got] == ["B0", "B1", "B2"]
    assert len({b["inspection_id"] for b in got}) == 3  # a subscriber can drop a re-sent message by its id
    assert [b["verdict"] for b in got] == ["pass", "fail", "pass"]
    assert got[1]["parts"][1]["defect_class"] == "polarity" and len(got[1]["parts"]) == 2
    # the UnitsInspected shape (IPC-CFX) a plant's MES reads: overall result, an inspection per part, its defects
    cfx = sub.messages_of()[1]
    assert cfx["MessageName"] == "CFX.Production.TestAndInspection.UnitsInspected"
    body = cfx["MessageBody"]
    assert body["TransactionId"] == got[1]["inspection_id"] and body["InspectionMethod"] == "AOI"
    (unit,) = body["InspectedUnits"]
    assert unit["UnitIdentifier"] == "B1" and unit["OverallResult"] == "Failed"
    results = {i["InspectionName"]: i["Result"] for i in unit["Inspections"]}
    failed = [i for i in unit["Inspections"] if i["Result"] == "Failed"]
    assert len(results) == 2 and len(failed) == 1
    (defect,) = failed[0]["DefectsFound"]
    assert defect["DefectCode"] == "polarity" and defect["ComponentOfInterest"]["ReferenceDesignator"] == \
        got[1]["parts"][1]["ref"]
    assert sub.messages_of()[0]["MessageBody"]["InspectedUnits"][0]["OverallResult"] == "Passed"
    assert {t for t, _, _ in sub.messages} >= {"inspector/line-7/aoi-2/board", "inspector/line-7/aoi-2/status"}
    status = pub.close()
    assert status.published == 3 and status.queued == 0
    time.sleep(0.2)
    assert sub.messages[-1][:2] == ("inspector/line-7/aoi-2/status", b"offline")
    sub.close()


class SlowToConnect(MqttPublisher):
    """A publisher on a loaded box: its network thread is held up just after the broker accepted the connection."""

    def _on_connect(self, *args) -> None:  # noqa: ANN002
        super()._on_connect(*args)
        time.sleep(0.3)


def test_boards_stored_while_the_connection_comes_up_arrive_in_the_order_they_were_stored(broker: Mosquitto) -> None:
    """paho marks a connection up and lets a new publish through before it re-sends what it queued: a board stored
    in that moment overtook older ones (seen in CI as B2, B0, B1). The publisher's own outbox keeps the order."""
    sub = Subscriber(broker.port)
    pub = SlowToConnect(f"127.0.0.1:{broker.port}", "line-9", "aoi-1")
    for i in range(3):  # stored before the connection is up
        pub(board(f"B{i}", i))
    pub.start()
    deadline = time.monotonic() + 5
    while not pub.status().connected and time.monotonic() < deadline:
        time.sleep(0.005)
    for i in range(3, 6):  # stored while the network thread is still in the connect callback
        pub(board(f"B{i}", i))
    assert pub.wait_published(10)
    assert [b["board_serial"] for b in sub.wait_for(6)] == [f"B{i}" for i in range(6)]
    pub.close()
    sub.close()


def test_boards_stored_while_acknowledgements_stream_in_never_lock_the_publisher(broker: Mosquitto) -> None:
    """paho calls on_publish holding its message lock, which publish() takes too: a publisher that held its own
    lock across publish() while the broker's acknowledgements came in deadlocked with paho's network thread (a
    kiosk hung at shutdown in CI). Boards stored back to back while earlier ones are acknowledged all arrive."""
    sub = Subscriber(broker.port)
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-5", "aoi-3")
    pub.start()
    deadline = time.monotonic() + 5
    while not pub.status().connected and time.monotonic() < deadline:
        time.sleep(0.005)
    record = board("B0", 0)
    writer = threading.Thread(target=lambda: [pub(record) for _ in range(3000)], daemon=True)
    writer.start()
    writer.join(60)
    assert not writer.is_alive(), "the writer is stuck in the publisher"
    assert pub.wait_published(30), pub.status()
    status = pub.close()
    assert status.published == 3000 and status.queued == 0 and status.dropped == 0
    sub.close()


def test_results_published_during_a_broker_outage_arrive_after_it(broker: Mosquitto) -> None:
    Subscriber(broker.port).close()  # the MES has a persistent subscription
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1")
    pub.start()
    pub(board("BEFORE"))
    assert pub.wait_published(10)
    broker.stop()
    deadline = time.monotonic() + 10
    while pub.status().connected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pub.status().connected
    for i in range(3):
        pub(board(f"OUT{i}", i))
    assert pub.status().queued == 3 and not pub.wait_published(0.5)
    broker.start()
    assert pub.wait_published(40), pub.status()
    sub = Subscriber(broker.port)
    got = sub.wait_for(4)
    assert [b["board_serial"] for b in got] == ["BEFORE", "OUT0", "OUT1", "OUT2"]
    sub.close()
    pub.close()


def test_broker_addresses_are_checked() -> None:
    assert parse_broker("mqtt://broker.plant:1884") == ("broker.plant", 1884)
    assert parse_broker("broker") == ("broker", 1883)
    with pytest.raises(ValueError, match="not a number"):
        parse_broker("broker:eighty")


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 (openssl, as a plant's PKI would issue)."""
    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=inspector test CA")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out",
        "server.crt", "-days", "2", "-extfile", "san.ext")
    return folder / "ca.crt", folder / "server.crt", folder / "server.key"


def test_a_broker_with_passwords_over_tls(tmp_path: Path) -> None:
    if not shutil.which("openssl") or not shutil.which("mosquitto_passwd"):
        pytest.skip("openssl or mosquitto_passwd is not installed")
    ca, crt, key = _certificates(tmp_path)
    passwords = tmp_path / "passwords"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwords), "aoi", "s3cret"], check=True, capture_output=True)
    os.chmod(passwords, 0o600)
    broker = Mosquitto(settings=f"cafile {ca}\ncertfile {crt}\nkeyfile {key}\nallow_anonymous false\n"
                                f"password_file {passwords}\n")
    good = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1", username="aoi", password="s3cret",
                         ca_file=str(ca), client_id="good")
    wrong = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1", username="aoi", password="guess",
                          ca_file=str(ca), client_id="wrong")
    try:
        good.start()
        wrong.start()
        good(board("T1"))
        assert good.wait_published(10) and good.status().published == 1 and good.status().connected
        deadline = time.monotonic() + 10
        while "refused" not in (wrong.status().last_error or "") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not wrong.status().connected and "refused" in wrong.status().last_error
    finally:
        good.close(1)
        wrong.close(0.5)
        broker.close()


def test_a_restart_while_the_broker_is_away_loses_nothing_and_a_long_outage_spills_to_disk(
        broker: Mosquitto, tmp_path: Path) -> None:
    """The durable outbox: messages decided while the broker is away survive the box's restart and go first, in
    order; beyond the in-memory queue they wait on disk, never dropped; a torn last line is cut, not parsed."""
    from inspector.results.outbox import Outbox

    Subscriber(broker.port, client_id="mes-durable").close()  # a persistent subscription
    broker.stop()
    path = tmp_path / "mqtt-outbox.jsonl"
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1", max_queued=2, outbox=Outbox(path))
    pub.start()
    for i in range(5):
        pub(board(f"AWAY{i}", i))
    assert pub.status().queued == 5 and pub.status().dropped == 0
    pub.close(timeout=0.2)  # the box stops while the broker is still away
    with path.open("ab") as f:
        f.write(b'{"seq": 6, "topic": "board", "pay')  # a power cut mid-append
    broker.start()
    again = Outbox(path)
    assert again.torn_bytes > 0 and [m.seq for m in again.pending()] == [1, 2, 3, 4, 5]
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1", max_queued=2, outbox=again)
    pub.start()
    pub(board("AFTER", 9))
    assert pub.wait_published(40), pub.status()
    sub = Subscriber(broker.port, client_id="mes-durable")
    got = sub.wait_for(6)
    assert [b["board_serial"] for b in got] == [f"AWAY{i}" for i in range(5)] + ["AFTER"]
    assert pub.close().queued == 0 and Outbox(path).pending() == [] and path.stat().st_size == 0
    sub.close()


def test_with_the_database_down_for_a_whole_run_every_verdict_reaches_the_factory_once_in_order(
        demo, broker: Mosquitto, tmp_path: Path) -> None:  # noqa: ANN001
    """The line's factory events never wait for the database: 100 boards with the results database unreachable the
    whole run, each board's message at the subscriber once, in the order the verdicts were decided (the order the
    results spool keeps them in), while not one result reached the database; the recipe said first, every board
    that did not pass rejected (no line controller here)."""
    from inspector.app.factory_events import FactoryEvents
    from inspector.app.line import LineConfig
    from inspector.app.run import run_line
    from inspector.app.service import ServiceConfig
    from inspector.ingest.sources import SyntheticSource
    from inspector.results.outbox import Outbox
    from inspector.results.store import ResultStore
    from inspector.routing.rules import parse_rules

    from .services import free_port
    from .test_routing_rules import GOOD

    root, zoo = demo
    rules = parse_rules(GOOD, "mini.yaml")
    sub = Subscriber(broker.port, client_id="mes-line")
    store = ResultStore(f"postgresql+psycopg2://nobody@127.0.0.1:{free_port()}/down", connect=False)
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1", outbox=Outbox(tmp_path / "outbox.jsonl"))
    pub.start()
    n = 100
    service, _ = run_line(rules, zoo, root / "models", SyntheticSource(rules, n, seed=21),
                          ServiceConfig(LineConfig(device_mb=40)), store, tmp_path, lambda _m: None,
                          events=FactoryEvents(pub, "line-1", "aoi-1"))
    spooled = [json.loads(line)["inspection_id"] for line in (tmp_path / "spool.jsonl").read_text().splitlines()]
    assert len(spooled) == n and service.writer.status().written == 0  # the database never had one
    got = sub.wait_for(n, 30)
    ids = [b["inspection_id"] for b in got]
    assert ids == spooled and len(set(ids)) == n  # all, once each, in the order decided
    events = sub.messages_of("event")
    assert events[0]["MessageName"] == "CFX.Production.RecipeActivated"
    assert events[0]["MessageBody"]["Recipe"] == {"Name": rules.recipe, "Revision": rules.version}
    rejected = [e["MessageBody"]["TransactionId"] for e in events
                if e["MessageName"] == "CFX.Production.UnitsDisqualified"]
    assert rejected and rejected == [b["inspection_id"] for b in got if b["verdict"] != "pass"]
    faults = [e["MessageBody"]["Fault"] for e in events if e["MessageName"] == "CFX.ResourcePerformance.FaultOccurred"]
    assert [(f["FaultCode"], f["Severity"]) for f in faults] == [("ResultsDatabaseUnreachable", "Warning")]  # once
    assert "cannot open the results database" in faults[0]["Description"]
    sub.close()


def test_the_results_database_going_away_and_back_is_one_fault_opened_and_cleared(broker: Mosquitto,
                                                                                   tmp_path: Path) -> None:
    """A real PostgreSQL server stopped as a crash stops it, under a real results writer: the factory hears that the
    results wait on the box (a Warning: the line goes on) once, however many batches are spooled meanwhile, and
    hears it cleared once the spool has gone into the database after the server is back."""
    from types import SimpleNamespace

    from inspector.app.factory_events import FactoryEvents
    from inspector.ingest.sources import Source
    from inspector.results.store import ResultStore
    from inspector.results.writer import ResultWriter

    from .services import Postgres

    pg = Postgres()
    sub = Subscriber(broker.port, client_id="mes-db-faults")
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1")
    pub.start()
    writer = ResultWriter(ResultStore(pg.create_db("factory")), tmp_path / "spool.jsonl", max_wait_s=0.05,
                          retry_s=0.2, max_retry_s=0.5)
    writer.start()
    line = SimpleNamespace(rules=SimpleNamespace(recipe="board_a", version="v1"), on_rules=[])
    service = SimpleNamespace(decided=[], line=line, source=Source("folder:/in"), station=None, writer=writer)
    events = FactoryEvents(pub, "line-1", "aoi-1")
    try:
        events.attach(service)  # type: ignore[arg-type]
        writer.put(board("UP", 0))
        assert wait_until(lambda: writer.status().written == 1, 20)
        pg.outage()
        for i in range(6):
            writer.put(board(f"DOWN{i}", i + 1))
            time.sleep(0.2)
        assert wait_until(lambda: writer.status().spooled == 6, 20), writer.status()
        assert wait_until(lambda: len(sub.messages_of("event")) == 2, 10)  # the recipe, then the fault
        pg.start()
        assert wait_until(lambda: writer.status().written == 7 and writer.status().spooled == 0, 60), writer.status()
        assert wait_until(lambda: len(sub.messages_of("event")) == 3, 10)
    finally:
        events.close()
        writer.close()
        pg.stop()
    names = [e["MessageName"] for e in sub.messages_of("event")]
    assert names == ["CFX.Production.RecipeActivated", "CFX.ResourcePerformance.FaultOccurred",
                     "CFX.ResourcePerformance.FaultCleared"]
    occurred, cleared = sub.messages_of("event")[1:]
    fault = occurred["MessageBody"]["Fault"]
    assert (fault["FaultCode"], fault["Severity"]) == ("ResultsDatabaseUnreachable", "Warning")
    assert "results wait on this box's disk" in fault["Description"]
    assert cleared["MessageBody"]["FaultOccurrenceId"] == fault["FaultOccurrenceId"]
    sub.close()


def test_a_source_that_fails_and_comes_back_is_one_fault_opened_and_cleared(broker: Mosquitto) -> None:
    """The source's own counters (what a camera's reconnects write) drive FaultOccurred and FaultCleared."""
    from types import SimpleNamespace

    from inspector.app.factory_events import WATCH_S, FactoryEvents
    from inspector.ingest.sources import Source

    sub = Subscriber(broker.port, client_id="mes-faults")
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1")
    pub.start()
    source = Source("camera:rtsp://cam-3")
    line = SimpleNamespace(rules=SimpleNamespace(recipe="board_a", version="v1"), on_rules=[])
    service = SimpleNamespace(decided=[], line=line, source=source, station=None)
    events = FactoryEvents(pub, "line-1", "aoi-1")
    events.attach(service)  # type: ignore[arg-type]
    source.counters.fail("camera cam-3 lost: no frame for 5 s; reconnecting")
    time.sleep(3 * WATCH_S)
    source.counters.fail("camera cam-3: reconnect 2 failed")  # the same fault goes on: not a second one
    time.sleep(3 * WATCH_S)
    source.counters.delivered()
    deadline = time.monotonic() + 10
    while len(sub.messages_of("event")) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    events.close()
    names = [e["MessageName"] for e in sub.messages_of("event")]
    assert names == ["CFX.Production.RecipeActivated", "CFX.ResourcePerformance.FaultOccurred",
                     "CFX.ResourcePerformance.FaultCleared"]
    occurred, cleared = sub.messages_of("event")[1:]
    assert occurred["MessageBody"]["Fault"]["FaultCode"] == "CameraLost"
    assert "no frame for 5 s" in occurred["MessageBody"]["Fault"]["Description"]
    assert cleared["MessageBody"]["FaultOccurrenceId"] == occurred["MessageBody"]["Fault"]["FaultOccurrenceId"]
    sub.close()


def test_a_panel_is_one_inspection_with_a_unit_per_board_and_only_its_failed_boards_rejected(
        broker: Mosquitto) -> None:
    """A panel of four boards (its rule set's `panel:`): one UnitsInspected with a unit per board, each with its own
    result and only its own parts, the panel's frame at position 0, its x-out a Skipped unit; the reject names the
    failed board's position. A board of one unit and a panel that failed as a whole (its registration: CFX's Error)
    keep to what they were."""
    from datetime import timedelta

    from inspector.app.factory_events import FactoryEvents
    from inspector.results.records import BoardRecord, PartRecord

    from .test_results import T0

    sub = Subscriber(broker.port, client_id="mes-panel")
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1")
    pub.start()
    events = FactoryEvents(pub, "line-1", "aoi-1")  # no line controller: the box rejects what did not pass

    def part(ref: str, defect: str | None = None) -> PartRecord:
        return PartRecord(ref, "R0402", "cls-R0402", "ab" * 32, "fail" if defect else "pass", defect or "ok", 0.9)

    parts = [part(f"{k}-{r}", "missing" if (k, r) == (2, "R2") else None) for k in (1, 2, 3) for r in ("R1", "R2")]
    panel = BoardRecord("P-100", "panel_a", "v1", T0, T0 + timedelta(seconds=1), parts=[*parts, part("X1")],
                        panel_boards=4, panel_skipped=[4])  # board 4: an x-out
    broken = BoardRecord("P-101", "panel_a", "v1", T0, T0 + timedelta(seconds=1), panel_boards=2,
                         error="registration failed: 1 of 3 fiducials found")
    for record in (panel, board("B-7", defect="polarity"), broken):
        events.board(record)
    assert pub.wait_published(10)
    deadline = time.monotonic() + 10
    while len(sub.messages_of("event")) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    events.close()
    units = [m["MessageBody"]["InspectedUnits"] for m in sub.messages_of()]
    assert [(u["UnitPositionNumber"], u["OverallResult"]) for u in units[0]] == \
        [(0, "Passed"), (1, "Passed"), (2, "Failed"), (3, "Passed"), (4, "Skipped")]  # the x-out: CFX 1.4's Skipped
    assert units[0][4]["Inspections"] == [] and units[0][4]["Error"] is None
    assert all(u["UnitIdentifier"] == "P-100" for u in units[0])  # no board has a code of its own: the panel's
    assert [i["InspectionName"] for i in units[0][2]["Inspections"]] == ["INSPECT_2-R1", "INSPECT_2-R2"]
    assert [(u["UnitPositionNumber"], u["OverallResult"]) for u in units[1]] == [(1, "Failed")]
    assert [(u["UnitPositionNumber"], u["OverallResult"], u["Error"][:19]) for u in units[2]] == \
        [(1, "Error", "registration failed"), (2, "Error", "registration failed")]  # CFX: Aborted is an operator's
    rejected = [(e["MessageBody"]["TransactionId"], e["MessageBody"]["DisqualifiedUnits"])
                for e in sub.messages_of("event") if e["MessageName"] == "CFX.Production.UnitsDisqualified"]
    assert [units for _id, units in rejected] == [
        [{"UnitIdentifier": "P-100", "PositionNumber": 2}], [{"UnitIdentifier": "B-7", "PositionNumber": 1}],
        [{"UnitIdentifier": "P-101", "PositionNumber": 1}, {"UnitIdentifier": "P-101", "PositionNumber": 2}]]
    assert [i for i, _u in rejected] == [panel.inspection_id, rejected[1][0], broken.inspection_id]
    sub.close()


def test_the_line_controllers_reject_of_a_panel_names_its_failed_boards(broker: Mosquitto) -> None:
    """With a line controller the reject is the controller's, and the service tells it before the factory: the
    factory holds the reject until the panel's verdict comes and names the failed board, by its own serial; a board
    failed safe at its deadline (no verdict will come) is rejected at once, whole."""
    from datetime import timedelta
    from types import SimpleNamespace

    from inspector.app.factory_events import WATCH_S, FactoryEvents
    from inspector.ingest.sources import Source
    from inspector.plc.station import FailSafe, Station
    from inspector.results.records import BoardRecord, PartRecord

    from .test_results import T0

    sub = Subscriber(broker.port, client_id="mes-station")
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1")
    pub.start()
    clock = SimpleNamespace(t=100.0)
    station = Station(FailSafe(deadline_ms=500), clock=lambda: clock.t)
    line = SimpleNamespace(rules=SimpleNamespace(recipe="panel_a", version="v1"), on_rules=[])
    events = FactoryEvents(pub, "line-1", "aoi-1")
    events.attach(SimpleNamespace(decided=[], line=line, source=Source("folder:x"), station=station))  # type: ignore[arg-type]
    time.sleep(3 * WATCH_S)  # the factory listens to the controller
    parts = [PartRecord(f"{k}-R1", "R0402", "cls-R0402", "ab" * 32, "fail" if k == 3 else "pass",
                        "missing" if k == 3 else "ok", 0.9) for k in (1, 2, 3)]
    panel = BoardRecord("P-200", "panel_a", "v1", T0, T0 + timedelta(seconds=1), parts=parts, panel_boards=3,
                        panel_serials={1: "U-1", 2: "U-2", 3: "U-3"})  # each board's own code, read
    station.board_in("p", since=100.0)
    station.board_in("late", since=100.0, serial="P-201", inspection_id="late-id")
    clock.t = 100.2
    station.verdict("p", panel.inspection_id, "P-200", panel.verdict)  # the controller first, as the service does
    events.board(panel)
    clock.t = 101.0
    station.expire()  # "late" gets no verdict within its deadline
    deadline = time.monotonic() + 10
    while len(sub.messages_of("event")) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    events.close()
    rejected = {e["MessageBody"]["TransactionId"]: e["MessageBody"] for e in sub.messages_of("event")
                if e["MessageName"] == "CFX.Production.UnitsDisqualified"}
    assert rejected[panel.inspection_id]["DisqualifiedUnits"] == [{"UnitIdentifier": "U-3", "PositionNumber": 3}]
    assert rejected["late-id"]["DisqualifiedUnits"] == [{"UnitIdentifier": "P-201", "PositionNumber": 1}]
    assert "no verdict within 500 ms" in rejected["late-id"]["Reason"]
    sub.close()


def test_a_findings_part_number_is_the_boms_where_the_rule_set_has_one(broker: Mosquitto, demo,  # noqa: ANN001
                                                                       tmp_path: Path) -> None:
    """The demo line runs a rule set with `part_numbers:` (board import --bom writes it) for R1 and D1: the factory
    message's record carries each part's number, and a defect names its component by the BOM's part number, or by
    its component type where the rule set has none (R2)."""
    from inspector.app.line import LineConfig
    from inspector.app.run import open_source, run_line
    from inspector.app.service import ServiceConfig
    from inspector.results.store import ResultStore, sqlite_url
    from inspector.routing.rules import parse_rules

    from .test_routing_rules import GOOD

    numbers = {"R1": "RC0402FR-071KL", "D1": "1N4148WS,115"}
    rules = parse_rules(GOOD + 'part_numbers:\n  R1: RC0402FR-071KL\n  D1: "1N4148WS,115"\n',
                        str(tmp_path / "mini.yaml"))
    assert rules.part_numbers == numbers
    sub = Subscriber(broker.port)
    pub = MqttPublisher(f"127.0.0.1:{broker.port}", "line-1", "aoi-1")
    pub.start()
    root, zoo = demo
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    run_line(rules, zoo, root / "models", open_source("synthetic", rules, 12, 3), ServiceConfig(LineConfig(
        device_mb=40)), store, tmp_path, lambda _m: None, published=[pub])
    assert pub.wait_published(20)
    messages = [m for m in sub.messages_of() if m["MessageName"].endswith("UnitsInspected")]
    assert len(messages) == 12
    defects = 0
    for message in messages:
        assert {p["ref"]: p["part_number"] for p in message["Record"]["parts"]} == {**numbers, "R2": None}
        for inspection in message["MessageBody"]["InspectedUnits"][0]["Inspections"]:
            for defect in inspection["DefectsFound"]:
                part = defect["ComponentOfInterest"]
                assert part["PartNumber"] == numbers.get(part["ReferenceDesignator"], "R1K")
                defects += 1
    assert defects > 0
    pub.close()
    sub.close()
    store.close()
