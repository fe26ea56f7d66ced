"""`inspector board revise`: a taught board carried to a new revision of its CAD or BOM without teaching it again.

The new revision is imported as any board is (`board import`, its own CAD, BOM and options); this compares it with
the rule set taught on the line, place by place (board/revision.py), and writes the revision's taught set:
- the taught experts serve it unchanged (same component types, same zoo, same thresholds and presence check), so
  what was validated stays validated, and nothing is trained;
- each place whose golden window no longer shows what the revision fits (a part fitted now, moved or turned, another
  package, another part number) gets its window from a photo of a board built to the revision, registered and
  brought to the golden board's light as the line does (board_approve.board_from_photo), pasted into a copy of the
  golden board; a part the revision leaves off gets its bare place from that photo too, so its neighbours' windows
  stop showing it. A window that shows no body where its type's golden parts do is refused: it would teach the line
  that a missing part is good;
- approved makes (`alternates:`) stay with the parts that kept their part number.

Refused, saying to teach the revision instead: another layout (outline, scale, fiducials) and a component type no
taught expert serves.
"""
from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cv2
import numpy as np
import yaml

from ..board.bom import designators
from ..board.geometry import BoardGeometry, geometry_path, read_geometry
from ..board.photo_camera import checked_camera
from ..board.presence import share
from ..board.provenance import HEAD, TAUGHT_ON, carried, said
from ..board.revision import PACKAGE, PART_NUMBER, REMOVED, Revision, compare, format_revision, neighbours
from ..ingest.crops import crop_part
from ..ingest.golden import golden_image
from ..ingest.registration import warp_inverse
from ..routing.rules import ComponentRule, Placement, RuleSet, body_box, load_rules, parse_rules
from ..runtime.diskio import write_atomically
from .board_approve import board_from_photo, relative_path, with_alternates
from .board_photos import points_path, registration_inputs
from .board_teach import taught_doc


@dataclass
class RevisePlan:
    taught: Path  # the rule set taught on the line
    revision: Path  # the new revision's import (`board import`)
    out: Path  # the revision's taught set to write
    photo: Path | None = None  # a board built to the revision: the changed places' windows come from it
    board: int = 0  # which board of the photo (#N as `board check` numbers them)
    correction: Path | None = None  # the line camera's correction file, where the photo is its frame
    looks_alike: str = ""  # parts whose new part number looks as the old (designators): their windows kept
    zoo: Path | None = None  # the taught set's zoo, where known: each of the revision's types must have its expert


@dataclass
class Revised:
    revision: Revision
    out: Path
    golden: Path
    windows: list[str]  # parts whose golden window came from the photo
    bare: list[str]  # parts left off, their place taken from the photo
    still_shown: dict[str, list[str]] = field(default_factory=dict)  # left off, no photo -> windows still showing it
    dropped: list[str] = field(default_factory=list)  # parts whose approved makes were dropped
    options: tuple[str | None, str | None] | None = None  # the imports' options, where they differ
    zoo: Path | None = None  # the taught set's zoo, where given
    unchecked: list[str] = field(default_factory=list)  # windows from the photo the presence check cannot tell for
    seconds: float = 0.0
    rules: RuleSet | None = None  # the revised set as written

    def to_json(self) -> dict:
        return {"changes": [asdict(c) for c in self.revision.changes], "kept": self.revision.kept,
                "out": str(self.out), "golden": str(self.golden), "windows": self.windows, "bare": self.bare,
                "still_shown": self.still_shown, "dropped_alternates": self.dropped, "unchecked": self.unchecked,
                "options": None if self.options is None else {"taught": self.options[0], "revision": self.options[1]},
                "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        return "\n".join([*self.notes(), f"wrote {self.out} (golden board {self.golden.name}; {self.seconds:.1f} s): "
                                         "serve it with the zoo " + (f"{self.zoo}" if self.zoo is not None else
                                                                     "the taught set serves")])

    def notes(self) -> list[str]:
        """What the engineer should know of the revision beside its table: windows taken, what to look at."""
        lines = []
        if self.options is not None:
            lines.append(f"note: imported with other options: taught {self.options[0]}; revision {self.options[1]}")
        if self.windows:
            lines.append(f"golden windows from the photo: {', '.join(self.windows)}")
        if self.unchecked:
            lines.append(f"note: the windows of {', '.join(self.unchecked)} were not checked to show a body (the "
                         "presence check cannot tell for them on this board): look at them on the golden board "
                         f"{self.golden.name} before serving it")
        if self.bare:
            lines.append(f"places left off, taken bare from the photo: {', '.join(self.bare)}")
        for ref, near in self.still_shown.items():
            lines.append(f"note: {ref} is left off but the golden windows of {', '.join(near)} still show it: a photo "
                         "of a board of this revision (--photo) takes its place bare, else expect them flagged")
        if self.dropped:
            lines.append(f"approved makes dropped (another part there now, or none): {', '.join(self.dropped)}")
        return lines


