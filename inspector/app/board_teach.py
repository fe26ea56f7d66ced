"""`inspector board teach`: a plant's imported board taught from photos of good boards, the way AOI is programmed.

1. Every golden photo is registered to the CAD (app/board_photos.py: picked points, else the board's outline, the
   later ones refined on the first) and warped into the rule set's frame; an overlay PNG of every part's window on
   the photo shows a person where the CAD landed. The golden board the line compares with is the first photo's
   board, or the per-pixel median of three or more (one board's dust and glare do not become the reference).
2. Every inspected part's crop is cut from every golden board, as the line cuts it. Good examples are those crops
   as another photo would show them (made_defects.photo_variant); defects are made from the same real crops
   (inspector/board/made_defects.py: missing as bare pads in the photo's own colours from the CAD's pads, shifted,
   rotated, tombstoned, reversed where the part is polarised, bridged) and any real defect crops given.
3. One golden-comparison classifier (it reads each crop beside the golden board's same window: ingest/golden.py)
   is taught from them with the trainer for labelled real data (`zoo train --new`, training/labelled/teach.py),
   split by part so the held-out figures come from parts it never saw (every type of two or more parts has one
   held out and one trained on: `parts_held_out`). A golden comparison is what lets one board
   teach dozens of types at once: what it learns is "what changed", not what each package looks like.
4. Each component type gets its own expert entry (`cls-<type>`): the shared weights, or with `experts` anomaly an
   expert of its good crops alone (app/board_anomaly.py). Each serves its own threshold, the log-odds of good
   below which a part is called: the teaching's (its false-call budget) or, with an `escape_rate`, the one letting
   at most that share of the type's held-out made defects pass (pooled over all types where a type has too few).
5. Beside the experts, a presence check (inspector/board/presence.py): where the golden board shows a part's body
   standing out from the solder mask in colour, a live crop whose body shows the mask's colour instead is missing.
   Its least share is set from the good crops at the false-call budget and written as each type's `body_contrast:`;
   the validation table counts its calls with the experts'.
6. The taught rule set (the imported one, with `golden:`, `photo_registration:` on the board geometry, and without
   the render-trained polarity detector: a reversed part is one of the comparison's own classes) runs unchanged on
   the line with that zoo, raw photos included.

What it cannot know: made defects are not real ones; the validation table says how the expert does on made defects
of parts it never saw and on those parts' good crops, and `board check` on photos of other boards says the rest.
"""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import cv2
import numpy as np
import yaml

from ..board.geometry import BoardGeometry, PxRect, geometry_path
from ..board.golden_marks import GoldenMarks, golden_marks
from ..board.made_defects import made_defects, photo_variant
from ..board.photo_camera import PhotoCamera, taught_camera
from ..board.presence import PresenceTaught, teach_presence
from ..board.provenance import carried
from ..experts.zoo import MANIFEST, ExpertEntry, Zoo
from ..ingest.crops import crop_part, crop_window
from ..ingest.registration import map_points
from ..routing.rules import RuleSet, load_rules
from ..runtime.diskio import write_atomically
from ..training.labelled.evaluate import served_module
from ..training.labelled.folder import IMAGE_SUFFIXES, identity_of, stratified_heldout
from ..training.labelled.metrics import logodds
from ..training.labelled.teach import TAUGHT, TeachPlan, teach
from ..training.labelled.trainer import FALSE_CALL_BUDGET, Crops, logits_of
from .board_anomaly import (
    anomaly_state,
    distances,
    features,
    threshold_of,
    unseen_distances,
    whitening,
    write_anomaly_expert,
)
from .board_costs import HeldOut, percent, write_heldout
from .board_photos import PhotoBoard, boards_of, overlay, placed, points_path, read_photo, registration_inputs

GOOD = "good"
MIN_TYPE_DEFECTS = 10  # held-out defects a type needs for a threshold of its own
MEDIAN_FROM = 3  # golden boards from which the reference is their per-pixel median


