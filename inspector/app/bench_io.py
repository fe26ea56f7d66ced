"""`inspector bench-io`: from the PLC's trigger to the verdict at the PLC, through the camera and the whole line.

A PLC client (asyncua, over an encrypted session with a user, as on a line) writes the station's Trigger; the
emulated industrial camera (pypylon's emulator, serving pre-rendered boards of the recipe, so rendering is not
in the measured process's way) takes one frame; the line registers it, reads its code, inspects every part and
decides; the station publishes the verdict; the client's subscription sees Sequence change. The latency is
from the write to that notification, as the PLC sees it; the PLC acknowledges and triggers the next board
(closed loop: the boards/min is what one station sustains). The same is run with the results database down
(an unreachable PostgreSQL server: results spool), which must not move the verdict.

With `lane`, a further phase puts the box on a Hermes lane between two real peers (bench_lane.py); with
`conveyor`, the line's own pace is measured and then a conveyor 1.5x it triggers boards without waiting.
"""
from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..experts.zoo import Zoo
from ..ingest.images import write_image
from ..results.store import ResultStore, sqlite_url
from ..routing.rules import RuleSet
from .events_probe import EventsSeen
from .histogram import nearest_rank
from .line import LineConfig
from .plc_link import PlcConfig, PlcLink
from .service import ServiceConfig

if TYPE_CHECKING:
    from .bench_lane import LaneResult

Say = Callable[[str], None]
WARMUP = 3  # boards before the measured ones (experts loaded, caches warm)
CONVEYOR = 1.5  # the conveyor phase triggers this much faster than the line's own pace
PACE_BOARDS = 24  # boards the line's own pace is measured on, triggered faster than any line goes
PACE_INTERVAL_S = 0.03
PACE_DEADLINE_MS = 120_000.0  # long enough that no board of the pace run is late


@dataclass
class PhaseResult:
    phase: str
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0
    deadline_missed: int = 0
    stored: int = 0
    spooled: int = 0
    serials_read: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    events: EventsSeen | None = None  # with --mqtt: what the factory's subscriber saw
    interval_ms: float | None = None  # a conveyor's fixed trigger interval (open loop), else closed loop
    failed_safe: int = 0  # the conveyor phase's measured boards failed safe at their deadline
    late_verdicts: int = 0  # ... whose verdict came after the fail-safe had been published
    triggered: int = 0  # measured boards triggered
    triggers_refused: int = 0  # triggers the camera could not take
    rejected_late: int = 0  # refused uninspected: their deadline passed before the line could take them
    inspected_late: int = 0  # inspected after their deadline (only with skip_late off)

    def quantile(self, q: float) -> float:
        value = nearest_rank(sorted(self.latencies_ms), q)
        return float("nan") if value is None else value

    @property
    def boards(self) -> int:
        return len(self.latencies_ms) or self.triggered

    @property
    def boards_per_min(self) -> float:
        return 60 * self.boards / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict:
        return {"phase": self.phase, "boards": self.boards, "interval_ms": self.interval_ms,
                "rejected_late": self.rejected_late, "inspected_late": self.inspected_late,
                "triggers_refused": self.triggers_refused, "p50_ms": self.quantile(0.5),
                "p99_ms": self.quantile(0.99), "max_ms": max(self.latencies_ms, default=float("nan")),
                "boards_per_min": self.boards_per_min, "deadline_missed": self.deadline_missed,
                "stored": self.stored, "spooled": self.spooled, "serials_read": self.serials_read,
                "verdicts": self.verdicts, "events": None if self.events is None else vars(self.events)}