def revise_board(plan: RevisePlan, say: Callable[[str], None] = lambda _m: None) -> Revised:
    t0 = time.perf_counter()
    taught, (revision, geometry) = _taught(plan.taught), _revision(plan.revision)
    px_per_mm = _scale(plan, taught, geometry)
    changes = compare(taught, revision, px_per_mm)
    if plan.zoo is not None:
        _unserved(changes, revision, plan.zoo)
    _refuse_what_teaching_must_do(plan, changes)
    say(format_revision(changes))
    for note in checked_camera(taught, [plan.photo] if plan.photo is not None else []):
        say(f"note: {note} (its golden windows come from it)")
    looks_alike = _looks_alike(plan.looks_alike, changes)
    need, removed = changes.needing_window(looks_alike), changes.of_kind(REMOVED)
    if need and plan.photo is None:
        raise ValueError(f"{', '.join(need)}: the golden board does not show what the revision fits there; give a "
                         "photo of a board built to this revision (--photo), or, for a part number that looks as "
                         "the old one (another value of an unmarked chip), name it with --looks-alike")
    golden, golden_path, bare, unchecked = None, Path(taught.golden), [], []
    if plan.photo is not None and (need or removed):
        image, marks = board_from_photo(plan.taught, taught, plan.photo, plan.board, plan.correction)
        board = image if marks is None else warp_inverse(image, marks.homography, taught.board_size)
        golden, unchecked = _patched(golden_image(taught), board, taught, revision, need, removed)
        golden_path, bare = plan.out.with_name(plan.out.stem + ".golden.png"), removed
    still = {} if bare else neighbours(taught, revision, removed)
    dropped = sorted({c.ref for c in changes.changes if c.kind in (PACKAGE, PART_NUMBER, REMOVED)
                      and c.ref in taught.alternates})
    old = yaml.safe_load(taught.text)  # the taught keys carried: classifier, registration, marks
    text = _revised_text(plan, taught, old, revision, golden_path, dropped, len(need), _registration(plan, taught, old))
    rules = parse_rules(text, str(plan.out))  # the schema's checks, before anything is written
    if golden is not None:
        golden_path.parent.mkdir(parents=True, exist_ok=True)
        if not cv2.imwrite(str(golden_path), golden):
            raise ValueError(f"{golden_path}: cannot be written")
    write_atomically(plan.out, text.encode("utf-8"))
    options = (said(taught.text, HEAD[1]), said(revision.text, HEAD[1]))
    return Revised(changes, plan.out, golden_path, need if plan.photo is not None else [], bare, still, dropped,
                   options if options[0] != options[1] else None, plan.zoo, unchecked, time.perf_counter() - t0, rules)


def _taught(path: Path) -> RuleSet:
    rules = load_rules(path)
    if rules.golden is None:
        raise ValueError(f"{path} is not a taught rule set (no `golden:`): revise the set `board teach` wrote")
    return rules


