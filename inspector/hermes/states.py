"""The Hermes lane's state machine (IPC-HERMES-9852, chapter 2.6), the same on both ends of a lane.

A lane joins a machine's downstream interface (it hands boards on; the TCP server) to the next machine's
upstream interface (it takes boards; the client). Both ends walk the same states; a message moves them the same
way whichever end sent it, so one table serves both, and `SENT_BY` says which end may send each message. A
message the table does not allow in the current state is a protocol error: the lane is closed with a
Notification, never guessed through.
"""
from __future__ import annotations

from enum import Enum


class State(Enum):
    NOT_CONNECTED = "NotConnected"
    SOCKET_CONNECTED = "SocketConnected"
    SERVICE_DESCRIPTION_DOWNSTREAM = "ServiceDescriptionDownstream"
    NOT_AVAILABLE_NOT_READY = "NotAvailableNotReady"
    BOARD_AVAILABLE = "BoardAvailable"
    MACHINE_READY = "MachineReady"
    AVAILABLE_AND_READY = "AvailableAndReady"
    TRANSPORTING = "Transporting"
    TRANSPORT_STOPPED = "TransportStopped"
    TRANSPORT_FINISHED = "TransportFinished"
    DISCONNECTED = "Disconnected"


S = State
# the end that may send each message: "taker" (the upstream interface of the machine taking boards) or "giver"
SENT_BY = {"MachineReady": "taker", "RevokeMachineReady": "taker", "StartTransport": "taker",
           "StopTransport": "taker", "BoardAvailable": "giver", "RevokeBoardAvailable": "giver",
           "TransportFinished": "giver", "BoardForecast": "giver"}
# message -> {state before: state after}
TRANSITIONS: dict[str, dict[State, State]] = {
    "BoardAvailable": {S.NOT_AVAILABLE_NOT_READY: S.BOARD_AVAILABLE, S.MACHINE_READY: S.AVAILABLE_AND_READY},
    "RevokeBoardAvailable": {S.BOARD_AVAILABLE: S.NOT_AVAILABLE_NOT_READY, S.AVAILABLE_AND_READY: S.MACHINE_READY},
    "MachineReady": {S.NOT_AVAILABLE_NOT_READY: S.MACHINE_READY, S.BOARD_AVAILABLE: S.AVAILABLE_AND_READY},
    "RevokeMachineReady": {S.MACHINE_READY: S.NOT_AVAILABLE_NOT_READY, S.AVAILABLE_AND_READY: S.BOARD_AVAILABLE},
    "StartTransport": {S.AVAILABLE_AND_READY: S.TRANSPORTING, S.MACHINE_READY: S.TRANSPORTING},
    "StopTransport": {S.TRANSPORTING: S.TRANSPORT_STOPPED, S.TRANSPORT_FINISHED: S.NOT_AVAILABLE_NOT_READY},
    "TransportFinished": {S.TRANSPORTING: S.TRANSPORT_FINISHED, S.TRANSPORT_STOPPED: S.NOT_AVAILABLE_NOT_READY},
    "BoardForecast": {S.NOT_AVAILABLE_NOT_READY: S.NOT_AVAILABLE_NOT_READY, S.MACHINE_READY: S.MACHINE_READY},
}
# a board offer or forecast that crosses a transport in flight is ignored, as the standard allows
IGNORED_WHILE_MOVING = {"BoardAvailable", "RevokeBoardAvailable", "BoardForecast"}
CONNECTED = frozenset(State) - {S.NOT_CONNECTED, S.DISCONNECTED}


class ProtocolError(Exception):
    """A message the state machine does not allow now; its text goes to the peer in a Notification."""


def after(state: State, tag: str, sender: str, role: str, sent: bool) -> State:
    """The state once `tag` has been sent (`sent`) or received by the end playing `role` ("taker" | "giver").

    ServiceDescription opens the lane: the taker sends first, the giver answers.
    """
    if tag in ("Notification", "CheckAlive"):
        if state not in CONNECTED:
            raise ProtocolError(f"{tag} on a lane that is not connected")
        return state
    if tag == "ServiceDescription":
        first = (role == "taker") == sent  # the taker's own, or the giver hearing it
        if first and state is S.SOCKET_CONNECTED:
            return S.SERVICE_DESCRIPTION_DOWNSTREAM
        if not first and state is S.SERVICE_DESCRIPTION_DOWNSTREAM:
            return S.NOT_AVAILABLE_NOT_READY
        raise ProtocolError(f"ServiceDescription in state {state.value}")
    expected = SENT_BY.get(tag)
    if expected is None:
        raise ProtocolError(f"{tag} is not a message of a lane")
    if expected != sender:
        raise ProtocolError(f"{tag} comes from the {expected} of a lane, not from the {sender}")
    if state in (S.TRANSPORTING, S.TRANSPORT_STOPPED) and tag in IGNORED_WHILE_MOVING:
        return state
    try:
        return TRANSITIONS[tag][state]
    except KeyError:
        raise ProtocolError(f"{tag} in state {state.value}") from None
