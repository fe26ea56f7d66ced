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

    def index(self) -> tuple[dict[str, Path], dict[str, Path], dict[str, str]]:
        """(recipe -> its rule file, file name -> its rule file, file name -> why that file does not load), each
        file read once; the first folder wins."""
        recipes: dict[str, Path] = {}
        stems: dict[str, Path] = {}
        broken: dict[str, str] = {}
        for folder in self.folders:
            for path in sorted(folder.glob("*.yaml")):
                try:
                    recipe = load_rules(path).recipe
                except ValueError as exc:
                    broken.setdefault(path.stem, str(exc))
                    continue
                recipes.setdefault(recipe, path)
                stems.setdefault(path.stem, path)
        return recipes, stems, broken

    def select(self, name: str) -> str | None:
        """Switch to recipe `name` from the next board; the reason when refused (nothing changes)."""
        name = name.strip()
        recipes, stems, broken = self.index()
        path = recipes.get(name) or stems.get(name)
        if path is None:
            if name in broken:
                return f"its rule file does not load: {broken[name]}"
            where = ", ".join(str(f) for f in self.folders) or "no rule folder"
            names = ", ".join(sorted(recipes)) or "none"
            return f"no rule set for recipe {name!r} in {where} (recipes there: {names})"
        if self.watcher.path is not None and path.resolve() == Path(self.watcher.path).resolve() \
                and self.watcher.line.rules.recipe == name:
            return None  # already in force
        old = self.watcher.line.rules
        try:
            text = path.read_text(encoding="utf-8")
            with self.watcher.writing:
                rules: RuleSet = self.watcher.apply_text(text, str(path))  # validated against the zoo, then applied
                self.watcher.path = path
                self.watcher.mark_read()
        except (ValueError, OSError) as exc:
            return str(exc)
        self.watcher.say(f"recipe changeover: {rules.recipe} {rules.version} from {path}, from the next board on")
        self.watcher.witnessed("rules.changeover", "line controller", f"recipe changeover to {name} asked by the PLC",
                               old, rules)
        return None