def render_folder(rules: RuleSet, folder: Path, n: int, seed: int = 4242, defect_rate: float = 0.005) -> list[str]:
    """`n` boards of the recipe as the emulator's images, in the order it serves them; their serials. Parts are
    defective at the demo line's rate (most boards pass, as on a line)."""
    from ..ingest.synthetic import rates_for, render_board

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, rules.seed])
    serials = []
    for i in range(n):
        board = render_board(rules, f"{rules.recipe.upper()}-IO-{i:04d}", rng, rates_for(defect_rate))
        write_image(folder / f"{i:04d}.png", board.image)
        serials.append(board.serial)
    return serials


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_phase(phase: str, rules: RuleSet, zoo: Zoo, models_dir: Path, images: Path, boards: int, db_url: str | None,
              work: Path, config: LineConfig, deadline_ms: float, say: Say, mqtt: str | None = None,
              conveyor: float | None = None) -> PhaseResult:
    """One phase: the PLC triggers a board and waits for its verdict (closed loop), or with `conveyor` triggers one
    every `conveyor` seconds like a conveyor that does not wait (open loop: `_conveyor`)."""
    from asyncua import ua

    from ..plc.client import Loop, PlcClient, client_certificate
    from ..plc.station import FailSafe
    from ..plc.trust import TrustList
    from .run import open_source, run_line

    work.mkdir(parents=True, exist_ok=True)
    source = open_source("genicam:0", rules, 0, 0, camera_settings={
        "ImageFilename": str(images), "Width": rules.board_size[0], "Height": rules.board_size[1],
        "PixelFormat": "BGR8", "ExposureTime": 1000, "TriggerMode": "On", "TriggerSource": "Software"})
    url = f"opc.tcp://127.0.0.1:{_free_port()}/inspector"
    password = os.urandom(12).hex()
    link = PlcLink(PlcConfig(opcua=url, opcua_user="plc", opcua_password=password, cert_dir=work / "opcua",
                             fail_safe=FailSafe(deadline_ms=deadline_ms)), config.station)
    store = ResultStore(db_url or sqlite_url(work / "results.sqlite"), connect=False)
    out: dict = {}

    events, probe = None, None
    if mqtt:  # the factory events through the plant's broker, under a topic of their own
        from ..results.mqtt import MqttPublisher
        from ..results.outbox import Outbox
        from .events_probe import EventsProbe
        from .factory_events import FactoryEvents

        prefix = f"inspector-bench-io-{os.getpid()}"
        probe = EventsProbe(mqtt, f"{prefix}/+/+/board").start()
        publisher = MqttPublisher(mqtt, config.line, config.station, prefix=prefix, outbox=Outbox(work / "outbox"))
        publisher.start()
        events = FactoryEvents(publisher, config.line, config.station)

    def line() -> None:
        out["service"], _ = run_line(rules, zoo, models_dir, source, ServiceConfig(config, keep_crops="none"), store,
                                     work, lambda _m: None, plc=link, events=events)
    thread = threading.Thread(target=line, name="bench-io-line", daemon=True)
    thread.start()
    deadline = time.monotonic() + 300
    while (link.opcua is None or link.opcua.server is None or source.origin.camera is None) \
            and time.monotonic() < deadline:
        if not thread.is_alive():
            raise RuntimeError("the line stopped before the camera and the OPC UA server were up")
        time.sleep(0.05)
    loop = Loop()
    result = PhaseResult(phase)
    try:
        security = loop.run(client_certificate(work, "bench-plc"))
        TrustList(work / "opcua").trust(work / "bench-plc-cert.der")  # the bench's PLC, trusted as a plant's is
        plc = PlcClient(loop, url, config.station, "plc", password, security).connect()
        watch = plc.subscribe("Sequence", period_ms=5)
        watch.wait(lambda w: w.changes, 10)
        watch.changes.clear()
        t_start, missed_before, refused_before = None, 0, 0
        for i in range(WARMUP + boards):
            if i == WARMUP:
                t_start = time.monotonic()
                missed_before = link.station.counters.deadline_missed
                refused_before = link.station.counters.triggers_refused
                if conveyor is not None:
                    _conveyor(plc, watch, link, boards, conveyor, result)
                    break
            seen = len(watch.changes)
            t0 = time.monotonic()
            plc.write("Trigger", True, ua.VariantType.Boolean)
            if not watch.wait(lambda w, s=seen: len(w.changes) > s, 30):
                raise RuntimeError(f"no verdict for board {i} within 30 s")
            at, sequence = watch.changes[seen]
            plc.write("Acknowledge", sequence, ua.VariantType.UInt32)
            if i >= WARMUP:
                result.latencies_ms.append(1000 * (at - t0))
        if conveyor is None:
            result.seconds = time.monotonic() - (t_start or time.monotonic())
        result.triggers_refused = link.station.counters.triggers_refused - refused_before
        plc.close()
    finally:
        source.stop()
        thread.join(120)
        loop.close()
        if probe is not None:
            probe.wait(WARMUP + boards, 10)
            result.events = probe.stop(_decided_order(store, work))
    service = out.get("service")
    st = link.station.counters
    result.deadline_missed = st.deadline_missed - missed_before  # the measured boards' (warm-up: first sessions)
    if service is not None:
        w = service.writer.status()
        result.stored, result.spooled = w.written, w.spooled
        result.verdicts = dict(service.line.stats.board_verdicts)
        result.rejected_late = service.rejected_late + service.line.stats.late_refused
        result.inspected_late = service.inspected_late
        result.serials_read = service.line.stats.serials_read
    store.close()
    say(f"{phase}: p50 {result.quantile(0.5):.1f} ms, p99 {result.quantile(0.99):.1f} ms over "
        f"{len(result.latencies_ms)} boards")
    return result


