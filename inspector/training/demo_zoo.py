"""`inspector zoo build --demo`: train every expert the demo rule sets name, cache, write a manifest.

The cache key is the rule sets' training versions (what their crops depend on), the training recipe and the seed:
the same inputs give the zoo already on disk, any change retrains it.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..experts.zoo import ZOO_FORMAT, ExpertEntry, Zoo, current_zoo, write_expert, write_manifest
from ..ingest.camera_model import describe
from ..ingest.photometric import INPUT_VERSION
from ..ingest.silkscreen import clips_silkscreen
from ..ingest.synthetic import RENDER_VERSION
from ..logs import progress as progress_of
from ..routing.rules import CLASSIFIER_CLASSES, DETECTOR_CLASSES, RuleSet
from ..runtime.diskio import write_atomically
from .samples import TRAINING_CAMERA, TRAINING_RATES, collect

if TYPE_CHECKING:  # the trainers import torchvision (seconds of every start): loaded only when a zoo is trained
    from .classifier import TrainedClassifier
    from .detector import TrainedDetector
    from .jobs import Trained, TrainJob

RECIPE = {"per_type": 400, "classifier_cap": 600, "classifier_epochs": 14, "detector_cap": 1500,
          "detector_epochs": 15, "detector_copies": 1, "val_per_type": 100, "rates": TRAINING_RATES, "augment": 1.0,
          "camera": describe(TRAINING_CAMERA), "version": 5,  # 4: Bayer in the augmentation; 5: operating margins
          "retrain_below": 0.99, "attempts": 3}  # an expert short of this validation accuracy trains again (jobs.py)


def demo_key(rule_sets: list[RuleSet], seed: int, recipe: dict) -> str:
    """What the zoo's weights depend on; code that changes what experts see bumps INPUT_VERSION or the recipe."""
    payload = {"format": ZOO_FORMAT, "input": INPUT_VERSION, "rules": sorted(r.training_version for r in rule_sets),
               "seed": seed, "recipe": recipe}
    if any(clips_silkscreen(r) for r in rule_sets):  # drawn otherwise than render version 1 drew them
        payload["render"] = RENDER_VERSION
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def check_shared_types(rule_sets: list[RuleSet]) -> None:
    """A component type in two recipes is one classifier: its shape, size and input must agree."""
    seen: dict[str, tuple[str, tuple[int, int], int | None, str]] = {}
    for rules in rule_sets:
        for c in rules.components:
            prev = seen.setdefault(c.name, (c.shape, c.size, c.input_size, rules.recipe))
            if prev[:2] != (c.shape, c.size):
                raise ValueError(f"component type {c.name} is a {prev[0]} {prev[1]} in {prev[3]} but a {c.shape} "
                                 f"{c.size} in {rules.recipe}; one name, one part: rename one of them")
            if prev[2] != c.input_size:
                raise ValueError(f"component type {c.name} has input_size {prev[2]} in {prev[3]} but {c.input_size} "
                                 f"in {rules.recipe}: one classifier has one input; give both the same")
    specs = {json.dumps(r.classifier_spec, sort_keys=True) for r in rule_sets}
    if len(specs) > 1:
        raise ValueError("the demo rule sets must agree on the classifier architecture to share experts")


