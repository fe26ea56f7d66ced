"""`inspector llm serve`: the language model in its own process, behind the OpenAI-compatible endpoint.

The process sets its own torch thread count (`--threads`; without it the engine
measures the fastest, service/threads.py) and may lower its CPU priority
(`--nice`), so a model beside the line takes what the line leaves.
It binds 127.0.0.1 unless told otherwise, and refuses to listen beyond the box
without TLS (a certificate and key) and a gate (users from the results database, --db,
or a token file). SIGTERM or Ctrl+C ends waiting requests as cancelled,
stops the engine thread and gives the pool back.
"""
from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ...access.gate import Gate
from ...access.tls import require_tls_off_loopback, server_context
from ...endpoint import is_loopback, parse_listen, read_token
from ..engine import OffloadedLM, serving_checkpoint
from ..loans import borrow_for, from_kiosk
from ..offline.collect import calibrate_on_texts
from ..policies import get_policy
from ..text import load_tokenizer
from .api import Service, create_app
from .batcher import Batcher
from .threads import REMEASURE_S


@dataclass
class ServeConfig:
    model: Path
    policy: str = "daop"
    cache_ratio: float = 0.25
    device: str = "cpu"
    host_ratio: float | None = None
    calibration_dir: Path | None = None
    listen: str = "127.0.0.1:8000"
    token_file: str | None = None
    name: str | None = None
    threads: int | None = None
    nice: int = 0
    max_batch: int = 8
    max_waiting: int = 64
    ledger: str | None = None  # the kiosk that lends this process its memory (URL of its API)
    ledger_token_file: str | None = None
    db: str | None = None  # the results database whose users may use the model (their tokens; inspector/access)
    tls_cert: str | None = None  # serve HTTPS with this certificate and key
    tls_key: str | None = None
    tls_client_ca: str | None = None  # ... and demand client certificates signed by this CA
    expert_dtype: str = "native"  # native, bf16, int8 or int4 (quant/: a quantized copy, written once)
    quant_dir: Path | None = None  # where quantized copies are kept (default: beside the calibration cache)
    remeasure_s: float | None = REMEASURE_S  # a measured thread count is tried again once this old; 0: never


def spinning_beside(niceness: int, threads: int | None, omp_wait: str | None) -> str | None:
    """What to say when a model that yields the CPU to the line (niceness > 0) may run several OpenMP threads that
    spin on the cores between steps (torch sets OpenMP's policy when it loads: only the environment can change it).
    With --threads 2 beside a line at 90% of its capacity, spinning kept 73% of the line's rate and 3% of the
    model's; passive waiting 80% and 81% (inspector llm beside-line --omp-wait active|passive)."""
    if niceness <= 0 or threads == 1 or (omp_wait or "").upper() == "PASSIVE":
        return None
    return (f"note: this model yields the CPU (niceness {niceness}) but runs {threads or 'up to several'} threads "
            "whose OpenMP workers spin on the cores between steps, taking them from the line; start it with "
            "OMP_WAIT_POLICY=PASSIVE in its environment (the installed inspector-llm service does)")


def niceness_alone(niceness: int, autogroups: bool, a_service: bool) -> str | None:
    """What to say when a model yields the CPU by its niceness where that does not reach the line: the kernel's
    autogroups weigh each session as one group, and niceness orders a process only within its own (a trainer at
    nice 10 in a session of its own left a line at 90% of its capacity 68-79% of its rate, in the line's session
    90-93%); a systemd service is weighed by its cgroup's CPU weight, which the installed unit sets."""
    if niceness <= 0 or not autogroups or a_service:
        return None
    return (f"note: niceness {niceness} orders this model only against the processes of its own session; a line "
            "running as a service is not one of them and shares the CPU with it evenly: run the model as the installed "
            "inspector-llm service (CPUWeight=10), or start it with `systemd-run --scope -p CPUWeight=10 inspector llm "
            "serve ...`")


def autogroups_on() -> bool:
    """The kernel weighs each session as one group of its own (sched_autogroup_enabled)."""
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return False


