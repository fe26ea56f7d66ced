"""A running line on a Hermes lane: boards taken from the machine before the box, handed to the machine after it.

Upstream (`--hermes-upstream HOST:PORT`): the box takes a board whenever it has room (`buffer` boards between
taking and handing on). Each board that arrives takes the next frame of the box's source (a triggered camera is
triggered for it) and lends it its identity: the barcode becomes the board's serial (`serial_source: upstream`,
checked against the board's own code where the rule set reads one: line.py) and the BoardId follows it into the
record. A board upstream already failed is passed on uninspected and stored as such, unless `inspect_failed`. A
panel's boards upstream marked skip or missing in its SubBoards (x-outs) are not inspected (line.py).

Downstream (`--hermes-downstream LISTEN`): each board is handed on in the order it came in, once its verdict is
decided (before the database sees it, like the PLC), with FailedBoard = good for a pass and failed otherwise (a
fail, an error, a board refused). A board that came from no Hermes upstream gets a BoardId here. A panel (its rule
set's `panel:`) goes on with SubBoards, each of its boards good or failed as its own result says (results/units.py)
and skip where the box read its bad mark; what upstream said of a board is kept where it says more: failed stays
failed, missing and skip (an x-out) stay as they were, a board's own barcode stays with it. SubBoards from upstream
on a board that is no panel here go on as they came.
"""
from __future__ import annotations

import queue
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..endpoint import parse_listen
from ..hermes.lane import KEPT, Giver, Handed, Say, Taker
from ..hermes.messages import BASE_PORT, BoardAvailable, BoardQuality, SubBoard, SubBoardState
from ..ingest.sources import Frame, Source, WrappedSource
from ..results.records import BoardRecord
from ..routing.identity import is_noread

UPSTREAM_FAILED = "failed upstream (Hermes FailedBoard): passed on uninspected"
TRIGGER_WAIT_S = 10.0  # how long a board waits for its frame from a triggered camera
NOT_THERE = (SubBoardState.MISSING, SubBoardState.SKIP)  # a panel's boards upstream says are not to be inspected


@dataclass(frozen=True)
class HermesConfig:
    upstream: str | None = None  # HOST:PORT of the machine before the box (its downstream interface)
    downstream: str | None = None  # HOST:PORT the box listens on for the machine after it
    machine_id: str = "inspector"
    lane: int = 1
    buffer: int = 2  # boards the box holds between taking and handing on (its conveyor's places)
    inspect_failed: bool = False  # inspect boards upstream already failed instead of passing them on
    boards: int = 0  # with an upstream lane: stop after taking this many boards (0: until stopped)
    follow_product: bool = False  # a board's ProductTypeId changes the line over to its recipe first

    @property
    def enabled(self) -> bool:
        return bool(self.upstream or self.downstream)


@dataclass
class HermesCounters:
    taken: int = 0
    passed_uninspected: int = 0  # failed upstream, handed on without inspection
    handed_on: int = 0
    handed_failed: int = 0  # handed on with FailedBoard = failed


def _quality(verdict: str) -> BoardQuality:
    return BoardQuality.GOOD if verdict == "pass" else BoardQuality.FAILED


def sub_boards(record: BoardRecord, upstream: tuple[SubBoard, ...] = ()) -> tuple[SubBoard, ...]:
    """The SubBoards a board goes on with: a panel's boards by their own results, merged with what upstream said;
    upstream's as they came for a board that is no panel here. A board's code read here is its barcode (`Bc`);
    one not read keeps what upstream said, never a NOREAD of ours."""
    if not record.panel_boards:
        return upstream
    said = {sb.Pos: sb for sb in upstream}
    failed, skipped = set(record.failed_boards()), set(record.panel_skipped)
    out = []
    for k in range(1, record.panel_boards + 1):
        before = said.pop(k, SubBoard(k))
        if before.St in NOT_THERE:
            out.append(before)
        elif k in skipped:  # an x-out read here, on its bad-mark pad
            out.append(replace(before, St=SubBoardState.SKIP))
        else:
            bad = k in failed or before.St == SubBoardState.FAILED
            own = record.panel_serials.get(k)
            out.append(replace(before, St=SubBoardState.FAILED if bad else SubBoardState.GOOD,
                               Bc=own if own and not is_noread(own) else before.Bc))
    return (*out, *sorted(said.values(), key=lambda sb: sb.Pos))  # positions past the panel: as upstream said


