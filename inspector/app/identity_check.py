"""`inspector accuracy --identity-boards N`: the serial read on many more boards than the inspection suite scores.

Reading a board's code is cheap next to inspecting its parts, and a 99.9% read rate needs thousands of boards to
show, so the identity check renders its own held-out boards per condition, shows them to the condition's camera,
registers them as the line does and reads their code (ingest/identity.py): read right, NOREAD, or read wrong
(a misread: another board's identity, never acceptable). A panel's boards' own codes (`panel: codes:`) are read
too, each a code of its own: a region placed loosely could read the neighbouring board's, which is a misread.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..camera.lens import CalibrationFailed
from ..ingest.camera_model import CameraModel
from ..ingest.identity import read_code
from ..ingest.registration import RegistrationFailed, register
from ..ingest.synthetic import unit_code_text
from ..routing.identity import SerialCode
from ..routing.rules import RuleSet
from .accuracy import HELD_OUT_SEED, UNCORRECTED, corrected_source


@dataclass
class IdentityResult:
    condition: str
    boards: int = 0
    codes: int = 0  # codes read on them: the board's own and, on a panel, each of its boards'
    read: int = 0
    noread: int = 0
    misread: int = 0
    retried: int = 0  # read on a second or third try (enlarged, thresholded)
    corrected: bool = False  # frames went through the camera's correction, as the line's do
    ms_per_read: float = 0.0

    @property
    def rate(self) -> float:
        return self.read / self.codes if self.codes else float("nan")

    def to_json(self) -> dict:
        return {**vars(self), "read_rate": self.rate}


def check_identity(rules: RuleSet, camera: CameraModel, name: str, boards: int, seed: int = HELD_OUT_SEED + 1,
                   correct: bool = True) -> IdentityResult:
    """The codes of `boards` held-out boards under one camera, read as the line reads them: through the camera's
    correction where it needs one (unless `correct` is off: a camera without its correction file), registered."""
    codes = codes_of(rules)
    if not codes:
        raise ValueError(f"rule set {rules.recipe} places no serial code (serial_code.at) and no code of a panel's "
                         "boards (panel.codes): nothing to read")
    try:
        source, corrected = corrected_source(rules, camera, boards, seed, correct)
    except CalibrationFailed as exc:  # even the smallest synthetic target (4x3) does not resolve on a tiny board
        w, h = rules.board_size
        why = str(exc).split(";")[0]  # its advice on --pattern is for a real target, not this one
        raise ValueError(f"{name}: this camera is calibrated before its boards are read, as at a line's install, and "
                         f"its synthetic calibration target does not resolve on a {w}x{h} px board ({why}); leave "
                         f"{name} out (--conditions)") from None
    out = IdentityResult(name, corrected=corrected)
    spent = 0.0
    for frame in source:
        matrix = None
        if rules.fiducials is not None:
            try:
                matrix = register(frame.image, rules.fiducials).homography
            except RegistrationFailed:
                matrix = None  # the line reads such a board where its code should lie
        out.boards += 1
        for code, position in codes:
            t = time.perf_counter()
            got = read_code(frame.image, code, matrix)
            spent += time.perf_counter() - t
            out.codes += 1
            if got.text == (frame.serial if position is None else unit_code_text(frame.serial, position)):
                out.read += 1
                out.retried += got.attempts > 1
            elif got.ok:
                out.misread += 1
            else:
                out.noread += 1
    out.ms_per_read = 1000 * spent / max(1, out.codes)
    return out


def codes_of(rules: RuleSet) -> list[tuple[SerialCode, int | None]]:
    """The codes a board of `rules` carries where the rule set places them: its own (position None) and its panel's
    boards' (their positions)."""
    own = [(rules.serial_code, None)] if rules.serial_code is not None and rules.serial_code.at is not None else []
    panel = sorted((rules.panel.codes or {}).items()) if rules.panel is not None else []
    return [*own, *((code, k) for k, code in panel)]


def identity_suite(rules: RuleSet, conditions: dict[str, CameraModel], names: list[str], boards: int,
                   say: Callable[[str], None] = lambda _m: None) -> list[IdentityResult]:
    results = []
    for name in names:
        results.append(check_identity(rules, conditions[name], name, boards, correct=name not in UNCORRECTED))
        r = results[-1]
        say(f"{name}: codes read {r.read}/{r.codes} on {r.boards} boards, NOREAD {r.noread}, misread {r.misread}")
    return results


def format_identity(results: list[IdentityResult]) -> str:
    head = (f"{'condition':<14}{'boards':>8}{'codes':>8}{'read':>8}{'rate':>9}{'NOREAD':>8}{'misread':>9}"
            f"{'retried':>9}{'ms/read':>9}{'fix':>5}")
    lines = [head, "-" * len(head)]
    lines += [f"{r.condition:<14}{r.boards:>8}{r.codes:>8}{r.read:>8}{r.rate:>9.4f}{r.noread:>8}{r.misread:>9}"
              f"{r.retried:>9}{r.ms_per_read:>9.2f}{'yes' if r.corrected else '-':>5}" for r in results]
    return "\n".join(lines)
