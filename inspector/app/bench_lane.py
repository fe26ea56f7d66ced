"""`inspector bench-io --hermes | --lane-only`: the box on a Hermes lane between two real peers (hermes/peer.py).

The machine before hands in boards (BoardId, barcode, every tenth already failed), each board it hands over
triggers the emulated camera, and the machine after takes every board with FailedBoard from its verdict. What it
reports: identities in against identities out, every FailedBoard against the stored verdict, and the handover
times on both lanes.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..experts.zoo import Zoo
from ..results.store import ResultStore, sqlite_url
from ..routing.rules import RuleSet
from .histogram import nearest_rank
from .line import LineConfig
from .service import ServiceConfig

Say = Callable[[str], None]


@dataclass
class LaneResult:
    """The Hermes lane phase: what went in and out, and how long the handovers took."""

    boards: int = 0
    seconds: float = 0.0
    identities_equal: bool = False  # BoardIds and barcodes out == in, in order
    failed_board_equal: int = 0  # boards whose FailedBoard downstream equals their stored verdict
    uninspected: int = 0  # failed upstream, passed on without inspection
    mismatches: int = 0  # barcodes from upstream the board's own code contradicted
    handover_ms: list[float] = field(default_factory=list)  # StartTransport -> StopTransport, both lanes
    wait_ms: list[float] = field(default_factory=list)  # BoardAvailable from upstream -> StartTransport (box full)
    hand_on_ms: list[float] = field(default_factory=list)  # the verdict decided -> the board taken downstream
    through_ms: list[float] = field(default_factory=list)  # offered upstream -> taken downstream

    @property
    def boards_per_min(self) -> float:
        return 60 * self.boards / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict:
        q = {f"{name}_{k}_ms": nearest_rank(sorted(getattr(self, name + "_ms")), p)
             for name in ("handover", "wait", "hand_on", "through") for k, p in (("p50", 0.5), ("p99", 0.99))}
        return {"phase": "hermes lane", "boards": self.boards, "seconds": self.seconds,
                "identities_equal": self.identities_equal, "failed_board_equal": self.failed_board_equal,
                "uninspected": self.uninspected, "mismatches": self.mismatches,
                "boards_per_min": self.boards_per_min, **q}


def run_lane(rules: RuleSet, zoo: Zoo, models_dir: Path, images: Path, serials: list[str], boards: int, work: Path,
             config: LineConfig, say: Say) -> LaneResult:
    """Three machines on loopback: an upstream peer, the box (its line on the triggered emulated camera), a
    downstream peer; `boards` boards through the lane."""
    from sqlalchemy import text

    from ..hermes.lane import KEPT
    from ..hermes.messages import BoardQuality
    from ..hermes.peer import BoardPlan, DownstreamPeer, UpstreamPeer
    from .hermes_link import HermesConfig, HermesLink
    from .run import open_source, run_line

    if boards > KEPT:
        raise ValueError(f"the lane phase compares at most {KEPT} boards in and out; give --boards {KEPT} or fewer")
    work.mkdir(parents=True, exist_ok=True)
    failed_every = 10
    imaged = iter(range(boards))
    barcodes = tuple(f"UPFAIL-{i:05d}" if (i + 1) % failed_every == 0 else serials[next(imaged) % len(serials)]
                     for i in range(boards))
    up = UpstreamPeer(("127.0.0.1", 0), BoardPlan(boards, failed_every, barcodes=barcodes, seed=7)).start()
    link = HermesLink(HermesConfig("{}:{}".format(*up.address), "127.0.0.1:0", config.station, boards=boards), say)
    down = DownstreamPeer(link.giver.address).start()  # type: ignore[union-attr]
    source = open_source("genicam:0", rules, 0, 0, camera_settings={
        "ImageFilename": str(images), "Width": rules.board_size[0], "Height": rules.board_size[1],
        "PixelFormat": "BGR8", "ExposureTime": 1000, "TriggerMode": "On", "TriggerSource": "Software"})
    store = ResultStore(sqlite_url(work / "results.sqlite"), connect=False)
    result = LaneResult()
    t0 = time.monotonic()
    try:
        service, _ = run_line(rules, zoo, models_dir, source, ServiceConfig(config, keep_crops="none"), store, work,
                              lambda _m: None, hermes=link)
        deadline = time.monotonic() + 60
        while len(down.taken) < boards and time.monotonic() < deadline:
            time.sleep(0.01)
        result.seconds = time.monotonic() - t0
    finally:
        up.stop()
        down.stop()
    result.boards = len(down.taken)
    result.identities_equal = [(h.board.BoardId, h.board.TopBarcode) for h in down.taken] == \
        [(b.BoardId, b.TopBarcode) for b in up.boards]
    with store.engine.connect() as c:
        verdicts = dict(c.execute(text("SELECT board_id, verdict FROM inspections")).all())
    store.close()
    result.failed_board_equal = sum(
        verdicts.get(h.board.BoardId) is not None
        and (h.board.FailedBoard == BoardQuality.GOOD) == (verdicts[h.board.BoardId] == "pass") for h in down.taken)
    result.uninspected = link.counters.passed_uninspected
    result.mismatches = service.line.stats.identity_mismatches
    taken_at = {h.board.BoardId: h for h in link.taker.taken}  # type: ignore[union-attr]
    offered_at = {h.board.BoardId: h.offered_at for h in up.handed}
    for h in down.taken:
        box = taken_at.get(h.board.BoardId)
        result.handover_ms.append(1000 * h.handover_s)
        if box is not None:
            result.handover_ms.append(1000 * box.handover_s)
            result.wait_ms.append(1000 * (box.started_at - box.offered_at))
        if h.board.BoardId in link.verdict_at:
            result.hand_on_ms.append(1000 * (h.done_at - link.verdict_at[h.board.BoardId]))
        if h.board.BoardId in offered_at:
            result.through_ms.append(1000 * (h.done_at - offered_at[h.board.BoardId]))
    say(f"hermes lane: {result.boards} boards, identities in = out: {result.identities_equal}")
    return result


def format_lane(result: LaneResult) -> str:
    def pq(values: list[float]) -> str:
        s = sorted(values)
        return f"{nearest_rank(s, 0.5) or float('nan'):.1f} / {nearest_rank(s, 0.99) or float('nan'):.1f}"

    head = (f"{'phase':<12}{'boards':>7}{'in = out':>9}{'FailedBoard = verdict':>22}{'uninspected':>12}"
            f"{'mismatched':>11}{'handover p50/p99 ms':>21}{'wait p50/p99 ms':>19}{'hand on p50/p99 ms':>20}"
            f"{'through p50/p99 ms':>20}{'boards/min':>11}")
    row = (f"{'hermes lane':<12}{result.boards:>7}{'yes' if result.identities_equal else 'NO':>9}"
           f"{f'{result.failed_board_equal}/{result.boards}':>22}{result.uninspected:>12}{result.mismatches:>11}"
           f"{pq(result.handover_ms):>21}{pq(result.wait_ms):>19}{pq(result.hand_on_ms):>20}"
           f"{pq(result.through_ms):>20}{result.boards_per_min:>11.1f}")
    return "\n".join([head, "-" * len(head), row,
                      "handover: StartTransport to StopTransport on either lane; wait: upstream's BoardAvailable to "
                      "the box's StartTransport (the box full); hand on: the verdict decided to the downstream "
                      "machine's StopTransport; through: offered upstream to taken downstream; every tenth board "
                      "failed upstream (passed on uninspected); mismatched: a barcode the board's own code "
                      "contradicted"])