class HermesLink:
    def __init__(self, config: HermesConfig, say: Say = lambda _m: None) -> None:
        if config.buffer < 1:
            raise ValueError(f"the Hermes buffer must hold at least one board, got {config.buffer}")
        self.config, self.say = config, say
        self.counters = HermesCounters()
        self._lock = threading.Lock()
        self._inside = 0  # boards taken (or framed) and not yet handed on
        self._slots: OrderedDict[str, BoardAvailable | None] = OrderedDict()  # inspection id -> board, in order
        self._templates: dict[str, BoardAvailable] = {}  # inspection id -> what upstream said of the board
        self.arrivals: queue.Queue[Handed] = queue.Queue()
        self.taker: Taker | None = None
        self.giver: Giver | None = None
        # BoardId -> time.monotonic() its verdict was decided, the newest KEPT boards (what bench-io times)
        self.verdict_at: OrderedDict[str, float] = OrderedDict()
        if config.upstream:
            host, port = parse_listen(config.upstream, "--hermes-upstream", f"10.0.0.5:{BASE_PORT + 1}")
            self.taker = Taker(host, port, config.machine_id, config.lane, on_board=self._arrived,
                               has_room=self._has_room, say=say)
        if config.downstream:
            host, port = parse_listen(config.downstream, "--hermes-downstream", f"0.0.0.0:{BASE_PORT + 1}")
            self.giver = Giver(host, port, config.machine_id, config.lane, on_handed=self._handed, say=say)

    # -- the lane ends -------------------------------------------------------------------------------------
    def start(self) -> None:
        if self.giver is not None:
            self.giver.start()
        if self.taker is not None:
            self.taker.start()

    def stop(self, drain_s: float = 10.0) -> None:
        """Hand on what is decided (up to `drain_s`), then close both lanes."""
        if self.giver is not None:
            self.giver.wait_empty(drain_s)
        for end in (self.taker, self.giver):
            if end is not None:
                end.stop()

    def _has_room(self) -> bool:
        with self._lock:
            return self._inside < self.config.buffer

    def _arrived(self, handed: Handed) -> None:
        with self._lock:
            self._inside += 1
            self.counters.taken += 1
        self.arrivals.put(handed)

    def _left(self) -> None:
        with self._lock:
            self._inside -= 1
        if self.taker is not None:
            self.taker.room_freed()

    def _handed(self, handed: Handed) -> None:
        with self._lock:
            self.counters.handed_on += 1
            self.counters.handed_failed += handed.board.FailedBoard == BoardQuality.FAILED
        self._left()

    # -- the source: frames lent their boards' identities -----------------------------------------------------
    def wrap(self, source: Source) -> Source:
        return HermesSource(source, self) if self.taker is not None else source

    # -- the line's hooks (service.py) ------------------------------------------------------------------------
    def board_in(self, frame: Frame) -> None:
        """A board enters the line: its place in the order boards are handed on."""
        with self._lock:
            self._slots[frame.inspection_id] = None
            if self.taker is None:
                self._inside += 1  # no upstream lane: the box's own source brings the board in
            board = frame.handoff
            if isinstance(board, BoardAvailable):
                self._templates[frame.inspection_id] = board

    def verdict(self, record: BoardRecord) -> None:
        """The board's verdict is decided: give the record its BoardId and hand on what may go, in order."""
        ready: list[BoardAvailable] = []
        with self._lock:
            if record.inspection_id not in self._slots:
                return
            upstream = self._templates.pop(record.inspection_id, None)
            quality = _quality(record.verdict)
            if upstream is not None:
                board = replace(upstream, FailedBoard=quality, sub_boards=sub_boards(record, upstream.sub_boards))
            else:
                known = record.serial_source not in ("noread", "none", None)
                board = BoardAvailable(str(uuid.uuid4()), self.config.machine_id, quality,
                                       TopBarcode=record.board_serial if known else None,
                                       sub_boards=sub_boards(record))
            record.board_id = board.BoardId
            self.verdict_at[board.BoardId] = time.monotonic()
            if len(self.verdict_at) > KEPT:
                self.verdict_at.popitem(last=False)
            self._slots[record.inspection_id] = board
            while self._slots and next(iter(self._slots.values())) is not None:
                ready.append(self._slots.popitem(last=False)[1])  # type: ignore[arg-type]
        for board in ready:
            if self.giver is not None:
                self.giver.give(board)
            else:
                self._left()  # no downstream lane: the board leaves the box with its verdict

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {**vars(self.counters), "buffer": self.config.buffer, "inside": self._inside}
        if self.taker is not None:
            out["upstream"] = {"address": self.config.upstream, "connected": self.taker.connected.is_set(),
                               "reconnects": self.taker.reconnects, "last_error": self.taker.last_error}
        if self.giver is not None:
            out["downstream"] = {"address": "{}:{}".format(*self.giver.address), "connected": self.giver.connected,
                                 "waiting": self.giver.waiting, "refused_connections": self.giver.refused_connections}
        return out


