"""The OpenAI-compatible HTTP endpoint over one offloaded model (FastAPI).

`/v1/models`, `/v1/completions` and `/v1/chat/completions`, streamed over
server-sent events or not, with OpenAI's request fields and error bodies.
Every response carries `usage` and, as a documented extension, `inspector`: the
offloading statistics of that request (policy, hit rate, prediction accuracy,
expert loads, bytes read, time to first token, tokens/s, experts resident per
layer). `/metrics` is Prometheus text; `/health` says whether the engine runs.
With a gate (inspector/access/gate.py) every /v1 route wants `Authorization: Bearer TOKEN` of a user whose role
may use the model (or the box's service token): 401 for no, a wrong, an expired or a revoked token, 403 for a role
that may not.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ... import __version__
from ...access.gate import Gate
from ...access.identity import Forbidden, Unauthenticated
from ...access.roles import Permission
from ..engine import ContextTooLong, GenStats, OffloadedLM
from ..text import Detokenizer, encode_prompt
from .batcher import Batcher, Event, Job, QueueFull
from .chat_format import BadMessages, chat_prompt_ids
from .lease import Lease
from .sampling import BadSampling, Sampling
from .stops import StopScanner

DEFAULT_MAX_TOKENS = 256


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"message": self.message, "type": self.kind, "param": self.param,
                                       "code": self.code}}, status_code=self.status)


class _Sampled(BaseModel):
    model_config = ConfigDict(extra="allow")  # fields of newer clients are ignored, not refused

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # an extension most local servers take
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


class CompletionRequest(_Sampled):
    prompt: str | list[str]
    echo: bool = False
    logprobs: int | None = None
    best_of: int | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str


class ChatRequest(_Sampled):
    messages: list[ChatMessage]
    logprobs: bool = False


@dataclass
class Service:
    """What the endpoint serves: one model under one name, its tokenizer, its engine thread."""

    name: str
    lm: OffloadedLM
    tokenizer: Any
    batcher: Batcher
    gate: Gate | None = None  # None: open (loopback only; the server refuses to listen further without one)
    lease: Lease | None = None  # the memory grant from the kiosk, when it lends this process its memory
    created: int = field(default_factory=lambda: int(time.time()))
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.m_requests = Counter("inspector_llm_requests", "requests by outcome", ["outcome"], registry=r)
        self.m_tokens = Counter("inspector_llm_tokens", "tokens by kind", ["kind"], registry=r)
        self.m_ttft = Histogram("inspector_llm_ttft_seconds", "time to first token, queueing included",
                                buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30), registry=r)
        self.m_hits = Counter("inspector_llm_expert_hits", "selected experts found in memory", registry=r)
        self.m_misses = Counter("inspector_llm_expert_misses", "selected experts read on demand", registry=r)
        self.m_loads = Counter("inspector_llm_expert_loads", "expert reads", registry=r)
        self.m_pred = Counter("inspector_llm_predicted", "real picks of layers a guess was made for", registry=r)
        self.m_right = Counter("inspector_llm_predicted_right", "of those, picks the guess held", registry=r)
        self.m_resident = Gauge("inspector_llm_resident_experts", "experts resident per layer", ["layer"], registry=r)
        Gauge("inspector_llm_active_sequences", "sequences decoding now", registry=r).set_function(
            lambda: self.batcher.active)
        Gauge("inspector_llm_waiting_requests", "requests waiting for the engine", registry=r).set_function(
            lambda: self.batcher.waiting)

    def record(self, stats: GenStats, outcome: str) -> None:
        self.m_requests.labels(outcome).inc()
        self.m_tokens.labels("prompt").inc(stats.prompt_tokens)
        self.m_tokens.labels("completion").inc(stats.tokens)
        if stats.tokens:
            self.m_ttft.observe(stats.ttft_s)
        self.m_hits.inc(stats.hits)
        self.m_misses.inc(stats.misses)
        self.m_loads.inc(stats.expert_loads)
        self.m_pred.inc(stats.predicted)
        self.m_right.inc(stats.predicted_right)
        for layer, n in stats.residency.items():
            self.m_resident.labels(str(layer)).set(n)

    def extension(self, stats: GenStats) -> dict[str, Any]:
        """The documented `inspector` field of every response."""
        return {"policy": self.lm.runtime.policy.name, "hit_rate": round(stats.hit_rate, 4),
                "prediction_accuracy": stats.prediction_accuracy, "expert_loads": stats.expert_loads,
                "bytes_read": stats.bytes_read, "ttft_s": round(stats.ttft_s, 4),
                "tokens_per_s": round(stats.tokens_per_s, 3), "prefetches": stats.prefetches,
                "prefetch_used": stats.prefetch_used, "peak_pool_bytes": stats.peak_pool_bytes, "hits": stats.hits,
                "misses": stats.misses, "predicted": stats.predicted, "predicted_right": stats.predicted_right,
                "residency": {str(k): v for k, v in stats.residency.items()}}


def sampling_of(req: _Sampled) -> Sampling:
    try:
        return Sampling(temperature=req.temperature, top_p=req.top_p, top_k=req.top_k, seed=req.seed)
    except BadSampling as e:
        raise ApiError(400, str(e), param="sampling") from None


def _check(req: _Sampled, service: Service) -> list[str]:
    if req.model != service.name:
        raise ApiError(404, f"the model {req.model!r} does not exist here; this server serves {service.name!r} "
                            "(GET /v1/models)", code="model_not_found", param="model")
    if req.n != 1:
        raise ApiError(400, "n must be 1: this server returns one choice per request", param="n")
    if req.presence_penalty or req.frequency_penalty:
        raise ApiError(400, "presence_penalty and frequency_penalty are not supported; leave them at 0",
                       param="presence_penalty")
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    if len(stops) > 4:
        raise ApiError(400, "at most 4 stop strings", param="stop")
    return stops


async def _run(service: Service, prompt: list[int], req: _Sampled) -> tuple[Job, asyncio.Queue[Event]]:
    if service.lease is not None and service.lease.lost:
        raise ApiError(503, f"the model does not hold its memory grant now ({service.lease.lost}); retry shortly",
                       kind="server_error")
    sampling = sampling_of(req)
    max_tokens = req.max_completion_tokens or req.max_tokens
    if max_tokens is None:  # not asked: up to DEFAULT_MAX_TOKENS, as far as the context leaves room
        context = service.lm.context
        max_tokens = max(1, min(DEFAULT_MAX_TOKENS, context - len(prompt))) if context else DEFAULT_MAX_TOKENS
    try:
        ids, _ = service.lm.fit_prompt(prompt, max_tokens)
    except ContextTooLong as e:
        raise ApiError(400, str(e), code="context_length_exceeded", param="max_tokens") from None
    except ValueError as e:
        raise ApiError(400, str(e), param="prompt") from None
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Event] = asyncio.Queue()
    eos = service.tokenizer.eos_token_id
    job = Job(ids, max_tokens, sampling, lambda ev: loop.call_soon_threadsafe(queue.put_nowait, ev),
              frozenset() if eos is None else frozenset([eos]))
    try:
        service.batcher.submit(job)
    except QueueFull as e:
        raise ApiError(429, str(e), kind="rate_limit_error") from None
    except RuntimeError as e:
        raise ApiError(503, str(e), kind="server_error") from None
    return job, queue


async def _pieces(service: Service, job: Job, queue: asyncio.Queue[Event],
                  stops: list[str]) -> AsyncIterator[tuple[str, str | None, GenStats]]:
    """(text, finish reason or None, stats): text released as it becomes final; the last item has the finish."""
    detok, scan = Detokenizer(service.tokenizer), StopScanner(stops)
    try:
        while True:
            ev = await queue.get()
            if ev.finish is not None:
                if ev.finish == "error":
                    service.record(ev.stats, "error")
                    raise ApiError(500, f"the model failed on this request: {ev.error}", kind="server_error")
                tail = scan.flush()
                reason = "stop" if ev.finish in ("stop", "cancelled") else "length"
                service.record(ev.stats, reason)
                yield tail, reason, ev.stats
                return
            piece = detok.push(ev.token) if ev.token is not None else None
            text = scan.push(piece) if piece else ""
            if scan.stopped:
                job.cancel()
                service.record(ev.stats, "stop")
                yield text, "stop", ev.stats
                return
            if text:
                yield text, None, ev.stats
    finally:
        job.cancel()  # a client that went away frees its row at the next step


def _usage(stats: GenStats) -> dict[str, int]:
    return {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.tokens,
            "total_tokens": stats.prompt_tokens + stats.tokens}


def _envelope(service: Service, rid: str, created: int, obj: str, choices: list[dict[str, Any]],
              stats: GenStats | None) -> dict[str, Any]:
    """A response or chunk: its id and kind, the choices, and with the request's statistics its usage and the
    `inspector` extension."""
    out = {"id": rid, "object": obj, "created": created, "model": service.name, "choices": choices}
    if stats is not None:
        out["usage"], out["inspector"] = _usage(stats), service.extension(stats)
    return out


def _sse(obj: dict[str, Any] | str) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def create_app(service: Service) -> FastAPI:
    # the schema is served (plant IT's tools read it; the manual's reference is made from it), no doc pages: those
    # would fetch scripts from the internet, which a line box does not reach
    app = FastAPI(title="inspector llm", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json",
                  description="OpenAI-compatible endpoint over one offloaded Mixture-of-Experts model. Every /v1 "
                              "route wants `Authorization: Bearer TOKEN` when the server runs with users (401: no "
                              "or a bad token, 403: a role that may not use the model). Errors are OpenAI's "
                              "`{\"error\": {\"message\", \"type\", \"param\", \"code\"}}`.")

    def schema() -> dict[str, Any]:
        """FastAPI's schema, with the errors this server really answers: a refused body is OpenAI's 400, not
        FastAPI's 422."""
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            for methods in doc["paths"].values():
                for op in methods.values():
                    if op.get("responses", {}).pop("422", None) is not None:
                        op["responses"]["400"] = {"description": "the body refused: OpenAI's error object"}
            for name in ("HTTPValidationError", "ValidationError"):
                doc.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        if first.get("type") == "json_invalid":
            msg = "the request body is not valid JSON; send a JSON object"
        else:
            msg = f"{where or 'body'}: {first.get('msg', 'invalid')}"
        return ApiError(400, msg, param=where or None).response()

    @app.middleware("http")
    async def _auth(request: Request, call_next):  # noqa: ANN001, ANN202 - starlette's middleware signature
        if service.gate is not None and request.url.path.startswith("/v1/"):
            origin = f"{request.client.host if request.client else '?'} via the model server"
            try:  # a user's token may need the database: off the event loop
                await run_in_threadpool(service.gate.check, request.headers.get("authorization"), origin,
                                        Permission.LLM)
            except Unauthenticated as exc:
                return ApiError(401, f"{exc} (or the service token file the server was started with)",
                                kind="authentication_error", code="invalid_api_key").response()
            except Forbidden as exc:
                return ApiError(403, str(exc), kind="permission_error", code="forbidden").response()
        return await call_next(request)

    def model_card() -> dict[str, Any]:
        return {"id": service.name, "object": "model", "created": service.created, "owned_by": "inspector"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        """The one model this server serves, as OpenAI's model list."""
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id}")
    async def model(model_id: str) -> dict[str, Any]:
        """The model's card; 404 `model_not_found` for any other name."""
        if model_id != service.name:
            raise ApiError(404, f"the model {model_id!r} does not exist here; this server serves "
                                f"{service.name!r}", code="model_not_found")
        return model_card()

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest):  # noqa: ANN202 - JSON or a stream
        """A text completion of one prompt, whole or streamed as server-sent events (`stream: true`). The answer
        carries `usage` and `inspector`: the request's offloading statistics (policy, hit rate, prediction
        accuracy, expert loads, bytes read, time to first token, tokens/s). echo, logprobs and best_of > 1 are
        refused with 400."""
        stops = _check(req, service)
        if req.echo or req.logprobs or (req.best_of or 1) > 1:
            raise ApiError(400, "echo, logprobs and best_of are not supported", param="echo")
        prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        if len(prompts) != 1:
            raise ApiError(400, "give one prompt per request", param="prompt")
        job, queue = await _run(service, encode_prompt(service.tokenizer, prompts[0]), req)
        rid, created = f"cmpl-{job.id}", int(time.time())

        def body(choices: list[dict[str, Any]], stats: GenStats | None) -> dict[str, Any]:
            return _envelope(service, rid, created, "text_completion", choices, stats)

        if req.stream:
            async def events() -> AsyncIterator[bytes]:
                try:
                    async for text, reason, stats in _pieces(service, job, queue, stops):
                        if text or reason:
                            yield _sse(body([{"index": 0, "text": text, "logprobs": None, "finish_reason": reason}],
                                            stats if reason else None))
                except ApiError as e:
                    yield _sse({"error": {"message": e.message, "type": e.kind}})
                yield _sse("[DONE]")
            return StreamingResponse(events(), media_type="text/event-stream")
        text, reason, stats = await _collect(service, job, queue, stops)
        return body([{"index": 0, "text": text, "logprobs": None, "finish_reason": reason}], stats)

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest):  # noqa: ANN202 - JSON or a stream
        """A chat completion through the model's own chat template, whole or streamed (`stream: true`;
        `stream_options.include_usage` adds a last chunk with `usage`). `inspector` as for completions."""
        stops = _check(req, service)
        if req.logprobs:
            raise ApiError(400, "logprobs are not supported", param="logprobs")
        try:
            prompt = chat_prompt_ids(service.tokenizer, [m.model_dump() for m in req.messages])
        except BadMessages as e:
            raise ApiError(400, str(e), param="messages") from None
        job, queue = await _run(service, prompt, req)
        rid, created = f"chatcmpl-{job.id}", int(time.time())

        def body(obj: str, choices: list[dict[str, Any]], stats: GenStats | None) -> dict[str, Any]:
            return _envelope(service, rid, created, obj, choices, stats)

        if req.stream:
            usage_chunk = bool((req.stream_options or {}).get("include_usage"))

            async def events() -> AsyncIterator[bytes]:
                yield _sse(body("chat.completion.chunk", [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                           "finish_reason": None}], None))
                try:
                    async for text, reason, stats in _pieces(service, job, queue, stops):
                        if text:
                            yield _sse(body("chat.completion.chunk", [{"index": 0, "delta": {"content": text},
                                                                       "finish_reason": None}], None))
                        if reason:
                            last = body("chat.completion.chunk", [{"index": 0, "delta": {}, "finish_reason": reason}],
                                        None)
                            last["inspector"] = service.extension(stats)
                            yield _sse(last)
                            if usage_chunk:
                                yield _sse(body("chat.completion.chunk", [], stats))
                except ApiError as e:
                    yield _sse({"error": {"message": e.message, "type": e.kind}})
                yield _sse("[DONE]")
            return StreamingResponse(events(), media_type="text/event-stream")
        text, reason, stats = await _collect(service, job, queue, stops)
        return body("chat.completion", [{"index": 0, "message": {"role": "assistant", "content": text},
                                         "finish_reason": reason}], stats)

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        """Prometheus text: requests, tokens, time to first token, expert hits, misses, loads, prediction."""
        return PlainTextResponse(generate_latest(service.registry).decode(),
                                 media_type="text/plain; version=0.0.4")

    @app.get("/health")
    async def health() -> JSONResponse:
        """`status` ok (200) or critical (503) with `reasons`; the model, policy, queue, threads, the MoE
        architecture and, when the kiosk lends the memory, the grant."""
        reasons = [] if service.batcher.alive else ["the engine thread has stopped"]
        if service.lease is not None and service.lease.lost:
            reasons.append(f"memory grant lost: {service.lease.lost}")
        ck, rt = service.lm.ckpt, service.lm.runtime
        body = {"status": "critical" if reasons else "ok", "reasons": reasons, "model": service.name,
                "policy": rt.policy.name, "active": service.batcher.active, "waiting": service.batcher.waiting,
                "threads": _threads(service),
                "architecture": {"type": ck.config.model_type, "moe_layers": list(ck.moe_layers),
                                 "experts": ck.num_experts, "top_k": ck.top_k,
                                 "slots": {str(k): v for k, v in rt.slots.items()}}}
        if service.lease is not None:
            body["grant"] = {"bytes": service.lease.nbytes, "device": service.lease.device, "from": service.lease.url}
        return JSONResponse(body, status_code=503 if reasons else 200)

    return app


def _threads(service: Service) -> dict:
    """The engine's torch threads: the operator's count, or per decode-step row count the one measured fastest
    (absent while first tried; the previous one while tried again, those row counts under `remeasuring`) and each
    tried count's median step time in the latest trials."""
    t = service.batcher.threads
    return {"given": t.given, "chosen": {str(r): n for r, n in sorted(t.chosen.items())},
            "remeasure_s": t.remeasure_s, "remeasuring": t.trying, "remeasured": t.remeasured,
            "step_ms": {str(r): {str(n): round(v, 3) for n, v in by.items()} for r, by in t.step_ms.items()}}


async def _collect(service: Service, job: Job, queue: asyncio.Queue[Event],
                   stops: list[str]) -> tuple[str, str, GenStats]:
    parts: list[str] = []
    async for text, reason, stats in _pieces(service, job, queue, stops):
        parts.append(text)
        if reason:
            return "".join(parts), reason, stats
    raise ApiError(500, "the request ended without a finish", kind="server_error")

