"""Quantized experts, the memory plan and DeepSeek on real tiny checkpoints: products, serving, refusals."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from inspector.moe.checkpoint import CheckpointError
from inspector.moe.engine import OffloadedLM
from inspector.moe.plan import GiB, PlanDoesNotFit, check_fits, make_plan, model_shape
from inspector.moe.policies import get_policy
from inspector.moe.quality import perplexity
from inspector.moe.quant.weights import NIBBLES, PACKED, quantize

from .moe_models import save_tiny

PROMPT = [0, 5, 17, 60, 3, 42, 8, 77, 11, 30]
POLICIES = ["ondemand", "lru", "fiddler", "moesys", "firm", "firm:parts=2"]  # the uncalibrated exact ones
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
                "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
                "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
                "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05, "rope_theta": 1e6,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000}


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).norm() / want.float().norm())


@pytest.mark.parametrize("shape", [(64, 32), (48, 24), (32, 48), (128, 256)])
def test_quantized_weights_multiply_close_to_the_float_product(shape: tuple[int, int]) -> None:
    torch.manual_seed(0)
    w, x = torch.randn(shape), torch.randn(5, shape[1])
    want = F.linear(x, w)
    bounds = {"bf16": 0.01, "int8": 0.02, "int4": 0.15}
    for kind, bound in bounds.items():
        q = quantize(w, kind)
        got = q.linear(x)
        assert got.dtype == x.dtype and got.shape == want.shape
        assert rel_error(got, want) < bound, kind
    packed, portable = quantize(w, "int4", "cpu"), quantize(w, "int4", torch.device("cuda"))
    assert portable.layout == NIBBLES  # the layout a GPU gets: dequantized then multiplied
    if packed.layout == PACKED:  # PyTorch's CPU kernel and the portable product agree on the same weights
        assert rel_error(packed.linear(x), portable.linear(x)) < 0.01
    assert rel_error(F.linear(x, portable.dequantize().float()), want) < 0.15
    assert quantize(w, "int4").nbytes <= w.numel() * 4 / 6  # half a byte a weight, and a scale and zero a group


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("quant")
    return {name: save_tiny(name, root) for name in ("mixtral", "deepseek_v2")}


@pytest.mark.parametrize("arch", ["mixtral", "deepseek_v2"])
def test_quantized_experts_serve_fewer_bytes_and_the_same_tokens_under_every_policy(
        tiny: dict[str, Path], tmp_path: Path, arch: str) -> None:
    native = OffloadedLM.load(tiny[arch], "lru", cache_ratio=0.25)
    native_bytes = max(s.nbytes for s in native.ckpt.experts.values())
    native.close()
    said: list[str] = []
    tokens: dict[str, list[int]] = {}
    for policy in POLICIES:
        lm = OffloadedLM.load(tiny[arch], get_policy(policy), cache_ratio=0.25, expert_dtype="int4",
                              quant_dir=tmp_path, log=said.append)
        per = max(s.nbytes for s in lm.ckpt.experts.values())
        assert per < 0.3 * native_bytes  # float32 as stored: int4 and its scales are well under a third
        out = list(lm.generate(PROMPT, 8))
        tokens[policy] = [t for t, _ in out]
        stats = out[-1][1]
        assert stats.bytes_read > 0 and stats.peak_pool_bytes <= lm.runtime.store.ledger.capacity
        assert lm.runtime.store.ledger.capacity % per == 0  # the pool is planned in quantized experts
        lm.close()
    assert len({tuple(t) for t in tokens.values()}) == 1, tokens  # results do not depend on scheduling
    assert sum("quantizing" in line for line in said) == 1  # written once, then the cached copy
    [copy] = list(tmp_path.iterdir())
    manifest = json.loads((copy / "manifest.json").read_text())
    assert manifest["kind"] == "int4" and set(manifest["projections"]) == {"gate", "up", "down"}
    manifest["format"] = 0
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="delete it to quantize again"):
        OffloadedLM.load(tiny[arch], "lru", cache_ratio=0.25, expert_dtype="int4", quant_dir=tmp_path)


def test_perplexity_of_quantized_experts_is_measured_beside_native(tiny: dict[str, Path], tmp_path: Path) -> None:
    stream = torch.randint(2, 96, (200,), generator=torch.Generator().manual_seed(1))
    got = {}
    for dtype in ("native", "int8", "int4"):
        lm = OffloadedLM.load(tiny["mixtral"], "lru", cache_ratio=1.0, expert_dtype=dtype, quant_dir=tmp_path)
        got[dtype], scored = perplexity(lm, stream, 32, 4)
        lm.close()
        assert scored == 4 * 31
    assert got["native"] != got["int4"]  # the weights differ, so the loss does
    assert abs(got["int8"] / got["native"] - 1) < 0.05  # int8 per channel costs little
    assert abs(got["int4"] / got["native"] - 1) < 0.5


def test_plan_for_mixtral_8x7b_on_a_24_gb_gpu(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(MIXTRAL_8X7B))  # the config alone: no weights
    shape = model_shape(tmp_path)
    assert shape.num_experts == 8 and len(shape.moe_layers) == 32
    assert abs(shape.non_expert_params - 1.6e9) < 0.01e9  # 46.7 B parameters, 45.1 B of them routed experts
    bf16 = make_plan(shape, "cuda", 24 * GiB, "native", host_ram=128 * GiB)
    assert not bf16.fits and "expert pool needs" in bf16.refusal()
    int4 = make_plan(shape, "cuda", 24 * GiB, "int4", host_ram=128 * GiB)
    assert int4.fits and int4.cache_ratio >= 0.5 and int4.fixed + int4.pool <= 24 * GiB
    small_host = make_plan(shape, "cuda", 24 * GiB, "int4", host_ram=16 * GiB)
    assert small_host.host_ratio < 1.0 and small_host.notes  # pinned RAM checked against the box
    with pytest.raises(PlanDoesNotFit, match="GiB"):
        check_fits(tmp_path, "cuda", 24 * GiB, "native", "daop", 0.25, 1, None)
    cli = [sys.executable, "-m", "inspector.cli", "llm", "plan", str(tmp_path), "--device", "cuda", "--memory", "24G"]
    fits = subprocess.run([*cli, "--expert-dtype", "int4"], capture_output=True, text=True, timeout=300)
    assert fits.returncode == 0 and fits.stdout.strip().endswith("fits"), fits.stdout + fits.stderr
    refused = subprocess.run(cli, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 3 and "DOES NOT FIT" in refused.stdout


def test_plan_reads_deepseek_shapes_and_chat_refuses_a_plan_that_cannot_fit(tiny: dict[str, Path]) -> None:
    shape = model_shape(tiny["deepseek_v2"])
    assert shape.moe_layers == (1, 2) and shape.projections == ((24, 32), (24, 32), (32, 24))
    out = subprocess.run([sys.executable, "-m", "inspector.cli", "llm", "chat", "--model", str(tiny["deepseek_v2"]),
                          "--policy", "lru", "--memory", "64K", "--prompt", "x"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1 and "does not fit 0.0 GiB on cpu" in out.stderr and "expert pool needs" in out.stderr


def test_awq_and_fp8_checkpoints_are_named_for_what_they_are(tiny: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    weights = load_file(str(tiny["mixtral"] / "model.safetensors"))
    for kind, change, said in [
        ("awq", lambda n, t: {n.replace(".weight", ".qweight") if ".experts." in n else n: t}, "AWQ/GPTQ"),
        ("fp8", lambda n, t: {n: t.to(torch.float8_e4m3fn) if ".experts." in n else t}, "FP8"),
    ]:
        out = tmp_path / kind
        shutil.copytree(tiny["mixtral"], out)
        changed = {}
        for name, t in weights.items():
            changed.update(change(name, t))
        save_file(changed, str(out / "model.safetensors"))
        with pytest.raises(CheckpointError, match=said):
            OffloadedLM.load(out, "lru", cache_ratio=0.25)


def test_moving_or_pinning_an_expert_keeps_what_has_landed() -> None:
    from inspector.moe.store import ExpertWeights

    empty = ExpertWeights(torch.zeros(4, 2), torch.zeros(2, 2), frozenset())
    assert empty.to(torch.device("cpu")).landed == frozenset()  # an unread buffer is never taken for a read one
    if torch.cuda.is_available():
        assert empty.pinned().landed == frozenset()


def test_a_killed_quantizers_leftovers_are_cleared_by_the_next_one(tiny: dict[str, Path], tmp_path: Path) -> None:
    from inspector.moe.checkpoint import MoECheckpoint
    from inspector.moe.quant.copy import copy_dir, open_quantized

    ckpt = MoECheckpoint.open(tiny["mixtral"])
    out = copy_dir(ckpt, "int8", torch.device("cpu"), tmp_path)
    dead = out.with_name(f"{out.name}.partial-2147483646")  # no such process
    (dead / "experts-00000.safetensors").parent.mkdir(parents=True)
    (dead / "experts-00000.safetensors").write_bytes(b"half written")
    copy = open_quantized(ckpt, "int8", "cpu", tmp_path)
    assert not dead.exists() and copy.path == out and set(copy.experts) == set(ckpt.experts)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


class _Event:
    """A recorded CUDA event's time, where no GPU exists: the overlap arithmetic is what is tested here (the
    events themselves are recorded on a GPU, by installer/gpu-window.sh)."""

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        return end.ms - self.ms


def test_the_copy_streams_hidden_share_is_the_copy_time_compute_did_not_wait_for() -> None:
    from inspector.moe.store import CopyOverlap, CopyTiming

    log = CopyOverlap()
    log.add(CopyTiming(_Event(0), _Event(10), _Event(4)))  # asked 4 ms in: compute waited 6 of its 10 ms
    log.add(CopyTiming(_Event(10), _Event(20), _Event(30)))  # done before compute needed it: all hidden
    log.add(CopyTiming(_Event(20), _Event(30), _Event(0)))  # asked before it started: the whole copy waited for
    never = CopyTiming(_Event(30), _Event(40))  # prefetched, never used (yet): not in the share
    log.add(never)
    log.fold(wait=True)
    assert log.copies == 3 and log.pending == [never]
    assert abs(log.copy_s - 0.030) < 1e-9 and abs(log.waited_s - 0.016) < 1e-9
    assert abs(log.hidden_share - (1 - 16 / 30)) < 1e-9
    assert CopyOverlap().hidden_share is None  # no copies: no share, not 100%


def test_copies_never_used_are_given_up_past_the_logs_bound() -> None:
    from inspector.moe.store import CopyOverlap, CopyTiming

    log = CopyOverlap()
    for i in range(CopyOverlap.KEEP + 1):
        log.add(CopyTiming(_Event(i), _Event(i + 1)))
    assert len(log.pending) <= CopyOverlap.KEEP // 2 and log.unused == CopyOverlap.KEEP + 1 - len(log.pending)
    assert log.copies == 0
