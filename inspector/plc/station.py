"""One inspection station as a PLC sees it: the tags, the handshake, the deadline and the fail-safe rules.

The line tells the station of every board it takes in (`board_in`, with the time of the trigger or the frame)
and of every verdict the moment it is decided (`verdict`). The station publishes each verdict as one step of
the sequence: LastSerial, LastVerdict (pass/fail/error), Reject, RejectBoards and Sequence + 1; the PLC reads them
and writes Acknowledge = Sequence. A board with no verdict by the deadline is published as `error` with Reject set
(fail-safe), and an `error` verdict rejects too; both are settings. A verdict that arrives after its deadline
was published is counted late and not published again (the PLC already acted on the fail-safe). Listeners
(the OPC UA server, the Modbus map, the dashboard) hear every change; the PLC's writes come in through
`trigger`, `board_present`, `acknowledge` and `select_recipe`.

RejectBoards names a panel's boards that did not pass (bit k-1 for board k, boards 1..32; results/units.py), for a
bad-mark (x-out) station. 0 with Reject set rejects the whole panel (no verdict in time, its code unread, a part on
its frame) or a board that is not a panel.
"""
from __future__ import annotations

import heapq
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

VERDICTS = ("pass", "fail", "error")
MASK_BOARDS = 32  # RejectBoards names boards 1..32 (two Modbus registers, one OPC UA UInt32)
ERROR_HEALTH = ("critical", "stalled")  # health that OPC 40100 shows as Error


def board_mask(boards: Sequence[int]) -> int:
    """RejectBoards for a panel's positions: bit k-1 for board k. A part failed on the panel's frame (0), or a failed
    board past MASK_BOARDS (no bit), makes the mask 0: the PLC rejects the panel whole, never marking some boards of
    a panel that failed beyond them."""
    if any(k > MASK_BOARDS or k < 1 for k in boards):
        return 0
    return sum(1 << (k - 1) for k in set(boards) if k >= 1)


@dataclass(frozen=True)
class FailSafe:
    deadline_ms: float = 2000.0  # a board with no verdict this long after its trigger (or frame) is rejected
    reject_on_error: bool = True  # an `error` verdict (registration failed, an expert failed) rejects
    reject_on_noread: bool = False  # a board whose code did not read (NOREAD) rejects


@dataclass(frozen=True)
class Published:
    """One step of the sequence, as the PLC reads it."""

    sequence: int
    inspection_id: str
    serial: str
    verdict: str
    reject: bool
    reason: str = ""  # why a board was failed safe (deadline, error), else empty
    at: float = 0.0  # time.time() of publishing
    latency_ms: float | None = None  # from the trigger (or the frame) to publishing
    deadline: bool = False  # failed safe at its deadline: no verdict came (one may come late, and is not published)
    reject_boards: int = 0  # a panel's boards that did not pass: bit k-1 for board k (board_mask)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class StationCounters:
    boards: int = 0  # boards taken in
    published: int = 0
    rejected: int = 0
    deadline_missed: int = 0  # boards failed safe for want of a verdict in time
    late: int = 0  # verdicts that came after their deadline had been published
    unacknowledged: int = 0  # verdicts published while the PLC had not acknowledged the one before
    triggers: int = 0  # triggers the PLC asked for
    triggers_refused: int = 0  # ... that the camera could not take
    recipes_selected: int = 0
    recipes_refused: int = 0


@dataclass
class Tags:
    """The plain tags, mirrored on OPC UA and Modbus."""

    board_present: bool = False
    trigger: bool = False
    last_serial: str = ""
    last_verdict: str = ""
    last_inspection_id: str = ""
    reject: bool = False
    reject_boards: int = 0  # the last panel's boards that did not pass, bit k-1 for board k (board_mask)
    sequence: int = 0
    acknowledge: int = 0
    heartbeat: int = 0
    health: str = "starting"
    ready: bool = False
    recipe: str = ""
    recipe_error: str = ""
    halted: bool = False  # OPC 40100's Halt: no boards taken until Reset


Listener = Callable[[Tags, "Published | None"], None]


@dataclass(order=True)
class _Due:
    at: float
    key: Any = field(compare=False)


