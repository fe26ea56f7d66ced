"""Benchmark workloads: component types, routes, request stream, budget, executors.

A workload YAML (documented in inspector/workloads/default.yaml) is read
once into a `Workload`; everything it implies (the zoo to build, usage
probabilities, the board scan order, the request images) is derived here
deterministically from its seed, so every policy sees the same stream.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from ...experts.registry import architecture_from_spec
from ...experts.zoo import ZooItem
from ...yamlio import ConfigError, Fields, load_yaml
from .components import ComponentType, DetectorSpec
from .request import Request
from .usage import ExpertUsage, RouteUse

MiB = 2**20
CASUAL_EXPERT_SHARE = 0.75  # §5.2 "CoServe Casual": 75% of device memory for experts


@dataclass(frozen=True)
class Recipe:
    """One board variant of the product family: which component types it carries, how many of each.

    A plant builds lots of one recipe, then changes over; the stream follows
    the lots, so a run touches the types of the recipes it passes through,
    not every type of the family (paper §5.1: a board's 352 types).
    """

    name: str
    parts: tuple[tuple[str, int], ...]  # (component type, parts of it per board)

    @property
    def parts_per_board(self) -> int:
        return sum(n for _, n in self.parts)


@dataclass(frozen=True)
class Workload:
    name: str
    seed: int
    classifier: dict[str, Any]
    detectors: tuple[DetectorSpec, ...]
    components: tuple[ComponentType, ...]
    requests: int
    arrival_interval_s: float
    expert_pool_bytes: int
    cpu_pool_bytes: int
    host_cache_bytes: int
    batch_bytes: int | None
    executors: dict[str, int | None] = field(default_factory=dict)  # None: the casual default for the box
    source: str = "<built-in>"
    device_bytes: int | None = None  # experts + batches on the main device, what the planner splits
    pool_fixed: bool = True  # expert_pool_mb was given: an override the planner keeps
    executors_fixed: bool = True  # executors were given: an override the planner keeps
    recipes: tuple[Recipe, ...] = ()  # none: one board carrying every component type `count` times
    boards_per_lot: int = 1  # boards of one recipe before the line changes over to the next

    # -- derived ---------------------------------------------------------------------------------
    @property
    def image_size(self) -> int:
        return int(self.classifier.get("input_size", 64))

    def zoo_items(self) -> list[ZooItem]:
        items = [ZooItem(c.classifier, dict(self.classifier), c.pass_rate) for c in self.components]
        return items + [ZooItem(d.name, dict(d.spec)) for d in self.detectors]

    def usage(self) -> ExpertUsage:
        """Usage probabilities from the parts counts over the recipe mix (each recipe's lots alike)."""
        return ExpertUsage.from_routes(RouteUse(c.route, c.count, c.pass_rate) for c in self.components)

    def executor_counts(self, has_cuda: bool, cores: int) -> dict[str, int]:
        """Counts to run with: the workload's, else §5.2's casual 3 GPU + 1 CPU, or one per core on a CPU box."""
        cuda, cpu = self.executors.get("cuda"), self.executors.get("cpu")
        if has_cuda:
            return {"cuda": 3 if cuda is None else cuda, "cpu": 1 if cpu is None else cpu}
        return {"cuda": 0, "cpu": max(1, cores) if cpu is None else cpu}

    def board_recipes(self) -> tuple[Recipe, ...]:
        """The recipes; without any, one that carries every component type `count` times."""
        return self.recipes or (Recipe("board", tuple((c.name, c.count) for c in self.components)),)

    def board_layout(self, recipe: Recipe | None = None) -> list[ComponentType]:
        """The scan order of one board of `recipe` (the first by default): every part, placed once by the seed."""
        recipe = recipe or self.board_recipes()[0]
        by_name = {c.name: c for c in self.components}
        parts = [by_name[name] for name, n in recipe.parts for _ in range(n)]
        random.Random(_stable_seed(self.seed, recipe.name) if self.recipes else self.seed).shuffle(parts)
        return parts

    def board_plan(self) -> list[Recipe]:
        """The recipe of each board the stream passes through, in order (lots of `boards_per_lot`)."""
        recipes = self.board_recipes()
        plan: list[Recipe] = []
        parts = 0
        while parts < self.requests:
            recipe = recipes[(len(plan) // self.boards_per_lot) % len(recipes)]
            plan.append(recipe)
            parts += recipe.parts_per_board
        return plan

    def image(self, component: ComponentType, index: int) -> torch.Tensor:
        """A deterministic crop: the component's tint plus per-part noise."""
        g = torch.Generator().manual_seed(_stable_seed(self.seed, component.name))
        tint = torch.rand(3, 1, 1, generator=g)
        g.manual_seed(_stable_seed(self.seed, component.name, index))
        noise = torch.rand(3, self.image_size, self.image_size, generator=g)
        return (0.5 * tint + 0.5 * noise).contiguous()

    def sample_inputs(self, expert: str, n: int) -> torch.Tensor:
        """Crops like the ones `expert` will see (for calibrating its pass rate)."""
        comp = next(c for c in self.components if c.classifier == expert)
        return torch.stack([self.image(comp, -1 - i) for i in range(n)])

    def calibration_inputs(self, expert: str, n: int = 64) -> torch.Tensor | None:
        """Raw crops like the ones `expert` sees: a classifier's own type's, a detector's from the types routed to
        it in turn (an INT8 runtime calibrates on them); None for an expert no component routes to."""
        comps = [c for c in self.components if expert in (c.classifier, c.detector)]
        if not comps:
            return None
        return torch.stack([self.image(comps[i % len(comps)], -1 - i) for i in range(n)])

    def stream(self) -> list[Request]:
        """`requests` component requests in board-scan order, board after board, lot after lot."""
        layouts = {r.name: self.board_layout(r) for r in self.board_recipes()}
        out: list[Request] = []
        for recipe in self.board_plan():
            for comp in layouts[recipe.name]:
                if len(out) == self.requests:
                    return out
                i = len(out)
                out.append(Request(i, comp.name, comp.route, self.image(comp, i), arrival=0.0))
        return out

    def total_weight_bytes(self) -> int:
        cls_bytes = architecture_from_spec(self.classifier).weight_bytes()
        det = sum(architecture_from_spec(d.spec).weight_bytes() for d in self.detectors)
        return cls_bytes * len(self.components) + det

    def describe(self, total_weight_bytes: int | None = None) -> dict[str, Any]:
        total = self.total_weight_bytes() if total_weight_bytes is None else total_weight_bytes
        return {
            "name": self.name, "source": self.source, "seed": self.seed,
            "component_types": len(self.components), "detectors": [d.name for d in self.detectors],
            "parts_per_board": round(sum(r.parts_per_board for r in self.board_recipes())
                                     / len(self.board_recipes())),
            "recipes": len(self.board_recipes()), "boards_per_lot": self.boards_per_lot, "requests": self.requests,
            "arrival_interval_ms": self.arrival_interval_s * 1000, "classifier": self.classifier,
            "expert_pool_mb": round(self.expert_pool_bytes / MiB, 1),
            "experts_total_mb": round(total / MiB, 1),
            "executors": self.executors,
        }

    def zoo_fingerprint(self) -> str:
        """What the zoo's weights depend on: not the feed rate, the memory or the executors."""
        parts = {"seed": self.seed, "classifier": self.classifier, "detectors": self.detectors,
                 "components": self.components}
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _stable_seed(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "little") & (2**62 - 1)


# --- parsing ------------------------------------------------------------------------------------

_TOP = {"name", "seed", "classifier", "detectors", "components", "requests", "boards",
        "arrival_interval_ms", "memory", "executors"}


def parse_workload(text: str, source: str) -> Workload:
    doc = Fields(load_yaml(text, source), source)
    doc.unknown(_TOP)
    seed = doc.number("seed", 0, minimum=0, integer=True)
    cls_fields = doc.sub("classifier")
    classifier = _arch_spec(cls_fields, default_arch="resnet18")
    if architecture_from_spec(classifier).role != "classifier":
        raise cls_fields.error("arch", "the classifier must be a ResNet (e.g. resnet18)")
    detectors = _detectors(doc)
    components, recipes, lot = _components(doc, [d.name for d in detectors], seed)
    boards = recipes or (Recipe("board", tuple((c.name, c.count) for c in components)),)
    if doc.has("requests") and doc.has("boards"):
        raise doc.error("boards", "give either requests or boards, not both")
    if doc.has("boards"):
        n = doc.number("boards", minimum=1, integer=True)
        requests = sum(boards[(b // lot) % len(boards)].parts_per_board for b in range(n))
    else:
        requests = doc.number("requests", 1000, minimum=1, integer=True)
    mem = doc.sub("memory")
    mem.unknown({"device_mb", "expert_pool_mb", "cpu_pool_mb", "host_cache_mb", "batch_mb"})
    device = mem.number("device_mb", minimum=1) if mem.has("device_mb") else None
    if mem.has("expert_pool_mb"):
        pool = mem.number("expert_pool_mb", minimum=1)
        if device is not None and pool >= device:
            raise mem.error("expert_pool_mb", f"must be below device_mb ({device}) to leave room for batches")
    elif device is not None:
        pool = CASUAL_EXPERT_SHARE * device  # the paper's casual split until a plan says otherwise
    else:
        raise mem.error("device_mb", "give device_mb (experts + batches, the planner splits it) or expert_pool_mb")
    ex = doc.sub("executors")
    ex.unknown({"cpu", "cuda"})
    return Workload(
        name=doc.text("name", Path(source).stem),
        seed=seed,
        classifier=classifier,
        detectors=tuple(detectors),
        components=tuple(components),
        requests=requests,
        arrival_interval_s=doc.number("arrival_interval_ms", 4, minimum=0) / 1000,
        expert_pool_bytes=int(pool * MiB),
        cpu_pool_bytes=int(mem.number("cpu_pool_mb", pool, minimum=1) * MiB),
        host_cache_bytes=int(mem.number("host_cache_mb", 2048, minimum=0) * MiB),
        batch_bytes=int(mem.number("batch_mb", minimum=0) * MiB) if mem.has("batch_mb") else None,
        executors={k: ex.number(k, minimum=0, integer=True) if ex.has(k) else None for k in ("cpu", "cuda")},
        source=source,
        device_bytes=int(device * MiB) if device is not None else None,
        pool_fixed=mem.has("expert_pool_mb"),
        executors_fixed=doc.has("executors"),
        recipes=recipes,
        boards_per_lot=lot,
    )


def _arch_spec(f: Fields, default_arch: str | None = None) -> dict[str, Any]:
    f.unknown({"arch", "input_size", "classes", "threshold", "name"})
    spec = {"arch": f.text("arch", default_arch), "input_size": f.number("input_size", 64, minimum=8, integer=True)}
    if f.has("classes"):
        spec["classes"] = f.number("classes", minimum=1, integer=True)
    if f.has("threshold"):
        spec["threshold"] = f.number("threshold", minimum=0, maximum=1)
    try:
        architecture_from_spec(spec)
    except ValueError as exc:  # UnknownArchitecture, bad sizes
        raise f.error("arch", str(exc)) from None
    return spec


def _detectors(doc: Fields) -> list[DetectorSpec]:
    raw = doc.get("detectors") or []
    if not isinstance(raw, list):
        raise doc.error("detectors", "must be a list of {name, arch, input_size, classes}")
    out, seen = [], set()
    for i, item in enumerate(raw):
        f = Fields(item, doc.source, f"detectors[{i}]")
        name = f.text("name")
        if name in seen:
            raise f.error("name", f"detector {name!r} is defined twice")
        seen.add(name)
        spec = _arch_spec(f)
        if architecture_from_spec(spec).role != "detector":
            raise f.error("arch", "a detector must be a YOLO model yaml or local .pt")
        out.append(DetectorSpec(name, spec))
    return out


def _components(doc: Fields, detectors: list[str], seed: int) -> tuple[list[ComponentType], tuple[Recipe, ...], int]:
    raw = doc.get("components")
    if isinstance(raw, dict):
        return _generated(Fields(raw, doc.source, "components"), detectors, seed)
    if not isinstance(raw, list) or not raw:
        raise doc.error("components", "must be a list of component types or a {generate: N, ...} mapping")
    out, seen = [], set()
    for i, item in enumerate(raw):
        f = Fields(item, doc.source, f"components[{i}]")
        f.unknown({"name", "count", "detector", "pass_rate"})
        name = f.text("name")
        if name in seen:
            raise f.error("name", f"component type {name!r} is listed twice")
        seen.add(name)
        det = f.get("detector")
        if det is not None and det not in detectors:
            raise f.error("detector", f"unknown detector {det!r}; defined: {', '.join(detectors) or 'none'}")
        out.append(ComponentType(name, f.number("count", 1, minimum=1, integer=True), det,
                                 f.number("pass_rate", 0.9, minimum=0, maximum=1)))
    return out, (), 1


def _generated(f: Fields, detectors: list[str], seed: int) -> tuple[list[ComponentType], tuple[Recipe, ...], int]:
    """Zipf-skewed counts: a few types (resistors, capacitors) fill most of a board.

    With `recipes`, the family's types are spread over that many board
    variants of `types_per_recipe` types each, drawn by the same Zipf weight
    (common types recur on most variants, rare ones on few); each variant's
    board holds `parts_per_board` parts over its own types.
    """
    f.unknown({"generate", "parts_per_board", "zipf", "with_detector", "pass_rate", "recipes", "types_per_recipe",
               "boards_per_lot"})
    n = f.number("generate", minimum=1, integer=True)
    n_recipes = f.number("recipes", 0, minimum=0, integer=True)
    if not n_recipes and (f.has("types_per_recipe") or f.has("boards_per_lot")):
        raise f.error("recipes", "types_per_recipe and boards_per_lot need recipes: N (how many board variants)")
    per_recipe = f.number("types_per_recipe", n, minimum=1, maximum=n, integer=True) if n_recipes else n
    parts = f.number("parts_per_board", 3 * per_recipe, minimum=per_recipe, integer=True)
    lot = f.number("boards_per_lot", 1, minimum=1, integer=True)
    s = f.number("zipf", 1.0, minimum=0)
    share = f.number("with_detector", 0.5, minimum=0, maximum=1)
    pass_rate = f.number("pass_rate", 0.9, minimum=0, maximum=1)
    if share > 0 and not detectors:
        raise f.error("with_detector", "is above 0 but no detectors are defined")
    weights = [1.0 / (i + 1) ** s for i in range(n)]
    rng = random.Random(seed)
    with_det = set(rng.sample(range(n), round(n * share)))
    names = [f"C{i:03d}" for i in range(n)]

    def board(members: list[int]) -> list[int]:
        total = sum(weights[i] for i in members)
        return [max(1, round(parts * weights[i] / total)) for i in members]

    recipes: list[Recipe] = []
    totals = [0] * n
    if n_recipes:
        for r in range(n_recipes):
            pick = random.Random(_stable_seed(seed, "recipe", r))
            # weighted sampling without replacement (Efraimidis-Spirakis): a key of u ** (1 / w), the largest win
            keyed = sorted(range(n), key=lambda i: pick.random() ** (1.0 / weights[i]), reverse=True)
            members = sorted(keyed[:per_recipe])
            counts = board(members)
            recipes.append(Recipe(f"recipe-{r + 1}", tuple((names[i], c) for i, c in zip(members, counts))))
            for i, c in zip(members, counts):
                totals[i] += c
    else:
        totals = board(list(range(n)))
    out = []
    for i in range(n):
        det = detectors[i % len(detectors)] if i in with_det else None
        out.append(ComponentType(names[i], totals[i], det, pass_rate))
    return out, tuple(recipes), lot


def load_workload(path: Path | None = None) -> Workload:
    """A workload file, a shipped workload by name (paper-a1, ...), or the built-in default."""
    shipped = resources.files("inspector.workloads")
    if path is None:
        return parse_workload(shipped.joinpath("default.yaml").read_text(encoding="utf-8"), "<built-in default.yaml>")
    if not Path(path).exists() and shipped.joinpath(f"{path}.yaml").is_file():
        name = f"{path}.yaml"
        return parse_workload(shipped.joinpath(name).read_text(encoding="utf-8"), f"<built-in {name}>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read workload: {exc.strerror}") from None
    return parse_workload(text, str(path))