@dataclass
class BoardTeachPlan:
    rules: Path
    goldens: list[Path]
    work: Path
    out: Path  # the taught rule set
    defects: Path | None = None  # real labelled crops: DIR/<class>/<REF>__*.png (good/: alternates found good)
    escape_rate: float | None = None  # None: every type serves the teaching's threshold (its false-call budget)
    false_call_budget: float = FALSE_CALL_BUDGET  # the teaching's own threshold (the shared expert's)
    heldout_share: float = 0.25
    good_variants: int = 16
    defect_variants: int = 3
    epochs: int = 30
    patience: int = 6
    seed: int = 0
    depth: int = 10
    experts: str = "classifier"  # each type served by the shared classifier, or by an anomaly expert of good crops
    comparison: str = "composite"  # the golden comparison's kind (experts/base.py REFERENCES), or none: the live crop
    presence: bool = True  # serve the presence check (board/presence.py) beside the experts where it can tell
    every_board: bool = False  # every board a golden photo shows (a tray of golden boards), not only the first


@dataclass
class TypeCheck:
    type: str
    parts: int
    heldout_parts: int
    good: int
    defects: int
    threshold: float
    recall: float
    false_calls: float
    pooled: bool  # the threshold came from every type's held-out defects (too few of this type's)


@dataclass
class KindCheck:
    """How many of the held-out parts' defects of one kind (a made one, or a class of real crops) were called,
    each at its type's threshold: what a plant engineer needs to know the teaching catches, beside its types."""
    kind: str
    defects: int
    called: int

    @property
    def recall(self) -> float:
        return self.called / self.defects  # HeldOut.by_kind lists only kinds with held-out defects


@dataclass
class BoardTaught:
    plan: BoardTeachPlan
    expert: str
    zoo: Path
    goldens: list[dict]
    overlays: list[str]
    counts: dict[str, int]
    checks: list[TypeCheck]
    pooled: TypeCheck
    presence: PresenceTaught | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    kinds: list[KindCheck] = field(default_factory=list)
    epoch_chosen: str = ""  # what chose the epoch (teach.py): training parts set aside, or the whole course run
    epoch_set_aside: bool = True  # training parts chose it (else the last epoch was kept)
    camera: dict | None = None  # the camera settings the golden photos said, which the taught set asks (None: its own)

    def to_json(self) -> dict:
        return {"rules": str(self.plan.out), "from": str(self.plan.rules), "zoo": str(self.zoo),
                "expert": self.expert, "escape_rate": self.plan.escape_rate, "goldens": self.goldens,
                "overlays": self.overlays, "crops": self.counts, "types": [asdict(c) for c in self.checks],
                "all": asdict(self.pooled),
                "kinds": [{**asdict(k), "recall": k.recall} for k in self.kinds],  # kinds with a held-out defect
                "presence": self.presence.to_json() if self.presence else None,
                "seconds": self.seconds, "epoch_chosen": self.epoch_chosen, "camera": self.camera}


def expert_name(recipe: str) -> str:
    return f"cls-golden-{recipe}"


def golden_boards(plan: BoardTeachPlan, rules: RuleSet, geometry: BoardGeometry | None, points: list | None,
                  say: Callable[[str], None]) -> tuple[list[PhotoBoard], list[str]]:
    """Every golden photo's board registered and warped (the first registered board of each photo, or with
    `every_board` all of them: a tray of golden boards), and the overlay PNGs written. The first golden board is the
    reference the later ones are refined on."""
    picked = points_path(plan.rules).name
    if geometry is None and points is None:
        raise ValueError(f"{plan.rules} has no board geometry beside it ({plan.rules.stem}.board.json, written by "
                         f"`board import`) and no picked points ({picked}): import the board again, or pick 3 "
                         "points on the golden photo and write them there")
    boards, overlays, reference = [], [], None
    for path in plan.goldens:
        photo = read_photo(path)
        found = list(boards_of(photo, path, rules, geometry, points, reference, light=plan.comparison != "none"))
        registered = [b for b in found if b.registration is not None]
        drawn = overlay(photo, found, rules, plan.work / "overlays" / f"{path.stem}.png")
        overlays.append(str(drawn))
        if not registered:
            why = "; ".join(f"#{b.index}: {b.reason}" for b in found)
            raise ValueError(f"golden photo {path} did not register ({why}); see {drawn}. Pick 3 points on it "
                             f"({picked}) or photograph the board whole against a plain background")
        if reference is None and plan.every_board and len(registered) > 1:  # the photo's other boards refined on
            reference = registered[0].image                                    # its first, as later photos' are
            px_per_mm = geometry.px_per_mm if geometry is not None else 1.0
            others = []
            for b in registered[1:]:
                reg, image = placed(photo, b.registration, rules, px_per_mm, reference, plan.comparison != "none")
                others.append(replace(b, registration=reg, image=image))
            registered = registered[:1] + others
        for board in registered if plan.every_board else registered[:1]:
            reg = board.registration
            which = f" #{board.index}" if plan.every_board else ""
            say(f"{path.name}{which}: registered on its {reg.method} (residual {reg.residual_px:.1f} px, "
                f"{reg.residual_mm:.2f} mm){'; ' + reg.note if reg.note else ''}; overlay {drawn}")
            boards.append(board)
        if reference is None:
            reference = registered[0].image
    return boards, overlays


