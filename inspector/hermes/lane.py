"""Both ends of a Hermes lane over TCP: the giver (a machine's downstream interface, the server) and the taker
(the next machine's upstream interface, the client that connects to it).

The handover, as both ends walk it (states.py):
    taker: ServiceDescription          giver: ServiceDescription
    taker: MachineReady                giver: BoardAvailable (BoardId, barcode, FailedBoard)   either order
    taker: StartTransport(BoardId)     giver: TransportFinished(Complete)
    taker: StopTransport(Complete)     -> both NotAvailableNotReady: the board has changed machines
A giver hands its boards on in the order they were given to it, and keeps an offered board through a lost
connection (it is offered again on the next one); a taker reconnects until stopped. A CheckAlive ping is
answered with a pong. Anything the state machine does not allow closes the lane with a Notification that says why.
"""
from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .messages import (
    BoardAvailable,
    BoardQuality,
    CheckAlive,
    CheckAliveType,
    Framer,
    HermesError,
    MachineReady,
    Message,
    Notification,
    NotificationCode,
    RevokeBoardAvailable,
    ServiceDescription,
    Severity,
    StartTransport,
    StopTransport,
    TransferState,
    TransportFinished,
    encode,
)
from .states import ProtocolError, State, after

Say = Callable[[str], None]
KEPT = 10_000  # boards an end remembers having handed or taken (bounded: a line runs for months)


@dataclass
class Handed:
    """One board that changed machines on this lane, as this end saw it."""

    board: BoardAvailable
    offered_at: float  # time.monotonic(): the giver's BoardAvailable sent (giver) or received (taker)
    started_at: float  # the taker's StartTransport sent (taker) or received (giver)
    done_at: float  # the StopTransport that ends the handover

    @property
    def handover_s(self) -> float:
        """The handover itself, StartTransport to StopTransport (the wait for room before it not counted)."""
        return self.done_at - self.started_at


