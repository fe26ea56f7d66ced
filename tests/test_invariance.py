"""A crop's result does not depend on its batch-mates (invariance.py), and shells move to a device whole."""
from __future__ import annotations

import copy

import torch

from inspector.coserve.evaluation.report import BenchReport, RunReport, format_table
from inspector.experts.base import _move_real
from inspector.experts.invariance import GPU_BATCH, fixed_shape
from inspector.experts.registry import architecture_from_spec


def test_fixed_shape_runs_every_piece_at_one_size_and_returns_the_rows_in_order() -> None:
    seen: list[int] = []

    def forward(x: torch.Tensor) -> torch.Tensor:
        seen.append(x.shape[0])
        return x.flatten(1).sum(1, keepdim=True)

    batch = torch.arange(2 * GPU_BATCH + 3, dtype=torch.float32).view(-1, 1, 1)
    out = fixed_shape(forward, batch)
    assert seen == [GPU_BATCH] * 3  # padded at the end, never a smaller shape
    assert out.view(-1).tolist() == batch.view(-1).tolist()


def test_a_crop_gets_the_same_bits_alone_and_among_others_on_a_real_model() -> None:
    arch = architecture_from_spec({"arch": "resnet10", "input_size": 32, "classes": 2})
    module = arch.materialize(arch.random_state(5), torch.device("cpu"))
    crops = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        alone = fixed_shape(lambda x: arch.forward(module, x), crops[2:3])
        among = fixed_shape(lambda x: arch.forward(module, x), crops)[2:3]
    assert torch.equal(alone, among)


def test_a_detector_shell_moves_without_touching_its_meta_weights() -> None:
    arch = architecture_from_spec({"arch": "yolov8n.yaml", "input_size": 32, "classes": 2})
    shell = copy.deepcopy(arch.skeleton())
    _move_real(shell, torch.device("cpu"))  # .to() on it raises "Cannot copy out of meta tensor"
    assert all(p.is_meta for p in shell.parameters())
    assert not shell.model[-1].stride.is_meta  # the head's plain tensors are real where it runs


def test_a_bench_row_with_failures_says_why() -> None:
    run = RunReport("samba", 10.0, 5, 8, 2, 0.1, 0.2, 0.0, 0.0,
                    failures={"expert '…' failed: RuntimeError: CUDA out of memory": 2})
    workload = {"name": "w", "component_types": 1, "requests": 10, "expert_pool_mb": 1, "experts_total_mb": 2}
    text = format_table(BenchReport(workload, "cpu", float("nan"), [run], True))
    assert "samba failed: expert '…' failed: RuntimeError: CUDA out of memory (x2)" in text
