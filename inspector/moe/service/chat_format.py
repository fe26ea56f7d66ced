"""Chat messages to prompt ids: the checkpoint's own chat template when it ships one, else a plain format.

The plain format (for base models such as the demo, which were never trained on
a template) writes each message as `role: content` on its own lines and ends
with `assistant:`, so the model continues as the assistant; it is documented
in the manual (The language model as a local service) so that clients know what the model sees.
"""
from __future__ import annotations

from ..text import encode_prompt

ROLES = ("system", "user", "assistant", "tool", "developer")


class BadMessages(ValueError):
    """Chat messages the endpoint cannot turn into a prompt."""


def plain_chat(messages: list[dict[str, str]]) -> str:
    lines = [f"{m['role']}: {m['content']}" for m in messages]
    return "\n".join([*lines, "assistant:"])


def chat_prompt_ids(tokenizer, messages: list[dict[str, str]]) -> list[int]:  # noqa: ANN001 - HF tokenizer
    if not messages:
        raise BadMessages("messages is empty: give at least one message with a role and its content")
    for i, m in enumerate(messages):
        if m.get("role") not in ROLES:
            raise BadMessages(f"messages[{i}].role is {m.get('role')!r}; use one of {', '.join(ROLES)}")
        if not isinstance(m.get("content"), str):
            raise BadMessages(f"messages[{i}].content must be text")
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return list(ids)
    return encode_prompt(tokenizer, plain_chat(messages))
