"""How a part is mounted, as placement files and BOMs write it: surface mount, through-hole, or through-hole placed
in paste before reflow (pin-in-paste, THR).

A CAD board file knows each part's mounting from its footprint (or its pads' plated holes), and Gerbers from the
drill files' holes in its pads (gerber.py); a placement file or a BOM says it only where it has a column for it
(`Mount`, `Mounting Type`, `Technology`, ...), in words of its own: `SMD`, `SMT`, `Surface Mount`; `THT`, `TH`,
`PTH`, `Through Hole`, `Press-Fit`; `THR`, `Pin in Paste`, `Paste-in-Hole`; a distributor's with an orientation
after it (`Surface Mount, Right Angle`). A part with surface pads and plated holes both (a hybrid connector;
Digi-Key's `Surface Mount, Through Hole`) is placed before reflow: pin-in-paste. What a station does with it is
station.py's.
"""
from __future__ import annotations

import re

from .design import PIN_IN_PASTE, SMD, THROUGH_HOLE, Pad

# a cell's words, as _words() writes them; a press-fit part goes in after reflow like a through-hole one
WORDS: dict[str, str] = {
    **dict.fromkeys(("smd", "smt", "sm", "smd smt", "surface mount", "surface mount device", "surface mount smd",
                     "surface"), SMD),
    **dict.fromkeys(("tht", "th", "pth", "through hole", "thru hole", "through hole tht", "tht through hole",
                     "through hole mount", "press fit", "pressfit"), THROUGH_HOLE),
    **dict.fromkeys(("thr", "pin in paste", "pip", "paste in hole", "through hole reflow", "intrusive reflow",
                     "thr pin in paste"), PIN_IN_PASTE),
}
LEAD_HOLE_MM = 0.5  # a plated hole this wide takes a part's lead; a narrower one is a via (a thermal via, via-in-pad)
COLUMN_NAMES = ("mount", "mount type", "mounting", "mounting type", "mounting style", "technology",
                "assembly type", "smd/tht", "smt/tht", "smd/th", "tht/smd", "type of mounting")


def _words(text: str) -> str:
    """A cell as compared: lower case, punctuation a space (`Through-Hole`, `SMD/SMT`, `Press-Fit`)."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


UNREAD = "in words this does not read (SMD, THT, pin-in-paste and their usual spellings)"  # for a note


def mount_in(text: str, where: str, unread: list[str]) -> str | None:
    """mount_of's answer for a file's cell at `where`; a word it does not know goes to `unread` (`WHERE ('word')`,
    for the file's note) and gives None: the part's mounting is as the design says, or not known."""
    try:
        return mount_of(text)
    except ValueError:
        unread.append(f"{where} ({text!r})")
        return None


# what a distributor's Mounting Type adds after the mounting (Digi-Key's `Surface Mount, Right Angle`): not one
ORIENTATIONS = {"right angle", "vertical", "horizontal", "top entry", "side entry", "bottom entry", "top mount",
                "mid mount", "board edge", "cutout", "straddle mount", "in line", "low profile"}


def mount_of(text: str) -> str | None:
    """SMD, THROUGH_HOLE or PIN_IN_PASTE for a cell that says one; None for an empty cell; ValueError for a word
    this does not know (the caller says where, and takes the part as the design has it). A cell of several parts
    (`Surface Mount, Right Angle`) is read by those that say a mounting; surface mount and through-hole both
    (Digi-Key's `Surface Mount, Through Hole`, a hybrid) is pin-in-paste."""
    said = [w for w in (_words(part) for part in re.split(r"[,;+&]| and ", text)) if w and w not in ORIENTATIONS]
    if not said:
        if _words(text):
            raise ValueError(text)  # an orientation alone says no mounting
        return None
    if any(w not in WORDS for w in said):
        raise ValueError(text)
    mounts = {WORDS[w] for w in said}
    if len(mounts) == 1:
        return mounts.pop()
    return PIN_IN_PASTE  # surface pins and plated legs both: reflowed with its legs in paste


def by_pads(pads: tuple[Pad, ...] | list[Pad]) -> tuple[bool, bool]:
    """(through-hole, pin-in-paste) as a part's pads say (a board file's footprints, Eagle's packages, the
    Gerbers'): a plated hole a lead fits (LEAD_HOLE_MM or wider, where the CAD gives its drill; a QFN's thermal vias
    are pads of narrower holes) makes it through-hole; holes beside as many other pads or more (a USB-C or card
    socket's legs beside its pins) make it pin-in-paste, since its surface pins are reflowed, so it is placed before
    reflow. A lone surface pad among many holes (a tab, or a pad the Gerbers gave it by place) leaves it
    through-hole."""
    holes = sum(is_lead_hole(p) for p in pads)
    return holes > 0, 0 < holes <= len(pads) - holes


def is_lead_hole(pad: Pad) -> bool:
    """Whether a pad is a plated hole a part's lead goes through (not a surface pad, nor a via drawn as a pad)."""
    return not pad.smd and (pad.hole is None or pad.hole >= LEAD_HOLE_MM)
