"""A running line's link to its line controller: the station, its OPC UA and Modbus servers, wired to the line.

The station hears of every board the line takes in and every verdict the moment it is decided (service.py
calls it before the result writer sees the board); the PLC's trigger fires the camera's software trigger;
its recipe selection goes through the recipe book. `inspector run`, the kiosk and `inspector bench-io` all
link a line this way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..endpoint import parse_listen
from ..plc.station import FailSafe, Station
from .recipes import RecipeBook
from .service import LineService

if TYPE_CHECKING:
    from ..plc.modbus import ModbusServer
    from ..plc.opcua import OpcUaServer


@dataclass(frozen=True)
class PlcConfig:
    opcua: str | None = None  # opc.tcp://HOST:PORT[/PATH]: serve the station over OPC UA
    opcua_user: str | None = None
    opcua_password: str | None = None
    opcua_anonymous: bool = False
    opcua_insecure: bool = False
    opcua_trust_any: bool = False  # any client certificate opens a secure session (off: the trust list's only)
    modbus: str | None = None  # HOST:PORT: serve the register map over Modbus TCP
    fail_safe: FailSafe = field(default_factory=FailSafe)
    cert_dir: Path = Path("opcua")

    @property
    def enabled(self) -> bool:
        return bool(self.opcua or self.modbus)


class PlcLink:
    def __init__(self, config: PlcConfig, station_name: str) -> None:
        self.config = config
        self.station = Station(config.fail_safe)
        # the servers' libraries load only when a server is asked for: a line without a PLC starts ~1 s sooner
        self.opcua: OpcUaServer | None = None
        self.modbus: ModbusServer | None = None
        if config.opcua:
            from ..plc.opcua import OpcUaConfig, OpcUaServer

            self.opcua = OpcUaServer(self.station, OpcUaConfig(
                config.opcua, station_name, config.cert_dir, config.opcua_user, config.opcua_password,
                config.opcua_anonymous, config.opcua_insecure, config.opcua_trust_any))
        if config.modbus:
            from ..plc.modbus import ModbusServer

            self.modbus = ModbusServer(self.station, *parse_listen(config.modbus, "--modbus", "0.0.0.0:5020"))
        self.camera: Any = None

    def attach(self, service: LineService, recipes: RecipeBook | None = None) -> None:
        """Hear the line's boards and verdicts; let the PLC trigger its camera and switch its recipe."""
        service.station = self.station
        camera = service.source.origin
        settings = getattr(camera, "settings", None)
        if settings is not None and getattr(settings, "software_trigger", False):
            self.camera = camera
            self.station.on_trigger = camera.trigger
        self.station.on_recipe = recipes.select if recipes is not None else None
        self.station.on_halt = lambda halted: service.pause() if halted else service.resume()  # OPC 40100
        self.station.set_recipe(service.line.rules.recipe)

    def start(self) -> None:
        self.station.start()
        try:
            if self.opcua is not None:
                self.opcua.start()
            if self.modbus is not None:
                self.modbus.start()
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        self.station.set_health("stopping", False)
        for server in (self.modbus, self.opcua):
            if server is not None:
                server.stop()
        self.station.stop()

    def snapshot(self) -> dict[str, Any]:
        out = self.station.snapshot()
        out["opcua"] = self.config.opcua
        out["modbus"] = self.config.modbus
        out["software_trigger"] = self.station.on_trigger is not None
        return out
