"""A protocol server on a thread and asyncio event loop of its own, started and stopped from plain threads.

The OPC UA and Modbus servers are asyncio libraries; the line is threads. Each server subclass writes
`_serve` (set `_ready` once it listens, return when asked to stop) and `_shutdown` (called on its loop);
`start` waits until it listens or raises what kept it from listening.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor


class ServerThread:
    what = "server"  # for messages: "the OPC UA server", ...

    def __init__(self, workers: int, name: str) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._name = name
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{name}-plc")  # PLC writes that block briefly

    def where(self) -> str:
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> None:
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the {self.what} did not start on {self.where()} within {timeout:g} s")
        if self._error is not None:
            raise RuntimeError(f"the {self.what} cannot start on {self.where()}: {self._error}")

    def stop(self, timeout: float = 10.0) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=False)

    def _main(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # noqa: BLE001 - start() raises it
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        raise NotImplementedError

    async def _shutdown(self) -> None:
        raise NotImplementedError
