"""Golden comparison: a live crop beside the same window of the golden board, the way AOI compares a board with
its known-good one.

An expert taught with a reference (`reference: composite` in its spec) reads one 3-channel crop made of three
greys: the live crop, the golden crop, and their absolute difference. Each grey is standardised on its own first
(ingest/photometric.py's numbers), so a golden photo taken under other light still lines up with the live one;
the difference is what a defect leaves, and the two crops beside it let the expert tell a real change from a
trace's edge off by a pixel. The same function makes the training crops and the line's, so nothing differs.
Colour is given up for it in the plain `composite` (a golden comparison is about shape); the `colour` kind keeps it
in the difference: the grey difference and the change of chromaticity (two opponent channels, not normalised, so a
solder mask of another colour or a part of another colour stands out) in one channel.
A part with approved alternates (another make, routing/alternates.py) has more than one golden window; each crop is
composed with the one it differs least from, by the comparison's own difference channel.
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch

from ..routing.rules import RuleSet
from .alternates import alternate_windows
from .crops import Crop, crop_part, crop_tensor
from .photometric import MEAN, MIN_STD, SPREAD, normalize_crop

_GREY = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)  # RGB order, as crop tensors are


def _grey(x: torch.Tensor) -> torch.Tensor:
    return (x.float() * _GREY).sum(dim=1)  # N x H x W


def _standard_grey(x: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
    """`x`'s grey standardised on its own mean and spread, or on those of `like`'s grey (one scale for both)."""
    g = _grey(x)
    r = g if like is None else _grey(like)
    mean = r.mean(dim=(1, 2), keepdim=True)
    std = r.std(dim=(1, 2), keepdim=True).clamp(min=MIN_STD)
    return (g - mean) * (SPREAD / std) + MEAN


def _opponent(x: torch.Tensor) -> torch.Tensor:
    """N x 3 x H x W RGB -> N x 2 x H x W chromaticity: (R - G) / sqrt 2, (R + G - 2B) / sqrt 6."""
    r, g, b = x.float().unbind(dim=1)
    return torch.stack([(r - g) / 2 ** 0.5, (r + g - 2 * b) / 6 ** 0.5], dim=1)


def compose(live: torch.Tensor, golden: torch.Tensor, kind: str = "composite") -> torch.Tensor:
    """N x 3 x H x W uint8 RGB live and golden crops (one window each) -> N x 3 x H x W uint8: live grey, golden grey,
    their difference (channels in that order): |live - golden| of the greys, or with `kind` colour the length of
    (grey difference, change of chromaticity)."""
    if live.shape != golden.shape:
        raise ValueError(f"a live crop {tuple(live.shape[-2:])} and its golden crop {tuple(golden.shape[-2:])} must "
                         "be one window: the same size")
    # matched: one scale for both, the golden window's: how dark the live window is stays
    a, b = _standard_grey(live, golden if kind == "matched" else None), _standard_grey(golden)
    diff = (a - b).abs()
    if kind == "colour":
        chroma = (_opponent(live) - _opponent(golden)).pow(2).sum(dim=1)
        diff = (diff.pow(2) + chroma).sqrt()
    out = torch.stack([a, b, diff], dim=1)
    return out.round_().clamp_(0, 255).to(torch.uint8)


def composite_tensor(live: np.ndarray, golden: np.ndarray, kind: str = "composite") -> torch.Tensor:
    """One HxWx3 BGR live crop and its golden window -> the normalised composite an expert is served."""
    return normalize_crop(compose(crop_tensor(live)[None], crop_tensor(golden)[None], kind)[0])


class GoldenMissing(ValueError):
    """A rule set whose golden-comparison experts have no usable golden image; the message says what to do."""


_LOADED: dict[tuple[str, int, int], np.ndarray] = {}


def golden_image(rules: RuleSet) -> np.ndarray:
    """The rule set's golden board (HxWx3 BGR, the board's size), read once per file version."""
    if rules.golden is None:
        raise GoldenMissing(f"rule set {rules.recipe} has experts that compare with the golden board but no golden "
                            f"image: add `golden: FILE` (the golden board in the recipe's {rules.board_size[0]}x"
                            f"{rules.board_size[1]} px, relative to {rules.source})")
    path = Path(rules.golden)
    try:
        stat = path.stat()
    except OSError as exc:
        raise GoldenMissing(f"rule set {rules.recipe}: the golden image {path} cannot be read "
                            f"({exc.strerror})") from None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _LOADED:
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if image is None:
            raise GoldenMissing(f"rule set {rules.recipe}: {path} is not an image OpenCV can read")
        if (image.shape[1], image.shape[0]) != rules.board_size:
            raise GoldenMissing(f"rule set {rules.recipe}: the golden image {path} is {image.shape[1]}x"
                                f"{image.shape[0]} px but the recipe lays out a {rules.board_size[0]}x"
                                f"{rules.board_size[1]} board; cut it to the recipe's pixels")
        _LOADED.clear()  # one golden board per rule set in force: keep memory flat across changeovers
        _LOADED[key] = image
    return _LOADED[key]


def composed_tensors(crops: list[Crop], tensors: list[torch.Tensor], rules: RuleSet,
                     composite: dict[str, str]) -> tuple[list[torch.Tensor], dict[str, int]]:
    """`tensors` (the crops normalised) with the crops of `composite` component types replaced by their golden
    comparison: the live crop composed with the same window of the golden board, then normalised. A part with
    approved alternates (routing/alternates.py) is composed with whichever of its golden windows it is nearest;
    also returned: REF -> the approved window (1, 2, ...) a part was composed with, where not the golden board's."""
    if not composite:
        return tensors, {}
    golden = golden_image(rules)
    approved = alternate_windows(rules)
    out, matched = list(tensors), {}
    place = {p.ref: p for _c, p in rules.placements()}
    for i, crop in enumerate(crops):
        kind = composite.get(crop.component.name)
        if kind is None:
            continue
        window = crop_part(golden, crop.component, place[crop.ref], rules.crop_margin)
        if crop.ref in approved:
            k = nearest(crop.image, [window, *approved[crop.ref]], kind)
            if k:
                window, matched[crop.ref] = approved[crop.ref][k - 1], k
        out[i] = composite_tensor(crop.image, window, kind)
    return out, matched


def nearest(live: np.ndarray, windows: list[np.ndarray], kind: str = "composite") -> int:
    """The index of the window `live` differs least from (the first on a tie: the golden board's). It depends on
    the crop alone, so every policy serves the same comparison."""
    a = crop_tensor(live)[None]
    return int(np.argmin([_difference(a, w, kind) for w in windows]))


def difference(live: np.ndarray, window: np.ndarray, kind: str = "composite") -> float:
    """The comparison's own difference channel between a live crop and a golden window, averaged (0: the same)."""
    return _difference(crop_tensor(live)[None], window, kind)


def _difference(live: torch.Tensor, window: np.ndarray, kind: str) -> float:
    return float(compose(live, crop_tensor(window)[None], kind)[0, 2].float().mean())
