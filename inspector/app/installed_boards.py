"""The boards installed on a kiosk (app/board_package.py), and the one it starts with.

A new board brings its own zoo. It is changed over to live by app/board_switch.py, which keeps its choice here too,
or chosen for the kiosk's next start alone (a plant that changes boards by a restart): `choose` writes
`board-next.json` in the kiosk's data directory with what the configuration named then; `at_start` gives the installed
board's rule file and zoo in place of the configured ones while the configuration still names the same (a
configuration naming another rule file or zoo since wins, as it does over a changeover's rule file, app/recipes.py).
Choosing none goes back to the configured board. A recipe changeover kept for the next start (rules-in-force.json)
is forgotten by a choice: it named a file of the board served before.
"""
from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..experts.zoo import Zoo
from ..routing.rules import RuleSet, load_rules
from ..runtime.diskio import write_atomically
from .board_package import PACKAGE, Installed, board_name, install_board
from .line import check_rule_set
from .recipes import forget_in_force

BOARDS = "boards"  # <data dir>/boards/NAME/: installed boards (board/ and zoo/)
NEXT_FILE = "board-next.json"


@dataclass(frozen=True)
class Chosen:
    """The installed board a kiosk starts with."""
    name: str
    folder: Path  # boards/NAME/
    rules: Path
    zoo: Path


def boards_dir(data_dir: Path) -> Path:
    return Path(data_dir) / BOARDS


def served_folder(data_dir: Path, zoo_root: Path) -> Path | None:
    """The installed board's folder whose zoo is `zoo_root` (None: a zoo of the configuration's)."""
    zoo = Path(zoo_root).resolve()
    return zoo.parent if zoo.parent.parent == boards_dir(data_dir).resolve() else None


