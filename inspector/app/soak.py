"""`inspector soak`: a long run of the line on synthetic boards, watching the process's memory.

Months of running must not grow memory: every queue and history of the line is bounded. The soak runs
the whole line (ingest queue, engine, result writer into SQLite, crops) until `parts` parts are inspected
and samples the resident set size (RSS) after a warm-up, at the middle and at the end; growth after the
warm-up is what a leak would show.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..coserve.online.profile import DeviceProfile
from ..experts.zoo import Zoo
from ..ingest.sources import SyntheticSource
from ..results.store import ResultStore, sqlite_url
from ..routing.rules import RuleSet
from .service import LineService, ServiceConfig

WARMUP_SHARE = 0.05  # the first 5% of the parts (at least WARMUP_MIN) warm allocators and caches up
WARMUP_MIN = 1000


def rss_bytes() -> int:
    """The resident set size now (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass
class Sample:
    point: str
    parts: int
    boards: int
    rss: int
    seconds: float


@dataclass
class SoakReport:
    samples: list[Sample] = field(default_factory=list)
    stored: int = 0

    @property
    def growth(self) -> float:
        """RSS growth from the warm-up sample to the end, as a fraction."""
        base, end = self.samples[0].rss, self.samples[-1].rss
        return (end - base) / base if base else float("nan")

    def table(self) -> str:
        head = f"{'point':<10}{'parts':>10}{'boards':>9}{'seconds':>9}{'parts/s':>9}{'RSS MiB':>10}{'vs warm-up':>12}"
        out = [head, "-" * len(head)]
        base = self.samples[0].rss
        for s in self.samples:
            rate = s.parts / s.seconds if s.seconds else 0.0
            out.append(f"{s.point:<10}{s.parts:>10}{s.boards:>9}{s.seconds:>9.0f}{rate:>9.1f}{s.rss / 2**20:>10.1f}"
                       f"{(s.rss - base) / base * 100 if base else 0:>11.2f}%")
        return "\n".join(out)


def soak(rules: RuleSet, zoo: Zoo, profiles: dict[str, DeviceProfile], config: ServiceConfig, parts: int,
         data_dir: Path | None = None, say: Callable[[str], None] = lambda _m: None) -> SoakReport:
    warmup = max(WARMUP_MIN, int(WARMUP_SHARE * parts))
    marks = [("warm-up", warmup), ("middle", (warmup + parts) // 2), ("end", parts)]
    with tempfile.TemporaryDirectory(prefix="inspector-soak-") as tmp:
        data = data_dir or Path(tmp)
        data.mkdir(parents=True, exist_ok=True)
        store = ResultStore(sqlite_url(data / "soak.sqlite"))
        source = SyntheticSource(rules, boards=0, seed=4242)
        service = LineService(rules, zoo, profiles, config, store, data, source, say=say)
        report = SoakReport()
        t0 = time.perf_counter()
        lock = threading.Lock()
        next_note = [parts // 10]

        def on_board() -> None:
            st = service.line.stats
            with lock:
                while marks and st.parts >= marks[0][1]:
                    point, _ = marks.pop(0)
                    report.samples.append(Sample(point, st.parts, st.boards, rss_bytes(), time.perf_counter() - t0))
                    say(f"soak {point}: {st.parts} parts, RSS {report.samples[-1].rss / 2**20:.1f} MiB")
                if not marks:
                    service.request_stop()
                elif st.parts >= next_note[0]:
                    next_note[0] += parts // 10
                    say(f"soak: {st.parts}/{parts} parts")

        service.start()
        service.run(on_board)
        report.stored = store.count()[0]
        store.close()
    return report