def _decided_order(store: ResultStore, work: Path) -> list[str]:
    """The inspection ids in the order the results writer got them: the database's rows, then the spool's lines."""
    import json

    from sqlalchemy import text

    ids: list[str] = []
    try:
        with store.engine.connect() as c:
            ids = [row[0] for row in c.execute(text("SELECT uuid FROM inspections ORDER BY id"))]
    except Exception:  # noqa: BLE001 - the database down on purpose: the spool has them all
        pass
    spool = work / "spool.jsonl"
    if spool.is_file():
        ids += [json.loads(line)["inspection_id"] for line in spool.read_text(encoding="utf-8").splitlines() if line]
    return ids


def _conveyor(plc: Any, watch: Any, link: PlcLink, boards: int, interval_s: float, result: PhaseResult) -> None:
    """`boards` triggers every `interval_s`, not waiting for verdicts (acknowledging what is published meanwhile),
    then until every board the camera took is published (its verdict, or its fail-safe at the deadline)."""
    from asyncua import ua

    station = link.station
    before, refused, missed, late = (station.counters.published, station.counters.triggers_refused,
                                     station.counters.deadline_missed, station.counters.late)
    start = time.monotonic()
    for i in range(boards):
        time.sleep(max(0.0, start + i * interval_s - time.monotonic()))
        plc.write("Trigger", True, ua.VariantType.Boolean)
        if watch.changes:
            plc.write("Acknowledge", watch.changes[-1][1], ua.VariantType.UInt32)
    end = time.monotonic() + 120
    while time.monotonic() < end:  # every board the camera took has the line's verdict (in time, or late)
        c = station.counters
        taken = boards - (c.triggers_refused - refused)
        if (c.published - before) - (c.deadline_missed - missed) + (c.late - late) >= taken:
            break
        time.sleep(0.02)
    result.seconds = time.monotonic() - start
    result.interval_ms, result.triggered = 1000 * interval_s, boards
    result.failed_safe = station.counters.deadline_missed - missed
    result.late_verdicts = station.counters.late - late


