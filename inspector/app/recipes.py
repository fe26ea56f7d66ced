"""Recipe changeover: the rule set a line controller names, found among the rule files and switched at a board
boundary.

A PLC or MES names a recipe (OPC UA RecipeManagement, or the Recipe tag); the rule file whose `recipe:` (or
file name) is that name, in the folder of the rule file in force, is validated against the zoo and applied
from the next board on; boards inside finish under the set they were cut with. An unknown name or a file that
does not validate is refused with the reason, and the running set stays.
"""
from __future__ import annotations

from pathlib import Path

from ..routing.rules import RuleSet, load_rules
from .rules_watch import RulesWatcher


class RecipeBook:
    def __init__(self, watcher: RulesWatcher, folders: list[Path]) -> None:
        self.watcher = watcher
        self.folders = [f for f in folders if f.is_dir()]

    def files(self) -> dict[str, Path]:
        """Recipe name -> its rule file (a file name counts as a name too; the first folder wins)."""
        out: dict[str, Path] = {}
        for folder in self.folders:
            for path in sorted(folder.glob("*.yaml")):
                try:
                    recipe = load_rules(path).recipe
                except ValueError:
                    continue  # a broken file is no recipe; selecting it by name says why below
                out.setdefault(recipe, path)
                out.setdefault(path.stem, path)
        return out

    def select(self, name: str) -> str | None:
        """Switch to recipe `name` from the next board; the reason when refused (nothing changes)."""
        name = name.strip()
        known = self.files()
        path = known.get(name)
        if path is None:
            broken = [p for f in self.folders for p in f.glob(f"{name}.yaml")]
            if broken:
                try:
                    load_rules(broken[0])
                except ValueError as exc:
                    return f"its rule file does not load: {exc}"
            where = ", ".join(str(f) for f in self.folders) or "no rule folder"
            names = ", ".join(sorted({load_rules(p).recipe for p in set(known.values())})) or "none"
            return f"no rule set for recipe {name!r} in {where} (recipes there: {names})"
        if self.watcher.path is not None and path.resolve() == Path(self.watcher.path).resolve() \
                and self.watcher.line.rules.recipe == name:
            return None  # already in force
        try:
            rules: RuleSet = self.watcher.validate(path.read_text(encoding="utf-8"), str(path))
        except (ValueError, OSError) as exc:
            return str(exc)
        with self.watcher.writing:
            self.watcher.path = path
            self.watcher.apply_text(path.read_text(encoding="utf-8"), str(path))
            self.watcher.mark_read()
        self.watcher.say(f"recipe changeover: {rules.recipe} {rules.version} from {path}, from the next board on")
        return None
