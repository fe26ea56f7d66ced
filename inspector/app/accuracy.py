"""`inspector accuracy`: how the line does on held-out boards under a suite of camera conditions.

Each condition renders the same number of held-out boards (a seed the demo zoo's
training never uses) with an exact number of defects, shows them to a camera
model (ingest/camera_model.py), and runs them through the real line: rules,
registration, engine, verdicts and a results database. The line's verdicts are
scored part by part against the truth the renderer knows. Boards that fail
registration get one board-level error and are counted apart (their parts have
no verdicts to score).
"""
from __future__ import annotations

import contextlib
import itertools
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..camera.correction import CorrectedSource
from ..camera.targets import needs_correction, synthetic_correction
from ..errors import UnknownChoice
from ..experts.zoo import Zoo
from ..ingest.camera_model import CameraModel, describe
from ..ingest.sources import Source, SyntheticSource
from ..ingest.synthetic import DEFECTS
from ..results.store import ResultStore, sqlite_url
from ..routing.rules import RuleSet
from .conditions import CONDITIONS, HELD_OUT_SEED, PLACEMENT, UNCORRECTED
from .detection import Detection
from .line import LineConfig
from .run import run_line
from .service import ServiceConfig

MIN_GOOD, MIN_DEFECTS = 2000, 100  # per condition at the default number of boards
DEFECT_SHARE = 0.05


@dataclass
class ConditionResult:
    condition: str
    camera: str
    boards: int = 0
    detection: Detection = field(default_factory=Detection)  # part verdicts against the truth; boards refused
    residual_mean_px: float | None = None
    residual_max_px: float | None = None
    stored: int = 0  # boards the results database holds afterwards
    corrected: bool = False  # frames went through the camera's correction (calibrated lens and tilt, flat field)
    parts_per_s: float = 0.0
    seconds: float = 0.0

    @property
    def parts(self) -> int:
        return self.detection.good + self.detection.defective

    def to_json(self) -> dict:
        d = self.detection
        out = {k: v for k, v in asdict(self).items() if k != "detection"}
        return {**out, "parts": self.parts, "defects": d.defective, "caught": d.caught, "good": d.good,
                "false_alarms": d.false_alarms, "by_class": d.by_class, "false_alarms_by_type": d.false_by_type,
                "rejected": d.rejected_boards,
                "recall": d.recall, "false_alarm_rate": d.false_alarm_rate, "false_alarm_ppm": d.false_alarm_rate * 1e6,
                "serials": d.serials, "serials_read": d.serials_read, "serial_misreads": d.misreads,
                "serial_read_rate": d.read_rate}


def default_boards(rules: RuleSet, share: float = DEFECT_SHARE) -> int:
    """Boards for at least MIN_GOOD good parts and MIN_DEFECTS defects at `share` defects per board."""
    parts = len(rules.placements())
    k = defects_per_board(rules, share)
    return max(math.ceil(MIN_GOOD / max(1, parts - k)), math.ceil(MIN_DEFECTS / k))


def defects_per_board(rules: RuleSet, share: float = DEFECT_SHARE) -> int:
    return max(1, round(share * len(rules.placements())))


def exact_defects(rules: RuleSet, share: float = DEFECT_SHARE) -> Callable[[int, np.random.Generator], dict[str, str]]:
    """Board i gets exactly `share` of its parts defective, the classes taken in turn (polarity on polarized parts)."""
    k = defects_per_board(rules, share)
    parts = rules.placements()
    turn = itertools.count()

    def forced(i: int, rng: np.random.Generator) -> dict[str, str]:
        out = {}
        for j in rng.choice(len(parts), k, replace=False):
            comp, place = parts[int(j)]
            classes = [d for d in DEFECTS if d != "polarity" or comp.polarized]
            out[place.ref] = classes[next(turn) % len(classes)]
        return {p.ref: out.get(p.ref, "ok") for _, p in parts}  # "ok" too: no random defects besides these
    return forced


def run_condition(name: str, camera: CameraModel, rules: RuleSet, zoo: Zoo, models_dir: Path, boards: int,
                  config: LineConfig, seed: int = HELD_OUT_SEED, share: float = DEFECT_SHARE,
                  say: Callable[[str], None] = lambda _m: None, data_dir: Path | None = None,
                  correct: bool = True) -> ConditionResult:
    """One condition through the real line into a SQLite database (under `data_dir`, else a throwaway one),
    scored against the truth. A camera that needs it is calibrated first, as at a line's install (`correct`)."""
    source, corrected = corrected_source(rules, camera, boards, seed, correct, share)
    out = ConditionResult(name, describe(camera), corrected=corrected)
    with contextlib.ExitStack() as stack:
        data = Path(data_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="inspector-accuracy-")))
        store = ResultStore(sqlite_url(data / "results.sqlite"))
        service, seconds = run_line(rules, zoo, models_dir, source, ServiceConfig(config, keep_crops="none"), store,
                                    data, say, every=10**9)
        out.stored = store.count()[0]
        store.close()
    stats = service.line.stats
    out.boards, out.seconds, out.detection = stats.boards, seconds, service.detection
    out.residual_mean_px = stats.residual_px_mean
    out.residual_max_px = stats.residual_px_max if stats.registered else None
    out.parts_per_s = stats.parts / max(seconds, 1e-9)
    return out