class Lane:
    """One TCP connection of a lane: its state, a reader thread, and the protocol's checks on every message."""

    def __init__(self, sock: socket.socket, role: str, on_message: Callable[[Lane, Message], None],
                 on_closed: Callable[[Lane, str], None], say: Say, lock: threading.RLock) -> None:
        """`lock` is the owner's (giver's or taker's): one lock for the lane's state and the owner's boards, so a
        message and the owner's bookkeeping of it are one step for every other thread."""
        self.sock, self.role = sock, role
        self.peer_role = "giver" if role == "taker" else "taker"
        self.state = State.SOCKET_CONNECTED
        self.peer: ServiceDescription | None = None
        self._on_message, self._on_closed, self._say = on_message, on_closed, say
        self._lock = lock
        self._closed = False
        self._thread = threading.Thread(target=self._read, name=f"hermes-{role}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send(self, message: Message) -> None:
        """Send `message` if the state machine allows it now; ProtocolError (nothing sent) if not."""
        with self._lock:
            if self._closed:
                raise ProtocolError(f"{message.tag} on a closed lane")
            state = after(self.state, message.tag, self.role, self.role, sent=True)
            self.sock.sendall(encode(message))
            self.state = state

    def close(self, reason: str = "", notify: NotificationCode | None = None) -> None:
        with self._lock:
            if self._closed:
                return
            if notify is not None:
                try:
                    self.sock.sendall(encode(Notification(notify, Severity.FATAL, reason)))
                except OSError:
                    pass
            self._closed = True
            self.state = State.DISCONNECTED
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._on_closed(self, reason)

    @property
    def closed(self) -> bool:
        return self._closed

    def _read(self) -> None:
        framer = Framer()
        reason = "the peer closed the connection"
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                for message in framer.feed(data):
                    self._receive(message)
        except (HermesError, ProtocolError) as exc:
            reason = f"protocol error: {exc}"
            self._say(f"hermes {self.role}: {reason}; lane closed")
            self.close(reason, NotificationCode.PROTOCOL_ERROR)
            return
        except OSError as exc:
            reason = f"connection lost: {exc}"
        self.close(reason)

    def _receive(self, message: Message) -> None:
        with self._lock:
            if isinstance(message, CheckAlive):
                if message.Type == CheckAliveType.PING:
                    self.send(CheckAlive(CheckAliveType.PONG, message.Id))
                return
            self.state = after(self.state, message.tag, self.peer_role, self.role, sent=False)
            if isinstance(message, ServiceDescription):
                self.peer = message
            elif isinstance(message, Notification):
                self._say(f"hermes {self.role}: the peer says {message.NotificationCode.name} "
                          f"({message.Severity.name}): {message.Description}")
            self._on_message(self, message)


class Giver:
    """A machine's downstream interface: listens on one lane and hands its boards on, in order."""

    def __init__(self, host: str, port: int, machine_id: str, lane_id: int = 1,
                 on_handed: Callable[[Handed], None] | None = None, say: Say = lambda _m: None) -> None:
        self.machine_id, self.lane_id, self.say = machine_id, lane_id, say
        self.on_handed = on_handed
        self._server = socket.create_server((host, port))
        self.address = self._server.getsockname()[:2]
        self._lock = threading.RLock()
        self._boards: deque[BoardAvailable] = deque()
        self._lane: Lane | None = None
        self._offered_at: float | None = None
        self._started_at: float | None = None
        self._stopping = False
        self.handed: deque[Handed] = deque(maxlen=KEPT)  # the newest handovers, oldest first
        self.refused_connections = 0
        self._changed = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._accept, name="hermes-giver", daemon=True)

    def start(self) -> Giver:
        self._thread.start()
        return self

    def give(self, board: BoardAvailable) -> None:
        """Queue `board` to be handed on after those given before it."""
        with self._lock:
            self._boards.append(board)
            self._pump()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._boards)

    @property
    def connected(self) -> bool:
        with self._lock:
            return self._lane is not None and not self._lane.closed

    def wait_empty(self, timeout: float) -> bool:
        """Until every given board has been handed on (True) or `timeout` seconds passed (False)."""
        end = time.monotonic() + timeout
        with self._changed:
            while self._boards:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            lane = self._lane
        try:
            self._server.close()
        except OSError:
            pass
        if lane is not None:
            lane.close("the machine stops", NotificationCode.MACHINE_SHUTDOWN)

    def _accept(self) -> None:
        while not self._stopping:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                busy = self._lane is not None and not self._lane.closed
                if not busy:
                    self._lane = Lane(sock, "giver", self._on_message, self._on_closed, self.say, self._lock)
                    self._offered_at = None
                    self._lane.start()
                    continue
            self.refused_connections += 1  # one taker per lane: the standard's answer to a second
            try:
                sock.sendall(encode(Notification(NotificationCode.CONNECTION_REFUSED, Severity.ERROR,
                                                 "this lane is already connected")))
            finally:
                sock.close()

    def _on_closed(self, lane: Lane, reason: str) -> None:
        with self._lock:
            if lane is self._lane:
                self._offered_at = None  # an offered board stays first; the next connection is offered it again

    def _on_message(self, lane: Lane, message: Message) -> None:
        with self._lock:
            if isinstance(message, ServiceDescription):
                lane.send(ServiceDescription(self.machine_id, self.lane_id))
            elif isinstance(message, StartTransport):
                head = self._boards[0] if self._boards and self._offered_at is not None else None
                if head is None or message.BoardId != head.BoardId:
                    raise ProtocolError(f"StartTransport for board {message.BoardId}, but the board offered is "
                                        f"{head.BoardId if head else 'none'}")
                self._started_at = time.monotonic()
                lane.send(TransportFinished(TransferState.COMPLETE, head.BoardId))  # our conveyor: it has left
            elif isinstance(message, StopTransport):
                if message.TransferState != TransferState.COMPLETE:
                    raise ProtocolError(f"StopTransport {message.TransferState.name}: the board did not arrive")
                board, now = self._boards.popleft(), time.monotonic()
                handed = Handed(board, self._offered_at or now, self._started_at or now, now)
                self._offered_at = None
                self.handed.append(handed)
                self._changed.notify_all()
                if self.on_handed is not None:
                    self.on_handed(handed)
            self._pump()

    def _pump(self) -> None:
        """Offer the first board when the lane can take an offer (under the lock)."""
        lane = self._lane
        if lane is None or lane.closed or not self._boards or self._offered_at is not None:
            return
        if lane.state in (State.NOT_AVAILABLE_NOT_READY, State.MACHINE_READY):
            lane.send(self._boards[0])
            self._offered_at = time.monotonic()