def build_service(cfg: ServeConfig, log: Callable[[str], None]) -> Service:
    """Model, tokenizer, calibration (cached) and engine thread; raises with what to fix before anything binds."""
    host, _ = parse_listen(cfg.listen)
    if cfg.remeasure_s is not None and cfg.remeasure_s < 0:
        raise ValueError(f"--remeasure-threads wants seconds (0: never), got {cfg.remeasure_s:g}")
    token = read_token(cfg.token_file)
    require_tls_off_loopback(host, bool(cfg.tls_cert and cfg.tls_key))
    if bool(cfg.tls_cert) != bool(cfg.tls_key):
        raise ValueError("give both --tls-cert and --tls-key (or neither)")
    gate = gate_of(cfg.db, token)
    if not is_loopback(host) and gate is None:
        raise ValueError(f"--listen {cfg.listen} reaches beyond this box: give --db (the plant's users sign in with "
                         "their tokens) or --token-file, so that only they can use the model")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.nice:
        os.nice(cfg.nice)
    for note in (spinning_beside(os.nice(0), cfg.threads, os.environ.get("OMP_WAIT_POLICY")),
                 niceness_alone(os.nice(0), autogroups_on(), "INVOCATION_ID" in os.environ)):  # systemd sets it
        if note:
            log(note)
    tokenizer = load_tokenizer(cfg.model)
    calibration = None
    if get_policy(cfg.policy).calibrated:
        cache = cfg.calibration_dir or cfg.model.parent / "calibration"
        calibration = calibrate_on_texts(cfg.model, tokenizer, cache, log)
    policy = get_policy(cfg.policy, calibration, log)
    quant_dir = cfg.quant_dir or (cfg.calibration_dir or cfg.model.parent / "calibration").parent / "quantized"
    ckpt = serving_checkpoint(cfg.model, cfg.expert_dtype, cfg.device, quant_dir, log)
    loan = None
    if cfg.ledger:  # the kiosk owns the device ledger: borrow the pool's bytes and the fixed weights' from it
        loan = borrow_for(ckpt, policy, cfg.cache_ratio, calibration,
                          from_kiosk(cfg.ledger, read_token(cfg.ledger_token_file), log, "inspector llm serve"))
        lease = loan.lease
        log(f"the kiosk lends {lease.nbytes / 2**20:.1f} MiB on {lease.device} (lease {lease.lease_s:g} s)")
    try:
        lm = OffloadedLM.load(cfg.model, policy, cache_ratio=cfg.cache_ratio, device=cfg.device,
                              host_ratio=cfg.host_ratio, budget=loan.budget if loan else None,
                              expert_dtype=cfg.expert_dtype, quant_dir=quant_dir)
    except BaseException:
        if loan is not None:
            loan.close()
        raise
    batcher = Batcher(lm, cfg.max_batch, cfg.max_waiting, cfg.threads, cfg.remeasure_s)
    return Service(cfg.name or cfg.model.name, lm, tokenizer, batcher, gate, lease=loan.lease if loan else None)


def gate_of(db: str | None, token: str | None) -> Gate | None:
    """Who may use the model: the users of the results database `db` (by their tokens), the service token."""
    if db is None and token is None:
        return None
    users = None
    if db is not None:
        from ...access.audit import AuditTrail
        from ...access.users import UserBook
        from ...results.store import ResultStore

        store = ResultStore(db)
        store.ready()
        users = UserBook(store.engine, AuditTrail(store.engine))
    return Gate(users, token)


def _threads(cfg: ServeConfig) -> str:
    if cfg.threads:
        return f"{cfg.threads} torch thread(s)"
    again = f", again every {cfg.remeasure_s:g} s" if cfg.remeasure_s else ""
    return f"torch threads measured on the first decode steps{again} (/health says the choice)"


def serve(cfg: ServeConfig, log: Callable[[str], None]) -> int:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM after its shutdown, which would kill the process before the engine thread
        stops and the pool is given back: here a signal only asks the server to exit."""

        @contextlib.contextmanager
        def capture_signals(self):  # noqa: ANN202 - uvicorn's signature
            def stop(signum: int, frame: object) -> None:
                self.should_exit = True

            old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)

    service = build_service(cfg, log)
    host, port = parse_listen(cfg.listen)
    try:
        tls = {"ssl_certfile": cfg.tls_cert, "ssl_keyfile": cfg.tls_key} if cfg.tls_cert else {}
        if cfg.tls_cert and cfg.tls_client_ca:
            import ssl

            tls.update(ssl_ca_certs=cfg.tls_client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
        if cfg.tls_cert:
            server_context(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca)  # a bad pair says so before uvicorn starts
        server = Server(uvicorn.Config(create_app(service), host=host, port=port, log_level="warning",
                                       timeout_keep_alive=5, limit_concurrency=256, **tls))
        mode = f"decode batches of up to {service.batcher.max_batch}" if service.batcher.max_batch > 1 else \
            "one sequence at a time (the policy keeps per-sequence state)"
        scheme = "https" if cfg.tls_cert else "http"
        log(f"serving {service.name!r} at {scheme}://{host}:{port}/v1 with {service.lm.runtime.policy.name}, "
            f"{mode}, {_threads(cfg)}" + (", token required" if service.gate else ""))
        server.run()
        log("stopped")
    finally:
        service.batcher.close()
        service.lm.close()
        if service.lease is not None:
            service.lease.close()
    return 0