def unregistered_move(rules: RuleSet, camera: CameraModel, config: LineConfig) -> str:
    """Why a condition's false alarms would measure the cut, not the experts: the camera moves the board and
    nothing registers it (no fiducials, no photo registration, or registration off); "" when something does."""
    moves = camera.shift_px or camera.rotation_deg or camera.scale or any(camera.tilt_deg)
    if not moves or (config.register and (rules.fiducials is not None or rules.photo is not None)):
        return ""
    why = "registration is off" if not config.register else f"rule set {rules.recipe} has no fiducials and no " \
        "photo registration"
    return (f"the camera moves the board and {why}, so every board is cut at its nominal place: its false alarms "
            "measure that, not the experts (`inspector board golden --rules R` aligns a board known from its CAD "
            "on a drawn golden board)")


def condition_source(rules: RuleSet, camera: CameraModel, boards: int, seed: int = HELD_OUT_SEED,
                     share: float = DEFECT_SHARE) -> SyntheticSource:
    """The held-out boards of a condition; the same arguments render the same boards."""
    return SyntheticSource(rules, boards, seed=seed, camera=camera, forced=exact_defects(rules, share))


def corrected_source(rules: RuleSet, camera: CameraModel, boards: int, seed: int = HELD_OUT_SEED,
                     correct: bool = True, share: float = DEFECT_SHARE) -> tuple[Source, bool]:
    """A condition's held-out boards as the line sees them: through the camera's correction (calibrated first, as at
    a line's install) where the camera needs one and `correct`; and whether they went through it."""
    source = condition_source(rules, camera, boards, seed, share)
    if correct and needs_correction(camera):
        return CorrectedSource(source, synthetic_correction(camera, rules.board_size, seed)), True
    return source, False


def run_suite(rules: RuleSet, zoo: Zoo, models_dir: Path, names: list[str], boards: int | None, config: LineConfig,
              seed: int = HELD_OUT_SEED, say: Callable[[str], None] = lambda _m: None,
              cameras: dict[str, CameraModel] | None = None) -> list[ConditionResult]:
    """The named conditions, then any `cameras` of one's own (named by their settings), in order."""
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        raise UnknownChoice(f"unknown condition(s) {', '.join(unknown)}; known: {', '.join(CONDITIONS)}")
    n = boards or default_boards(rules)
    runs = [(name, CONDITIONS[name], name not in UNCORRECTED) for name in names]
    runs += [(name, camera, True) for name, camera in (cameras or {}).items()]
    results = []
    for name, camera, correct in runs:
        unmoored = unregistered_move(rules, camera, config)
        if unmoored:
            say(f"note: {name}: {unmoored}")
        t = time.perf_counter()
        results.append(run_condition(name, camera, rules, zoo, models_dir, n, config, seed, say=say, correct=correct))
        d = results[-1].detection
        worst = "; ".join(f"{t} {r['flagged']}/{r['good']}" for t, r in d.worst_types(3))
        say(f"{name}: recall {d.recall:.4f}, false alarms {d.false_alarms}/{d.good}"
            + (f" (most on {worst})" if worst else "") + f", rejected {d.rejected_boards} "
            f"({time.perf_counter() - t:.0f} s)")
    return results


def format_table(results: list[ConditionResult]) -> str:
    classes = [c for c in DEFECTS if any(c in r.detection.by_class for r in results)]
    wide = max([14, *(len(r.condition) + 1 for r in results)])
    head = (f"{'condition':<{wide}}{'fix':>4}{'boards':>7}{'parts':>7}{'defects':>8}{'recall':>8}  {'false alarms':<22}"
            f"{'rejected':>9}{'serial read':>16}{'resid mean':>11}{'resid max':>10}"
            + "".join(f"{c:>9}" for c in classes))
    lines = [head, "-" * len(head)]
    for r in results:
        d = r.detection
        fa = f"{d.false_alarms}/{d.good} {100 * d.false_alarm_rate:.3f}% {d.false_alarm_rate * 1e6:.0f}ppm"
        res = (f"{r.residual_mean_px:>11.3f}{r.residual_max_px:>10.3f}" if r.residual_mean_px is not None
               else f"{'-':>11}{'-':>10}")
        per = "".join(f"{(d.by_class[c][1] / d.by_class[c][0]) if c in d.by_class else float('nan'):>9.3f}"
                      for c in classes)
        serial = f"{d.serials_read}/{d.serials} {d.read_rate:.3f}" if d.serials else "-"
        if d.misreads:
            serial += f" {d.misreads}!"
        fix = "yes" if r.corrected else "-"
        lines.append(f"{r.condition:<{wide}}{fix:>4}{r.boards:>7}{r.parts:>7}{d.defective:>8}{d.recall:>8.4f}  {fa:<22}"
                     f"{d.rejected_boards:>9}{serial:>16}{res}{per}")
    return "\n".join(lines)


def cut_timing(rules: RuleSet, boards: int = 20, repeats: int = 5, seed: int = HELD_OUT_SEED) -> dict[str, float]:
    """Milliseconds per board: registration, and cutting every crop at nominal pixels, through the transform one
    warp per crop, and through one warp of the whole board (placed boards, best of `repeats`)."""
    from ..ingest.crops import cut_board
    from ..ingest.registration import register

    frames = list(condition_source(rules, PLACEMENT, boards, seed))
    regs = [register(f.image, rules.fiducials) for f in frames] if rules.fiducials else [None] * len(frames)

    def best(fn: Callable[[], object]) -> float:
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return 1000 * min(times) / len(frames)

    out = {"cut nominal": best(lambda: [cut_board(f.image, rules) for f in frames])}
    if rules.fiducials:
        out["register"] = best(lambda: [register(f.image, rules.fiducials) for f in frames])
        for warp in ("crop", "board"):
            out[f"cut warp per {warp}"] = best(lambda w=warp: [cut_board(f.image, rules, r, w)
                                                              for f, r in zip(frames, regs)])
    return out
