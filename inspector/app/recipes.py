"""Recipe changeover: the rule set a line controller names, found among the rule files and switched at a board
boundary.

A PLC or MES names a recipe (OPC UA RecipeManagement, or the Recipe tag); the rule file whose `recipe:` (or
file name) is that name, in the folder of the rule file in force, is validated against the zoo and applied
from the next board on; boards inside finish under the set they were cut with. An unknown name or a file that
does not validate is refused with the reason, and the running set stays. An engineer changes over the same way
through the kiosk's API (a new revision of the board, kiosk/revisions.py), recorded under their name.

A recipe no rule file of the folder answers to may be another board's, with its own zoo (app/board_switch.py): a
book given `elsewhere` asks it, and the whole board changes over.

The kiosk keeps the file a changeover put in force (`rules-in-force.json` in its data directory) and starts with it
again, as long as its configuration still names the file it named then: a restart in the middle of a lot of the
new revision does not go back to the old one.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from ..routing.rules import RuleSet, load_rules
from ..runtime.diskio import write_atomically
from .rules_watch import RulesWatcher

IN_FORCE_FILE = "rules-in-force.json"  # in the kiosk's data directory: the rule file a changeover put in force


class NoRecipe(ValueError):
    """No rule file of the folders answers to the recipe asked for."""


Index = tuple[dict[str, Path], dict[str, Path], dict[str, str]]


def recipe_index(folders: list[Path]) -> Index:
    """(recipe -> its rule file, file name -> its rule file, file name -> why that file does not load) of the rule
    files in `folders`, each file read once; the first folder wins."""
    recipes: dict[str, Path] = {}
    stems: dict[str, Path] = {}
    broken: dict[str, str] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            try:
                recipe = load_rules(path).recipe
            except ValueError as exc:
                broken.setdefault(path.stem, str(exc))
                continue
            recipes.setdefault(recipe, path)
            stems.setdefault(path.stem, path)
    return recipes, stems, broken


def find_recipe(name: str, folders: list[Path]) -> Path:
    """The rule file of recipe (or file name) `name` in `folders`; NoRecipe saying what they hold when none is,
    ValueError when its file does not load."""
    name = name.strip()
    recipes, stems, broken = recipe_index(folders)
    path = recipes.get(name) or stems.get(name)
    if path is not None:
        return path
    if name in broken:
        raise ValueError(f"its rule file does not load: {broken[name]}")
    where = ", ".join(str(f) for f in folders) or "no rule folder"
    names = ", ".join(sorted(recipes)) or "none"
    raise NoRecipe(f"no rule set for recipe {name!r} in {where} (recipes there: {names})")


class RecipeBook:
    def __init__(self, watcher: RulesWatcher, folders: list[Path],
                 keep: Callable[[Path, RuleSet], None] | None = None,
                 elsewhere: Callable[[str, str], tuple[Path, RuleSet]] | None = None) -> None:
        self.watcher = watcher
        self.folders = [f for f in folders if f.is_dir()]
        self.keep = keep  # told of every changeover, to keep the file in force for the next start
        # asked for a recipe the folders lack, with why they lack it: another board's, changed over to whole (its
        # rule file and the set in force), or NoRecipe
        self.elsewhere = elsewhere

    def find(self, name: str) -> Path:
        """The rule file of recipe (or file name) `name`; NoRecipe saying what the folders hold when none is."""
        return find_recipe(name, self.folders)

    def changeover(self, name: str) -> tuple[Path, RuleSet]:
        """Recipe `name` in force from the next board: a rule file of the folders, or another board's where the
        book has `elsewhere`; (its rule file, the set). ValueError (NoRecipe: none answers) and nothing changes."""
        try:
            path = self.find(name)
        except NoRecipe as exc:
            if self.elsewhere is None:
                raise
            return self.elsewhere(name, str(exc))
        return path, self.switch(path)

    def switch(self, path: Path) -> RuleSet:
        """The rule file `path` in force from the next board (validated against the zoo first; the running set stays
        when refused: ValueError), kept for the next start where the book keeps it. The set in force already is
        returned as it is."""
        if self.watcher.path is not None and path.resolve() == Path(self.watcher.path).resolve():
            return self.watcher.line.rules
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None
        with self.watcher.writing:
            rules: RuleSet = self.watcher.apply_text(text, str(path))  # validated against the zoo, then applied
            self.watcher.path = path
            self.watcher.mark_read()
        if self.keep is not None:
            self.keep(path, rules)
        self.watcher.say(f"recipe changeover: {rules.recipe} {rules.version} from {path}, from the next board on")
        return rules

    def select(self, name: str, who: str = "line controller", origin: str | None = None) -> str | None:
        """Switch to recipe `name` from the next board, as a PLC (or the machine before the box) asks; the reason
        when refused (nothing changes). Recorded as `who`'s, from `origin`."""
        old = self.watcher.line.rules
        try:
            rules = self.changeover(name)[1]
        except (ValueError, TimeoutError) as exc:
            return str(exc)
        self.watcher.witnessed("rules.changeover", who, origin or f"recipe changeover to {name} asked by the PLC",
                               old, rules)
        return None


def save_in_force(data_dir: Path, configured: Path, path: Path, rules: RuleSet) -> None:
    """The rule file a changeover put in force (`path`, beside the `configured` one), for the kiosk's next start; a
    changeover back to the configured file keeps nothing."""
    if path.resolve() == configured.resolve():
        forget_in_force(data_dir)
        return
    doc = {"configured": str(configured.resolve()), "file": path.name, "recipe": rules.recipe, "version": rules.version,
           "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_atomically(data_dir / IN_FORCE_FILE, json.dumps(doc, indent=1).encode("utf-8"))


def in_force(data_dir: Path, configured: Path) -> tuple[Path, str] | None:
    """(the rule file the last changeover put in force, what to say of it) while the configuration still names
    `configured` and the file is still there; None otherwise (the configured file is in force)."""
    kept = data_dir / IN_FORCE_FILE
    try:
        doc = json.loads(kept.read_text(encoding="utf-8"))
        named, file = Path(doc["configured"]), str(doc["file"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return configured, f"warning: {kept} is damaged ({exc}): the configured rule file {configured} is in force"
    if named.resolve() != configured.resolve():
        return None  # the configuration names another file since: it wins
    path = configured.parent / Path(file).name
    if not path.is_file():
        return configured, (f"warning: the rule file the last changeover put in force, {path}, is gone: the "
                            f"configured {configured} is in force")
    return path, (f"rules in force since the changeover of {doc.get('at', '?')}: {path.name} (recipe "
                  f"{doc.get('recipe', '?')}); the configuration names {configured.name}")


def forget_in_force(data_dir: Path) -> None:
    """The configuration names another rule file: it is in force, not the last changeover's."""
    (data_dir / IN_FORCE_FILE).unlink(missing_ok=True)