def reference_board(boards: list[PhotoBoard]) -> np.ndarray:
    if len(boards) >= MEDIAN_FROM:
        return np.median(np.stack([b.image for b in boards]), axis=0).astype(np.uint8)
    return boards[0].image


def pads_in_crop(pads: list[PxRect], matrix: np.ndarray) -> list[PxRect]:
    """The part's pads (image frame px) in its crop's pixels (`matrix`: crop px -> image px)."""
    back = np.linalg.inv(matrix)
    out = []
    for x0, y0, x1, y1 in pads:
        xy = map_points(back, np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]]))
        out.append((xy[:, 0].min(), xy[:, 1].min(), xy[:, 0].max() + 1, xy[:, 1].max() + 1))
    return out


@dataclass
class FolderCrops:
    """Every crop of the labelled folder teaching wrote, read once: its golden window, label (0 good, 1 a defect),
    type, part, side of the split and class (good, or the defect's kind)."""
    images: list[np.ndarray]
    refs: list[np.ndarray]
    types: np.ndarray
    idents: list[str]
    heldout: np.ndarray
    kinds: np.ndarray

    @property
    def labels(self) -> np.ndarray:
        return (self.kinds != GOOD).astype(np.int64)

    def subset(self, mask: np.ndarray) -> Crops:
        idx = np.flatnonzero(mask)
        return Crops([self.images[i] for i in idx], self.labels[idx], [self.refs[i] for i in idx],
                     [self.idents[i] for i in idx])


def parts_held_out(rules: RuleSet, share: float) -> frozenset[str]:
    """The parts validation holds out: about `share` of them, and of every type with two or more parts at least
    one held out and one trained on, so every such type gets its row in the validation table (folder.py)."""
    return stratified_heldout({p.ref: c.name for c, p in rules.placements()}, share)


def write_crops(plan: BoardTeachPlan, rules: RuleSet, geometry: BoardGeometry | None, boards: list[PhotoBoard],
                golden: np.ndarray, folder: Path, mirror: Path,
                held: frozenset[str]) -> tuple[FolderCrops, dict[str, int]]:
    """The labelled folder (class/REF__board_variant.png) the trainer reads and its golden mirror, the same crops
    kept in memory for validation, and the counts by class."""
    rng = np.random.default_rng(plan.seed)
    counts: dict[str, int] = {}
    margin = rules.crop_margin
    type_of = {p.ref: c.name for c, p in rules.placements()}
    images, refs, types, idents, kinds = [], [], [], [], []

    def put(label: str, name: str, image: np.ndarray, reference: np.ndarray) -> None:
        for root, im in ((folder, image), (mirror, reference)):
            (root / label).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / label / name), im)
        counts[label] = counts.get(label, 0) + 1
        ref = identity_of(Path(name))
        images.append(image)
        refs.append(reference)
        types.append(type_of[ref])
        idents.append(ref)
        kinds.append(label)

    for comp, place in rules.placements():
        ref_crop = crop_part(golden, comp, place, margin)
        matrix, _ = crop_window(comp, place, margin)
        pads = pads_in_crop(geometry.pads.get(place.ref, []), matrix) if geometry is not None else []
        for k, board in enumerate(boards):
            crop = crop_part(board.image, comp, place, margin)
            put(GOOD, f"{place.ref}__b{k}_0.png", crop, ref_crop)
            for v in range(1, plan.good_variants):
                put(GOOD, f"{place.ref}__b{k}_{v}.png", photo_variant(crop, rng), ref_crop)
            for v in range(plan.defect_variants):  # the same photos' variation: a defect is not told by its light
                for kind, image in made_defects(crop, pads, margin, comp.detector is not None, rng).items():
                    put(kind, f"{place.ref}__b{k}_{v}.png", photo_variant(image, rng), ref_crop)
    if plan.defects is not None:
        add_real_crops(plan.defects, rules, golden, put, plan.good_variants, rng)
    heldout = np.array([i in held for i in idents])
    return FolderCrops(images, refs, np.array(types), idents, heldout, np.array(kinds)), counts


