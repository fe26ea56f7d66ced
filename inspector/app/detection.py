"""Part verdicts scored against the truth a synthetic source knows: detection and false-alarm rates."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..results.records import BoardRecord


@dataclass
class Detection:
    """Part verdicts against the truth a synthetic source knows."""

    defective: int = 0
    caught: int = 0
    good: int = 0
    false_alarms: int = 0
    by_class: dict[str, list[int]] = field(default_factory=dict)  # defect -> [parts, caught]
    # component type -> {"good": parts, "flagged": false alarms, "called": {class called: count}}: where they come from
    false_by_type: dict[str, dict] = field(default_factory=dict)
    rejected_boards: int = 0  # boards with a board-level error (registration failed): no part verdicts to score
    serials: int = 0  # boards whose true serial is known and printed on them as a code
    serials_read: int = 0  # ... stored under exactly that serial
    misreads: int = 0  # ... stored under another serial that is not a NOREAD (never acceptable)

    def add(self, truth: dict[str, str], record: BoardRecord, serial: str | None = None) -> None:
        """Score one board; `serial`: its true serial when its code was printed (the read is scored too)."""
        if serial is not None:
            self.serials += 1
            self.serials_read += record.board_serial == serial
            self.misreads += record.serial_source == "code" and record.board_serial != serial
        if record.error is not None:
            self.rejected_boards += 1
            return
        for part in record.parts:
            real = truth.get(part.ref, "ok")
            flagged = part.verdict != "pass"
            if real == "ok":
                self.good += 1
                self.false_alarms += flagged
                row = self.false_by_type.setdefault(part.component_type, {"good": 0, "flagged": 0, "called": {}})
                row["good"] += 1
                if flagged:
                    row["flagged"] += 1
                    called = part.defect_class or part.verdict
                    row["called"][called] = row["called"].get(called, 0) + 1
            else:
                self.defective += 1
                self.caught += flagged
                row = self.by_class.setdefault(real, [0, 0])
                row[0] += 1
                row[1] += flagged

    def worst_types(self, top: int = 5) -> list[tuple[str, dict]]:
        """The component types with false alarms, the most first."""
        flagged = [(t, r) for t, r in self.false_by_type.items() if r["flagged"]]
        return sorted(flagged, key=lambda tr: (-tr[1]["flagged"], tr[0]))[:top]

    @property
    def recall(self) -> float:
        return self.caught / self.defective if self.defective else float("nan")

    @property
    def read_rate(self) -> float:
        return self.serials_read / self.serials if self.serials else float("nan")

    @property
    def false_alarm_rate(self) -> float:
        return self.false_alarms / self.good if self.good else float("nan")

    def lines(self) -> list[str]:
        out = [f"defect detection rate {self.recall:.3f} ({self.caught}/{self.defective}), "
               f"false-alarm rate {self.false_alarm_rate:.4f} ({self.false_alarms}/{self.good})"]
        out += [f"  {d:<9} {c}/{n} caught" for d, (n, c) in sorted(self.by_class.items())]
        out += [f"  false alarms on {t}: {r['flagged']}/{r['good']} ("
                + ", ".join(f"{k} {v}" for k, v in sorted(r["called"].items())) + ")"
                for t, r in self.worst_types()]
        if self.serials:
            out.append(f"serials read from the boards' codes: {self.serials_read}/{self.serials} ({self.read_rate:.4f})"
                       + (f"; {self.misreads} read WRONG" if self.misreads else ""))
        if self.rejected_boards:
            out.append(f"  {self.rejected_boards} board(s) not scored: a board-level error (registration failed, "
                       "unreadable image)")
        return out
