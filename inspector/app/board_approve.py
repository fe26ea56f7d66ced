"""`inspector board approve`: a second source's part approved on a taught board, from a board that carries it.

The line (or `board check`) flagged a part that an engineer found to be an approved alternate, another make of
the same part. Its window, cut as the line cuts it (from a photo registered as `board check` registers it, from a
frame of a board with fiducials, or a crop the line kept), is written beside the rule set and named under
`alternates:` (routing/alternates.py): from then on the line compares that part with whichever of the golden
window and its approved windows it is nearest. Nothing is retrained, so an approval takes effect with the rule
set's next version, and the change is a change of the recipe's text (its version, the audit trail).

An approval is refused where the window shows no body against the board (the presence check's own measure,
board/presence.py): approving a missing part would pass every missing one. The window's file is named after the make
where the engineer names it (`--make`, its manufacturer part number), else after the photo or crop it came from;
every part the line compares with it is stored with that name (results: `alternate`), which is what makes a second
source's parts traceable.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..board.presence import share
from ..ingest.crops import crop_part, cut_board
from ..ingest.golden import golden_image, nearest
from ..ingest.registration import Registration, RegistrationFailed, register
from ..routing.rules import ComponentRule, Placement, RuleSet, load_rules, parse_rules
from ..runtime.diskio import write_atomically
from .board_photos import boards_of, read_photo, registration_inputs

BLOCK = re.compile(r"^alternates\s*:")
MAX_MAKE = 64  # characters of a make's name (a part number with its maker's suffixes fits)


@dataclass
class Approved:
    ref: str
    file: Path  # the window written beside the rule set
    already: bool  # an approved window it was nearest already (written all the same: one more look of that make)


def check_refs(rules: RuleSet, refs: list[str]) -> None:
    """Every name a part this rule set inspects and compares with its golden board, else a ValueError naming them."""
    if rules.golden is None:
        raise ValueError(f"{rules.source} compares no part with a golden board (no `golden:`): an approved alternate "
                         "is a second golden window; approve on the rule set `board teach` wrote")
    unknown = [r for r in refs if r not in _placements(rules)]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: no inspected part of {rules.source} is called so (name each part by "
                         "its reference, as `board check` lists them)")


def make_name(text: str) -> str:
    """A make's name as a window's file is named after it (letters, digits, `_.-`), else a ValueError saying why."""
    name = _safe(text.strip())
    if not text.strip() or not re.search(r"[A-Za-z0-9]", text) or len(name) > MAX_MAKE:
        raise ValueError(f"make {text!r}: name the approved make by its part number (letters and digits, at most "
                         f"{MAX_MAKE} characters), e.g. LIS2DH12TR")
    return name


def alternates_folder(rules_path: Path) -> Path:
    return rules_path.with_name(rules_path.stem + ".alternates")


def windows_from_photo(rules_path: Path, rules: RuleSet, photo_path: Path, refs: list[str],
                       board: int = 0, correction: Path | None = None) -> dict[str, np.ndarray]:
    """Each named part's window on the photo's board `board` (largest first), cut as the line cuts it (through the
    camera's `correction` first, as the line corrects that camera's frames)."""
    image, marks = board_from_photo(rules_path, rules, photo_path, board, correction)
    if marks is not None:
        crops = {c.ref: c.image for c in cut_board(image, rules, marks)}
        return {ref: crops[ref] for ref in refs}
    place = _placements(rules)
    return {ref: crop_part(image, *place[ref], rules.crop_margin) for ref in refs}


def board_from_photo(rules_path: Path, rules: RuleSet, photo_path: Path, board: int = 0,
                     correction: Path | None = None) -> tuple[np.ndarray, Registration | None]:
    """The photo's board `board` (largest first) registered as the line registers it: (the board in the rule set's
    pixels, found on its outline or picked points and brought to the golden board's light, None) or, for a board
    with fiducials, (that image, or a line's frame, and its registration on the marks, which the line cuts by)."""
    photo = read_photo(photo_path)
    if correction is not None:
        from ..camera.correction import CameraCorrection

        photo = CameraCorrection.load(correction).apply(photo)
    if rules.photo is None and rules.fiducials is not None:
        return photo, _on_marks(photo, rules, str(photo_path))
    geometry, points = registration_inputs(rules_path, rules)
    found = list(boards_of(photo, photo_path, rules, geometry, points, golden_image(rules)))
    if board >= len(found) or found[board].image is None:
        why = found[board].reason if board < len(found) else f"the photo holds {len(found)} board(s)"
        raise ValueError(f"{photo_path}: board #{board} did not register ({why}); see `inspector board check`")
    image = found[board].image
    if rules.fiducials is not None:  # found in the photo, then refined on its fiducials, as the line does
        return image, _on_marks(image, rules, f"{photo_path}: board #{board}")
    return image, None


def _on_marks(image: np.ndarray, rules: RuleSet, what: str) -> Registration:
    try:
        return register(image, rules.fiducials)
    except RegistrationFailed as exc:
        raise ValueError(f"{what}: {exc}") from None


def window_from_crop(rules: RuleSet, ref: str, path: Path) -> np.ndarray:
    """A crop the line kept (or `dataset export` wrote) of `ref`, checked to be its window."""
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError(f"{path} is not an image OpenCV can read")
    return checked_window(rules, ref, image, str(path))


def checked_window(rules: RuleSet, ref: str, image: np.ndarray, what: str) -> np.ndarray:
    """`image` (`what` names it) if it is `ref`'s window as the line cuts it, else a ValueError saying so."""
    check_refs(rules, [ref])
    comp, place = _placements(rules)[ref]
    want = crop_part(golden_image(rules), comp, place, rules.crop_margin).shape
    if image.shape != want:
        raise ValueError(f"{what} is {image.shape[1]}x{image.shape[0]} px but {ref}'s window is {want[1]}x{want[0]}: "
                         "give a crop the line kept of this part, or a photo (--photo)")
    return image


@dataclass
class Approval:
    """What approving some windows makes: the rule file's new text and the images to write beside it."""
    text: str
    approved: list[Approved]
    images: dict[Path, np.ndarray]

    def write_images(self) -> None:
        for path, image in self.images.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if not cv2.imwrite(str(path), image):
                raise ValueError(f"{path}: cannot be written")


def prepare(rules_path: Path, windows: dict[str, np.ndarray], source: str, make: str | None = None) -> Approval:
    """Each window named under `alternates:` (REF__MAKE.png beside the rule set where the engineer names the make,
    else REF__source.png), checked by the rule set's own schema; nothing is written yet."""
    if make is not None:
        source = make_name(make)
    rules = load_rules(rules_path)
    golden = golden_image(rules)
    place = _placements(rules)
    check_refs(rules, list(windows))
    folder = alternates_folder(rules_path)
    listed = {ref: list(files) for ref, files in rules.alternates.items()}
    out, images = [], {}
    for ref, window in windows.items():
        comp, p = place[ref]
        gold = crop_part(golden, comp, p, rules.crop_margin)
        _refuse_bare(ref, window, gold, comp, rules.crop_margin)
        known = [cv2.imread(f, cv2.IMREAD_COLOR) for f in listed.get(ref, [])]
        at = nearest(window, [gold, *[k for k in known if k is not None and k.shape == gold.shape]])
        file = _free_name(folder / f"{ref}__{_safe(source)}.png", list(images))
        images[file] = window
        listed.setdefault(ref, []).append(str(file))
        out.append(Approved(ref, file, at > 0))
    text = with_alternates(rules.text,
                           {ref: [relative_path(Path(f), rules_path) for f in files] for ref, files in listed.items()})
    parse_rules(text, str(rules_path))  # the schema's checks, before anything is written
    return Approval(text, out, images)


def apply_approval(approval: Approval, apply: Callable[[str], RuleSet]) -> RuleSet:
    """A running line's approval: the images written, then the new text applied by `apply` (which validates it
    against the zoo and saves it); refused, the images are removed again and the running set stays."""
    approval.write_images()
    try:
        return apply(approval.text)
    except Exception:
        for path in approval.images:  # no image left that nothing names
            path.unlink(missing_ok=True)
        raise


def approve(rules_path: Path, windows: dict[str, np.ndarray], source: str,
            make: str | None = None) -> list[Approved]:
    """Write each window beside the rule set and name it under `alternates:` (the images first, then the rule file
    atomically: a kiosk watching it never reads half of it, nor a name whose image is not there yet)."""
    approval = prepare(rules_path, windows, source, make)
    approval.write_images()
    write_atomically(rules_path, approval.text.encode("utf-8"))
    return approval.approved


def with_alternates(text: str, alternates: dict[str, list[str]]) -> str:
    """The rule file's text with its top-level `alternates:` block replaced (or appended): the rest of the text and
    its comments stay as they were."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if BLOCK.match(line)), None)
    block = "alternates:  # approved makes' windows (`inspector board approve`)\n" + "".join(
        f"  {ref}: [{', '.join(_quoted(f) for f in files)}]\n" for ref, files in sorted(alternates.items()))
    if start is None:
        body = text if text.endswith("\n") or not text else text + "\n"
        return body + block
    end, j = start + 1, start + 1
    while j < len(lines):  # the block's own lines: indented ones, and blank or comment lines before another of them
        if lines[j][0] in " \t":
            end = j + 1
        elif lines[j].strip() and not lines[j].lstrip().startswith("#"):
            break
        j += 1
    return "".join(lines[:start]) + block + "".join(lines[end:])


def _refuse_bare(ref: str, window: np.ndarray, golden: np.ndarray, comp: ComponentRule, margin: int) -> None:
    kept = share(window, golden, comp, margin)
    least = comp.body_contrast
    if kept is not None and least is not None and kept < least:
        raise ValueError(f"{ref}: its window keeps {kept:.2f} of the golden body's contrast against the board, under "
                         f"the {least:.2f} below which the line calls a part missing: it shows no body, and "
                         "approving it would pass a missing part. Approve it from a board that carries the part")


def _placements(rules: RuleSet) -> dict[str, tuple[ComponentRule, Placement]]:
    return {p.ref: (c, p) for c, p in rules.placements()}


def _free_name(path: Path, taken: list[Path]) -> Path:
    k, candidate = 1, path
    while candidate.exists() or candidate in taken:
        k += 1
        candidate = path.with_name(f"{path.stem}-{k}{path.suffix}")
    return candidate


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "approved"


def relative_path(path: Path, rules_path: Path) -> str:
    """`path` relative to the rule file's folder (as a rule set names its files), else absolute."""
    try:
        return str(path.resolve().relative_to(rules_path.resolve().parent))
    except ValueError:
        return str(path.resolve())


def _quoted(name: str) -> str:
    return "'" + name.replace("'", "''") + "'"
