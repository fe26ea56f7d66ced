"""The station's tags as a Modbus TCP register map (pymodbus), for PLCs without OPC UA.

Holding registers (function 3 reads, 6 and 16 write), addresses from 0; the PLC writes only the three marked w:

    0   Heartbeat       counts up once a second (wraps at 65535): the box is alive
    1   Sequence        low 16 bits of the result sequence: +1 with each verdict published
    2   Verdict         0 none yet, 1 pass, 2 fail, 3 error
    3   Reject          1: divert this board
    4   Health          0 ok, 1 degraded, 2 critical, 3 stalled, 4 stopping, 5 starting
    5   Ready           1: the station inspects
    6   Acknowledge  w  the Sequence the PLC has read (the handshake)
    7   Trigger      w  write 1: one software trigger of the camera; reads 0 again once taken
    8   BoardPresent w  1 while a board is in position
    9   RecipeRefused   1 when the last recipe selection (OPC UA) was refused
    10..41 LastSerial   ASCII, two characters a register (high byte first), NUL padded, 64 characters
    42..57 Recipe       ASCII, the recipe in force, 32 characters
    58  RejectBoards    a panel's boards 1..16 that did not pass: bit k-1 for board k (0 with Reject: the whole panel)
    59  RejectBoards    ... boards 17..32: bit k-17 for board k

Recipes are selected over OPC UA (RecipeManagement), not here. Every read is filled from the station's tags
at that moment, so a poll never sees half of a verdict.
"""
from __future__ import annotations

import asyncio
from typing import Any

from pymodbus.constants import ExcCodes
from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from .serving import ServerThread
from .station import Station, Tags

REGISTERS = 60
HEARTBEAT, SEQUENCE, VERDICT, REJECT, HEALTH, READY, ACKNOWLEDGE, TRIGGER, BOARD_PRESENT, RECIPE_REFUSED = range(10)
SERIAL, SERIAL_CHARS = 10, 64
RECIPE, RECIPE_CHARS = 42, 32
REJECT_BOARDS = 58  # two registers, low 16 boards first
WRITABLE = {ACKNOWLEDGE, TRIGGER, BOARD_PRESENT}
VERDICT_CODES = {"": 0, "pass": 1, "fail": 2, "error": 3}
HEALTH_CODES = {"ok": 0, "degraded": 1, "critical": 2, "stalled": 3, "stopping": 4, "starting": 5}


def text_registers(text: str, chars: int) -> list[int]:
    data = text.encode("ascii", "replace")[:chars].ljust(chars, b"\0")
    return [data[i] << 8 | data[i + 1] for i in range(0, chars, 2)]


def registers_text(regs: list[int]) -> str:
    return b"".join(bytes((r >> 8, r & 0xFF)) for r in regs).rstrip(b"\0").decode("ascii", "replace")


def register_map(tags: Tags) -> list[int]:
    """Every register's value for these tags."""
    regs = [0] * REGISTERS
    regs[HEARTBEAT] = tags.heartbeat % 65536
    regs[SEQUENCE] = tags.sequence % 65536
    regs[VERDICT] = VERDICT_CODES.get(tags.last_verdict, 0)
    regs[REJECT] = int(tags.reject)
    regs[HEALTH] = HEALTH_CODES.get(tags.health, 1)
    regs[READY] = int(tags.ready)
    regs[ACKNOWLEDGE] = tags.acknowledge % 65536
    regs[TRIGGER] = int(tags.trigger)
    regs[BOARD_PRESENT] = int(tags.board_present)
    regs[RECIPE_REFUSED] = int(bool(tags.recipe_error))
    regs[SERIAL:SERIAL + SERIAL_CHARS // 2] = text_registers(tags.last_serial, SERIAL_CHARS)
    regs[RECIPE:RECIPE + RECIPE_CHARS // 2] = text_registers(tags.recipe, RECIPE_CHARS)
    regs[REJECT_BOARDS], regs[REJECT_BOARDS + 1] = tags.reject_boards & 0xFFFF, tags.reject_boards >> 16 & 0xFFFF
    return regs


class ModbusServer(ServerThread):
    """The register map served on HOST:PORT from a thread and event loop of its own."""

    what = "Modbus TCP server"

    def __init__(self, station: Station, host: str = "127.0.0.1", port: int = 5020) -> None:
        super().__init__(1, "modbus-server")  # a trigger blocks briefly
        self.station, self.host, self.port = station, host, port
        self._server: ModbusTcpServer | None = None

    def where(self) -> str:
        return f"{self.host}:{self.port}"

    async def _shutdown(self) -> None:
        if self._server is not None:
            await self._server.shutdown()

    async def _serve(self) -> None:
        device = SimDevice(0, simdata=[SimData(0, count=REGISTERS, values=0, datatype=DataType.REGISTERS)],
                           action=self._action)
        self._server = ModbusTcpServer(device, address=(self.host, self.port))
        await self._server.serve_forever(background=True)
        self._ready.set()
        try:
            await self._server.serving
        except asyncio.CancelledError:
            pass

    async def _action(self, function_code: int, start_address: int, address: int, count: int,
                      current_registers: list[int], set_values: Any) -> ExcCodes | None:
        """Reads see the tags as they are now; writes reach the station (only the PLC's three registers)."""
        if set_values is not None:
            touched = range(address, address + len(set_values))
            if any(a not in WRITABLE for a in touched):
                return ExcCodes.ILLEGAL_ADDRESS
            for a, value in zip(touched, set_values):
                await asyncio.get_running_loop().run_in_executor(self._pool, self._apply, a, int(value))
        regs = register_map(self.station.tags)
        current_registers[:] = regs[start_address:start_address + len(current_registers)]
        if set_values is not None:  # the write lands on what the station made of it (Trigger reads 0 again)
            for i, a in enumerate(range(address, address + len(set_values))):
                set_values[i] = regs[a]
        return None

    def _apply(self, address: int, value: int) -> None:
        if address == TRIGGER and value:
            self.station.trigger()
        elif address == BOARD_PRESENT:
            self.station.board_present(bool(value))
        elif address == ACKNOWLEDGE:
            self.station.acknowledge(value)
