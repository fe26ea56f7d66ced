"""A name that becomes a file or folder name on the line's box (a revised rule set, an installed board, a photo kept
with a revision): checked, or made from whatever a file was called, here, so no name reaches the disk that could
leave its folder."""
from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def file_name(text: str, what: str) -> str:
    """`text` stripped, checked as a file name of the kiosk's folders (letters, digits, `.`, `_`, `-`, at most 64,
    starting with a letter or digit, not ending in `.`); ValueError naming `what` otherwise."""
    name = text.strip()
    if not NAME.fullmatch(name) or name.endswith("."):
        raise ValueError(f"{what} is a file name: letters, digits, '.', '_' or '-', at most 64, starting with a "
                         f"letter or digit; got {text!r}")
    return name


def safe_name(text: str, fallback: str) -> str:
    """`text` made a file name of the kiosk's folders: every other character `_`, at most 64, no leading or trailing
    `.` or `_`; `fallback` where nothing is left."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:64].strip("._") or fallback
