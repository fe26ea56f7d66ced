"""`inspector board check`: photos of boards registered to a taught rule set and inspected by the line itself.

Before a taught board goes live its engineer shows it boards whose answer they know: another good board (how
many parts it flags is the false-call rate to expect) and bad ones (bare boards: every part should be flagged).
Each board in each photo is registered as teaching registered the golden ones (picked points, else its outline,
refined on the golden board) and the board in the rule set's frame goes through the line's own engine, experts
and thresholds; a board that does not register is reported with the reason, never guessed. An overlay PNG per
photo marks every flagged part red.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..board.photo_camera import checked_camera
from ..board.presence import EXPERT as PRESENCE
from ..board.presence import body_gone
from ..experts.zoo import Zoo
from ..ingest.golden import golden_image
from ..results.records import BoardRecord
from ..routing.rules import load_rules
from .board_photos import PhotoBoard, boards_of, overlay, read_photo, registration_inputs
from .comparisons import golden_types
from .detector_scale import scale_notes
from .line import Line, LineConfig
from .run import line_profiles

COARSE = 0.75  # of the recipe's px/mm: a photo that resolves the board more coarsely is said to (crops upsampled)


@dataclass
class BoardChecked:
    board: PhotoBoard
    inspected: int = 0
    flagged: list[tuple[str, str]] = field(default_factory=list)  # (ref, defect class)
    photo_px_per_mm: float | None = None  # how finely the photo resolves the board, where it registered
    recipe_px_per_mm: float | None = None
    alternates: dict[str, str] = field(default_factory=dict)  # REF -> the approved make's window it was nearest
    # REF -> the taught classifier's log-odds of good, whatever it called: how far each part sits from its
    # threshold (`cls-<type>`'s good_margin), so a board that passes by a hair is seen before it goes live
    logodds: dict[str, float] = field(default_factory=dict)
    # the flagged parts the presence check calls missing, whether it or an expert decided the verdict: no threshold
    # of the expert passes them
    by_presence: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        reg = self.board.registration
        return {"photo": str(self.board.photo), "board": self.board.index, "centre": list(self.board.centre),
                "registered": reg is not None, "reason": self.board.reason,
                "registration": reg.to_json() if reg is not None else None,
                "photo_px_per_mm": round(self.photo_px_per_mm, 1) if self.photo_px_per_mm is not None else None,
                "inspected": self.inspected, "flagged": [f"{ref} ({kind})" for ref, kind in self.flagged],
                "alternates": self.alternates, "logodds": self.logodds, "by_presence": self.by_presence}


def check_photos(rules_path: Path, zoo_root: Path, photos: list[Path], work: Path, models: Path,
                 say: Callable[[str], None] = lambda _m: None) -> tuple[list[BoardChecked], list[Path], float]:
    """(every board of every photo and what the line made of it, the overlay PNGs under `work`, seconds on the
    line). The line runs on the box's profiles (`models`/profiles, as `inspector run` does): a check measures only
    what the line has not, and the line then starts on what a check measured."""
    rules = load_rules(rules_path)
    geometry, points = registration_inputs(rules_path, rules)
    reference = golden_image(rules) if rules.golden else None
    zoo = Zoo.load(zoo_root)
    for note in (*scale_notes(rules, zoo), *checked_camera(rules, photos)):
        say(note)
    light = bool(golden_types(rules, zoo))  # the line's own choice: light matched for golden comparisons only
    found: list[PhotoBoard] = []
    per_photo: dict[Path, tuple[np.ndarray, list[PhotoBoard]]] = {}
    for path in photos:
        photo = read_photo(path)
        boards = list(boards_of(photo, path, rules, geometry, points, reference, light))
        per_photo[path] = (photo, boards)
        found += boards
    records: dict[str, BoardRecord] = {}
    lock = threading.Lock()

    def keep(record: BoardRecord) -> None:
        with lock:
            records[record.board_serial] = record

    registered = [b for b in found if b.image is not None]
    seconds = 0.0
    if registered:
        line = Line(rules, zoo, line_profiles(zoo, models, say), LineConfig(), sinks=[keep])
        line.start()
        try:
            t0 = time.perf_counter()
            for b in registered:
                line.inspect(b.image, b.name, source=str(b.photo), serial_origin="filename", in_frame=True)
            line.drain()
            seconds = time.perf_counter() - t0
        finally:
            line.stop()
    out, overlays = [], []
    least = {c.name: c.body_contrast for c in rules.components}
    px_per_mm = geometry.px_per_mm if geometry is not None else None
    for b in found:
        checked = BoardChecked(b)
        if b.registration is not None and px_per_mm is not None:
            checked.photo_px_per_mm = px_per_mm * b.registration.photo_scale(rules.board_size)
            checked.recipe_px_per_mm = px_per_mm
        record = records.get(b.name)
        if record is not None:
            if record.error:
                b.reason = f"the line refused it: {record.error}"
            checked.inspected = len(record.parts)
            checked.flagged = [(p.ref, p.defect_class) for p in record.parts if p.verdict != "pass"]
            checked.alternates = dict(sorted(record.alternates.items()))
            checked.logodds = {p.ref: round(p.good_logodds, 3) for p in record.parts if p.good_logodds is not None}
            checked.by_presence = [p.ref for p in record.parts if p.verdict != "pass" and (
                p.expert == PRESENCE or body_gone(p.body_share, least.get(p.component_type)))]
        out.append(checked)
    flagged = {c.board.name: {ref for ref, _ in c.flagged} for c in out}
    for path, (photo, boards) in per_photo.items():
        overlays.append(overlay(photo, boards, rules, work / "overlays" / f"{path.stem}.checked.png", flagged))
    return out, overlays, seconds


def format_checked(checked: list[BoardChecked]) -> str:
    lines = [f"{'photo':<28}{'board':>6}  {'registered':<34}{'parts':>6}{'flagged':>8}{'share':>8}"]
    for c in checked:
        reg = c.board.registration
        how = f"{reg.method}, {reg.residual_mm:.2f} mm" if reg is not None else "no"
        share = f"{100 * len(c.flagged) / c.inspected:.1f}%" if c.inspected else "-"
        lines.append(f"{c.board.photo.name:<28}{'#' + str(c.board.index):>6}  {how:<34}{c.inspected:>6}"
                     f"{len(c.flagged):>8}{share:>8}")
        if reg is None:
            lines.append(f"{'':<36}not registered: {c.board.reason}")
            continue
        if c.photo_px_per_mm is not None and c.recipe_px_per_mm and c.photo_px_per_mm < COARSE * c.recipe_px_per_mm:
            lines.append(f"{'':<36}the photo resolves it at {c.photo_px_per_mm:.1f} px/mm, the recipe's pixels are "
                         f"{c.recipe_px_per_mm:g}/mm: its crops are upsampled, and what is smaller than "
                         f"{2 / c.photo_px_per_mm:.2f} mm is not seen")
        if c.flagged and len(c.flagged) <= 12:
            lines.append(f"{'':<36}flagged: {', '.join(f'{ref} ({kind})' for ref, kind in c.flagged)}")
        if c.alternates:
            lines.append(f"{'':<36}compared with an approved alternate: "
                         + ", ".join(f"{ref} ({make})" for ref, make in c.alternates.items()))
    return "\n".join(lines)
