"""Train the demo Mixtral on the standard library and save it as a Hugging Face checkpoint directory (cached).

The recipe is sized for a 2-core CPU box: about ten minutes of training with
transformers' own grouped experts kernel. The directory is written under a
temporary name and renamed when complete, so an interrupted build never looks
finished; its name carries a hash of the recipe and the corpus, so a changed
recipe or Python builds anew instead of reusing a stale model.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ...runtime.diskio import fsync_and_drop
from .corpus import Corpus, stdlib_corpus
from .tokenizer import train_tokenizer

DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "models" / "llm"
BUILD_RECORD = "build.json"


@dataclass(frozen=True)
class DemoRecipe:
    layers: int = 8
    experts: int = 16
    top_k: int = 2
    hidden: int = 256
    intermediate: int = 1024  # 3 MiB experts: reading one costs more than computing a token, as in real MoEs
    heads: int = 4
    kv_heads: int = 2
    vocab: int = 4096
    seq_len: int = 256
    batch: int = 8
    steps: int = 440
    lr: float = 2e-3
    warmup: int = 30
    aux_loss_coef: float = 0.01
    eval_windows: int = 48
    seed: int = 0

    def key(self, corpus: Corpus) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True) + corpus.fingerprint()
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def config(self, tokenizer) -> object:
        from transformers import MixtralConfig

        return MixtralConfig(
            vocab_size=len(tokenizer), hidden_size=self.hidden, intermediate_size=self.intermediate,
            num_hidden_layers=self.layers, num_attention_heads=self.heads, num_key_value_heads=self.kv_heads,
            num_local_experts=self.experts, num_experts_per_tok=self.top_k, max_position_embeddings=self.seq_len,
            router_aux_loss_coef=self.aux_loss_coef, tie_word_embeddings=False, rope_theta=10000.0,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id)


@dataclass
class DemoBuild:
    path: Path
    cached: bool
    seconds: float
    perplexity: float
    record: dict


def demo_dir(recipe: DemoRecipe | None = None, root: Path | None = None, corpus: Corpus | None = None) -> Path:
    recipe = recipe or DemoRecipe()
    corpus = corpus or stdlib_corpus()
    return Path(root or DEFAULT_ROOT) / f"demo-mixtral-{recipe.key(corpus)}"


def token_stream(tokenizer, texts: list[str]) -> torch.Tensor:  # noqa: ANN001 - a transformers tokenizer
    """All texts as one token stream, each file between BOS and EOS (where the tokenizer has them)."""
    ids: list[int] = []
    for enc in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        ids += [t for t in (tokenizer.bos_token_id,) if t is not None] + enc
        ids += [t for t in (tokenizer.eos_token_id,) if t is not None]
    return torch.tensor(ids, dtype=torch.long)


def perplexity(model, stream: torch.Tensor, seq_len: int, windows: int, device: str = "cpu") -> float:
    """exp(mean next-token loss) over the first `windows` non-overlapping windows of the held-out stream."""
    n = min(windows, (len(stream) - 1) // seq_len)
    if n < 1:
        raise ValueError(f"held-out text has {len(stream)} tokens, fewer than one window of {seq_len}")
    total, count = 0.0, 0
    model.eval()
    with torch.inference_mode():
        for i in range(0, n, 8):
            batch = torch.stack([stream[j * seq_len:(j + 1) * seq_len] for j in range(i, min(i + 8, n))]).to(device)
            out = model(input_ids=batch, labels=batch, output_router_logits=False)
            tokens = batch.numel() - batch.shape[0]
            total += float(out.loss) * tokens
            count += tokens
    model.train()
    return math.exp(total / count)


def build_demo(recipe: DemoRecipe | None = None, root: Path | None = None, corpus: Corpus | None = None,
               force: bool = False, log: Callable[[str], None] = print, device: str = "cpu") -> DemoBuild:
    """Train (on `device`: a GPU trains the recipe in seconds, the CPU in minutes) and save; cached by the key."""
    from transformers import MixtralForCausalLM

    recipe = recipe or DemoRecipe()
    corpus = corpus or stdlib_corpus()
    out = demo_dir(recipe, root, corpus)
    if (out / BUILD_RECORD).is_file() and not force:
        record = json.loads((out / BUILD_RECORD).read_text())
        return DemoBuild(out, True, record["build_seconds"], record["held_out_perplexity"], record)
    t0 = time.perf_counter()
    torch.manual_seed(recipe.seed)
    train_texts, held_texts = Corpus.read(corpus.train), Corpus.read(corpus.held_out)
    log(f"corpus: {len(train_texts)} train files, {len(held_texts)} held-out files from {corpus.root}")
    tokenizer = train_tokenizer(train_texts, recipe.vocab)
    train, held = token_stream(tokenizer, train_texts), token_stream(tokenizer, held_texts)
    log(f"tokenizer: {len(tokenizer)} tokens; {len(train)} train tokens, {len(held)} held-out tokens "
        f"({time.perf_counter() - t0:.0f} s)")
    config = recipe.config(tokenizer)
    model = MixtralForCausalLM(config).to(device)  # transformers' grouped experts kernel: several times its loop
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / recipe.warmup) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, s / recipe.steps))) + 0.05)
    gen = torch.Generator().manual_seed(recipe.seed)
    losses: list[float] = []
    t_train = time.perf_counter()
    for step in range(recipe.steps):
        starts = torch.randint(0, len(train) - recipe.seq_len - 1, (recipe.batch,), generator=gen)
        batch = torch.stack([train[s:s + recipe.seq_len] for s in starts.tolist()]).to(device)
        loss = model(input_ids=batch, labels=batch, output_router_logits=True).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if (step + 1) % 20 == 0 or step + 1 == recipe.steps:
            rate = (time.perf_counter() - t_train) / (step + 1)
            log(f"step {step + 1}/{recipe.steps}: loss {sum(losses[-20:]) / len(losses[-20:]):.3f}, "
                f"{rate:.2f} s/step, {rate * (recipe.steps - step - 1) / 60:.1f} min left")
    ppl = perplexity(model, held, recipe.seq_len, recipe.eval_windows, device)
    model = model.cpu()
    seconds = time.perf_counter() - t0
    log(f"held-out perplexity {ppl:.2f} over {min(recipe.eval_windows, (len(held) - 1) // recipe.seq_len)} windows "
        f"of {recipe.seq_len} tokens; built in {seconds:.0f} s")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    record = {"recipe": dataclasses.asdict(recipe), "corpus": str(corpus.root), "corpus_fingerprint":
              corpus.fingerprint(), "train_tokens": len(train), "held_out_tokens": len(held),
              "tokens_seen": recipe.steps * recipe.batch * recipe.seq_len, "final_train_loss": losses[-1],
              "held_out_perplexity": ppl, "build_seconds": seconds, "torch": torch.__version__,
              "device": str(device)}
    (tmp / BUILD_RECORD).write_text(json.dumps(record, indent=2))
    for f in tmp.glob("*.safetensors"):
        fsync_and_drop(f)  # the benchmark's disk reads must come from disk, not from pages left by this write
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return DemoBuild(out, False, seconds, ppl, record)
