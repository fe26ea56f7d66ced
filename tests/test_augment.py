"""Training augmentation: the camera effects correction cannot undo (motion blur, residual colour) reach the crops."""
from __future__ import annotations

import numpy as np
import torch

from inspector.training.augment import MotionBlur, ResidualCast, augment_stack, camera_augmentation


def _edge(vertical_edge: bool) -> torch.Tensor:
    """Two 3x24x24 crops, dark on one side of an edge and bright on the other."""
    x = torch.full((2, 3, 24, 24), 40, dtype=torch.uint8)
    if vertical_edge:
        x[..., :, 12:] = 220
    else:
        x[..., 12:, :] = 220
    return x


def test_motion_blur_smears_along_its_axis_only_and_keeps_the_level() -> None:
    blur = MotionBlur(max_px=5.0)
    across = blur.transform(_edge(vertical_edge=True), {"length": 5.0, "vertical": False})
    assert across.dtype == torch.uint8 and across.shape == (2, 3, 24, 24)
    assert 40 < int(across[0, 0, 5, 11]) < 220 and 40 < int(across[0, 0, 5, 12]) < 220  # the edge spread across x
    assert int(across[0, 0, 5, 3]) == 40 and int(across[0, 0, 5, 20]) == 220  # far from it, unchanged
    along = blur.transform(_edge(vertical_edge=True), {"length": 5.0, "vertical": True})
    assert torch.equal(along, _edge(vertical_edge=True))  # blur along the edge changes nothing
    flat = torch.full((1, 3, 8, 8), 100, dtype=torch.uint8)
    assert torch.equal(blur.transform(flat, {"length": 3.4, "vertical": True}), flat)  # replicate border: no rim


def test_residual_cast_pulls_red_and_blue_apart_within_its_bounds() -> None:
    cast = ResidualCast(cast=0.06, jitter=0.0)
    grey = torch.full((4, 3, 6, 6), 100, dtype=torch.uint8)
    out = cast.transform(grey, {"gains": torch.tensor([1.06, 1.0, 0.94])})
    assert out[:, 0].unique().tolist() == [106] and out[:, 1].unique().tolist() == [100]
    assert out[:, 2].unique().tolist() == [94]
    for _ in range(50):
        gains = ResidualCast(cast=0.06, jitter=0.03).make_params([])["gains"]
        assert ((gains > 0.9) & (gains < 1.1)).all()


def test_the_pipeline_keeps_every_crop_and_its_type() -> None:
    torch.manual_seed(0)
    crops = torch.randint(0, 256, (20, 3, 16, 16), dtype=torch.uint8)
    out = augment_stack(crops, camera_augmentation(1.0))
    assert out.shape == crops.shape and out.dtype == torch.uint8 and not torch.equal(out, crops)
    assert torch.equal(augment_stack(crops, camera_augmentation(0.0)), crops)


def test_a_training_set_one_crop_past_a_full_batch_trains() -> None:
    """65 crops at a batch of 64 once left a batch of one, which batch norm refuses (seen in CI on reviewed crops)."""
    from inspector.experts.resnet import ResNetClassifier
    from inspector.training.batches import batch_slices
    from inspector.training.classifier import batch_size, train_classifier
    from inspector.training.samples import PartSample

    for n, size in [(1, 64), (64, 64), (65, 64), (129, 64), (130, 64), (7, 3)]:
        pieces = batch_slices(n, size)
        covered = [i for p in pieces for i in range(n)[p]]
        assert covered == list(range(n))
        assert n == 1 or min(p.stop - p.start for p in pieces) > 1
    rng = np.random.default_rng(0)
    n = batch_size(65) + 1
    samples = [PartSample(rng.integers(0, 255, (20, 20, 3), dtype=np.uint8), "ok" if i % 2 else "missing",
                          (0.0, 0.0), (12, 12), 4) for i in range(n)]
    trained = train_classifier(ResNetClassifier(18, input_size=32), samples, samples[:4], epochs=1, augment=0)
    assert trained.train_samples == n and all(torch.isfinite(v).all() for v in trained.state.values()
                                              if v.is_floating_point())
