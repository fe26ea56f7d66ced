"""Another board served live: an installed board (app/installed_boards.py) or the configured one taking the line
over at its changeover, with its own zoo, without a restart.

A line's boards are the configured one (the rule file and zoo its configuration names) and each board installed on
it (`boards/NAME/`: its rule folder `board/` and its `zoo/`). `serve` changes the line over to one of them at a board
boundary (Line.change_board: the boards inside finish on the old board, the old engine lets go of its experts, the
new board's engine starts); the rule watcher and the recipe book follow the new board's rule folder, and the choice
is kept for the next start as `board next` keeps it. `changeover` is the recipe book's way there: a recipe the
served board's folder lacks is looked for in the other boards' folders, so a PLC or MES naming the next product's
recipe changes the whole board over as it changes a rule set over.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..coserve.online.profile import DeviceProfile
from ..experts.zoo import Zoo
from ..routing.rules import RuleSet, load_rules
from .installed_boards import chosen_rules, installed, keep_choice, served_folder, weights_gone
from .recipes import NoRecipe, RecipeBook, recipe_index, save_in_force

Say = Callable[[str], None]


def board_said(name: str | None) -> str:
    """How a line's board is named to a person: an installed one by its name, else the configured one."""
    return f"board {name}" if name else "the configured board"


@dataclass(frozen=True)
class BoardOpener:
    """How this line opens a board: the configured board's rule file, a zoo by its folder (None: the configuration's
    default zoo for the rule set), the device profiles of a zoo (measured where the box lacks one), and what can be
    made of a zoo while another board runs."""
    rules: Path
    zoo: Callable[[str | None, RuleSet], Zoo]
    profiles: Callable[[Zoo, RuleSet], dict[str, DeviceProfile]]
    # what is made of a zoo ahead of its changeover (a runtime's model files); the architectures left to profile
    prepare: Callable[[Zoo, RuleSet], list[str]] = lambda _zoo, _rules: []


@dataclass(frozen=True)
class Board:
    """One board this line may serve: an installed one by name, or the configured one (name None)."""
    name: str | None
    rules: Path  # its main rule file
    zoo: str | None  # its zoo's folder (None: the configuration's default zoo)

    @property
    def said(self) -> str:
        return board_said(self.name)


@dataclass(frozen=True)
class Served:
    board: Board
    file: Path  # the rule file in force
    rules: RuleSet
    seconds: float  # from asked to the first board of it allowed in
    kept: str | None  # why the choice is not kept for the next start (None: kept)

    def to_json(self) -> dict[str, object]:
        return {"board": self.board.name, "file": self.file.name, "recipe": self.rules.recipe,
                "version": self.rules.version, "seconds": round(self.seconds, 2), "kept_for_next_start": not self.kept,
                **({"not_kept": self.kept} if self.kept else {})}


