"""IPC-HERMES-9852 messages: what one machine of an SMT line says to its neighbour, as XML on a TCP lane.

Every message is one `<Hermes Timestamp="...">` element holding one message element whose attributes are its
data; enumerations travel as their numbers (FailedBoard: 0 unknown, 1 good, 2 failed; TransferState: 1 not
started, 2 incomplete, 3 complete). Two carry child elements: ServiceDescription its SupportedFeatures, and
BoardAvailable a panel's SubBoards (`<SubBoard Pos="2" Bc="..." St="2"/>`, St: 0 unknown, 1 good, 2 failed,
3 missing, 4 skip, as in the standard's reference implementation). Messages follow each other on the stream with
nothing between them, so the reader cuts the stream at each `</Hermes>`. Written from the public standard;
attributes this module does not know are kept in `extra` (a newer peer's), never refused.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from enum import IntEnum
from typing import Any, ClassVar

MAX_MESSAGE = 65536  # bytes: the standard's limit for one message
BASE_PORT = 50100  # a machine's lane n listens on BASE_PORT + n by convention
VERSION = "1.2"
NIL_BOARD_ID = "00000000-0000-0000-0000-000000000000"


class HermesError(ValueError):
    """A message the standard does not allow here, or a stream that is not Hermes: the lane is closed."""


class BoardQuality(IntEnum):
    """FailedBoard: what upstream knows of the board (and, in MachineReady, what the receiver will take)."""

    UNKNOWN = 0  # in MachineReady: any board
    GOOD = 1
    FAILED = 2


class SubBoardState(IntEnum):
    """St of one board of a panel (SubBoard): what the machines so far know of it."""

    UNKNOWN = 0
    GOOD = 1
    FAILED = 2
    MISSING = 3  # not on the panel (broken out)
    SKIP = 4  # not to be processed (an x-out from the board maker or a machine before)


@dataclass(frozen=True)
class SubBoard:
    """One board of a panel: its position (1..N), its state, its own barcode where it has one."""

    Pos: int
    St: SubBoardState = SubBoardState.UNKNOWN
    Bc: str | None = None


class FlippedBoard(IntEnum):
    UNKNOWN = 0
    TOP_UP = 1
    BOTTOM_UP = 2


class TransferState(IntEnum):
    UNKNOWN = 0
    NOT_STARTED = 1
    INCOMPLETE = 2
    COMPLETE = 3


class CheckAliveType(IntEnum):
    UNKNOWN = 0
    PING = 1
    PONG = 2


class Severity(IntEnum):
    UNKNOWN = 0
    FATAL = 1
    ERROR = 2
    WARNING = 3
    INFO = 4


class NotificationCode(IntEnum):
    UNSPECIFIC = 0
    PROTOCOL_ERROR = 1
    CONNECTION_REFUSED = 2  # another connection on this lane is already established
    CONNECTION_RESET = 3  # the configuration changed
    CONFIGURATION_ERROR = 4
    MACHINE_SHUTDOWN = 5
    BOARD_FORECAST_ERROR = 6


@dataclass
class Message:
    """One message; subclasses name their XML element (`tag`) and their attributes (their fields, in order)."""

    tag: ClassVar[str] = ""
    extra: dict[str, str] = field(default_factory=dict, kw_only=True, repr=False)


@dataclass
class ServiceDescription(Message):
    tag: ClassVar[str] = "ServiceDescription"
    MachineId: str = ""
    LaneId: int = 1
    InterfaceId: str | None = None
    Version: str = VERSION
    features: tuple[str, ...] = ("FeatureCheckAliveResponse",)  # the SupportedFeatures child elements


@dataclass
class BoardAvailable(Message):
    tag: ClassVar[str] = "BoardAvailable"
    BoardId: str = NIL_BOARD_ID
    BoardIdCreatedBy: str = ""
    FailedBoard: BoardQuality = BoardQuality.UNKNOWN
    ProductTypeId: str | None = None
    FlippedBoard: FlippedBoard = FlippedBoard.UNKNOWN
    TopBarcode: str | None = None
    BottomBarcode: str | None = None
    Length: float | None = None  # mm
    Width: float | None = None
    Thickness: float | None = None
    ConveyorSpeed: float | None = None  # mm/s
    TopClearanceHeight: float | None = None
    BottomClearanceHeight: float | None = None
    Weight: float | None = None  # g
    sub_boards: tuple[SubBoard, ...] = ()  # a panel's boards (the SubBoards child element); () for none


@dataclass
class RevokeBoardAvailable(Message):
    tag: ClassVar[str] = "RevokeBoardAvailable"


@dataclass
class MachineReady(Message):
    tag: ClassVar[str] = "MachineReady"
    FailedBoard: BoardQuality = BoardQuality.UNKNOWN  # the boards it will take: any, good only, failed only
    ForecastId: str | None = None
    BoardId: str | None = None
    ProductTypeId: str | None = None


@dataclass
class RevokeMachineReady(Message):
    tag: ClassVar[str] = "RevokeMachineReady"


@dataclass
class StartTransport(Message):
    tag: ClassVar[str] = "StartTransport"
    BoardId: str = NIL_BOARD_ID
    ConveyorSpeed: float | None = None


@dataclass
class StopTransport(Message):
    tag: ClassVar[str] = "StopTransport"
    TransferState: TransferState = TransferState.UNKNOWN
    BoardId: str = NIL_BOARD_ID


@dataclass
class TransportFinished(Message):
    tag: ClassVar[str] = "TransportFinished"
    TransferState: TransferState = TransferState.UNKNOWN
    BoardId: str = NIL_BOARD_ID


@dataclass
class Notification(Message):
    tag: ClassVar[str] = "Notification"
    NotificationCode: NotificationCode = NotificationCode.UNSPECIFIC
    Severity: Severity = Severity.UNKNOWN
    Description: str = ""


@dataclass
class CheckAlive(Message):
    tag: ClassVar[str] = "CheckAlive"
    Type: CheckAliveType | None = None
    Id: str | None = None


@dataclass
class BoardForecast(Message):
    tag: ClassVar[str] = "BoardForecast"
    ForecastId: str | None = None
    TimeUntilAvailable: float | None = None  # s
    BoardId: str | None = None
    BoardIdCreatedBy: str | None = None
    FailedBoard: BoardQuality = BoardQuality.UNKNOWN
    ProductTypeId: str | None = None
    FlippedBoard: FlippedBoard = FlippedBoard.UNKNOWN
    TopBarcode: str | None = None
    BottomBarcode: str | None = None


CHILDREN = ("extra", "features", "sub_boards")  # fields that are no attribute of the message element
MESSAGES: dict[str, type[Message]] = {m.tag: m for m in (
    ServiceDescription, BoardAvailable, RevokeBoardAvailable, MachineReady, RevokeMachineReady, StartTransport,
    StopTransport, TransportFinished, Notification, CheckAlive, BoardForecast)}
_REQUIRED = {"ServiceDescription": ("MachineId", "LaneId"), "BoardAvailable": ("BoardId", "FailedBoard"),
             "StartTransport": ("BoardId",), "StopTransport": ("TransferState", "BoardId"),
             "TransportFinished": ("TransferState", "BoardId"), "Notification": ("NotificationCode", "Severity"),
             "MachineReady": ("FailedBoard",)}


def _text(value: Any) -> str:
    if isinstance(value, IntEnum):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def encode(message: Message, now: datetime | None = None) -> bytes:
    """The message as the bytes that go on the lane."""
    stamp = (now or datetime.now(timezone.utc)).astimezone().isoformat(timespec="milliseconds")
    root = ET.Element("Hermes", Timestamp=stamp)
    body = ET.SubElement(root, message.tag)
    for f in fields(message):
        if f.name in CHILDREN:
            continue
        value = getattr(message, f.name)
        if value is not None:
            body.set(f.name, _text(value))
    for key, value in message.extra.items():
        body.set(key, value)
    if isinstance(message, ServiceDescription):
        features = ET.SubElement(body, "SupportedFeatures")
        for name in message.features:
            ET.SubElement(features, name)
    if isinstance(message, BoardAvailable) and message.sub_boards:
        boards = ET.SubElement(body, "SubBoards")
        for sb in message.sub_boards:
            attrs = {"Pos": str(sb.Pos), **({"Bc": sb.Bc} if sb.Bc is not None else {}), "St": str(int(sb.St))}
            ET.SubElement(boards, "SubBoard", attrs)
    data = ET.tostring(root, encoding="utf-8")
    if len(data) > MAX_MESSAGE:
        raise HermesError(f"{message.tag} is {len(data)} bytes; a Hermes message may be at most {MAX_MESSAGE}")
    return data


def _convert(cls: type[Message], name: str, raw: str) -> Any:
    kind = {f.name: f.type for f in fields(cls)}[name]
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    try:
        if kind.startswith(("int", "LaneId")):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
        for enum in (BoardQuality, FlippedBoard, TransferState, CheckAliveType, Severity, NotificationCode):
            if kind.startswith(enum.__name__):
                return enum(int(raw))
    except ValueError:
        raise HermesError(f"{cls.tag}: {name}={raw!r} is not a value the standard allows") from None
    return raw


def decode(data: bytes) -> Message:
    """One message from its bytes; HermesError naming what is wrong (not XML, not Hermes, a bad value)."""
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise HermesError("a Hermes message has no DOCTYPE or entities; refused")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise HermesError(f"not XML ({exc}): {data[:80]!r}") from None
    if root.tag != "Hermes" or len(root) != 1:
        raise HermesError(f"not a Hermes message: <{root.tag}> with {len(root)} element(s)")
    body = root[0]
    cls = MESSAGES.get(body.tag)
    if cls is None:
        raise HermesError(f"unknown Hermes message <{body.tag}>")
    missing = [a for a in _REQUIRED.get(body.tag, ()) if a not in body.attrib]
    if missing:
        raise HermesError(f"{body.tag} without {', '.join(missing)}")
    known = {f.name for f in fields(cls)} - set(CHILDREN)
    values = {k: _convert(cls, k, v) for k, v in body.attrib.items() if k in known}
    extra = {k: v for k, v in body.attrib.items() if k not in known}
    message = cls(**values, extra=extra)
    if isinstance(message, ServiceDescription):
        supported = body.find("SupportedFeatures")
        message.features = tuple(child.tag for child in supported) if supported is not None else ()
    if isinstance(message, BoardAvailable):
        message.sub_boards = _sub_boards(body.find("SubBoards"))
    return message


def _sub_boards(element: ET.Element | None) -> tuple[SubBoard, ...]:
    """A BoardAvailable's SubBoards; HermesError for one without Pos, or with a Pos or St the standard does not
    allow."""
    if element is None:
        return ()
    out = []
    for sb in element.findall("SubBoard"):
        try:
            pos = int(sb.attrib["Pos"])
            state = SubBoardState(int(sb.get("St", "0")))
        except (KeyError, ValueError):
            raise HermesError(f"BoardAvailable: SubBoard {dict(sb.attrib)} needs Pos (1 or more) and St 0..4") from None
        if pos < 1:
            raise HermesError(f"BoardAvailable: SubBoard Pos={pos}: positions count from 1")
        out.append(SubBoard(pos, state, sb.get("Bc")))
    return tuple(out)


_END = re.compile(rb"</Hermes\s*>")


class Framer:
    """Cuts a TCP byte stream into messages at each `</Hermes>`."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        out = []
        while True:
            match = _END.search(self._buffer)
            if match is None:
                if len(self._buffer) > MAX_MESSAGE:
                    raise HermesError(f"over {MAX_MESSAGE} bytes without </Hermes>: not a Hermes peer")
                return out
            raw, self._buffer = self._buffer[:match.end()], self._buffer[match.end():]
            out.append(decode(raw.strip()))
