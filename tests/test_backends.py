"""Experts on ONNX Runtime beside torch: the same verdicts, exports checked before they are trusted, sessions
kept in the host tier so a switch back costs no new session."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from inspector.app.line import LineConfig
from inspector.app.run import run_line
from inspector.app.service import ServiceConfig
from inspector.experts.backends import get_backend
from inspector.experts.backends.base import BackendUnavailable, Weights
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
    counters = backend.counters()
    assert backend.name == "onnxruntime" and counters["weights_read"] >= 1 and counters["sessions_created"] == 0
    assert counters["experts_on_own_graph"] == 0
    runtime, entries = demo[1].root / "runtime", demo[1].entries
    exports = [runtime_path(runtime, n, e.weights_sha256) for n, e in entries.items()]
    weights = [p.with_name(f"{p.stem}.{backend.tag}.weights.safetensors") for p in exports]
    assert all(p.is_file() and p.with_suffix(".json").is_file() for p in exports + weights)  # each with its note
    graphs = {json.loads(p.with_suffix(".json").read_text())["graph"] for p in weights}
    # the operating margin decodes a classifier's output; its graph is its architecture's, margin or not
    archs = {(e.role, json.dumps({k: v for k, v in e.spec.items() if k != "good_margin"}, sort_keys=True),
              len(e.classes or ())) for e in entries.values()}
    assert len(graphs) == len(archs) < len(weights)  # one graph an architecture, its experts' weights its inputs
    assert all((runtime / g).is_file() for g in graphs)


def test_own_sessions_give_the_verdicts_the_shared_graph_gives(demo) -> None:
    """The two ways ONNX Runtime serves an expert (its weights fed to its architecture's shared graph, a session of
    its own from the pre-optimised file) and torch: the same verdicts on the same crops."""
    from inspector.experts.backends.onnxruntime_backend import OnnxRuntimeBackend

    zoo = demo[1]
    shared, own = OnnxRuntimeBackend(), OnnxRuntimeBackend(shared_graph=False)
    for name in ("cls-R1K", "cls-D1N", *[n for n, e in zoo.entries.items() if e.role == "detector"][:1]):
        arch, sha, state = _arch_state(zoo, name)
        module = arch.build().eval()
        module.load_state_dict(state)
        x = torch.rand(6, 3, arch.input_size, arch.input_size, generator=torch.Generator().manual_seed(5))
        want = [(p.label, p.passed) for p in arch.run(module, x)]
        for backend in (shared, own):
            loaded, _ = backend.load(arch, name, sha, _weights(zoo, name), torch.device("cpu"), zoo.root / "runtime")
            assert [(p.label, p.passed) for p in backend.run(arch, loaded, x)] == want, (name, backend.shared_graph)
    assert shared.counters()["sessions_created"] == 0 and own.counters()["weights_read"] == 0


def _arch_state(zoo, name: str):  # noqa: ANN001, ANN202
    entry = zoo.entries[name]
    from safetensors.torch import load_file

    return zoo.architecture(name), entry.weights_sha256, load_file(str(zoo.path_of(name)))


def test_a_damaged_export_is_made_again_and_a_disagreeing_one_is_refused(demo, tmp_path: Path) -> None:
    zoo = demo[1]
    backend = get_backend("onnxruntime")
    arch, sha, state = _arch_state(zoo, "cls-R1K")
    first = exported(arch, "cls-R1K", sha, lambda: state, tmp_path, backend.session)
    assert first.made and first.max_abs_diff < 1e-3
    assert not exported(arch, "cls-R1K", sha, lambda: state, tmp_path, backend.session).made  # kept
    path = runtime_path(tmp_path, "cls-R1K", sha)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte on disk
    path.write_bytes(bytes(data))
    again = exported(arch, "cls-R1K", sha, lambda: state, tmp_path, backend.session)
    assert again.made and again.sha256 == first.sha256
    other_arch, _, other_state = _arch_state(zoo, "cls-D1N")
    other = export_checked(other_arch, "cls-D1N", other_state, backend.session)[0]
    with pytest.raises(BackendUnavailable, match="disagrees with torch"):
        export_checked(arch, "cls-R1K", state, lambda _data: backend.session(other))


def _weights(zoo, name: str) -> Weights:  # noqa: ANN001
    from safetensors.torch import load_file

    return Weights(lambda: (load_file(str(zoo.path_of(name))), "disk"))


def test_an_evicted_session_is_kept_within_the_host_budget_and_comes_back(demo) -> None:
    zoo = demo[1]
    backend = get_backend("onnxruntime")
    arch, sha, _ = _arch_state(zoo, "cls-R1K")
    loaded, tier = backend.load(arch, "cls-R1K", sha, _weights(zoo, "cls-R1K"), torch.device("cpu"),
                                zoo.root / "runtime")
    assert tier == "disk" and backend.counters()["weights_read"] == 1
    backend.retire(arch, loaded, torch.device("cpu"))  # no host budget: nothing is kept
    assert backend.cached("cls-R1K", sha, torch.device("cpu")) is None
    backend.keep(loaded.nbytes)  # room for one session
    backend.retire(arch, loaded, torch.device("cpu"))
    assert backend.cached("cls-R1K", sha, torch.device("cpu")) is loaded
    assert backend.counters()["sessions_reused"] == 1
    backend.retire(arch, loaded, torch.device("cpu"))
    backend.forget("cls-R1K")  # new weights: the old session is never served again
    assert backend.cached("cls-R1K", sha, torch.device("cpu")) is None


def test_a_switch_reads_the_preoptimised_file_and_the_export_is_not_read_again(demo) -> None:
    from inspector.experts.backends.onnxruntime_backend import OnnxRuntimeBackend

    zoo = demo[1]
    backend = OnnxRuntimeBackend(shared_graph=False)  # a session of its own
    arch, sha, _ = _arch_state(zoo, "cls-D1N")
    fetched = []

    def fetch():  # noqa: ANN202
        fetched.append(1)
        return _weights(zoo, "cls-D1N").fetch()

    path, optimised = backend.model_file(arch, "cls-D1N", sha, Weights(fetch), zoo.root / "runtime")
    assert optimised and path.suffix == ".ort" and backend.tag in path.name
    assert fetched == []  # the zoo build exported it: a switch never reads the weights
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # damaged on disk: made again from the checked ONNX file
    path.write_bytes(bytes(data))
    again, _ = backend.model_file(arch, "cls-D1N", sha, Weights(fetch), zoo.root / "runtime")
    assert again == path and path.read_bytes() != bytes(data) and fetched == []
    x = torch.rand(4, 3, arch.input_size, arch.input_size)
    module = arch.build().eval()
    module.load_state_dict(_weights(zoo, "cls-D1N").fetch()[0])
    loaded, _ = backend.load(arch, "cls-D1N", sha, Weights(fetch), torch.device("cpu"), zoo.root / "runtime")
    assert [(p.label, p.passed) for p in backend.run(arch, loaded, x)] == \
        [(p.label, p.passed) for p in arch.run(module, x)]


@pytest.mark.parametrize("shared_graph", [True, False])
def test_a_session_holds_about_its_weights_as_measured(demo, shared_graph: bool) -> None:
    """Sessions from the file's path and without an arena, or weights fed to a shared graph: what the pool is
    charged is what a loaded expert holds."""
    from inspector.experts.backends.onnxruntime_backend import OnnxRuntimeBackend

    zoo = demo[1]
    backend = OnnxRuntimeBackend(shared_graph=shared_graph)
    arch, sha, _ = _arch_state(zoo, "cls-R1K")
    held = backend.resident_bytes(arch, "cls-R1K", sha, _weights(zoo, "cls-R1K"), zoo.root / "runtime", 8)
    weights = zoo.entries["cls-R1K"].weight_bytes  # torch's; the optimised graph's fold the batch norms in
    assert 0.9 * weights <= held < 1.5 * weights


def test_an_unknown_backend_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown backend 'tensorrt'.*torch, onnxruntime"):
        get_backend("tensorrt")


def test_the_zoo_build_exports_every_expert_for_the_runtime(demo) -> None:
    zoo = demo[1]
    runtime = zoo.root / "runtime"
    made = {p.name for p in runtime.glob("*.onnx")}
    assert made >= {runtime_path(runtime, name, e.weights_sha256).name for name, e in zoo.entries.items()}


def test_openvino_gives_the_verdicts_torch_gives_part_by_part(demo, tmp_path: Path) -> None:
    """The same exports compiled by OpenVINO (f32, checked through OpenVINO itself): the same verdicts, switches
    compile through a model cache of the expert's own, noted; a damaged cache is made again."""
    pytest.importorskip("openvino")
    torch_v, _ = _verdicts(demo, tmp_path / "torch", "torch")
    # an imported model holds its weights and its activation buffers (measured: about 2.2x the weights), so the
    # pool is sized for that; verdicts do not depend on the pool
    ov_v, service = _verdicts(demo, tmp_path / "ov", "openvino", device_mb=160)
    assert ov_v == torch_v and any(v != "pass" for v, _d in torch_v.values())
    backend = service.line.engine.backend
    assert backend.name == "openvino" and backend.counters()["models_compiled"] >= 1
    home = demo[1].root / "runtime" / "openvino"
    folders = [f for f in (home / "cache").iterdir() if f.is_dir()]
    assert len(folders) == len(list(home.glob("*.onnx"))) == len(demo[1].entries)  # a model cache an expert
    assert all(any(f.iterdir()) and f.with_name(f.name + ".json").is_file() for f in folders)  # with its note
    assert not backend.runs_on(torch.device("cuda"))
    blob = next(next(f for f in folders if "cls-R1K" in f.name).iterdir())
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a damaged cache on disk: compiled into a fresh one, never served
    blob.write_bytes(bytes(data))
    arch, sha, _ = _arch_state(demo[1], "cls-R1K")
    _onnx, folder = backend.model_file(arch, "cls-R1K", sha, _weights(demo[1], "cls-R1K"), demo[1].root / "runtime")
    assert not blob.exists() or blob.read_bytes() != bytes(data)
    assert any(folder.iterdir())


