"""Text in and out of a checkpoint's tokenizer: prompts with the model's BOS, streamed decoding, prompt files."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

PROMPT_SEPARATOR = "---"


def load_tokenizer(root: str | Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(root))
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"{root}: no usable tokenizer ({e}); copy the checkpoint's tokenizer files "
                                "(tokenizer.json, tokenizer_config.json) into the directory") from None


def encode_prompt(tokenizer, text: str) -> list[int]:
    """The prompt's ids, starting with BOS when the model has one (as the demo model was trained)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    bos = tokenizer.bos_token_id
    return [bos, *ids] if bos is not None and (not ids or ids[0] != bos) else ids


class Detokenizer:
    """Text as tokens arrive: each push returns what is new, or None while byte-level pieces do not yet form a
    character (they wait for the next token)."""

    def __init__(self, tokenizer) -> None:  # noqa: ANN001 - a transformers tokenizer
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""

    def push(self, token: int) -> str | None:
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return None
        new, self.text = text[len(self.text):], text
        return new


def stream_text(tokenizer, tokens: Iterable[int]) -> Iterator[str]:
    """New text as tokens arrive (see Detokenizer)."""
    detok = Detokenizer(tokenizer)
    for token in tokens:
        piece = detok.push(token)
        if piece is not None:
            yield piece


def read_prompts(path: str | Path | None = None) -> list[str]:
    """Prompts from a text file, separated by lines holding only `---`; the built-in set when no path is given."""
    if path is None:
        raw = resources.files("inspector.moe.prompts").joinpath("bench.txt").read_text(encoding="utf-8")
        where = "the built-in prompt set"
    else:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"prompt file {p} does not exist; give a text file with prompts separated "
                                    f"by lines holding only {PROMPT_SEPARATOR}")
        raw, where = p.read_text(encoding="utf-8"), str(p)
    prompts, current = [], []
    for line in raw.splitlines():
        if line.strip() == PROMPT_SEPARATOR:
            prompts.append("\n".join(current).strip("\n"))
            current = []
        else:
            current.append(line)
    prompts.append("\n".join(current).strip("\n"))
    prompts = [p for p in prompts if p.strip()]
    if not prompts:
        raise ValueError(f"{where} holds no prompt; write prompts separated by lines holding only "
                         f"{PROMPT_SEPARATOR}")
    return prompts
