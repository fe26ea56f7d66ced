"""Training augmentation: the camera effects correction cannot undo (motion blur, residual colour) reach the crops."""
from __future__ import annotations

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