class Station:
    def __init__(self, fail_safe: FailSafe | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.fail_safe = fail_safe or FailSafe()
        self.clock = clock
        self.tags = Tags()
        self.counters = StationCounters()
        self.history: deque[Published] = deque(maxlen=50)  # the last handshakes, for the dashboard
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._pending: dict[Any, float] = {}  # key (inspection id or trigger time) -> when it started
        self._due: list[_Due] = []
        self._done = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._expired: OrderedDict[Any, None] = OrderedDict()  # failed safe, their verdict not yet come (bounded)
        self._known: dict[Any, tuple[str, str]] = {}  # key -> (serial, inspection id) known before the verdict
        # what the PLC's writes do (set by whoever owns the camera and the rules)
        self.on_trigger: Callable[[], float | None] | None = None  # fires the camera: the trigger's time, or None
        self.on_recipe: Callable[[str], str | None] | None = None  # returns the reason when refused
        self.on_halt: Callable[[bool], None] | None = None  # True: stop taking boards (Halt); False: take them (Reset)

    # -- wiring ----------------------------------------------------------------------------------------------
    def listen(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)
            listener(replace(self.tags), None)

    def _changed(self, published: Published | None = None) -> None:
        tags = replace(self.tags)
        for listener in list(self._listeners):
            try:
                listener(tags, published)
            except Exception:  # noqa: BLE001 - one broken listener must not hold the verdict from the others
                pass

    def start(self, heartbeat_s: float = 1.0) -> None:
        """The heartbeat and the deadline watch, on a thread of their own."""
        self._thread = threading.Thread(target=self._run, args=(heartbeat_s,), name="plc-station", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def _run(self, heartbeat_s: float) -> None:
        next_beat = self.clock()
        while not self._done.is_set():
            now = self.clock()
            if now >= next_beat:
                with self._lock:
                    self.tags.heartbeat = (self.tags.heartbeat + 1) % 65536
                    self._changed()
                next_beat = now + heartbeat_s
            self.expire(now)
            with self._lock:
                soonest = self._due[0].at if self._due else next_beat
            self._wake.wait(max(0.0, min(next_beat, soonest) - self.clock()))
            self._wake.clear()

    # -- the line's side -------------------------------------------------------------------------------------
    def board_in(self, key: Any, since: float | None = None, serial: str = "", inspection_id: str = "") -> None:
        """A board (or a trigger that should make one) whose verdict the PLC waits for, from `since`; its serial
        and inspection id when already known (a fail-safe reject names them)."""
        start = self.clock() if since is None else since
        with self._lock:
            if key in self._pending:
                if serial or inspection_id:
                    self._known[key] = (serial, inspection_id)
                return
            self._pending[key] = start
            if serial or inspection_id:
                self._known[key] = (serial, inspection_id)
            self.counters.boards += 1
            heapq.heappush(self._due, _Due(start + self.fail_safe.deadline_ms / 1000, key))
        self._wake.set()

    def verdict(self, key: Any, inspection_id: str, serial: str, verdict: str,
                noread: bool = False, boards: Sequence[int] = (), unread: Sequence[int] = ()) -> Published | None:
        """The line decided: publish it now (None when its deadline already passed and was published). `boards`:
        a panel's positions that did not pass (its frame, 0, is no board of it); `unread`: its boards whose own code
        did not read, rejected with them where the fail-safe rejects a NOREAD."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        with self._lock:
            start = self._pending.pop(key, None)
            self._known.pop(key, None)
            if start is None and key in self._expired:
                del self._expired[key]
                self.counters.late += 1
                return None
            unread = list(unread) if self.fail_safe.reject_on_noread else []
            noread = noread and self.fail_safe.reject_on_noread
            reject = verdict == "fail" or (verdict == "error" and self.fail_safe.reject_on_error) or noread \
                or bool(unread)
            reason = "error" if verdict == "error" else ("noread" if reject and verdict == "pass" else "")
            # a panel's NOREAD rejects it whole (0); its boards' own NOREADs reject those boards
            marked = [] if noread else sorted({*boards, *unread})
            return self._publish(inspection_id, serial, verdict, reject, reason, start,
                                 reject_boards=board_mask(marked) if reject else 0)

    def expire(self, now: float | None = None) -> list[Published]:
        """Fail safe every board whose deadline passed (the watch thread calls this; tests may too)."""
        now = self.clock() if now is None else now
        out = []
        with self._lock:
            while self._due and self._due[0].at <= now:
                due = heapq.heappop(self._due)
                start = self._pending.pop(due.key, None)
                if start is None:
                    continue  # decided in time
                self._expired[due.key] = None
                while len(self._expired) > 1024:  # a trigger that never became a board is forgotten in time
                    self._expired.popitem(last=False)
                self.counters.deadline_missed += 1
                serial, inspection = self._known.pop(due.key, ("", due.key if isinstance(due.key, str) else ""))
                out.append(self._publish(inspection, serial, "error", True,
                                         f"no verdict within {self.fail_safe.deadline_ms:g} ms", start, deadline=True))
        return out

    def _publish(self, inspection_id: str, serial: str, verdict: str, reject: bool, reason: str,
                 start: float | None, deadline: bool = False, reject_boards: int = 0) -> Published:
        t = self.tags
        if t.sequence and t.acknowledge != t.sequence:
            self.counters.unacknowledged += 1
        t.sequence = t.sequence % 4_294_967_295 + 1
        t.last_serial, t.last_verdict, t.last_inspection_id, t.reject = serial, verdict, inspection_id, reject
        t.reject_boards = reject_boards
        latency = None if start is None else 1000 * (self.clock() - start)
        p = Published(t.sequence, inspection_id, serial, verdict, reject, reason, time.time(), latency, deadline,
                      reject_boards)
        self.counters.published += 1
        self.counters.rejected += reject
        self.history.append(p)
        self._changed(p)
        return p

    def set_health(self, status: str, ready: bool) -> None:
        with self._lock:
            ready = ready and not self.tags.halted
            if (self.tags.health, self.tags.ready) != (status, ready):
                self.tags.health, self.tags.ready = status, ready
                self._changed()

    def halt(self) -> str | None:
        """OPC 40100's Halt (the PLC, the MES, an operator): take no more boards (triggers are refused, the line
        pauses; boards inside finish); the reason when it does not apply."""
        with self._lock:
            if self.tags.halted:
                return "the station is already halted"
            self.tags.halted, self.tags.ready = True, False
            self._changed()
        if self.on_halt is not None:
            self.on_halt(True)
        return None

    def reset(self) -> str | None:
        """OPC 40100's Reset: from Halted (or Error) back to taking boards; the reason when it does not apply."""
        with self._lock:
            error = self.tags.health in ERROR_HEALTH
            if not (self.tags.halted or error):
                return f"Reset applies in Halted or Error; the station is {'ready' if self.tags.ready else 'starting'}"
            self.tags.halted = False
            self.tags.ready = self.tags.health == "ok"
            self._changed()
        if self.on_halt is not None:
            self.on_halt(False)
        return None

    def set_recipe(self, name: str) -> None:
        """The recipe in force (at start, after a changeover from any side)."""
        with self._lock:
            if self.tags.recipe != name:
                self.tags.recipe = name
                self._changed()

    # -- the PLC's side --------------------------------------------------------------------------------------
    def trigger(self) -> bool:
        """The PLC asks for one inspection (a software trigger of the camera); False when it cannot be taken.
        A trigger taken is a board the PLC waits for: its deadline runs from the trigger."""
        with self._lock:
            self.counters.triggers += 1
            self.tags.trigger = True
            self._changed()
            halted = self.tags.halted
        fire = self.on_trigger if not halted else None  # halted: refused, like a camera that cannot take it
        at = fire() if fire is not None else None
        if at is not None:
            self.board_in(at, since=at)
        with self._lock:
            self.counters.triggers_refused += at is None
            self.tags.trigger = False  # taken: reads back False, ready for the next edge
            self._changed()
        return at is not None

    def board_present(self, present: bool) -> None:
        with self._lock:
            if self.tags.board_present != present:
                self.tags.board_present = present
                self._changed()

    def acknowledge(self, sequence: int) -> None:
        with self._lock:
            self.tags.acknowledge = sequence
            self._changed()

    def select_recipe(self, name: str) -> str | None:
        """Switch the rule set at the next board boundary; the reason when refused (the running one stays)."""
        select = self.on_recipe
        reason = "this station takes no recipe changes (no rule set switcher configured)" if select is None \
            else select(name)
        with self._lock:
            if reason:
                self.counters.recipes_refused += 1
                self.tags.recipe_error = f"recipe {name!r} refused: {reason}"
            else:
                self.counters.recipes_selected += 1
                self.tags.recipe, self.tags.recipe_error = name, ""
            self._changed()
        return reason

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"tags": dict(vars(self.tags)), "counters": dict(vars(self.counters)),
                    "fail_safe": dict(vars(self.fail_safe)), "waiting": len(self._pending),
                    "history": [p.to_json() for p in list(self.history)[-10:]]}
