"""`inspector run`: a source through the rules, the engine and the results, printing as it goes."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..coserve.profiler import load_or_profile
from ..experts.zoo import Zoo
from ..ingest.crops import BoardSizeMismatch
from ..ingest.sources import CameraSource, FolderSource, Frame, ReplaySource, SyntheticSource
from ..results.records import BoardRecord
from ..results.store import ResultStore
from ..results.writer import ResultWriter
from ..routing.rules import RuleSet, load_rules
from ..runtime.devices import available_devices
from ..training.demo_zoo import build_demo_zoo
from .line import Line, LineConfig

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "routing_rules"
DEMO_RULES = ("board_a.yaml", "board_b.yaml")

Say = Callable[[str], None]


@dataclass
class Detection:
    """Part verdicts against the truth a synthetic source knows."""

    defective: int = 0
    caught: int = 0
    good: int = 0
    false_alarms: int = 0
    by_class: dict[str, list[int]] = field(default_factory=dict)  # defect -> [parts, caught]

    def add(self, truth: dict[str, str], record: BoardRecord) -> None:
        for part in record.parts:
            real = truth.get(part.ref, "ok")
            flagged = part.verdict != "pass"
            if real == "ok":
                self.good += 1
                self.false_alarms += flagged
            else:
                self.defective += 1
                self.caught += flagged
                row = self.by_class.setdefault(real, [0, 0])
                row[0] += 1
                row[1] += flagged

    def lines(self) -> list[str]:
        rate = self.caught / self.defective if self.defective else float("nan")
        fa = self.false_alarms / self.good if self.good else float("nan")
        out = [f"defect detection rate {rate:.3f} ({self.caught}/{self.defective}), "
               f"false-alarm rate {fa:.4f} ({self.false_alarms}/{self.good})"]
        out += [f"  {d:<9} {c}/{n} caught" for d, (n, c) in sorted(self.by_class.items())]
        return out


def demo_zoo(models_dir: Path, say: Say) -> Zoo:
    rule_sets = [load_rules(RULES_DIR / name) for name in DEMO_RULES]
    return build_demo_zoo(models_dir / "demo", rule_sets, progress=say)


def open_source(spec: str, rules: RuleSet, boards: int, seed: int):  # noqa: ANN201 - any source
    kind, _, arg = spec.partition(":")
    if kind == "synthetic":
        return SyntheticSource(rules, int(arg) if arg else boards, seed=seed)
    if kind in ("folder", "watch"):
        return FolderSource(arg, watch=kind == "watch")
    if kind == "replay":
        return ReplaySource(arg)
    if kind == "camera":
        return CameraSource(arg)
    raise ValueError(f"unknown source {spec!r}: use synthetic[:N], folder:DIR, watch:DIR, replay:FILE or camera:URI")


def run_line(rules: RuleSet, zoo: Zoo, models_dir: Path, frames: Iterable[Frame], config: LineConfig,
             store: ResultStore, spool: Path, say: Say, every: int = 5) -> tuple[Line, Detection, ResultWriter]:
    profiles = {d.key: load_or_profile(zoo, d, models_dir / "profiles", progress=say) for d in available_devices()}
    detection = Detection()
    truths: dict[str, dict[str, str]] = {}
    writer = ResultWriter(store, spool)
    writer.start()

    def on_board(record: BoardRecord) -> None:
        writer.put(record)
        truth = truths.pop(record.board_serial, None)
        if truth is not None:
            detection.add(truth, record)

    line = Line(rules, zoo, profiles, config, sinks=[on_board])
    line.start()
    last = 0
    for frame in frames:
        if frame.truth is not None:
            truths[frame.serial] = frame.truth
        try:
            line.inspect(frame.image, frame.serial, frame.source)
        except BoardSizeMismatch as exc:
            say(f"skipped {frame.serial}: {exc}")
            line.stats.rejected_boards += 1
            continue
        if line.stats.boards - last >= every:
            last = line.stats.boards
            say(progress_line(line))
    line.stop()
    writer.close()
    return line, detection, writer


def progress_line(line: Line) -> str:
    boards_s, parts_s = line.throughput()
    st = line.engine.stats()
    v = line.stats.board_verdicts
    return (f"{line.stats.boards} boards, {line.stats.parts} parts: {parts_s:.1f} parts/s ({boards_s:.2f} boards/s), "
            f"{st.experts.switches} switches, boards pass {v['pass']} fail {v['fail']} error {v['error']}")


def summary(line: Line, detection: Detection, writer: ResultWriter, store: ResultStore, seconds: float) -> str:
    st = line.engine.stats()
    defects = ", ".join(f"{k} {n}" for k, n in line.stats.defects.most_common()) or "none"
    w = writer.status()
    boards, parts = store.count()
    out = [f"policy {line.config.policy}: {line.stats.boards} boards, {line.stats.parts} parts in {seconds:.1f} s: "
           f"{line.stats.parts / max(seconds, 1e-9):.1f} parts/s, {line.stats.boards / max(seconds, 1e-9):.2f} "
           f"boards/s, {st.experts.switches} expert switches",
           f"flagged parts: {defects}",
           f"results: {w.written} boards written to {store.safe_url} (it holds {boards} boards, {parts} parts); "
           f"{w.spooled} spooled" + (f"; last error: {w.last_error}" if w.last_error else "")]
    if detection.defective or detection.good:
        out += detection.lines()
    return "\n".join(out)