def test_int8_is_calibrated_on_the_rule_sets_crops_and_kept_only_where_it_agrees(demo, tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """onnxruntime-int8 on the line: each expert quantised on crops of its own rendered boards, its note saying how
    far its verdicts agree with fp32's; an expert below the bar stays fp32 and says why; every part is served."""
    import json

    from inspector.experts.backends import int8

    torch_v, _ = _verdicts(demo, tmp_path / "torch", "torch")
    q_v, service = _verdicts(demo, tmp_path / "int8", "onnxruntime-int8")
    assert set(q_v) == set(torch_v) and all(v != "error" for v, _d in q_v.values())
    agree = sum(q_v[k] == torch_v[k] for k in torch_v) / len(torch_v)
    assert agree >= 0.9, agree
    backend = service.line.engine.backend
    runtime = demo[1].root / "runtime"
    notes = [json.loads(p.read_text()) for p in runtime.glob("*.int8.json")]
    assert len(notes) == len(demo[1].entries)  # every expert had crops of its own boards: quantised or refused
    kept = [n for n in notes if "refused" not in n]
    assert all(n["agreement"] >= int8.AGREEMENT and n["crops"] > 0 for n in kept)
    assert len(backend.in_fp32) == len(notes) - len(kept)
    for p in runtime.glob("*.int8.*"):
        p.unlink()
    monkeypatch.setattr(int8, "AGREEMENT", 1.01)  # no expert can agree that well: every one stays fp32
    q_v, service = _verdicts(demo, tmp_path / "strict", "onnxruntime-int8")
    reasons = service.line.engine.backend.in_fp32
    assert len(reasons) == len(demo[1].entries) and all("agrees with fp32 on" in r for r in reasons.values())
    assert not list(runtime.glob("*.int8.onnx")) and all(v != "error" for v, _d in q_v.values())


def test_a_shared_graph_is_made_again_when_gone_and_a_split_that_does_not_reproduce_is_refused(
        demo, tmp_path: Path, monkeypatch) -> None:
    """The graph every expert of an architecture reads is made again when removed; a split whose outputs are not
    the export's is refused, the reason kept in the note, and the expert served by a session of its own."""
    from inspector.experts.backends import shared_graph
    from inspector.experts.backends.onnxruntime_backend import OnnxRuntimeBackend

    zoo = demo[1]
    arch, sha, state = _arch_state(zoo, "cls-R1K")
    backend = OnnxRuntimeBackend()
    path = backend.shared(arch, "cls-R1K", sha, _weights(zoo, "cls-R1K"), tmp_path).weights
    graph = tmp_path / json.loads(path.with_suffix(".json").read_text())["graph"]
    graph.unlink()
    assert backend.shared(arch, "cls-R1K", sha, _weights(zoo, "cls-R1K"), tmp_path).weights == path
    assert graph.is_file()
    good = path.read_bytes()
    damaged = bytearray(good)
    damaged[-5] ^= 0xFF  # a flipped byte in the weights on disk: made again, never served
    path.write_bytes(bytes(damaged))
    assert backend.shared(arch, "cls-R1K", sha, _weights(zoo, "cls-R1K"), tmp_path).weights == path
    assert path.read_bytes() == good
    for made in [p for p in tmp_path.iterdir() if p.suffix != ".onnx" or p.name.startswith("graph-")]:
        made.unlink()  # the checked export stays; what is derived from it goes

    real = shared_graph.split

    def wrong(model: bytes):  # noqa: ANN202 - the split loses a weight's scale
        graph, weights = real(model)
        first = next(iter(weights))
        return graph, {**weights, first: weights[first] * 3}

    monkeypatch.setattr(shared_graph, "split", wrong)
    module = arch.build().eval()
    module.load_state_dict(state)
    x = torch.rand(6, 3, arch.input_size, arch.input_size, generator=torch.Generator().manual_seed(3))
    refusing = OnnxRuntimeBackend()
    loaded, _ = refusing.load(arch, "cls-R1K", sha, _weights(zoo, "cls-R1K"), torch.device("cpu"), tmp_path)
    assert "served by a session of its own" in refusing.own_graph["cls-R1K"]
    assert refusing.counters()["sessions_created"] == 1
    assert [(p.label, p.passed) for p in refusing.run(arch, loaded, x)] == \
        [(p.label, p.passed) for p in arch.run(module, x)]
    monkeypatch.setattr(shared_graph, "split", real)
    again = OnnxRuntimeBackend()  # another process reads the refusal from the note and does not split again
    assert again.shared(arch, "cls-R1K", sha, _weights(zoo, "cls-R1K"), tmp_path) is None
    assert "do not give the export's outputs" in again.own_graph["cls-R1K"]