def build_demo_zoo(root: Path, rule_sets: list[RuleSet], seed: int = 0, recipe: dict | None = None,
                   progress: Callable[[str], None] | None = None, workers: int | None = None) -> Zoo:
    """Train the zoo (cached by `demo_key`); `workers` processes train experts side by side (default: a core each)."""
    recipe = RECIPE if recipe is None else recipe
    say = progress or (lambda _m: None)
    check_shared_types(rule_sets)
    key = demo_key(rule_sets, seed, recipe)
    existing = current_zoo(root, key)
    if existing is not None:
        say(f"demo zoo up to date: {root}")
        return existing
    from .jobs import TrainJob, run_jobs

    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    done_before = resumable(root, key)
    if done_before:
        say(f"resuming the demo zoo: {len(done_before)} experts trained before are kept ({', '.join(done_before)})")
    # one set of training boards for both kinds of expert (rendering is a tenth of the build); held-out boards apart
    train = collect(rule_sets, recipe["per_type"], seed, recipe["rates"], cap=recipe["classifier_cap"],
                    detector_cap=recipe["detector_cap"])
    val = collect(rule_sets, recipe["val_per_type"], seed + 1, recipe["rates"])
    det_train = train
    say(f"rendered training and held-out boards in {time.perf_counter() - t0:.0f} s")
    specs = {name: spec for r in rule_sets for name, spec in r.expert_specs().items()}  # agreed: check_shared_types
    detectors = {d.name: d.spec for r in rule_sets for d in r.detectors}
    augment = recipe.get("augment", 1.0)
    retry = {"floor": recipe.get("retrain_below"), "attempts": recipe.get("attempts", 1)}
    jobs = [TrainJob(name, "classifier", specs[name], train.by_classifier[name], val.by_classifier[name],
                     recipe["classifier_epochs"], seed, augment, **retry) for name in sorted(train.by_classifier)]
    jobs += [TrainJob(name, "detector", detectors[name], det_train.by_detector[name], val.by_detector[name],
                      recipe["detector_epochs"], seed, augment, recipe.get("detector_copies", 1), **retry)
             for name in sorted(det_train.by_detector)]
    names = {j.name for j in jobs}
    entries = {name: e for name, e in done_before.items() if name in names}
    todo = [j for j in jobs if j.name not in entries]
    started = time.perf_counter()

    with progress_of(len(todo), "training experts", say, work=sum(j.work for j in todo)) as bar:
        def done(job: TrainJob, trained: Trained) -> None:
            # written as each finishes: an interrupted build resumes from here (partial_path)
            entries[job.name] = _write(root, job.name, job.role, job.spec, trained,
                                       CLASSIFIER_CLASSES if job.role == "classifier" else DETECTOR_CLASSES, key)
            write_atomically(partial_path(root, key), json.dumps(
                {"build_key": key, "experts": [asdict(e) for e in entries.values()]}, indent=1).encode())
            bar.write(f"trained {job.name}: validation accuracy {trained.val_accuracy:.3f} "
                      f"({trained.train_samples} crops, {time.perf_counter() - started:.0f} s into training)"
                      + _retries(job, trained))
            bar.step(note=job.name, size=job.work)

        run_jobs(todo, workers, done)
    ordered = [entries[j.name] for j in jobs]
    build_s = round(time.perf_counter() - t0, 1)
    zoo = write_manifest(root, key, seed, ordered, recipe=recipe, input_version=INPUT_VERSION,
                         rule_sets={r.recipe: r.version for r in rule_sets}, build_seconds=build_s)
    partial_path(root, key).unlink(missing_ok=True)
    say(f"demo zoo built in {build_s:.0f} s: {root}")
    export_runtime(zoo, say)
    return zoo


def export_runtime(zoo: Zoo, say: Callable[[str], None]) -> int:
    """Every expert exported for the runtime backend now, checked against torch (experts/backends/export.py), so no
    line pays it on first use; skipped where ONNX Runtime is not installed. The number exported."""
    try:
        from ..experts.backends import get_backend
        from ..experts.backends.ahead import prepare_zoo

        backend = get_backend("onnxruntime")
    except (ImportError, RuntimeError):
        return 0
    done = prepare_zoo(zoo, backend, say)  # a refused expert is served on torch; the line says why on first use
    say(f"made {done.made} ONNX Runtime files for {len(zoo.entries) - len(done.refused)} experts (checked exports, "
        f"shared graphs' weights) in {done.seconds:.0f} s")
    return done.made


def _retries(job: TrainJob, trained: Trained) -> str:
    """What the build log says of runs trained again (jobs.run_job), and of an expert still short of its floor."""
    if not trained.other_runs:
        return ""
    others = ", ".join(f"{a:.3f}" for a in trained.other_runs)
    note = f"; {len(trained.other_runs) + 1} runs (the others reached {others}), seed {trained.seed} kept"
    if job.floor is not None and trained.val_accuracy < job.floor:
        note += (f"; WARNING: still below {job.floor:.3f}, so it will flag good parts: give it more training crops "
                 "(the recipe's per_type and caps) or review its crops")
    return note


def partial_path(root: Path, key: str) -> Path:
    return root / f"partial-{key}.json"


def resumable(root: Path, key: str) -> dict[str, ExpertEntry]:
    """Experts an interrupted build of the same key finished, whose files are whole (their SHA-256 matches)."""
    try:
        data = json.loads(partial_path(root, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, ExpertEntry] = {}
    for raw in data.get("experts", []) if data.get("build_key") == key else []:
        entry = ExpertEntry.from_json(raw)
        try:
            whole = hashlib.sha256((root / entry.file).read_bytes()).hexdigest() == entry.weights_sha256
        except OSError:
            whole = False
        if whole:
            out[entry.name] = entry
    return out


def _write(root: Path, name: str, role: str, spec: dict, trained: TrainedClassifier | TrainedDetector,
           classes: tuple[str, ...], data_hash: str) -> ExpertEntry:
    from .classifier import TrainedClassifier

    state = {k: v.contiguous() for k, v in trained.state.items()}
    margin = trained.good_margin if isinstance(trained, TrainedClassifier) else None  # classifier.operating_margin
    if margin is not None:
        spec = {**spec, "good_margin": round(margin, 4)}
    return write_expert(root, name, role, spec, state, digest=True, classes=classes, data_hash=data_hash,
                        val_accuracy=round(trained.val_accuracy, 4), train_samples=trained.train_samples,
                        train_seed=trained.seed)
