"""A workload made ready to run: its zoo built (cached), its weights checked once, its experts made ready for a
backend (a runtime's model files, INT8 calibrated on the workload's crops), and a profile of every device that
will run it on that backend. The measured bench, the simulated boxes and the planner all start here."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ...experts.backends import get_backend
from ...experts.backends.ahead import prepare_zoo
from ...experts.zoo import MANIFEST, Zoo, build_random_zoo
from ...runtime.devices import available_devices
from ...runtime.store import TieredStore
from ..offline.profiler import load_or_profile
from ..online.profile import DeviceProfile
from ..online.workload import Workload

Progress = Callable[[str], None]


def zoo_dir_for(workload: Workload, zoos: Path) -> Path:
    """Its own folder (name and fingerprint), or a built zoo of another workload with the same fingerprint: the
    weights depend on the fingerprint alone, and a wide workload's zoo is gigabytes and minutes to build again for
    a copy that differs only in its name, memory or stream."""
    fingerprint = workload.zoo_fingerprint()
    own = zoos / f"{workload.name}-{fingerprint}"
    if own.is_dir():
        return own
    built = sorted(d for d in zoos.glob(f"*-{fingerprint}") if (d / MANIFEST).is_file())
    return built[0] if built else own


def zoo_for(workload: Workload, models_dir: Path, progress: Progress | None = None) -> Zoo:
    """The workload's benchmark zoo, built on first use and cached under models/zoo."""
    zoo_dir = zoo_dir_for(workload, Path(models_dir) / "zoo")
    if progress:
        progress(f"zoo: {zoo_dir}")
    return build_random_zoo(zoo_dir, workload.zoo_items(), seed=workload.seed,
                            sample_inputs=workload.sample_inputs, progress=progress)


def prepare(workload: Workload, models_dir: Path, progress: Progress | None = None,
            drop_page_cache: bool = True, backend: str = "torch") -> tuple[Zoo, dict[str, DeviceProfile]]:
    """The workload's zoo, its weights checked, ready for `backend`, and a profile of every device that will run
    it on that backend.

    The weights' digests are checked here, once per process, so that no
    policy pays the check inside its first switch to each expert (the
    all-resident ceiling never did: it loads everything before the clock);
    a runtime's model files are made here too (the zoo build's work, not a switch's).
    """
    zoo = zoo_for(workload, models_dir, progress)
    store = TieredStore(drop_page_cache=False)
    for name, entry in zoo.entries.items():
        store.register(name, zoo.path_of(name), entry.weights_sha256)
    store.verify()
    runtime = get_backend(backend)
    if backend != "torch":
        def calibration(name: str) -> torch.Tensor | None:
            raw = workload.calibration_inputs(name)
            return None if raw is None else zoo.architecture(name).preprocess_batch(raw)

        done = prepare_zoo(zoo, runtime, progress, calibration)
        if progress and done.made:
            progress(f"made {done.made} model files for {backend} in {done.seconds:.0f} s")
    profiles = {}
    for device in available_devices():
        if not runtime.runs_on(device.torch):  # a runtime without its GPU provider serves the CPU alone
            if progress:
                progress(f"{backend} cannot run on {device.key} here: its experts are served on the CPU")
            continue
        profiles[device.key] = load_or_profile(zoo, device, Path(models_dir) / "profiles", progress=progress,
                                               drop_page_cache=drop_page_cache, backend=runtime)
    return zoo, profiles