def add_real_crops(root: Path, rules: RuleSet, golden: np.ndarray, put: Callable, variants: int = 1,
                   rng: np.random.Generator | None = None) -> None:
    """Real labelled crops, DIR/<class>/<REF>__anything.png, each beside its part's golden crop: a defect class's,
    and `good/` for good parts the golden boards do not show (a second source's part, another make's marking: what
    `board check` or the line flagged and an engineer found good). A good crop is taught as a golden crop is, with
    `variants` - 1 more as another photo would show it; a golden comparison flags an alternate until it is."""
    place = {p.ref: (c, p) for c, p in rules.placements()}
    rng = rng if rng is not None else np.random.default_rng(0)
    if not root.is_dir():
        raise ValueError(f"--defects {root} is not a folder (DIR/<class>/<REF>__name.png)")
    for label_dir in sorted(d for d in root.iterdir() if d.is_dir()):
        for path in sorted(p for p in label_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES):
            ref = identity_of(path)
            if ref not in place:
                raise ValueError(f"{path}: no inspected part {ref!r} in {rules.source} (name a defect crop "
                                 "REF__anything, REF the part's reference)")
            comp, p = place[ref]
            reference = crop_part(golden, comp, p, rules.crop_margin)
            image = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if image is None:
                raise ValueError(f"{path} is not an image OpenCV can read")
            if image.shape != reference.shape:
                raise ValueError(f"{path} is {image.shape[1]}x{image.shape[0]} px but {ref}'s crop is "
                                 f"{reference.shape[1]}x{reference.shape[0]}: cut it as the line does "
                                 "(`inspector dataset export`)")
            put(label_dir.name, f"{ref}__real_{path.stem}.png", image, reference)
            for v in range(1, variants if label_dir.name == GOOD else 1):
                put(GOOD, f"{ref}__real_{path.stem}_{v}.png", photo_variant(image, rng), reference)


def classifier_scores(zoo: Zoo, expert: str, crops: FolderCrops) -> np.ndarray:
    """The shared classifier's log-odds of good for the held-out crops."""
    arch, model = served_module(zoo, expert)
    held = crops.subset(crops.heldout)
    if arch.reference is None:
        held.references = None
    logits, _ = logits_of(arch, model, held)
    return logodds(logits)


def anomaly_scores(plan: BoardTeachPlan, rules: RuleSet, zoo: Zoo, expert: str, crops: FolderCrops,
                   say: Callable[[str], None]) -> tuple[np.ndarray, list[ExpertEntry]]:
    """Each type's expert from its good crops alone (app/board_anomaly.py), its weights written to the zoo as
    cls-<type>: (the held-out crops' log-odds of good under their type's expert, the experts' entries)."""
    arch, model = served_module(zoo, expert)
    feats = features(arch, model, crops.subset(np.ones(len(crops.idents), bool)))
    parts = np.array(crops.idents)
    fits, ratios = {}, []
    for comp in rules.components:
        good = (crops.types == comp.name) & (crops.labels == 0)
        fit = good & ~crops.heldout if (good & ~crops.heldout).any() else good  # a type all held out: fit on all
        w, b = whitening(feats[fit])
        seen = threshold_of(distances(w, b, feats[fit]), plan.false_call_budget)
        unseen = unseen_distances(feats[fit], parts[fit])
        at = threshold_of(unseen, plan.false_call_budget) if unseen is not None else None
        if at is not None:
            ratios.append(at[0] / max(seen[0], 1e-9))
        fits[comp.name] = (fit, w, b, seen, at)
    ratio = float(np.median(ratios)) if ratios else 1.0
    scores = np.zeros(len(crops.idents))
    entries = []
    for comp in rules.components:
        fit, w, b, seen, at = fits[comp.name]
        tau, spread = at if at is not None else (seen[0] * ratio, seen[1] * ratio)  # one part: the board's ratio
        mine = crops.types == comp.name
        scores[mine] = (tau - distances(w, b, feats[mine])) / spread
        entries.append(write_anomaly_expert(plan.work / "zoo", f"cls-{comp.name}", arch,
                                            anomaly_state(model, w, b, tau, spread), int(fit.sum()), plan.seed))
    say(f"anomaly experts: {len(entries)} types, each from its good crops alone (unseen parts' distances "
        f"{ratio:.2f}x the fitted ones')")
    return scores[crops.heldout], entries