class BoardSwitch:
    def __init__(self, book: RecipeBook, data_dir: Path, opener: BoardOpener,
                 configured: tuple[str | None, str | None], say: Say = lambda _m: None,
                 moved: Callable[[Path], None] = lambda _p: None) -> None:
        self.book, self.data_dir, self.opener, self.say = book, Path(data_dir), opener, say
        self.line = book.watcher.line  # the line whose board changes (the watcher's: it follows the board's file)
        self.configured = configured  # (rule file, zoo) as the configuration names them: kept with a choice
        self.moved = moved  # told of the main rule file of each board served (a changeover is kept against it)
        book.elsewhere = self.changeover
        self._one = threading.RLock()  # one changeover at a time, kept for the next start before the next begins

    def board(self, name: str | None) -> Board:
        """The installed board `name` (ValueError naming those installed where there is none), or the configured."""
        if name is None:
            return Board(None, self.opener.rules, self.configured[1])
        chosen = chosen_rules(self.data_dir, name)
        return Board(chosen.name, chosen.rules, str(chosen.zoo))

    def serving(self) -> str | None:
        """The installed board served, by name (None: the configured board)."""
        folder = served_folder(self.data_dir, self.line.zoo.root)
        return folder.name if folder is not None else None

    def serve(self, name: str | None, file: Path | None = None, timeout: float = 60.0) -> Served:
        """Board `name` (None: the configured one) served from the next board on, its rule file `file` (None: its
        main one) in force. ValueError (the board, its rules or its zoo cannot be served) or TimeoutError (the boards
        inside did not finish) and the line serves what it served."""
        with self._one:
            return self._serve(name, file, timeout)

    def _serve(self, name: str | None, file: Path | None, timeout: float) -> Served:
        asked = time.monotonic()
        board = self.board(name)
        path = file or board.rules
        rules = load_rules(path)
        if board.name == self.serving() and (board.name is not None or self._configured_zoo_served()):
            self.book.switch(path)  # the board served already: a rule set of its folder changed over to
        else:
            zoo = self.opener.zoo(board.zoo, rules)
            gone = weights_gone(rules, zoo)
            if gone:
                raise ValueError(f"{board.said} cannot be served: {gone}")
            self.book.watcher.change_board(path, rules, zoo, lambda: self.opener.profiles(zoo, rules), timeout)
            self.book.folders = [path.parent]
        served = Served(board, path, rules, time.monotonic() - asked, self._keep(board, path, rules))
        self.moved(board.rules)
        self.say(f"{board.said} served from the next board on: {rules.recipe} {rules.version} from {path.name}, "
                 f"in {served.seconds:.1f} s" + (f" (warning: {served.kept})" if served.kept else ""))
        return served

    def prepare(self, name: str) -> list[str]:
        """Installed board `name` made ready for its changeover while the line serves another (a runtime's model
        files: seconds a changeover would otherwise spend); the architectures its first changeover still profiles."""
        _board, rules, zoo = self._opened(name)
        return self.opener.prepare(zoo, rules)

    def _opened(self, name: str) -> tuple[Board, RuleSet, Zoo]:
        """Installed board `name`, its main rule set read and its zoo opened (nothing served)."""
        board = self.board(name)
        rules = load_rules(board.rules)
        return board, rules, self.opener.zoo(board.zoo, rules)

    def profile(self, name: str, timeout: float = 60.0) -> tuple[list[str], float]:
        """Installed board `name`'s architectures this box never profiled measured now, on the line emptied for it
        (Line.measure_quietly: the boards wait as long as it takes, at a moment an engineer chose, not at a PLC's
        changeover); (those measured, seconds the line was held). None left: nothing held."""
        with self._one:
            _board, rules, zoo = self._opened(name)
            left = self.opener.prepare(zoo, rules)
            if not left:
                return [], 0.0
            asked = time.monotonic()
            self.line.measure_quietly(lambda: self.opener.profiles(zoo, rules), timeout)
            return left, time.monotonic() - asked

    def changeover(self, recipe: str, why: str) -> tuple[Path, RuleSet]:
        """Recipe `recipe` of another board served whole (the recipe book's `elsewhere`); NoRecipe saying what the
        boards hold (`why`: what the served board's folder holds) where none answers."""
        served = self.serving()
        others: list[tuple[str | None, Path]] = [(None, self.opener.rules.parent)] if served is not None else []
        others += [(b["board"], self.board(b["board"]).rules.parent) for b in installed(self.data_dir)
                   if b["board"] != served and "damaged" not in b]
        wanted = recipe.strip()
        searched, found = [], []
        for name, folder in others:
            recipes, stems, broken = recipe_index([folder])
            path = recipes.get(wanted) or stems.get(wanted)
            said = board_said(name)
            if path is not None:
                found.append((name, path))
            elif wanted in broken:
                raise ValueError(f"{said}'s rule file for it does not load: {broken[wanted]}")
            searched.append(f"{said}: {', '.join(sorted(recipes)) or 'none'}")
        if len(found) > 1:  # which board the PLC means is not for the line to guess
            boards = " and ".join(f"{board_said(n)} ({p.name})" for n, p in found)
            raise ValueError(f"recipe {wanted!r} is served by {boards}: remove the one not meant (`board "
                             "remove`), or serve the board by its name (`board serve`)")
        if found:
            done = self.serve(*found[0])
            return done.file, done.rules
        raise NoRecipe(f"{why}; nor has another board of this line ({'; '.join(searched) or 'none is installed'})")

    def _configured_zoo_served(self) -> bool:
        """The line serves the configured board's zoo (a configuration without a zoo folder: its default one)."""
        zoo = self.configured[1]
        return zoo is None or Path(zoo).resolve() == Path(self.line.zoo.root).resolve()

    def _keep(self, board: Board, path: Path, rules: RuleSet) -> str | None:
        """The board served, and its rule file in force, kept for the next start; why not, where not."""
        try:
            keep_choice(self.data_dir, board.name, *self.configured)  # its rules were read to serve it
            if path.resolve() != board.rules.resolve():
                save_in_force(self.data_dir, board.rules, path, rules)
        except (OSError, ValueError) as exc:
            return f"not kept for the next start ({exc}): the kiosk starts on the board it started on before"
        return None


def served_line(done: dict[str, object], start: str = "the kiosk's next start") -> str:
    """What a kiosk's answer to POST /boards/serve says, in a line (`start`: whose next start runs it too)."""
    board = board_said(done["board"])  # type: ignore[arg-type]
    kept = f"and from {start}" if done["kept_for_next_start"] else f"(warning: {done.get('not_kept')})"
    return (f"{board} served from the next board on: {done['recipe']} {done['version']} ({done['file']}), changed "
            f"over in {done['seconds']:.1f} s, {kept}")


def profiled_line(done: dict[str, Any], kiosk: str = "the kiosk") -> str:
    """What a kiosk's answer to POST /boards/profile says, in a line (`kiosk`: whose box; "this" for the box the
    dashboard's own line runs on)."""
    box = "this box" if kiosk == "this" else f"{kiosk}'s box"
    if done["profiled"]:
        return (f"board {done['board']}: {', '.join(done['profiled'])} profiled on {box}, the line held "
                f"{done['held_s']:.1f} s; its changeover measures nothing now")
    return (f"board {done['board']}: {box} has a profile of each of its architectures already (nothing "
            "measured, the line not held)")
