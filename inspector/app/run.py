"""`inspector run`: a source through the rules, the engine and the results, printing as it goes."""
from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from ..access.identity import Identity
from ..camera.gate import GatedSource
from ..coserve.offline.profiler import load_or_profile, saved_profile
from ..coserve.online.profile import DeviceProfile
from ..experts.backends import get_backend
from ..experts.backends.ahead import prepare_zoo
from ..experts.backends.base import Backend
from ..experts.zoo import Zoo
from ..ingest.camera_model import parse_camera
from ..ingest.glare import Glare
from ..ingest.images import DEFAULT_MAX_PIXELS
from ..ingest.sources import FolderSource, ReplaySource, Source, SyntheticSource
from ..ingest.sources import serial_pattern as serial_pattern_of
from ..ingest.synthetic import rates_for
from ..results.store import ResultStore
from ..routing.rules import RuleSet, load_rules
from ..runtime.devices import available_devices
from ..training.demo_zoo import build_demo_zoo
from .changes import ChangeLog
from .factory_events import FactoryEvents
from .hermes_link import HermesLink
from .line import Line
from .plc_link import PlcLink
from .product_changeover import ProductChangeover
from .recipes import RecipeBook
from .rules_watch import RulesWatcher
from .service import LineService, ServiceConfig, Sink


def _rules_dir() -> Path:
    """The shipped rule sets: the checkout's routing_rules/, or the copy installed beside the package."""
    spec = importlib.util.find_spec("routing_rules")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parents[2] / "routing_rules"


RULES_DIR = _rules_dir()
DEMO_RULES = ("board_a.yaml", "board_b.yaml")

Say = Callable[[str], None]


def starter_zoo(models_dir: Path, rules: RuleSet, say: Say, seed: int = 0) -> Zoo:
    """Starter experts for a rule set of the plant's own (an imported board, say: `inspector board import`), trained
    on boards the demo renderer draws of it, in models/starter/<recipe> (cached by the rule set's training version
    like the demo zoo): what runs the line until the board is taught on golden photos."""
    return build_demo_zoo(models_dir / "starter" / rules.recipe, [rules], seed=seed, progress=say)


def zoo_for(models_dir: Path, rules: RuleSet | None, say: Say) -> Zoo:
    """The demo zoo when `rules` names only the demo boards' experts (or no rule set is given), else the rule set's
    own starter zoo."""
    if rules is not None:
        demo = [load_rules(RULES_DIR / name) for name in DEMO_RULES]
        known = {name for r in demo for name in r.expert_specs()}
        if rules.compare is None and not set(rules.expert_specs()) <= known:
            return starter_zoo(models_dir, rules, say)
    return demo_zoo(models_dir, say)


def demo_zoo(models_dir: Path, say: Say, seed: int = 0) -> Zoo:
    """The demo zoo (trained on first use); another `seed` is another build beside it, models/demo-seed<N>, to see
    how much the training's own chance moves the line's figures."""
    rule_sets = [load_rules(RULES_DIR / name) for name in DEMO_RULES]
    return build_demo_zoo(models_dir / ("demo" if seed == 0 else f"demo-seed{seed}"), rule_sets, seed=seed,
                          progress=say)


GATES = ("auto", "on", "off")