def _revision(path: Path) -> tuple[RuleSet, BoardGeometry]:
    rules = load_rules(path)
    if rules.golden is not None:
        raise ValueError(f"{path} is a taught rule set: give the revision as `board import` wrote it (its own CAD, "
                         "BOM and options)")
    geometry = read_geometry(path)
    if geometry is None:
        raise ValueError(f"{path}: no board geometry beside it ({geometry_path(path).name}): import the revision "
                         "with `inspector board import`, which writes it")
    return rules, geometry


def _scale(plan: RevisePlan, taught: RuleSet, new: BoardGeometry) -> float:
    """The revision's px/mm (`new`: its geometry), refused where the taught board's is another (its golden board is
    in other pixels)."""
    old, _ = registration_inputs(plan.taught, taught)
    if old is not None and abs(old.px_per_mm - new.px_per_mm) > 1e-6:
        raise ValueError(f"{plan.revision} is imported at {new.px_per_mm:g} px/mm, the taught board at "
                         f"{old.px_per_mm:g}: import the revision at the taught scale (--px-per-mm {old.px_per_mm:g})")
    return new.px_per_mm


def _refuse_what_teaching_must_do(plan: RevisePlan, changes: Revision) -> None:
    teach = f"teach the revision instead (`inspector board teach --rules {plan.revision} --golden PHOTO`)"
    if changes.layout:
        raise ValueError(f"{plan.revision} is another layout than {plan.taught}: {'; '.join(changes.layout)}. Its "
                         f"golden board is another board: {teach}")
    if changes.new_types:
        listed = "; ".join(f"{t} ({', '.join(refs)})" for t, refs in sorted(changes.new_types.items()))
        raise ValueError(f"no taught expert serves the revision's component type(s) {listed}: {teach}")


def _unserved(changes: Revision, revision: RuleSet, zoo_root: Path) -> None:
    """Each of the revision's types the zoo holds no expert for, added to the changes' new types."""
    from ..experts.zoo import Zoo

    served = Zoo.load(zoo_root).entries
    for comp in revision.components:
        if comp.classifier not in served and comp.name not in changes.new_types:
            changes.new_types[comp.name] = sorted(p.ref for p in comp.placements)


def _looks_alike(text: str, changes: Revision) -> frozenset[str]:
    if not text.strip():
        return frozenset()
    named = designators(text, "--looks-alike")
    if not named:
        raise ValueError(f"--looks-alike {text!r}: name parts by their designators (R3,R7 or R3-R7)")
    changed = set(changes.of_kind(PART_NUMBER))
    other = [r for r in named if r not in changed]
    if other:
        raise ValueError(f"--looks-alike {', '.join(other)}: no part number of theirs changed in the revision "
                         f"(changed: {', '.join(sorted(changed)) or 'none'})")
    return frozenset(named)


def _patched(golden: np.ndarray, board: np.ndarray, taught: RuleSet, revision: RuleSet, need: list[str],
             removed: list[str]) -> tuple[np.ndarray, list[str]]:
    """(The golden board with each needed part's window (and, for a part moved or of another package, its old one:
    the part is no longer there) and each left-off part's window from the revision's board (both in the recipe's
    pixels), the needed parts whose window could not be checked to show a body); each new window first checked to
    show a body as its type's golden parts do."""
    out, unchecked = golden.copy(), []
    now = {p.ref: (c, p) for c, p in revision.placements()}
    was = {p.ref: (c, p) for c, p in taught.placements()}
    for ref in need:
        comp, place = now[ref]
        if not _shows_body(ref, crop_part(board, comp, place, revision.crop_margin), comp, golden, taught, was):
            unchecked.append(ref)
        _paste(out, board, body_box(comp, place, revision.crop_margin))
    for ref in [*need, *removed]:
        if ref in was:
            _paste(out, board, body_box(*was[ref], taught.crop_margin))
    return out, unchecked


