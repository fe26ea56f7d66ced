"""`inspector llm beside-line`: the line and the language model on one box, each against itself alone.

The line runs here, on paced synthetic boards, as on a conveyor: first flat out
to find its capacity, then at `line_load` of that capacity (a production
rate; a line that needs the whole box has no room for a model beside it). The
model runs as `inspector llm serve` in its own process, with its own thread
count and a lower CPU priority, and a client asks it for completions back to
back. Four figures come out: the line's parts/s alone and beside the model,
the model's tokens/s alone and beside the line.

The model's process waits for work passively between its steps (OpenMP's
OMP_WAIT_POLICY=PASSIVE), as the installed service runs it: with more than one
thread, torch's OpenMP workers otherwise spin on the cores after each step, and
at a low priority they still took them from a busy line (measured with
`--omp-wait active`, docs/pages/ml/llm-service.md).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..coserve.online.profile import DeviceProfile
from ..endpoint import EndpointError, request_json
from ..experts.zoo import Zoo
from ..ingest.sources import SyntheticSource
from ..results.store import ResultStore, sqlite_url
from ..routing.rules import RuleSet
from .service import LineService, ServiceConfig

WARMUP_S = 3.0  # not counted: the first boards warm the engine's pools, the model its pool and kernels


@dataclass
class BesideReport:
    seconds: float
    line_capacity: float  # parts/s flat out, alone
    line_load: float
    line_alone: float  # parts/s at the production rate, alone
    line_beside: float
    model_alone: float  # tokens/s
    model_beside: float
    model_flags: str

    def table(self) -> str:
        rows = [("line (parts/s)", self.line_alone, self.line_beside),
                ("model (tokens/s)", self.model_alone, self.model_beside)]
        out = [f"line at {self.line_load:.0%} of its capacity ({self.line_capacity:.1f} parts/s flat out, alone); "
               f"model: {self.model_flags}; {self.seconds:.0f} s each after {WARMUP_S:.0f} s of warm-up",
               f"{'':<18}{'alone':>9}{'beside':>9}{'kept':>8}"]
        out.append("-" * len(out[-1]))
        for name, alone, beside in rows:
            out.append(f"{name:<18}{alone:>9.2f}{beside:>9.2f}{beside / alone if alone else 0:>7.0%} ")
        return "\n".join(out)


class ModelServer:
    """`inspector llm serve` as a child process on a free loopback port."""

    def __init__(self, args: list[str], models_dir: Path, log: Path, env: dict[str, str] | None = None) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "inspector.cli", "--models", str(models_dir), "llm", "serve", "--listen",
               f"127.0.0.1:{self.port}", *args]
        self.log = log
        # a process group of its own (stopped whole), in the line's session: with the kernel's autogroups a process
        # in another session is weighed as a group of its own, and its niceness orders it only within that group
        # (a trainer at nice 10 in a session of its own left a line at 90% 68-79% of its rate, in the line's session
        # 90-93%); the installed service yields by its cgroup's CPU weight instead (installer/inspector-llm.service)
        self.proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, process_group=0,
                                     env={**os.environ, **(env or {})})
        deadline = time.monotonic() + 600  # the demo model may be built on first use
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"inspector llm serve exited with {self.proc.returncode}: "
                                   f"{log.read_text(errors='replace')[-2000:]}")
            try:
                self.name = request_json(self.url + "/health", timeout=1)["model"]
                return
            except EndpointError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("inspector llm serve did not come up in 10 minutes")

    def complete(self, prompt: str, max_tokens: int) -> int:
        body = {"model": self.name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        try:
            return int(request_json(self.url + "/v1/completions", body, timeout=300)["usage"]["completion_tokens"])
        except EndpointError as e:
            raise RuntimeError(f"the model refused a prompt ({e.status}): {e.message}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


class _Line:
    """The line on paced synthetic boards in a thread; parts counted between two marks."""

    def __init__(self, rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile], config: ServiceConfig,
                 data: Path, interval_s: float) -> None:
        self.store = ResultStore(sqlite_url(data / "beside.sqlite"))
        source = SyntheticSource(rules, boards=0, seed=77, interval_s=interval_s)
        self.service = LineService(rules, zoo, profiles, config, self.store, data, source)
        self.thread = threading.Thread(target=self.service.run, name="beside-line", daemon=True)

    def parts(self) -> int:
        return self.service.line.stats.parts

    def __enter__(self) -> _Line:
        self.service.start()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.service.request_stop()
        self.thread.join(120)
        self.store.close()


def _rate(count: Callable[[], int], seconds: float) -> float:
    time.sleep(WARMUP_S)
    a, t = count(), time.perf_counter()
    time.sleep(seconds)
    return (count() - a) / (time.perf_counter() - t)


class _Chat:
    """A client asking the model for completions back to back; tokens counted as answers arrive."""

    def __init__(self, server: ModelServer, prompts: list[str], max_tokens: int) -> None:
        self.server, self.prompts, self.max_tokens = server, prompts, max_tokens
        self.tokens = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="beside-chat", daemon=True)

    def _run(self) -> None:
        i = 0
        try:
            while not self._stop.is_set():
                self.tokens += self.server.complete(self.prompts[i % len(self.prompts)], self.max_tokens)
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e

    def __enter__(self) -> _Chat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join(300)
        if self.error is not None:
            raise RuntimeError(f"the model's client failed: {self.error}") from self.error


def beside(rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile], config: ServiceConfig,
           models_dir: Path, serve_args: list[str], prompts: list[str], seconds: float = 20.0,
           line_load: float = 0.5, max_tokens: int = 16, say: Callable[[str], None] = lambda _m: None,
           omp_wait: str = "passive") -> BesideReport:
    if not 0 < line_load <= 1:
        raise ValueError(f"--line-load is a share of the line's capacity, above 0 and at most 1; got {line_load}")
    with tempfile.TemporaryDirectory(prefix="inspector-beside-") as tmp:
        root = Path(tmp)

        def line(interval: float, name: str) -> _Line:
            d = root / name
            d.mkdir()
            return _Line(rules, zoo, profiles, config, d, interval)

        with line(0.0, "capacity") as ln:
            capacity = _rate(ln.parts, seconds)
        per_board = len(rules.placements())
        boards_per_s = capacity / per_board
        interval = 1.0 / (line_load * boards_per_s)  # the conveyor's period at the production rate
        say(f"line capacity {capacity:.1f} parts/s alone; production rate: a board every {interval:.3f} s")
        with line(interval, "alone") as ln:
            line_alone = _rate(ln.parts, seconds)
        say(f"line alone at the production rate: {line_alone:.1f} parts/s")
        server = ModelServer(serve_args, models_dir, root / "serve.log", {"OMP_WAIT_POLICY": omp_wait.upper()})
        try:
            with _Chat(server, prompts, max_tokens) as chat:
                model_alone = _rate(lambda: chat.tokens, seconds)
            say(f"model alone: {model_alone:.2f} tokens/s")
            with line(interval, "beside") as ln, _Chat(server, prompts, max_tokens) as chat:
                time.sleep(WARMUP_S)
                p0, k0, t0 = ln.parts(), chat.tokens, time.perf_counter()
                time.sleep(seconds)
                dt = time.perf_counter() - t0
                line_beside, model_beside = (ln.parts() - p0) / dt, (chat.tokens - k0) / dt
        finally:
            server.stop()
    return BesideReport(seconds, capacity, line_load, line_alone, line_beside, model_alone, model_beside,
                        " ".join(serve_args) + f", OMP_WAIT_POLICY={omp_wait.upper()}")
