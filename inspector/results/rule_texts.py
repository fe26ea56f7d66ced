"""Every rule set a line ran, kept by its hash, so a stored result resolves to the rules that produced it.

The line keeps each set it takes in a folder of its own (`rulesets/<version>.yaml` in the data directory, written
before the first board under it is finished), and the result writer puts each version's text into the database in
the same transaction as the first board that names it. So a result is never stored without its rules' text, even
when the database was down while the rules changed and the boards waited in the spool across a restart.
"""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import yaml
from sqlalchemy import Connection, Engine, insert, select
from sqlalchemy.orm import Session

from ..runtime.diskio import write_atomically
from .schema import Inspection, RuleText

TextOf = Callable[[str], "tuple[str, str] | None"]  # version -> (recipe, text), None when unknown here


def version_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class RuleArchive:
    """The line's own copies, by version: a folder, and what it read from it once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._known: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def keep(self, recipe: str, text: str) -> str:
        version = version_of(text)
        with self._lock:
            if version in self._known:
                return version
            path = self.folder / f"{version}.yaml"
            if not path.is_file():
                self.folder.mkdir(parents=True, exist_ok=True)
                write_atomically(path, f"# recipe: {recipe}\n".encode() + text.encode("utf-8"))
            self._known[version] = (recipe, text)
        return version

    def text(self, version: str) -> tuple[str, str] | None:
        with self._lock:
            if version in self._known:
                return self._known[version]
        try:
            raw = (self.folder / f"{version}.yaml").read_text(encoding="utf-8")
        except OSError:
            return None
        head, _, text = raw.partition("\n")
        if not head.startswith("# recipe: ") or version_of(text) != version:
            return None  # not ours, or damaged: better no text than a wrong one
        with self._lock:
            self._known[version] = (head[len("# recipe: "):], text)
        return self._known[version]


def store_texts(c: Connection, versions: set[str], text_of: TextOf) -> set[str]:
    """Insert the texts of `versions` the database lacks; returns the versions now known there."""
    if not versions:
        return set()
    have = set(c.execute(select(RuleText.version).where(RuleText.version.in_(versions))).scalars())
    now = datetime.now(timezone.utc)
    rows = []
    for v in sorted(versions - have):
        found = text_of(v)
        if found is not None:
            rows.append({"version": v, "sha256": hashlib.sha256(found[1].encode()).hexdigest(), "recipe": found[0],
                         "text": found[1], "first_seen": now})
    if rows:  # another box may put the same text in at the same moment: the first one stays
        if c.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            c.execute(pg_insert(RuleText).on_conflict_do_nothing(), rows)
        else:
            c.execute(insert(RuleText).prefix_with("OR IGNORE", dialect="sqlite"), rows)
    return have | {r["version"] for r in rows}


def rule_text(c: Connection, version: str) -> str | None:
    return c.execute(select(RuleText.text).where(RuleText.version == version)).scalar()


class PartNumbers:
    """REF -> part number under a rule-set version (its `part_numbers:`, routing/part_numbers.py), read from the
    version's stored text: a result names the version it was inspected under, so the part number it was bought as
    needs no column of its own. A version is its text's hash, so what was read once is kept; a version whose text
    the database lacks yet is asked again next time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._known: dict[str, dict[str, str]] = {}

    def __call__(self, version: str) -> dict[str, str]:
        """{} for a version the database keeps no text of, or whose rules name no part numbers."""
        return self.read(version)[0]

    def read(self, version: str) -> tuple[dict[str, str], bool]:
        """(the version's part numbers, whether the database keeps its text: a reader may keep an answer for good
        only then)."""
        if version in self._known:
            return self._known[version], True
        with Session(self.engine) as s:
            text = s.scalar(select(RuleText.text).where(RuleText.version == version))
        if text is None:
            return {}, False
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:  # a stored text is one the line parsed; a damaged one names nothing rather than fail
            doc = None
        numbers = doc.get("part_numbers") if isinstance(doc, dict) else None
        self._known[version] = {str(k): str(v) for k, v in numbers.items()} if isinstance(numbers, dict) else {}
        return self._known[version], True


def unresolved(c: Connection) -> list[tuple[str, int]]:
    """Rule-set versions stored results name whose text the database lacks: (version, boards)."""
    from sqlalchemy import func

    q = (select(Inspection.ruleset_version, func.count()).outerjoin(RuleText, RuleText.version ==
                                                                    Inspection.ruleset_version)
         .where(RuleText.version.is_(None)).group_by(Inspection.ruleset_version))
    return [(v, int(n)) for v, n in c.execute(q)]