class HermesSource(WrappedSource):
    """The box's source, one frame per board that arrived from upstream (and none for a board passed on
    uninspected)."""

    def __init__(self, inner: Source, link: HermesLink) -> None:
        super().__init__(inner)
        self.link = link

    def _pull(self, frames: queue.Queue[Frame | None]) -> None:
        """The inner source's frames into `frames`, one ahead at most; None once it ends (a thread: a triggered
        camera's grab waits for the trigger this source fires from its own thread)."""
        try:
            for frame in self.inner:
                while not self._put(frames, frame):
                    if self._stop:
                        return
        finally:
            while not self._put(frames, None) and not self._stop:
                pass

    @staticmethod
    def _put(frames: queue.Queue[Frame | None], item: Frame | None) -> bool:
        try:
            frames.put(item, timeout=0.25)
            return True
        except queue.Full:
            return False

    def _next_frame(self, frames: queue.Queue[Frame | None], trigger: Callable[[], float | None] | None,
                    ) -> Frame | str:
        """The board's frame, or why there is none."""
        if trigger is not None:  # the camera opens in the puller's thread: wait until it takes a trigger
            end = time.monotonic() + TRIGGER_WAIT_S
            while trigger() is None:
                if self._stop or time.monotonic() > end:
                    return f"the camera took no trigger within {TRIGGER_WAIT_S:g} s"
        end = time.monotonic() + TRIGGER_WAIT_S
        while not self._stop:
            try:
                frame = frames.get(timeout=0.25)
            except queue.Empty:
                if trigger is not None and time.monotonic() > end:
                    return f"the camera gave no image within {TRIGGER_WAIT_S:g} s of its trigger"
                continue
            return frame if frame is not None else "the source gave no image for this board (it ended)"
        return "the line is stopping"

    def __iter__(self) -> Iterator[Frame]:
        camera = self.inner.origin
        settings = getattr(camera, "settings", None)
        trigger = getattr(camera, "trigger", None) if getattr(settings, "software_trigger", False) else None
        frames: queue.Queue[Frame | None] = queue.Queue(maxsize=1)
        threading.Thread(target=self._pull, args=(frames,), name="hermes-frames", daemon=True).start()
        taken = 0
        while not self._stop and not (self.link.config.boards and taken >= self.link.config.boards):
            try:
                handed = self.link.arrivals.get(timeout=0.25)
            except queue.Empty:
                continue
            taken += 1
            board = handed.board
            serial = board.TopBarcode or board.BottomBarcode or ""
            origin = "upstream" if serial else "none"
            if board.FailedBoard == BoardQuality.FAILED and not self.link.config.inspect_failed:
                self.link.counters.passed_uninspected += 1
                frame = Frame(None, serial, f"hermes:{board.BoardId}", error=UPSTREAM_FAILED, serial_origin=origin)
            else:
                got = self._next_frame(frames, trigger)
                if isinstance(got, str):
                    frame = Frame(None, serial, f"hermes:{board.BoardId}", error=got, serial_origin=origin)
                else:
                    frame = got
                    if serial:
                        frame.serial, frame.serial_origin = serial, "upstream"
            frame.handoff = board
            frame.skip_boards = frozenset(sb.Pos for sb in board.sub_boards if sb.St in NOT_THERE)
            frame.unit_serials = {sb.Pos: sb.Bc for sb in board.sub_boards if sb.Bc and sb.St not in NOT_THERE}
            yield frame
        self.inner.stop()