def bench_io(rules: RuleSet, zoo: Zoo, models_dir: Path, boards: int, config: LineConfig, deadline_ms: float,
             phases: tuple[str, ...] = ("up", "down"), say: Say = lambda _m: None, mqtt: str | None = None,
             ) -> list[PhaseResult | LaneResult]:
    """The phases named: "up" and "down" (the PLC's trigger to its verdict, the database up and down) and "lane"
    (the box on a Hermes lane between two peers); `mqtt`: the factory events through this broker too, measured
    at a subscriber."""
    os.environ.setdefault("PYLON_CAMEMU", "1")  # before pylon starts: the emulated camera
    from .bench_lane import run_lane

    results: list[PhaseResult | LaneResult] = []
    with tempfile.TemporaryDirectory(prefix="inspector-bench-io-") as tmp:
        root = Path(tmp)
        serials = render_folder(rules, root / "images", min(boards + WARMUP, 24))
        for phase in phases:
            if phase == "conveyor":  # the line's own pace first (nothing late: a long deadline), then 1.5x it
                pace = run_phase("line's pace", rules, zoo, models_dir, root / "images", PACE_BOARDS, None,
                                 root / "pace", config, PACE_DEADLINE_MS, say, mqtt, PACE_INTERVAL_S)
                results.append(pace)
                interval = pace.seconds / max(1, pace.triggered - pace.triggers_refused) / CONVEYOR
                results.append(run_phase(f"conveyor {CONVEYOR:g}x", rules, zoo, models_dir, root / "images",
                                         boards, None, root / phase, config, deadline_ms, say, mqtt, interval))
                continue
            if phase == "lane":
                results.append(run_lane(rules, zoo, models_dir, root / "images", serials, boards, root / phase,
                                        config, say))
                continue
            down = f"postgresql+psycopg2://nobody@127.0.0.1:{_free_port()}/down" if phase == "down" else None
            name = "database down" if down else "database up"
            results.append(run_phase(name, rules, zoo, models_dir, root / "images", boards, down,
                                     root / phase, config, deadline_ms, say, mqtt))
    return results


def format_table(results: list[PhaseResult], deadline_ms: float) -> str:
    head = (f"{'phase':<16}{'boards':>7}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'boards/min':>12}"
            f"{'missed':>8}{'stored':>8}{'spooled':>9}{'serials read':>14}")
    lines = [head, "-" * len(head)]
    for r in results:
        n = r.boards
        lines.append(f"{r.phase:<16}{n:>7}{r.quantile(0.5):>9.1f}{r.quantile(0.99):>9.1f}"
                     f"{max(r.latencies_ms, default=float('nan')):>9.1f}{r.boards_per_min:>12.1f}"
                     f"{r.deadline_missed:>8}{r.stored:>8}{r.spooled:>9}{r.serials_read:>9}/{n + WARMUP}")
    for r in results:
        if r.interval_ms is not None:
            lines.append(f"{r.phase}: {r.triggered} boards triggered every {r.interval_ms:.0f} ms without "
                         f"waiting: inspected after their deadline {r.inspected_late}, rejected late (uninspected) "
                         f"{r.rejected_late}, failed safe at the deadline {r.failed_safe} (a verdict after it: "
                         f"{r.late_verdicts}), triggers the camera refused {r.triggers_refused}; verdicts "
                         f"{r.verdicts} (warm-up included)")
        if r.events is not None:
            e, s = r.events, sorted(r.events.delays_ms)
            lines.append(f"{r.phase}: MQTT board messages {e.boards}/{r.boards + WARMUP}, in the order "
                         f"decided: {'yes' if e.in_order else 'NO'}, duplicated: {e.duplicates}, verdict to message "
                         f"p50 {nearest_rank(s, 0.5) or float('nan'):.1f} ms, p99 "
                         f"{nearest_rank(s, 0.99) or float('nan'):.1f} ms; results in the database this phase: "
                         f"{r.stored}")
    lines.append(f"latency: the PLC's Trigger write to its Sequence notification (OPC UA, Basic256Sha256 "
                 f"SignAndEncrypt); deadline {deadline_ms:g} ms; {WARMUP} warm-up boards before each phase")
    return "\n".join(lines)