def validate(plan: BoardTeachPlan, rules: RuleSet, crops: FolderCrops, score: np.ndarray,
             taught_at: float, called: np.ndarray | None = None) -> tuple[list[TypeCheck], TypeCheck]:
    """Per type: the held-out parts' log-odds of good (`score`), a threshold (the teaching's, `taught_at`, or one for
    the escape rate), and the recall and false calls it gives, counting as called too the crops `called` marks
    (the presence check served beside the experts)."""
    truth, kinds = crops.labels[crops.heldout], crops.types[crops.heldout]
    idents = np.array(crops.idents)[crops.heldout]
    called = called[crops.heldout] if called is not None else np.zeros(len(truth), bool)

    def check(name: str, parts: int, mine: np.ndarray, pooled: TypeCheck | None) -> TypeCheck:
        good, bad = score[mine & (truth == 0)], score[mine & (truth == 1)]
        good_called, bad_called = called[mine & (truth == 0)], called[mine & (truth == 1)]
        own = plan.escape_rate is None or pooled is None or len(bad) >= MIN_TYPE_DEFECTS
        if plan.escape_rate is None:
            threshold = taught_at
        else:
            threshold = _escape_threshold(bad, plan.escape_rate) if own else pooled.threshold
        return TypeCheck(name, parts, len(set(idents[mine])), len(good), len(bad), threshold,
                         _share((bad < threshold) | bad_called), _share((good < threshold) | good_called), not own)

    pooled = check("all types", len(rules.placements()), np.ones(len(truth), bool), None)
    return [check(c.name, len(c.placements), kinds == c.name, pooled) for c in rules.components], pooled


def _escape_threshold(defects: np.ndarray, escape_rate: float) -> float:
    """The least log-odds threshold letting at most `escape_rate` of `defects` pass (a part passes at or above
    it): just above the defect that would otherwise be one escape too many."""
    d = np.sort(defects.astype(np.float64))[::-1]
    allowed = int(np.floor(escape_rate * len(d)))
    return float(d[allowed] + 1e-3) if allowed < len(d) else float(d[-1])


def _share(flags: np.ndarray) -> float:
    return float(flags.mean()) if flags.size else float("nan")


def serve_per_type(zoo_root: Path, expert: str, checks: list[TypeCheck], own: list[ExpertEntry]) -> Zoo:
    """Each type's own expert entry at the type's threshold (its good_margin): its `own` weights (anomaly experts),
    else the shared classifier's, its teaching's version naming the one type it serves (a retraining scores it on
    that type's parts first, retrain_taught.py)."""
    doc = json.loads((zoo_root / MANIFEST).read_text(encoding="utf-8"))
    shared = next(e for e in doc["experts"] if e["name"] == expert)
    mine = {e.name: asdict(e) for e in own}
    for c in checks:
        name = f"cls-{c.type}"
        base = mine.get(name, {**shared, "name": name})
        versions = [{**v, "component_type": c.type} if v.get("origin") == TAUGHT else v
                    for v in base.get("versions") or []]
        doc["experts"].append({**base, "spec": {**base["spec"], "good_margin": c.threshold}, "versions": versions})
    write_atomically(zoo_root / MANIFEST, json.dumps(doc, indent=1).encode())
    return Zoo.load(zoo_root)


def taught_rules_text(rules: RuleSet, golden: Path, spec: dict, out: Path, photo: dict[str, str],
                      presence: PresenceTaught | None = None, marks: GoldenMarks | None = None,
                      camera: PhotoCamera | None = None) -> str:
    """The imported rule set with the golden board, the taught classifier (polarity left to the comparison), the
    presence check's least share on the types it can tell for and photo registration on the files in `photo`
    (geometry, points: beside `out`): the line finds the board in a photo of any size as teaching did, and a board
    with fiducials is then refined on them (a photo taught from is never one of the recipe's pixels), each mark where
    the golden board has it (`marks`: board/golden_marks.py), and the camera settings the golden photos said they
    were taken with (`camera`: board/photo_camera.py)."""
    least = {} if presence is None or presence.least is None else \
        {name: round(presence.least, 4) for name in presence.types}
    doc = taught_doc(rules.text, golden, out, {"arch": f"resnet{spec.get('depth', 10)}",
                                               "input_size": int(spec["input_size"])},
                     photo, least, None if marks is None else marks.at)
    head = (f"# taught by `inspector board teach` from {rules.source}: every type's expert compares its crop with "
            "the golden board's (the zoo beside it)\n" + carried(rules.text))
    if camera is not None and camera.camera is not None:
        doc["camera"] = camera.camera
        head += f"# camera: as golden photo {camera.source} was taken\n"
    return head + yaml.safe_dump(doc, sort_keys=False, width=120)