def installed(data_dir: Path) -> list[dict[str, Any]]:
    """Each installed board: its name, recipe, version, rule file, when it was packed and installed (by name)."""
    out = []
    for folder in sorted(boards_dir(data_dir).glob("*")):
        if folder.name.startswith(".") or not (folder / PACKAGE).is_file():
            continue
        try:
            doc = json.loads((folder / PACKAGE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # listed, saying so: a board cannot be chosen without it
            out.append({"board": folder.name, "damaged": f"{PACKAGE} cannot be read ({exc}): install it again"})
            continue
        out.append({"board": folder.name, "recipe": doc.get("recipe"), "version": doc.get("version"),
                    "rules": Path(doc.get("rules", "")).name, "packed": doc.get("packed"),
                    "installed": doc.get("installed")})
    return out


def install_package(data_dir: Path, package: Path, serving: Path | None = None, keep_free: int = 0) -> Installed:
    """A board package file (`board install --out`) installed in `data_dir`'s boards folder (board_package.py's
    checks), never over a board of its name (a line in another process may serve it). ValueError saying what to do
    where one is there, or where it is `serving` (the folder of the board the line serves)."""
    with open(package, "rb") as f:
        try:
            return install_board(f, Path(package).stat().st_size, boards_dir(data_dir), serving=serving,
                                 keep_free=keep_free)
        except FileExistsError as exc:
            why = str(exc).split(":")[0]  # a board of its name is installed already, or is the one served
            then = ":" if "serves" in why else " on this box: remove the installed one first (Routing rules tab), or"
            raise ValueError(f"{why}{then} install this one under another name (--name)") from None


def boards_document(data_dir: Path, zoo_root: Path | None, configured_rules: str | None) -> dict[str, Any]:
    """What a line says of its boards (GET /boards, the dashboard's boards panel): each installed one, the one chosen
    for the kiosk's next start, the one whose zoo `zoo_root` the line serves (None: the configured board's, or no
    line runs) and the configured board's rule file."""
    served = served_folder(data_dir, zoo_root) if zoo_root is not None else None
    return {"boards": installed(data_dir), "next": next_board(data_dir),
            "serving": served.name if served is not None else None,
            "configured": {"rules": Path(configured_rules).name if configured_rules else None}}


def chosen_rules(data_dir: Path, name: str) -> Chosen:
    """Installed board `name`'s rule file and zoo; ValueError naming the installed boards where there is none."""
    folder = boards_dir(data_dir) / board_name(name)
    if not (folder / PACKAGE).is_file():
        names = ", ".join(b["board"] for b in installed(data_dir)) or "none"
        raise ValueError(f"no board {name} is installed on this kiosk (installed: {names}); install it first "
                         "(`inspector board install --kiosk`)")
    doc = json.loads((folder / PACKAGE).read_text(encoding="utf-8"))
    return Chosen(folder.name, folder, folder / doc["rules"], folder / "zoo")


def choose(data_dir: Path, name: str | None, configured_rules: str | None, configured_zoo: str | None) -> Chosen | None:
    """Installed board `name` for the kiosk's next start (None: the configured board again); the rule file is checked
    to load. What the configuration names now is kept beside it: a configuration changed since wins."""
    chosen = None
    if name is not None:
        chosen = chosen_rules(data_dir, name)
        load_rules(chosen.rules)
    keep_choice(data_dir, chosen.name if chosen is not None else None, configured_rules, configured_zoo)
    return chosen


def keep_choice(data_dir: Path, name: str | None, configured_rules: str | None, configured_zoo: str | None) -> None:
    """Board `name` (installed, its rules known to load; None: the configured board) for the kiosk's next start, with
    what the configuration names now; a recipe changeover kept for the next start is forgotten."""
    forget_in_force(data_dir)
    if name is None:
        (Path(data_dir) / NEXT_FILE).unlink(missing_ok=True)
        return
    doc = {"board": name, "configured_rules": _resolved(configured_rules),
           "configured_zoo": _resolved(configured_zoo), "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_atomically(Path(data_dir) / NEXT_FILE, json.dumps(doc, indent=1).encode("utf-8"))


def remove(data_dir: Path, name: str, serving: str | None) -> Chosen:
    """Installed board `name` removed (its folder renamed out of the list first, then deleted): ValueError where none
    is installed, FileExistsError where it is served or chosen for the next start (choose another first)."""
    chosen = chosen_rules(data_dir, name)
    if chosen.name in (serving, next_board(data_dir)):
        why = "the line serves it" if chosen.name == serving else "the kiosk's next start runs it"
        raise FileExistsError(f"board {chosen.name} stays: {why}; choose another board for the next start first")
    gone = chosen.folder.with_name(f".{chosen.name}.{uuid.uuid4().hex[:8]}.removed")
    chosen.folder.rename(gone)
    shutil.rmtree(gone, ignore_errors=True)
    return chosen


def next_board(data_dir: Path) -> str | None:
    """The installed board chosen for the next start, by name (None: the configured one)."""
    try:
        return str(json.loads((Path(data_dir) / NEXT_FILE).read_text(encoding="utf-8"))["board"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def at_start(data_dir: Path, configured_rules: str | None,
             configured_zoo: str | None) -> tuple[Chosen | None, str] | None:
    """(the installed board to start with, what to say of it); None where none was chosen or the configuration names
    another board since (it wins). A damaged record or a board gone is said, and the configured board starts
    (None, the warning): a line box that cannot start is worse than one on its configured board."""
    path = Path(data_dir) / NEXT_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        name, rules, zoo = str(doc["board"]), doc.get("configured_rules"), doc.get("configured_zoo")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"warning: {path} is damaged ({exc}): the configured board starts; choose a board again"
    if rules != _resolved(configured_rules) or zoo != _resolved(configured_zoo):
        return None  # the configuration names another board since: it wins
    try:
        chosen = chosen_rules(data_dir, name)
    except ValueError as exc:
        return None, f"warning: the board chosen for this start is not there ({exc}): the configured board starts"
    return chosen, (f"board {chosen.name} installed on this kiosk, chosen {doc.get('at', '?')}: {chosen.rules.name} "
                    "with its own zoo, in place of the configured board")


def startable(chosen: Chosen) -> str | None:
    """Why installed board `chosen` cannot start (its rule set does not load or its zoo cannot serve it, a weights
    file of it gone); None when it can. Cheap: read before the line starts on it, so a damaged board leaves the
    line on its configured board rather than down."""
    try:
        rules = load_rules(chosen.rules)
        zoo = Zoo.load(chosen.zoo)
        check_rule_set(rules, zoo)
    except (OSError, ValueError, KeyError) as exc:
        return str(exc)
    return weights_gone(rules, zoo)


def weights_gone(rules: RuleSet, zoo: Zoo) -> str | None:
    """What is gone of the weights files `rules`' experts need in `zoo` (None: all there): a board missing them is
    not started on, nor changed over to."""
    gone = sorted({zoo.path_of(name).name for name in rules.expert_specs() if not zoo.path_of(name).is_file()})
    return f"weights file(s) {', '.join(gone)} gone from {zoo.root}: install the board again" if gone else None


def _resolved(path: str | None) -> str | None:
    return str(Path(path).resolve()) if path else None
