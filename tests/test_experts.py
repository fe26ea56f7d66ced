"""Experts: one interface over torchvision ResNets and ultralytics YOLO, built on meta, loaded by assign."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inspector.experts.assign import assign, places
from inspector.experts.base import BadInput
from inspector.experts.registry import architecture_from_spec
from inspector.experts.resnet import DEPTHS, ResNetClassifier
from inspector.experts.spec import RESNET_DEPTHS, UnknownArchitecture, check_spec
from inspector.experts.yolo import YoloDetector

CPU = torch.device("cpu")


@pytest.mark.parametrize("depth,size,classes", [(10, 32, 2), (18, 48, 3), (50, 32, 5)])
def test_resnet_any_depth_size_classes_loads_exactly(depth: int, size: int, classes: int) -> None:
    arch = architecture_from_spec({"arch": f"resnet{depth}", "input_size": size, "classes": classes})
    state = arch.random_state(seed=1)
    real = arch.build()
    real.load_state_dict(state)
    real.eval()
    loaded = arch.materialize(state, CPU)
    assert all(p.device.type == "cpu" for p in loaded.parameters())
    # assign: the module's parameters are the given tensors, not copies
    assert loaded.fc.weight.data_ptr() == state["fc.weight"].data_ptr()
    x = torch.rand(2, 3, size, size)
    with torch.inference_mode():
        assert torch.equal(loaded(x), real(x))
    preds = arch.run(loaded, x)
    assert len(preds) == 2 and all(0 <= p.label < classes for p in preds)
    assert arch.weight_bytes() == sum(t.numel() * t.element_size() for t in state.values())


def test_skeleton_lives_on_meta_and_is_shared() -> None:
    arch = ResNetClassifier(10, 32, 2)
    sk = arch.skeleton()
    assert all(p.is_meta for p in sk.parameters())
    assert arch.skeleton() is sk


def test_yolo_from_yaml_loads_exactly_and_keeps_strides() -> None:
    arch = architecture_from_spec({"arch": "yolov8n.yaml", "input_size": 32, "classes": 3})
    assert arch.role == "detector"
    state = arch.random_state(seed=2)
    real = arch.build().eval()
    real.load_state_dict(state)
    loaded = arch.materialize(state, CPU)
    x = torch.rand(3, 3, 32, 32)
    with torch.inference_mode():
        assert torch.equal(loaded(x)[0], real(x)[0])
    preds = arch.run(loaded, x)
    assert len(preds) == 3
    assert all(p.box is not None and len(p.box) == 4 and 0 <= p.label < 3 for p in preds)


@pytest.mark.parametrize("spec", [{"arch": "resnet10", "input_size": 32, "classes": 2},
                                  {"arch": "yolov8n.yaml", "input_size": 32, "classes": 3}])
def test_a_retired_shell_serves_the_next_expert_exactly_and_holds_no_weights(spec: dict) -> None:
    arch = architecture_from_spec(spec)
    first, second = arch.random_state(seed=1), arch.random_state(seed=2)
    module = arch.materialize(first, CPU)
    arch.retire(module, CPU)
    assert all(p.is_meta for p in module.parameters())  # the evicted expert's weights are not kept alive
    reused = arch.materialize(second, CPU)
    assert reused is module
    real = arch.build().eval()
    real.load_state_dict(second)
    x = torch.rand(2, 3, 32, 32)
    with torch.inference_mode():
        got, want = reused(x), real(x)
    got, want = (got[0], want[0]) if isinstance(got, (tuple, list)) else (got, want)
    assert torch.equal(got, want)
    assert arch.materialize(first, CPU) is not module  # no spare shell left: a new one


def test_yolo_from_local_pt(tmp_path: Path) -> None:
    source = YoloDetector("yolov8n.yaml", input_size=32, classes=2)
    model = source.build().eval()
    path = tmp_path / "det.pt"
    torch.save({"model": model}, path)
    arch = architecture_from_spec({"arch": str(path), "input_size": 32, "classes": 2})
    loaded = arch.materialize({k: v.clone() for k, v in model.state_dict().items()}, CPU)
    x = torch.rand(1, 3, 32, 32)
    with torch.inference_mode():
        assert torch.equal(loaded(x)[0], model(x)[0])


@pytest.mark.parametrize("spec,message", [
    ({"arch": "resnet11"}, "resnet11 is not a known depth"),
    ({"arch": "vgg16"}, "unknown architecture 'vgg16'"),
    ({"arch": "/nowhere/det.pt"}, "not found; give a local .pt"),
    ({"arch": "yolov8n.yaml", "input_size": 50}, "multiple of 32"),
])
def test_unknown_or_bad_architecture_is_named(spec: dict, message: str) -> None:
    with pytest.raises((UnknownArchitecture, ValueError), match=message):
        architecture_from_spec(spec)


@pytest.mark.parametrize("spec", [
    {"arch": "resnet11"}, {"arch": "vgg16"}, {"arch": "/nowhere/det.pt"}, {"arch": "yolov8n"},
    {"arch": "resnet10", "fit": "crop"}, {"arch": "resnet10", "head": "svm"}, {"arch": "resnet10", "reference": "x"},
    {"arch": "yolov8n.yaml", "mode": "count"}, {"arch": "yolov8n.yaml", "fit": "pad"},
])
def test_a_spec_checked_without_torch_is_refused_as_building_it_refuses_it(spec: dict) -> None:
    """A rule set's experts are checked by spec.py (torch-free) and built by registry.py: the same word for each."""
    with pytest.raises(UnknownArchitecture) as checked:
        check_spec(spec)
    with pytest.raises(UnknownArchitecture) as built:
        architecture_from_spec(spec)
    assert str(checked.value) == str(built.value)
    assert tuple(DEPTHS) == RESNET_DEPTHS  # every depth a spec may name has its blocks
    check_spec({"arch": "resnet152", "head": "anomaly", "reference": "matched", "fit": "letterbox"})
    check_spec({"arch": "yolov8s.yaml", "mode": "find"})


