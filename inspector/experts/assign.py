"""Putting fetched tensors into a module shell, and taking them out again, at the cost of a dict write each.

Why not `load_state_dict(..., assign=True)`: it walks the module tree,
goes through `__setattr__` and per-module hooks for every tensor, which for a
YOLOv8 (355 tensors) is 9 ms per load and as much again to drop them at
eviction; Python time that holds the interpreter lock the executors need.
Here a shell's tensor places are found once (`places`) and a load writes each
tensor straight into its module's parameter or buffer table, with the same
checks: every key present, none unknown, every shape as the architecture has it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

_PLACES = "_inspector_places"  # where a shell keeps its places (a plain attribute, not a registered tensor)


@dataclass(frozen=True)
class Place:
    """One state-dict entry's home: the submodule that owns it, its attribute, whether it is a parameter."""

    owner: nn.Module
    attr: str
    is_param: bool
    shape: torch.Size
    requires_grad: bool


def places(module: nn.Module) -> dict[str, Place]:
    """Every state-dict key of `module` with its place, in state-dict order (found once per shell, then kept)."""
    found = module.__dict__.get(_PLACES)
    if found is None:
        found = {}
        _collect(module, "", found)
        object.__setattr__(module, _PLACES, found)
    return found


def _collect(module: nn.Module, prefix: str, out: dict[str, Place]) -> None:
    """As `state_dict` walks: own parameters, then persistent buffers, then children (no de-duplication)."""
    for name, p in module._parameters.items():
        if p is not None:
            out[prefix + name] = Place(module, name, True, p.shape, p.requires_grad)
    for name, b in module._buffers.items():
        if b is not None and name not in module._non_persistent_buffers_set:
            out[prefix + name] = Place(module, name, False, b.shape, False)
    for name, child in module._modules.items():
        if child is not None:
            _collect(child, f"{prefix}{name}.", out)


def assign(module: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Make `state`'s tensors the module's own (no copy), refusing what `load_state_dict(strict=True)` refuses."""
    where = places(module)
    if len(state) != len(where) or not all(k in where for k in state):
        missing = sorted(set(where) - set(state))
        unexpected = sorted(set(state) - set(where))
        raise RuntimeError(f"weights do not fit {type(module).__name__}: missing keys {missing[:5]}, "
                           f"unexpected keys {unexpected[:5]}")
    for key, place in where.items():
        tensor = state[key]
        if tensor.shape != place.shape:
            raise RuntimeError(f"size mismatch for {key}: the file has {tuple(tensor.shape)}, "
                               f"the architecture {tuple(place.shape)}")
        if place.is_param:
            place.owner._parameters[place.attr] = nn.Parameter(tensor, requires_grad=place.requires_grad)
        else:
            place.owner._buffers[place.attr] = tensor
