"""Devices the engine can run executors on: CUDA when present, else the CPU."""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Device:
    """One processor that owns pools and executors ("cpu" or "cuda:N")."""

    kind: str
    index: int = 0

    @property
    def key(self) -> str:
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"

    @property
    def torch(self) -> torch.device:
        return torch.device(self.key)

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def synchronize(self) -> None:
        """Wait for queued kernels so that timings measure work, not launches."""
        if self.is_cuda:
            torch.cuda.synchronize(self.index)

    def describe(self) -> str:
        if self.is_cuda:
            return torch.cuda.get_device_name(self.index)
        return cpu_model_name()

    @classmethod
    def parse(cls, text: str) -> Device:
        text = text.strip().lower()
        if text == "cpu":
            return cls("cpu")
        if text.startswith("cuda"):
            _, _, idx = text.partition(":")
            return cls("cuda", int(idx or 0))
        raise ValueError(f"unknown device {text!r}: use 'cpu' or 'cuda[:N]'")


def cuda_available() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def available_devices() -> list[Device]:
    """CUDA devices first (they run experts fastest), then the CPU."""
    devices = [Device("cuda", i) for i in range(torch.cuda.device_count())] if cuda_available() else []
    return devices + [Device("cpu")]


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def fingerprint(device: Device) -> dict[str, str | int]:
    """What a profile measured on this device depends on; a mismatch means re-profile."""
    info: dict[str, str | int] = {
        "device": device.key,
        "name": device.describe(),
        "torch": torch.__version__.split("+")[0],
    }
    if device.is_cuda:
        props = torch.cuda.get_device_properties(device.index)
        info["memory_bytes"] = int(props.total_memory)
    else:
        info["cores"] = cpu_cores()
    return info
