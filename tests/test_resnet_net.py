"""The line's own ResNet network against torchvision's: the same parameters, the same draws under one seed, the same
outputs, so zoos made either way load and agree; and a line process that never imports torchvision."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torchvision.models import resnet as tv

from inspector.experts import resnet_net as ours
from inspector.experts.resnet import DEPTHS, ResNetClassifier

TORCHVISION = {ours.BasicBlock: tv.BasicBlock, ours.Bottleneck: tv.Bottleneck}


@pytest.mark.parametrize("depth", sorted(DEPTHS))
def test_each_depth_is_torchvisions_network_weight_for_weight(depth: int) -> None:
    block, layers = DEPTHS[depth]
    torch.manual_seed(depth)
    mine = ours.ResNet(block, layers, num_classes=3).eval()
    torch.manual_seed(depth)
    theirs = tv.ResNet(TORCHVISION[block], layers, num_classes=3).eval()
    a, b = mine.state_dict(), theirs.state_dict()
    assert list(a) == list(b)  # names and order: a zoo's weights file loads into either
    for name in a:
        assert torch.equal(a[name], b[name]), name  # the same initialisation, draw by draw
    for p in mine.parameters():
        p.data.add_(0.01 * torch.randn_like(p))  # away from the initialisation: the computation itself
    theirs.load_state_dict(mine.state_dict())
    x = torch.randn(2, 3, 48, 48)
    with torch.inference_mode():
        assert torch.allclose(mine(x), theirs(x), atol=1e-5, rtol=1e-5)


def test_a_classifier_builds_on_the_lines_own_network() -> None:
    net = ResNetClassifier(18, input_size=32, classes=4).build()
    assert isinstance(net, ours.ResNet) and net.fc.out_features == 4


def test_a_line_process_never_imports_torchvision() -> None:
    """torchvision's import brings torch._dynamo (seconds of every start); the line's serving path does without."""
    code = ("import sys, inspector.cli.line, inspector.kiosk.service, inspector.app.run, inspector.experts.registry, "
            "inspector.experts.yolo, inspector.coserve.online.engine, inspector.coserve.evaluation.bench; "
            "print(sorted(m for m in sys.modules if m.startswith(('torchvision', 'torch._dynamo'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
