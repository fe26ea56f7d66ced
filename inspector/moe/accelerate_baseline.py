"""The real accelerate disk offload, as a bench row (`inspector llm bench --policies accelerate,...`).

Not a policy of our runtime: the checkpoint is loaded by transformers with a
device map that puts every MoE layer's fused experts module on "disk" and the
rest on the device, so accelerate writes those weights to an offload folder
and its hooks (AlignDevicesHook) read a layer's whole expert tensors back for
every forward through it, then drop them. That is the stock way to run a
model larger than memory with Hugging Face tools, and the baseline the MoE
offloading papers measure against.

To keep the comparison honest with our runtime (which drops an expert file's
pages after each read), a forward hook drops the offload files' pages from the
page cache after each experts forward, so every read is a disk read.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import torch

from ..runtime.diskio import drop_pages, fsync_and_drop

NAME = "accelerate"


def device_map(root: Path, device: str) -> dict[str, str]:
    """Every module on `device` except each MoE layer's experts module, which goes to "disk"."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(root)
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    out: dict[str, str] = {}
    for name, _ in [*meta.named_parameters(), *meta.named_buffers()]:
        module = name.rsplit(".", 1)[0]
        cut = module.find(".experts")
        is_shared = ".shared_expert" in module
        if cut >= 0 and not is_shared:
            out[module[:cut + len(".experts")]] = "disk"
        else:
            out[module] = device
    if "disk" not in out.values():
        raise ValueError(f"{root}: no fused experts module found to offload; is this a MoE checkpoint?")
    return out


class AccelerateOffload:
    """The model as transformers and accelerate load it with its experts on disk, and what it read."""

    def __init__(self, root: str | Path, device: str = "cpu", drop_page_cache: bool = True) -> None:
        from transformers import AutoModelForCausalLM

        self.root = Path(root)
        self.folder = Path(tempfile.mkdtemp(prefix="accelerate-offload-"))
        self.model = AutoModelForCausalLM.from_pretrained(self.root, device_map=device_map(self.root, device),
                                                          offload_folder=str(self.folder)).eval()
        self.device = torch.device(device)
        self.loads = 0  # expert weights read: every expert of a layer per forward through it
        self.bytes_read = 0
        files = sorted(self.folder.glob("*.safetensors"))
        for f in files:
            fsync_and_drop(f)
        self._hooks = []
        for name, module in self.model.named_modules():
            if name.endswith(".experts") and getattr(module, "_hf_hook", None) is not None:
                mine = [f for f in files if f.name.startswith(name + ".")]
                nbytes = sum(f.stat().st_size for f in mine)
                experts = int(getattr(module, "num_experts", 0) or 0)
                self._hooks.append(module.register_forward_hook(self._after(mine, nbytes, experts, drop_page_cache)))

    def _after(self, files: list[Path], nbytes: int, experts: int, drop: bool):  # noqa: ANN202 - a torch hook
        def hook(module: torch.nn.Module, args: object, output: object) -> None:
            self.loads += experts
            self.bytes_read += nbytes
            if drop:
                for f in files:
                    drop_pages(f)
        return hook

    @torch.inference_mode()
    def generate(self, ids: list[int], max_new_tokens: int) -> tuple[list[int], float]:
        """Greedy, exactly `max_new_tokens` (as the bench's runs); the tokens and the time to the first."""
        from transformers import DynamicCache

        x = torch.tensor([ids], device=self.device)
        cache = DynamicCache(config=self.model.config)
        t0 = time.perf_counter()
        out = self.model(input_ids=x, past_key_values=cache, use_cache=True)
        tokens: list[int] = []
        ttft = 0.0
        for i in range(max_new_tokens):
            tokens.append(int(out.logits[0, -1].argmax()))
            if i == 0:
                ttft = time.perf_counter() - t0
            if i + 1 < max_new_tokens:
                out = self.model(input_ids=torch.tensor([[tokens[-1]]], device=self.device), past_key_values=cache,
                                 use_cache=True)
        return tokens, ttft

    @property
    def resident_bytes(self) -> int:
        """Weights the model keeps in memory (everything but the offloaded experts)."""
        return sum(p.numel() * p.element_size() for p in self.model.parameters() if p.device.type != "meta")

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        self.model = None
        shutil.rmtree(self.folder, ignore_errors=True)
