"""A PLC's side of the station's OPC UA server (asyncua), callable from plain threads: what `inspector
bench-io` triggers and watches with, and what the tests drive the station with. Its event loop runs on a
thread of its own."""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from asyncua import Client, ua

from .opcua import MV_NAMESPACE, NAMESPACE


class Loop:
    """An event loop on a thread: `run(coro)` from synchronous test code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class Watcher:
    """Data-change notifications of one node, with the time each arrived."""

    def __init__(self) -> None:
        self.changes: list[tuple[float, Any]] = []
        self.events: list[Any] = []

    def datachange_notification(self, node: Any, value: Any, data: Any) -> None:
        self.changes.append((time.monotonic(), value))

    def event_notification(self, event: Any) -> None:
        self.events.append(event)

    def wait(self, predicate, timeout: float = 30.0) -> bool:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.01)
        return predicate(self)


class PlcClient:
    """What a PLC does on OPC UA: connect, read and write the station's tags, subscribe to Sequence."""

    def __init__(self, loop: Loop, url: str, station: str = "aoi-1", user: str | None = None,
                 password: str | None = None, security: str | None = None) -> None:
        self.loop, self.url, self.station = loop, url, station
        self.client = Client(url, timeout=10)
        if user:
            self.client.set_user(user)
            self.client.set_password(password or "")
        self.security = security
        self.nodes: dict[str, Any] = {}

    def connect(self) -> PlcClient:
        async def go() -> None:
            if self.security:
                await self.client.set_security_string(self.security)
            await self.client.connect()
            ns = await self.client.get_namespace_index(NAMESPACE)
            station = await self.client.nodes.objects.get_child([f"{ns}:{self.station}"])
            for child in await station.get_children():
                self.nodes[(await child.read_browse_name()).Name] = child
        self.loop.run(go())
        return self

    def read(self, name: str) -> Any:
        return self.loop.run(self.nodes[name].read_value())

    def write(self, name: str, value: Any, vtype: ua.VariantType) -> None:
        self.loop.run(self.nodes[name].write_value(ua.DataValue(ua.Variant(value, vtype))))

    def subscribe(self, *names: str, period_ms: int = 5) -> Watcher:
        watcher = Watcher()

        async def go() -> None:
            sub = await self.client.create_subscription(period_ms, watcher)
            await sub.subscribe_data_change([self.nodes[n] for n in names])
        self.loop.run(go())
        return watcher

    def vision(self, *path: str) -> Any:
        async def go() -> Any:
            mv = await self.client.get_namespace_index(MV_NAMESPACE)
            return await self.client.nodes.objects.get_child([f"{mv}:VisionSystem", *(f"{mv}:{p}" for p in path)])
        return self.loop.run(go())

    def select_recipe(self, name: str) -> list[Any]:
        async def go() -> list[Any]:
            mv = await self.client.get_namespace_index(MV_NAMESPACE)
            rm = await self.client.nodes.objects.get_child([f"{mv}:VisionSystem", f"{mv}:RecipeManagement"])
            return await rm.call_method(f"{mv}:SelectRecipe", name)
        return self.loop.run(go())

    def subscribe_results(self) -> Watcher:
        watcher = Watcher()

        async def go() -> None:
            mv = await self.client.get_namespace_index(MV_NAMESPACE)
            results = await self.client.nodes.objects.get_child([f"{mv}:VisionSystem", f"{mv}:ResultManagement"])
            etype = await self.client.nodes.root.get_child(
                ["0:Types", "0:EventTypes", "0:BaseEventType", f"{mv}:ResultReadyEventType"])
            sub = await self.client.create_subscription(5, watcher)
            await sub.subscribe_events(results, etype)
        self.loop.run(go())
        return watcher

    def close(self) -> None:
        try:
            self.loop.run(self.client.disconnect(), timeout=10)
        except Exception:  # noqa: BLE001 - a server already gone
            pass


async def client_certificate(folder: Path, name: str = "plc") -> str:
    """A self-signed client certificate and key made under `folder`, as asyncua's security string for an
    encrypted session (Basic256Sha256, SignAndEncrypt)."""
    from asyncua.crypto.cert_gen import setup_self_signed_certificate
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key, cert = folder / f"{name}-key.pem", folder / f"{name}-cert.der"
    await setup_self_signed_certificate(key, cert, f"urn:inspector:{name}", "localhost",
                                        [ExtendedKeyUsageOID.CLIENT_AUTH], {"commonName": name})
    return f"Basic256Sha256,SignAndEncrypt,{cert},{key}"