def test_reading_a_rule_set_does_not_load_torch() -> None:
    """A refused rule file and `board import` answer without the seconds torch takes to load."""
    code = ("import sys; from inspector.routing.rules import load_rules; import inspector.board.importing; "
            "print(sorted(m for m in ('torch', 'cv2', 'ultralytics') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


@pytest.mark.parametrize("image", [torch.rand(32, 32), torch.rand(4, 32, 32), torch.rand(3, 4, 4), "not a tensor"])
def test_wrong_image_shape_is_bad_input(image: object) -> None:
    arch = ResNetClassifier(10, 32, 2)
    with pytest.raises(BadInput, match="image must be"):
        arch.preprocess(image)  # type: ignore[arg-type]


def test_preprocess_resizes_and_scales_uint8() -> None:
    arch = ResNetClassifier(10, 32, 2)
    out = arch.preprocess(torch.full((3, 64, 48), 255, dtype=torch.uint8))
    assert out.shape == (3, 32, 32) and out.dtype == torch.float32 and torch.allclose(out, torch.ones(1))


def test_activation_memory_grows_with_batch() -> None:
    arch = ResNetClassifier(10, 32, 2)
    one = arch.activation_bytes(1)
    assert one > 0 and arch.activation_bytes(8) == 8 * one


def test_pass_rate_calibration_moves_the_ok_logit() -> None:
    arch = ResNetClassifier(10, 32, 2)
    state = arch.random_state(seed=4)
    module = arch.materialize(state, CPU)
    samples = torch.rand(64, 3, 32, 32)
    shift = arch.pass_bias_shift(module, samples, pass_rate=0.75)
    state = dict(state)
    state["fc.bias"] = state["fc.bias"].clone()
    state["fc.bias"][0] += shift
    calibrated = arch.materialize(state, CPU)
    passed = sum(p.passed for p in arch.run(calibrated, samples))
    assert 40 <= passed <= 56  # 75% of 64 = 48, quantile ties allowed


@pytest.mark.parametrize("spec", [{"arch": "resnet18", "input_size": 32, "classes": 2},
                                  {"arch": "yolov8n.yaml", "input_size": 32, "classes": 3}])
def test_fast_assignment_refuses_what_load_state_dict_refuses(spec: dict) -> None:
    arch = architecture_from_spec(spec)
    state = arch.random_state(seed=3)
    shell = arch.materialize(state, CPU)
    assert list(places(shell)) == list(arch.build().state_dict())  # the same keys, in the same order
    key = next(iter(state))
    with pytest.raises(RuntimeError, match=f"missing keys \\['{key}'\\]"):
        assign(shell, {k: v for k, v in state.items() if k != key})
    with pytest.raises(RuntimeError, match="unexpected keys \\['extra'\\]"):
        assign(shell, {**{k: v for k, v in state.items() if k != key}, "extra": state[key]})
    with pytest.raises(RuntimeError, match=f"size mismatch for {key}"):
        assign(shell, {**state, key: torch.zeros(3, 1)})


def test_a_batch_of_mixed_crops_preprocesses_as_each_crop_alone() -> None:
    """The executor resizes a batch's crops a group per size; each must come out as it would alone, or a verdict
    would depend on which crops a schedule put beside it."""
    torch.manual_seed(0)
    arch = ResNetClassifier(10, 32, 2)
    crops = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8) for h, w in ((20, 30), (32, 32), (20, 30),
                                                                            (41, 17), (32, 32), (20, 30))]
    crops.append(torch.rand(3, 20, 30))  # a float crop of a size the uint8 ones have: its own group
    many = arch.preprocess_many(crops)
    assert many.shape == (len(crops), 3, 32, 32)
    for crop, row in zip(crops, many):
        assert torch.equal(row, arch.preprocess(crop))
    assert torch.equal(arch.preprocess_many(crops[:1] * 3), torch.stack([arch.preprocess(crops[0])] * 3))
    with pytest.raises(BadInput):
        arch.preprocess_many([crops[0], torch.zeros(3, 4, 4)])