def open_source(spec: str, rules: RuleSet, boards: int, seed: int, interval_s: float = 0.0,  # noqa: ANN201
                defect_rate: float | None = None, camera: str | None = None,
                max_pixels: int = DEFAULT_MAX_PIXELS, glare: str | None = None, gate: str = "auto",
                reconnects: int = 5, serial_pattern: str | None = None, camera_settings: dict | None = None,
                correction: str | Path | None = None):
    """A source from its command-line spelling; the other arguments apply to synthetic ones (`camera`: a camera
    model's preset or settings, ingest/camera_model.py), `max_pixels` and `serial_pattern` to files, `reconnects`
    and `camera_settings` to cameras. `gate`: auto puts a board gate (camera/gate.py) on free-running cameras.
    `correction`: the camera's correction file (lens, flat field; camera/correction.py), applied to every frame
    before the gate and the line."""
    kind, _, arg = spec.partition(":")
    if gate not in GATES:
        raise ValueError(f"--gate must be one of {', '.join(GATES)}, got {gate!r}")
    fix = None
    if correction is not None:
        from ..camera.correction import CameraCorrection

        fix = CameraCorrection.load(correction)
    free_running = False
    if kind == "synthetic":
        rates = None if defect_rate is None else rates_for(defect_rate)
        source = SyntheticSource(rules, int(arg) if arg else boards, seed=seed, rates=rates, interval_s=interval_s,
                                 camera=parse_camera(camera) if camera else None,
                                 glare=Glare.parse(glare) if glare else None)
    elif glare:
        raise ValueError(f"--glare lights synthetic boards; source {spec!r} is a real one")
    elif camera and kind in ("folder", "watch", "replay", "camera", "genicam"):
        raise ValueError(f"--camera renders synthetic boards as a camera sees them; source {spec!r} is a real one")
    elif kind in ("folder", "watch"):
        source = FolderSource(arg, watch=kind == "watch", max_pixels=max_pixels,
                              pattern=serial_pattern_of(serial_pattern))
    elif kind == "replay":
        source = ReplaySource(arg, max_pixels=max_pixels, pattern=serial_pattern_of(serial_pattern))
    elif kind == "camera":
        from ..camera.opencv import CameraSource

        source, free_running = CameraSource(arg, max_reconnects=reconnects), True
    elif kind == "genicam":
        from ..camera.genicam import GenICamSource
        from ..camera.settings import parse_settings

        settings = parse_settings(camera_settings or {}, "camera settings")
        source = GenICamSource(arg, settings, max_reconnects=reconnects, board_size=rules.board_size)
        free_running = not settings.triggered
    else:
        raise ValueError(f"unknown source {spec!r}: use synthetic[:N], folder:DIR, watch:DIR, replay:FILE, "
                         "camera:URI or genicam:SERIAL|INDEX")
    if fix is not None or kind in ("camera", "genicam"):  # a camera's frames are always watched for exposure
        from ..camera.correction import CameraCorrection, CorrectedSource

        source = CorrectedSource(source, fix or CameraCorrection())
    return GatedSource(source, rules) if gate == "on" or (gate == "auto" and free_running) else source


def line_profiles(zoo: Zoo, models_dir: Path, say: Say, backend: str = "torch",
                  rules: RuleSet | None = None) -> dict[str, DeviceProfile]:
    """The engine's device profiles for `backend`, measured once per zoo, device and backend (before any clock
    starts); a runtime's model files are made first, so no switch on the line pays an export (an INT8 runtime
    calibrates on crops of `rules`' boards)."""
    runtime = _runtime_files(zoo, say, backend, rules)
    return {d.key: load_or_profile(zoo, d, models_dir / "profiles", progress=say, backend=runtime)
            for d in available_devices() if runtime.runs_on(d.torch)}  # a runtime without its GPU provider: CPU


def prepare_board(zoo: Zoo, models_dir: Path, say: Say, backend: str, rules: RuleSet) -> list[str]:
    """What can be made of a board's zoo before a line changes over to it, while another board runs: a runtime's
    model files (calibrated on `rules`' crops). Nothing is timed (that would be timed against the running line); the
    architectures this box has no profile of on `backend`, which the first changeover measures, are returned."""
    runtime = _runtime_files(zoo, say, backend, rules)
    keys = sorted({zoo.architecture(n).key for n in zoo.entries if n not in zoo.unavailable})
    devices = [d for d in available_devices() if runtime.runs_on(d.torch)]
    return [k for k in keys if any(saved_profile(d, models_dir / "profiles", runtime, {k}) is None for d in devices)]


def _runtime_files(zoo: Zoo, say: Say, backend: str, rules: RuleSet | None) -> Backend:
    """The backend, its model files made for every expert of `zoo` first where it is a runtime."""
    runtime = get_backend(backend)
    if backend != "torch":
        from ..training.int8_crops import rules_calibration

        calibration = rules_calibration([rules], zoo) if rules is not None else None
        prepare_zoo(zoo, runtime, say, calibration)
    return runtime


def run_line(rules: RuleSet, zoo: Zoo, models_dir: Path, source: Source, config: ServiceConfig,
             store: ResultStore, data_dir: Path, say: Say, every: int = 5,
             published: list[Sink] | None = None, plc: PlcLink | None = None,
             hermes: HermesLink | None = None, events: FactoryEvents | None = None) -> tuple[LineService, float]:
    """Inspect a whole source; returns the stopped service and the seconds from first board in to last stored.
    `plc`: the line controller's link, told of every verdict as it is decided (started and stopped here);
    `hermes`: the Hermes lanes the boards come in and go on by (started here, stopped once handed on);
    `events`: the factory events, told of each verdict as it is decided."""
    profiles = line_profiles(zoo, models_dir, say, config.line.backend, rules)
    if hermes is not None:
        source = hermes.wrap(source)
    service = LineService(rules, zoo, profiles, config, store, data_dir, source, published, say)
    if hermes is not None:
        service.handoff = hermes
        hermes.start()
    follow = hermes is not None and hermes.config.follow_product
    if plc is not None or follow:
        watcher = RulesWatcher(service.line, rules.source if Path(rules.source).is_file() else None, say=say)
        log = ChangeLog(store, config.line.line, config.line.station, say)  # a changeover, in the trail
        watcher.witness = lambda kind, who, origin, old, new: log.rules(Identity(who, "-", origin), kind, old, new)
        folders = [Path(rules.source).parent] if Path(rules.source).is_file() else []
        book = RecipeBook(watcher, folders)
        if follow:
            service.products = ProductChangeover(book)
    if plc is not None:
        plc.attach(service, book)
        plc.start()
        plc.station.set_health("ok", True)
    if events is not None:
        events.attach(service)
    last = [0]

    def progress() -> None:
        if service.line.stats.boards - last[0] >= every:
            last[0] = service.line.stats.boards
            say(progress_line(service.line))

    t0 = time.perf_counter()
    service.start()
    try:
        service.run(progress)
    finally:
        if plc is not None:
            plc.stop()
        if hermes is not None:
            hermes.stop()
        if events is not None:
            events.close()
    return service, time.perf_counter() - t0


