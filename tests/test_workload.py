"""Workload YAML: validated once, errors with file and line, deterministic derived stream."""
from __future__ import annotations

import pytest

from inspector.coserve.online.workload import load_workload, parse_workload
from inspector.yamlio import ConfigError

from .conftest import TINY


def test_default_workload_is_task_a_in_small() -> None:
    w = load_workload()
    assert len(w.components) >= 60 and len(w.detectors) >= 3
    counts = sorted((c.count for c in w.components), reverse=True)
    assert counts[0] >= 10 * counts[-1]  # skewed
    assert 0 < w.arrival_interval_s <= 0.004  # at least the paper's line rate
    assert w.expert_pool_bytes <= w.total_weight_bytes() / 4  # holds at most a quarter
    usage = w.usage()
    assert sum(usage.probability.values()) == pytest.approx(1.0)
    assert all(usage.is_subsequent(d.name) for d in w.detectors)


def test_the_wide_workload_is_one_where_switches_dominate() -> None:
    """wide-150: at least 150 types, a pool of at most a sixth of the experts, and a stream that asks for far more
    experts than the pool holds."""
    w = load_workload("wide-150")
    assert len(w.components) >= 150 and w.expert_pool_bytes <= w.total_weight_bytes() / 6
    asked = {r.expert for r in w.stream()}
    per_expert = w.total_weight_bytes() / (len(w.components) + len(w.detectors))
    assert len(asked) > 3 * w.expert_pool_bytes / per_expert


def test_stream_is_board_scan_order_and_deterministic() -> None:
    w = parse_workload(TINY, "tiny.yaml")
    a, b = w.stream(), w.stream()
    per_board = sum(c.count for c in w.components)
    assert [r.component for r in a] == [r.component for r in b]
    assert [r.component for r in a[:per_board]] == [r.component for r in a[per_board : 2 * per_board]]
    assert all(torch_equal(x.image, y.image) for x, y in zip(a, b))
    assert len({r.id for r in a}) == w.requests


def torch_equal(x, y) -> bool:
    import torch

    return bool(torch.equal(x, y))


@pytest.mark.parametrize("patch,line,message", [
    (("requests: 48", "requests: many"), 13, "requests: must be an integer"),
    (("memory: {expert_pool_mb: 45}", "memory: {expert_pool_mb: 45, cache: 3}"), 15, "memory.cache: unknown key"),
    (("{name: Q, count: 1, pass_rate: 0.5}", "{name: Q, count: 1, detector: det-z}"), 11,
     "components[4].detector: unknown detector 'det-z'"),
    (("classifier: {arch: resnet10", "classifier: {arch: resnet12"), 3, "resnet12 is not a known depth"),
    (("  - {name: D, count: 2", "  - {name: R, count: 2"), 12, "component type 'R' is listed twice"),
    (("arrival_interval_ms: 0", "arrival_interval_ms: [0"), None, "not valid YAML"),
])
def test_errors_name_file_and_line(patch: tuple[str, str], line: int | None, message: str) -> None:
    text = TINY.replace(*patch)
    assert text != TINY
    with pytest.raises(ConfigError) as err:
        parse_workload(text, "plant.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith(f"plant.yaml:{line}:" if line else "plant.yaml")


def test_missing_workload_file_is_clear(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read workload"):
        load_workload(tmp_path / "nope.yaml")


def test_generated_components_follow_zipf_and_share_detectors() -> None:
    text = TINY.split("components:")[0] + (
        "components: {generate: 20, parts_per_board: 60, zipf: 1.2, with_detector: 0.5}\nrequests: 10\n"
        "memory: {expert_pool_mb: 45}\n"
    )
    w = parse_workload(text, "gen.yaml")
    assert len(w.components) == 20
    assert [c.count for c in w.components] == sorted((c.count for c in w.components), reverse=True)
    assert sum(1 for c in w.components if c.detector) == 10


def test_a_renamed_copy_of_a_workload_runs_on_the_zoo_already_built(tiny, models_dir) -> None:
    """Same components and seed, another name, stream and memory: the same weights, so no second build."""
    import dataclasses

    from inspector.coserve.evaluation.preparation import zoo_dir_for, zoo_for
    from inspector.experts.zoo import MANIFEST

    workload, zoo, _ = tiny
    built = (zoo.root / MANIFEST).stat().st_mtime_ns
    copy = dataclasses.replace(workload, name="tiny-long", requests=workload.requests * 4,
                               expert_pool_bytes=workload.expert_pool_bytes // 2)
    assert zoo_for(copy, models_dir).root == zoo.root
    assert (zoo.root / MANIFEST).stat().st_mtime_ns == built
    other = dataclasses.replace(workload, name="tiny-long", seed=workload.seed + 1)
    assert zoo_dir_for(other, models_dir / "zoo") == models_dir / "zoo" / f"tiny-long-{other.zoo_fingerprint()}"