def _shows_body(ref: str, window: np.ndarray, comp: ComponentRule, golden: np.ndarray, taught: RuleSet,
                was: dict[str, tuple[ComponentRule, Placement]]) -> bool:
    """Whether `window` was checked to show a body (False: the presence check cannot tell for it); ValueError where
    it keeps less of a golden body's contrast than the line lets a part keep: its type's taught parts' golden windows
    (the median over them), else its own old one."""
    least = taught.component(comp.name).body_contrast
    if least is None:
        return False
    peers = [crop_part(golden, c, p, taught.crop_margin) for c, p in taught.placements()
             if c.name == comp.name and p.ref != ref] or \
        ([crop_part(golden, *was[ref], taught.crop_margin)] if ref in was else [])
    shares = [s for s in (share(window, g, comp, taught.crop_margin) for g in peers if g.shape == window.shape)
              if s is not None]
    if not shares:
        return False
    if float(np.median(shares)) < least:
        raise ValueError(f"{ref}: its window on the photo keeps {float(np.median(shares)):.2f} of its type's golden "
                         f"bodies' contrast against the board, under the {least:.2f} below which the line calls a "
                         "part missing: it shows no body. Give a photo of a board that carries the part")
    return True


def _paste(golden: np.ndarray, board: np.ndarray, box: tuple[int, int, int, int]) -> None:
    h, w = golden.shape[:2]
    x0, y0, x1, y1 = max(0, box[0]), max(0, box[1]), min(w, box[2]), min(h, box[3])
    golden[y0:y1, x0:x1] = board[y0:y1, x0:x1]


def _registration(plan: RevisePlan, taught: RuleSet, old: dict) -> dict[str, str]:
    """The taught set's `photo_registration:` (`old`: its document) for the revised one: the revision's board
    geometry (its pads) and the taught set's picked points, copied beside `plan.out`."""
    photo = dict(old.get("photo_registration") or {})
    for key, source, target in (("geometry", geometry_path(plan.revision), geometry_path(plan.out)),
                                ("points", _points(taught), points_path(plan.out))):
        if source is not None and source.is_file():
            if source.resolve() != target.resolve():
                shutil.copyfile(source, target)
            photo[key] = target.name
    return photo


def _revised_text(plan: RevisePlan, taught: RuleSet, old: dict, revision: RuleSet, golden: Path, dropped: list[str],
                  windows: int, photo: dict[str, str]) -> str:
    """The revision's import made a taught set with the taught set's (`old`: its document) classifier, presence
    check, registration (`photo`) and marks, the golden board `golden` and the approved makes of parts not in
    `dropped`."""
    marks = None
    if revision.fiducials is not None:
        marks = {str(n): tuple(m["at"]) for n, m in ((old.get("fiducials") or {}).get("marks") or {}).items()}
    doc = taught_doc(revision.text, golden, plan.out, old["classifier"], photo,
                     {c.name: c.body_contrast for c in taught.components if c.body_contrast is not None}, marks)
    head = (f"# revised by `inspector board revise` from {taught.source} to the revision {revision.source}: the taught "
            f"experts serve it; {windows} golden window(s) from {plan.photo.name if plan.photo else 'no photo'}\n"
            f"{TAUGHT_ON} {said(taught.text, TAUGHT_ON) or said(taught.text, HEAD[0]) or taught.source}\n"
            + carried(revision.text))
    text = head + yaml.safe_dump(doc, sort_keys=False, width=120)
    kept = {ref: [relative_path(Path(f), plan.out) for f in files] for ref, files in taught.alternates.items()
            if ref not in dropped and any(p.ref == ref for _c, p in revision.placements())}
    return with_alternates(text, kept) if kept else text


def _points(taught: RuleSet) -> Path | None:
    return Path(taught.photo.points) if taught.photo is not None and taught.photo.points else None

