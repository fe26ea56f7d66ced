"""The language model as a local service (`inspector llm serve`): an OpenAI-compatible HTTP endpoint over one
offloaded model.

- sampling.py     greedy (exact) or temperature / top-k / top-p with a per-request seed
- kvbatch.py      the KV cache of sequences decoding together (left-padded rows)
- batcher.py      the engine thread: a bounded first-come queue, prefill alone, decode steps batched
- chat_format.py  chat messages to prompt ids (the checkpoint's chat template, or a plain fallback)
- api.py          the HTTP endpoint (/v1/models, /v1/completions, /v1/chat/completions, /metrics, /health)
- server.py       the process: model, batcher and endpoint, bound to loopback unless told otherwise
"""