class Taker:
    """A machine's upstream interface: connects to the machine before it and takes its boards while it has room."""

    def __init__(self, host: str, port: int, machine_id: str, lane_id: int = 1,
                 on_board: Callable[[Handed], None] | None = None, has_room: Callable[[], bool] = lambda: True,
                 accept: BoardQuality = BoardQuality.UNKNOWN, say: Say = lambda _m: None) -> None:
        self.host, self.port, self.machine_id, self.lane_id = host, port, machine_id, lane_id
        self.on_board, self.has_room, self.accept, self.say = on_board, has_room, accept, say
        self._lock = threading.RLock()
        self._lane: Lane | None = None
        self._offer: tuple[BoardAvailable, float] | None = None
        self._started_at = 0.0
        self._stopping = False
        self._closed = threading.Event()
        self.connected = threading.Event()
        self.taken: deque[Handed] = deque(maxlen=KEPT)  # the newest handovers, oldest first
        self.reconnects = 0
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._connect_loop, name="hermes-taker", daemon=True)

    def start(self) -> Taker:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            lane = self._lane
        if lane is not None:
            lane.close("the machine stops", NotificationCode.MACHINE_SHUTDOWN)
        self._closed.set()

    def room_freed(self) -> None:
        """The machine can take another board: say MachineReady if the lane waits for it."""
        with self._lock:
            self._ready()

    def _connect_loop(self) -> None:
        delay = 0.05
        while not self._stopping:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=5)
            except OSError as exc:
                self.last_error = f"cannot reach {self.host}:{self.port}: {exc}"
                time.sleep(delay)
                delay = min(2.0, delay * 2)
                continue
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            delay = 0.05
            self._closed.clear()
            with self._lock:
                if self._stopping:
                    sock.close()
                    return
                self._lane = lane = Lane(sock, "taker", self._on_message, self._on_lane_closed, self.say, self._lock)
                self._offer = None
                lane.start()
                lane.send(ServiceDescription(self.machine_id, self.lane_id))
            self._closed.wait()
            if not self._stopping:
                self.reconnects += 1
                time.sleep(delay)

    def _on_lane_closed(self, lane: Lane, reason: str) -> None:
        self.connected.clear()
        if not self._stopping:
            self.last_error = reason
        self._closed.set()

    def _ready(self) -> None:
        lane = self._lane
        if lane is None or lane.closed or not self.has_room():
            return
        if lane.state in (State.NOT_AVAILABLE_NOT_READY, State.BOARD_AVAILABLE):
            lane.send(MachineReady(self.accept))
        if lane.state is State.AVAILABLE_AND_READY and self._offer is not None:
            self._started_at = time.monotonic()
            lane.send(StartTransport(self._offer[0].BoardId))

    def _on_message(self, lane: Lane, message: Message) -> None:
        with self._lock:
            if isinstance(message, ServiceDescription):
                self.connected.set()
            elif isinstance(message, BoardAvailable):
                self._offer = (message, time.monotonic())
            elif isinstance(message, RevokeBoardAvailable):
                self._offer = None
            elif isinstance(message, TransportFinished):
                if self._offer is None or message.BoardId != self._offer[0].BoardId:
                    raise ProtocolError(f"TransportFinished for board {message.BoardId}, not the board started")
                board, offered_at = self._offer
                lane.send(StopTransport(TransferState.COMPLETE, board.BoardId))  # our conveyor: it has arrived
                self._offer = None
                handed = Handed(board, offered_at, self._started_at, time.monotonic())
                self.taken.append(handed)
                if self.on_board is not None:
                    self.on_board(handed)
            self._ready()
