"""Experts on ONNX Runtime beside torch: the same verdicts, exports checked before they are trusted, sessions
kept in the host tier so a switch back costs no new session."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inspector.app.line import LineConfig
from inspector.app.run import run_line
from inspector.app.service import ServiceConfig
from inspector.experts.backends import get_backend
from inspector.experts.backends.base import BackendUnavailable
from inspector.experts.backends.export import export_checked, exported, runtime_path
from inspector.ingest.synthetic import render_board
from inspector.results.store import ResultStore, sqlite_url

from .conftest import DEMO_RULES
from .test_camera_line import Frames

pytest.importorskip("onnxruntime")


def _verdicts(demo, tmp_path: Path, backend: str, device_mb: float = 40) -> tuple[dict, object]:  # noqa: ANN001
    root, zoo = demo
    rng = np.random.default_rng(21)
    from inspector.ingest.sources import Frame

    frames = [Frame(b.image, b.serial, "t") for b in (render_board(DEMO_RULES, f"B{i}", rng, {"missing": 0.1,
                                                                                                "shifted": 0.1})
                                                       for i in range(12))]
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    service, _ = run_line(DEMO_RULES, zoo, root / "models", Frames(frames),
                          ServiceConfig(LineConfig(device_mb=device_mb, backend=backend)), store, tmp_path,
                          lambda _m: None)
    out = {(i.board_serial, p.ref): (p.verdict, p.defect_class) for i in store.inspections() for p in i.parts}
    return out, service


def test_the_runtime_gives_the_verdicts_torch_gives_part_by_part(demo, tmp_path: Path) -> None:
    torch_v, _ = _verdicts(demo, tmp_path / "torch", "torch")
    ort_v, service = _verdicts(demo, tmp_path / "ort", "onnxruntime")
    assert len(torch_v) == 12 * 3 and ort_v == torch_v
    assert any(v != "pass" for v, _d in torch_v.values())  # defects were there to be called
    backend = service.line.engine.backend
    assert backend.name == "onnxruntime" and backend.counters()["sessions_created"] >= 1
    runtime = demo[1].root / "runtime"
    assert len(list(runtime.glob("*.onnx"))) == len(list(runtime.glob("*.json"))) >= 1


def _arch_state(zoo, name: str):  # noqa: ANN001, ANN202
    entry = zoo.entries[name]
    from safetensors.torch import load_file

    return zoo.architecture(name), entry.weights_sha256, load_file(str(zoo.path_of(name)))


def test_a_damaged_export_is_made_again_and_a_disagreeing_one_is_refused(demo, tmp_path: Path) -> None:
    zoo = demo[1]
    backend = get_backend("onnxruntime")
    arch, sha, state = _arch_state(zoo, "cls-R1K")
    first = exported(arch, "cls-R1K", sha, state, tmp_path, backend.session)
    assert first.made and first.max_abs_diff < 1e-3
    assert not exported(arch, "cls-R1K", sha, state, tmp_path, backend.session).made  # kept
    path = runtime_path(tmp_path, "cls-R1K", sha)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte on disk
    path.write_bytes(bytes(data))
    again = exported(arch, "cls-R1K", sha, state, tmp_path, backend.session)
    assert again.made and again.sha256 == first.sha256
    other_arch, _, other_state = _arch_state(zoo, "cls-D1N")
    other = export_checked(other_arch, "cls-D1N", other_state, backend.session)[0]
    with pytest.raises(BackendUnavailable, match="disagrees with torch"):
        export_checked(arch, "cls-R1K", state, lambda _data: backend.session(other))


def test_an_evicted_expert_comes_back_from_its_kept_session(demo, tmp_path: Path) -> None:
    _, service = _verdicts(demo, tmp_path, "onnxruntime", device_mb=40)  # room for one classifier at a time
    backend = service.line.engine.backend
    st = service.line.engine.stats()
    assert st.experts.switches > 3
    assert backend.counters()["sessions_reused"] > 0
    assert backend.counters()["sessions_created"] < st.experts.switches + len(demo[1].entries)


def test_an_unknown_backend_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown backend 'tensorrt'.*torch, onnxruntime"):
        get_backend("tensorrt")


def test_the_zoo_build_exports_every_expert_for_the_runtime(demo) -> None:
    zoo = demo[1]
    runtime = zoo.root / "runtime"
    made = {p.name for p in runtime.glob("*.onnx")}
    assert made >= {runtime_path(runtime, name, e.weights_sha256).name for name, e in zoo.entries.items()}