def progress_line(line: Line) -> str:
    boards_s, parts_s = line.throughput()
    st = line.engine_stats()
    v = line.stats.board_verdicts
    return (f"{line.stats.boards} boards, {line.stats.parts} parts: {parts_s:.1f} parts/s ({boards_s:.2f} boards/s), "
            f"{st.experts.switches} switches, boards pass {v['pass']} fail {v['fail']} error {v['error']}")


def nothing_inspected(service: LineService) -> str | None:
    """Why a run failed its purpose (exit 1): not one board inspected, every one errored or none came; else None."""
    st = service.line.stats
    if st.inspected:
        return None
    if not st.boards:
        return f"no board was inspected: {service.source.name} gave none"
    return f"no board was inspected: all {st.boards} errored (the first: {st.first_error})"


def summary(service: LineService, seconds: float) -> str:
    line, detection, store = service.line, service.detection, service.store
    st = line.engine_stats()
    defects = ", ".join(f"{k} {n}" for k, n in line.stats.defects.most_common()) or "none"
    w = service.writer.status()
    try:
        held = "it holds {} boards, {} parts of this line".format(*store.count(line.config.scope))
    except SQLAlchemyError as exc:
        held = f"it cannot be read now: {type(exc).__name__}"
    out = [f"policy {line.config.policy}, backend {line.config.backend}: {line.stats.boards} boards, "
           f"{line.stats.parts} parts in {seconds:.1f} s: "
           f"{line.stats.parts / max(seconds, 1e-9):.1f} parts/s, {line.stats.boards / max(seconds, 1e-9):.2f} "
           f"boards/s, {st.experts.switches} expert switches",
           f"flagged parts: {defects}",
           f"results: {w.written} boards written to {store.safe_url} ({held}); {w.spooled} spooled"
           + (f", {w.duplicates} already stored" if w.duplicates else "")
           + (f", {w.dead_letters} set aside as dead letters" if w.dead_letters else "")
           + (f"; last error: {w.last_error}" if w.last_error else "")]
    gate = getattr(service.source, "gate", None)
    if gate is not None:
        g = gate.counters
        out.append(f"board gate: {g.frames} frames -> {g.boards} boards; {g.moving} moving, {g.empty} empty, "
                   f"{g.held} more of a board already inspected (none stored)")
    if line.rules.serial_code is not None:
        s = line.stats
        out.append(f"serials: {s.serials_read} read from the boards' codes, {s.noreads} NOREAD"
                   + (f" ({s.noread_refused} refused)" if s.noread_refused else ""))
    if line.rules.panel is not None and line.rules.panel.codes:
        s = line.stats
        out.append(f"panel boards' serials: {s.unit_serials_read} read from their own codes, {s.unit_noreads} NOREAD")
    if line.stats.alternates:
        out.append("parts nearest an approved alternate's window: "
                   + ", ".join(f"{ref} {n}" for ref, n in sorted(line.stats.alternates.items())))
    q, src, crops = service.queue.counters, service.source.counters, service.crops
    if q.dropped:
        out.append(f"ingest: {q.dropped} boards dropped (queue full, policy {service.queue.overflow}); "
                   f"last {q.last_dropped}")
    if src.unreadable or src.reconnects or q.source_error:
        out.append(f"source: {src.unreadable} unreadable images, {src.reconnects} reconnects; "
                   f"last: {q.source_error or src.last_error}")
    if crops.kept or crops.failed:
        out.append(f"crops kept: {crops.kept} under {crops.root}" +
                   (f"; {crops.failed} not written: {crops.last_error}" if crops.failed else ""))
    if detection.defective or detection.good:
        out += detection.lines()
    return "\n".join(out)