def taught_doc(text: str, golden: Path, out: Path, classifier: dict, photo: dict[str, str],
               body_contrast: dict[str, float], marks: dict[str, tuple[int, int]] | None) -> dict:
    """An imported rule set's `text` made a taught one's document (written to `out`): `golden:` (relative to `out`
    where it lies beside it), the taught `classifier`, no render-trained detectors, each type in `body_contrast` its
    presence check's least share, `photo:` registration's files and, given `marks` (mark -> where the golden board
    has it; {}: none found), the fiducials the golden board shows, there. Teaching and a revision of a taught board
    (board_revise.py) both make theirs so."""
    doc = yaml.safe_load(text)
    doc["golden"] = str(golden.resolve().relative_to(out.parent.resolve())) \
        if golden.resolve().is_relative_to(out.parent.resolve()) else str(golden.resolve())
    doc["classifier"] = dict(classifier)
    doc.pop("detectors", None)
    for name, comp in doc.get("components", {}).items():
        comp.pop("detector", None)
        comp.pop("input_size", None)  # a starter expert's: every type is served the taught expert, at its own input
        if str(name) in body_contrast:
            comp["body_contrast"] = body_contrast[str(name)]
    if photo:
        doc["photo_registration"] = photo
    if marks is not None and "fiducials" in doc:
        if not marks:
            del doc["fiducials"]
        else:
            listed = doc["fiducials"]["marks"]
            for name in [n for n in listed if str(n) not in marks]:
                del listed[name]
            for name, body in listed.items():
                body["at"] = list(marks[str(name)])
    return doc


