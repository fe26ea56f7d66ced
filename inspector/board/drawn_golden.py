"""A golden board drawn by the product's renderer, for a board known from its CAD alone.

A board with no fiducials is registered on what it shows: its outline in a photo, or, where the camera sees it
about where the recipe puts it, its golden board's content (`photo_registration: {using: golden}`). Until golden
boards have been photographed and taught (`inspector board teach`, which writes the real golden image), the
renderer that trains the starter experts and feeds `run`, `accuracy` and `bench` can draw the golden board too:
every part in place, no defect. It is the stand-in of the synthetic line, not of a real one: a real camera's boards
must be aligned on a real golden photo.

The rule set gains two top-level lines (`golden:` and `photo_registration:`), appended so its own text and
comments stay as they were; what a trained expert depends on (`RuleSet.training_version`) does not change, so a
starter zoo already built for it still serves it.
"""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..ingest.synthetic import render_board
from ..routing.rules import load_rules, parse_rules


def draw_golden(rules_path: Path, out: Path | None = None, seed: int = 0) -> tuple[Path, str]:
    """Draw the golden board of `rules_path`, write it (default: RULES.golden.png beside it) and add it, aligned
    on, to the rule set. Returns (the image's path, the lines added). ValueError, naming what to do, for a rule
    set that registers another way already."""
    rules = load_rules(rules_path)
    if rules.fiducials is not None:
        raise ValueError(f"{rules_path}: the board has fiducials and registers on them; a golden board to align on "
                         "is for boards without")
    if rules.compare is not None:
        raise ValueError(f"{rules_path}: a bare-board comparison has its own golden board (photographed, not drawn)")
    for key, what in (("golden", rules.golden), ("photo_registration", rules.photo)):
        if what is not None:
            raise ValueError(f"{rules_path}: it names `{key}:` already; remove it first to align on a drawn golden "
                             "board, or keep the one it has")
    out = out or rules_path.with_suffix(".golden.png")
    image = render_board(rules, "golden", np.random.default_rng(seed), rates={}).image
    if not cv2.imwrite(str(out), image):
        raise ValueError(f"{out}: cannot be written as an image (is the folder there, the suffix .png?)")
    name = out.name if out.resolve().parent == rules_path.resolve().parent else str(out.resolve())
    added = (f"\n# drawn by `inspector board golden` (the renderer's golden board: replace it with a taught one)\n"
             f"golden: {name}\nphoto_registration: {{using: golden}}\n")
    text = rules_path.read_text(encoding="utf-8")
    new = text if text.endswith("\n") else text + "\n"
    parse_rules(new + added, str(rules_path))  # the schema's checks, before a byte of the file changes
    rules_path.write_text(new + added, encoding="utf-8")
    return out, added.strip()
