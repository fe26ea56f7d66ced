"""What an imported rule set was made from, written at its head: each input file's name and a hash of its bytes,
and the import's options, so an engineer (or an auditor) can tell which CAD, BOM and Gerber revisions a line's
program came from, and make it again. Teaching keeps these lines in the taught set (app/board_teach.py).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

HEAD = ("# made from:", "# import options:")  # the lines this writes; teaching carries them on
TAUGHT_ON = "# taught on:"  # a revised set's (app/board_revise.py): what its experts' golden board was made from


def fingerprint(path: Path) -> str:
    """The first 12 hex digits of a sha256 over the file's bytes, or over a folder's files (their names relative to
    it and their bytes, in name order: an ODB++ job's or a Gerber set's folder)."""
    digest = hashlib.sha256()
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(str(f.relative_to(path)).encode() + b"\0")
        with f.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:12]


def provenance(inputs: dict[str, Path | None], options: str) -> str:
    """The head lines for `inputs` (what each is -> its path, None where not given) and the import's `options`."""
    made = ", ".join(f"{what} {p.name} (sha256 {fingerprint(p)})" for what, p in inputs.items() if p is not None)
    return f"{HEAD[0]} {made}\n{HEAD[1]} {options}\n"


def carried(text: str) -> str:
    """The provenance lines at a rule text's head (before its first key), for a rule set made from it."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(HEAD):
            lines.append(line + "\n")
    return "".join(lines)


def said(text: str, head: str) -> str | None:
    """What a rule text's comment line `head` (one of HEAD, or TAUGHT_ON) at its head says, or None where it has
    none."""
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(head):
            return line[len(head):].strip()
    return None