def teach_board(plan: BoardTeachPlan, say: Callable[[str], None] = lambda _m: None) -> BoardTaught:
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    rules = load_rules(plan.rules)
    if rules.compare is not None:
        raise ValueError(f"{plan.rules} is a bare-board rule set: it is taught from labelled pairs, not golden "
                         "photos (inspector accuracy --dataset)")
    if not plan.goldens:
        raise ValueError("give at least one golden photo (--golden IMG)")
    zoo_root = plan.work / "zoo"
    if (zoo_root / MANIFEST).exists():
        raise ValueError(f"{zoo_root} already holds a taught zoo (its results name its experts): teach into a new "
                         "--work folder")
    plan.work.mkdir(parents=True, exist_ok=True)
    geometry, points = registration_inputs(plan.rules)
    camera = taught_camera(rules, plan.goldens)  # before anything is trained: a damaged photo's text says so now
    for note in camera.notes:
        say(note)
    boards, overlays = golden_boards(plan, rules, geometry, points, say)
    golden = reference_board(boards)
    marks = None
    if rules.fiducials is not None:
        marks = golden_marks(golden, rules.fiducials)
        say(marks.note)
    golden_path = plan.out.with_name(plan.out.stem + ".golden.png")
    golden_path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(golden_path), golden)
    seconds["register"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    folder, mirror = plan.work / "crops", plan.work / "golden-crops"
    for d in (folder, mirror):
        shutil.rmtree(d, ignore_errors=True)
    held = parts_held_out(rules, plan.heldout_share)
    if not held:
        raise ValueError("no part was held out to validate on: every type has one part and none fell in the held-out "
                         f"share ({plan.heldout_share:g}); raise --heldout")
    crops, counts = write_crops(plan, rules, geometry, boards, golden, folder, mirror, held)
    say(f"crops: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))} from {len(boards)} golden board(s)")
    seconds["crops"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    expert = expert_name(rules.recipe)
    taught = teach(TeachPlan(expert, folder, zoo_root, good=GOOD, depth=plan.depth, heldout_share=plan.heldout_share,
                             heldout=held, kinds={p.ref: c.name for c, p in rules.placements()},
                             epochs=plan.epochs, patience=plan.patience, seed=plan.seed,
                             false_call_budget=plan.false_call_budget,
                             reference=None if plan.comparison == "none" else mirror,
                             reference_kind=plan.comparison), say)
    say(taught.summary())
    seconds["train"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    zoo = Zoo.load(zoo_root)
    own: list[ExpertEntry] = []
    presence: PresenceTaught | None = None
    called = None
    if plan.presence:
        presence, called = teach_presence(rules, crops.images, crops.refs, crops.types, crops.idents, crops.labels,
                                          crops.heldout, plan.false_call_budget)
        say(presence.summary())
    if plan.experts == "anomaly":
        score, own = anomaly_scores(plan, rules, zoo, expert, crops, say)
        checks, pooled = validate(plan, rules, crops, score, 0.0, called)
    else:
        score = classifier_scores(zoo, expert, crops)
        checks, pooled = validate(plan, rules, crops, score, float(zoo.entries[expert].spec["good_margin"]), called)
    served = serve_per_type(zoo_root, expert, checks, own)
    held_out = HeldOut(crops.types[crops.heldout], crops.kinds[crops.heldout], score,
                       called[crops.heldout] if called is not None else np.zeros(int(crops.heldout.sum()), bool),
                       {c.type: served.entries[f"cls-{c.type}"].weights_sha256 for c in checks},
                       {c.type: float(c.threshold) for c in checks})
    kinds = [KindCheck(k, n, hit) for k, n, hit in held_out.by_kind({c.type: c.threshold for c in checks})]
    write_heldout(zoo_root, held_out)
    copied = {}
    for key, source, target in (("geometry", geometry_path(plan.rules), geometry_path(plan.out)),
                                ("points", points_path(plan.rules), points_path(plan.out))):
        if source.is_file():
            if source.resolve() != target.resolve():
                shutil.copyfile(source, target)  # the line registers its photos on them, beside the taught set
            copied[key] = target.name
    plan.out.write_text(taught_rules_text(rules, golden_path, zoo.entries[expert].spec, plan.out, copied, presence,
                                          marks, camera), encoding="utf-8")
    load_rules(plan.out)  # what was written loads
    seconds["validate"] = time.perf_counter() - t3
    seconds["total"] = time.perf_counter() - t0
    goldens = [{"photo": str(b.photo), "board": b.index, **b.registration.to_json()} for b in boards]
    return BoardTaught(plan, expert, zoo_root, goldens, overlays, counts, checks, pooled, presence, seconds, kinds,
                       taught.epoch_chosen, taught.epoch_set_aside, camera.camera)


def format_checks(taught: BoardTaught) -> str:
    e = taught.plan.escape_rate
    how = (f"each type's threshold letting at most {100 * e:.1f}% of its made defects pass" if e is not None else
           f"every type at the teaching's threshold (false calls within {100 * taught.plan.false_call_budget:.1f}% "
           "of the held-out good crops; --escape-rate E sets one a type instead)")
    chose = ("the epoch was chosen on training parts set aside" if taught.epoch_set_aside else
             "the whole course was run, its last epoch kept")
    lines = [f"validation on held-out parts (never trained on; they chose the threshold, {chose}), {how}:",
             f"{'type':<34}{'parts':>6}{'held':>6}{'good':>6}{'defects':>8}{'threshold':>10}{'recall':>9}"
             f"{'false calls':>12}"]
    for c in [*taught.checks, taught.pooled]:
        pooled = " *" if c.pooled else ""
        lines.append(f"{c.type:<34}{c.parts:>6}{c.heldout_parts:>6}{c.good:>6}{c.defects:>8}{c.threshold:>10.2f}"
                     f"{percent(c.recall):>9}{percent(c.false_calls):>12}{pooled}")
    if taught.presence is not None:
        least = taught.presence.least
        lines.append("recall and false calls count the presence check's calls too" +
                     (f" (a part keeping under {least:.2f} of its golden body's contrast is missing)"
                      if least is not None else " (not served: too few good crops to set it)"))
    if taught.kinds:
        lines.append("held-out defects called, by kind (each at its type's threshold): " + ", ".join(
            f"{k.kind} {k.called}/{k.defects} ({percent(k.recall)})" for k in taught.kinds))
    if any(c.pooled for c in taught.checks):
        lines.append(f"* fewer than {MIN_TYPE_DEFECTS} held-out made defects of its own: the threshold of all types "
                     "together serves it (its own figures, where it has any held-out crops, at that threshold)")
    return "\n".join(lines)


