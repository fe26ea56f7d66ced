"""A chat through a running `inspector llm serve`: what the dashboard's LLM tab uses when given the server's
URL instead of a checkpoint, with the same methods as ChatSession (complete, residency, describe, close).

Standard library only (urllib, server-sent events read line by line), so the
dashboard needs no HTTP package of its own. Greedy, as the in-process chat.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from http.client import HTTPResponse
from typing import Any

from ...endpoint import EndpointError, open_url
from ..engine import GenStats
from ..session import LayerResidency


class EndpointChat:
    def __init__(self, url: str, token: str | None = None, timeout: float = 300.0) -> None:
        """Raises ConnectionError naming the URL when no server answers there."""
        self.url, self.token, self.timeout = url.rstrip("/").removesuffix("/v1"), token, timeout
        self.health = self._get("/health")
        self.name = self.health["model"]
        self.stats: GenStats | None = None
        self._last: dict[str, Any] = {}

    def _request(self, path: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> HTTPResponse:
        try:
            return open_url(self.url + path, body, self.token, timeout)
        except EndpointError as e:
            if e.status is None:
                raise ConnectionError(f"no language model server answers at {self.url} ({e.message}); start one "
                                      "with `inspector llm serve`") from None
            raise

    def _get(self, path: str) -> dict[str, Any]:
        with self._request(path) as r:
            return json.loads(r.read())

    def describe(self) -> str:
        a = self.health["architecture"]
        slots = min(a["slots"].values()) if a["slots"] else 0
        return (f"<b>{self.name}</b> at {self.url}: {a['type']}, {len(a['moe_layers'])} MoE layers × "
                f"{a['experts']} experts, top-{a['top_k']}; policy <b>{self.health['policy']}</b>, {slots} experts "
                "per layer in the pool")

    def complete(self, text: str, max_new_tokens: int) -> Iterator[tuple[str, GenStats | None]]:
        """(new text, None) as it streams; the last item carries the request's statistics."""
        body = {"model": self.name, "prompt": text, "max_tokens": max_new_tokens, "temperature": 0, "stream": True}
        with self._request("/v1/completions", body, self.timeout) as r:
            for raw in r:
                line = raw.decode("utf-8").strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    raise ConnectionError(f"the server failed this request: {chunk['error'].get('message')}")
                choice = chunk["choices"][0]
                ext = chunk.get("inspector")
                if ext is not None:
                    self._last = ext
                    self.stats = _stats(ext, chunk.get("usage", {}))
                if choice["text"] or ext is not None:
                    yield choice["text"], self.stats if ext is not None else None

    def residency(self) -> list[LayerResidency]:
        a = self.health["architecture"]
        resident = self._last.get("residency", {})
        return [LayerResidency(layer, int(resident.get(str(layer), a["slots"][str(layer)])), a["slots"][str(layer)],
                               a["experts"]) for layer in a["moe_layers"]]

    def close(self) -> None:
        """Nothing to free here: the server owns the model."""


def _stats(ext: dict[str, Any], usage: dict[str, Any]) -> GenStats:
    counts = ("expert_loads", "peak_pool_bytes", "prefetches", "prefetch_used", "bytes_read", "hits", "misses",
              "predicted", "predicted_right")
    s = GenStats(tokens=int(usage.get("completion_tokens", 0)), prompt_tokens=int(usage.get("prompt_tokens", 0)),
                 ttft_s=float(ext["ttft_s"]), **{k: int(ext.get(k, 0)) for k in counts})
    s.seconds = s.tokens / ext["tokens_per_s"] if ext.get("tokens_per_s") else 0.0
    return s
