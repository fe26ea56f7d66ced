"""The line follows the product the machine before it hands in: a board whose Hermes ProductTypeId names a recipe
other than the one in force changes the line over to it before the board is inspected.

The product type is looked up as a PLC's recipe name is (app/recipes.py): a recipe or rule file of the served board's
folder (a rule set changed over, same zoo), else another board of the line's (app/board_switch.py: the whole board
with its zoo). A board of a product no recipe answers to is not inspected under another product's rules: it is
finished as an error naming the product (handed on as failed), and the line serves what it served. Each changeover
is recorded in the audit trail as the upstream machine's.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..ingest.sources import Frame
from .recipes import RecipeBook

UPSTREAM = "Hermes upstream"


@dataclass
class ProductCounters:
    changeovers: int = 0  # times a board's product changed the line over
    refused: int = 0  # boards not inspected: no recipe of the line answers to their product
    last_refused: str = ""  # why, for the last


class ProductChangeover:
    def __init__(self, book: RecipeBook) -> None:
        self.book = book
        self.counters = ProductCounters()
        self._lock = threading.Lock()
        self._served: tuple[str, str] | None = None  # (product, the version it changed over to): a product named by
        # a rule file's name rather than its recipe is served while that version is

    def _serves(self, product: str) -> bool:
        rules = self.book.watcher.line.rules
        return product == rules.recipe or self._served == (product, rules.version)

    def __call__(self, frame: Frame) -> str | None:
        """Before `frame`'s board is inspected: None when the line serves its product (changed over to it where it
        did not), or why the board is not inspected."""
        product = (getattr(frame.handoff, "ProductTypeId", None) or "").strip()
        if not product or self._serves(product):
            return None
        with self._lock:  # one board at a time decides (the ingest thread's, in order)
            if self._serves(product):
                return None
            board = getattr(frame.handoff, "BoardId", "?")
            reason = self.book.select(product, UPSTREAM, f"board {board} of product {product} from the machine "
                                                         "before the box")
            if reason is None:
                self.counters.changeovers += 1
                self._served = (product, self.book.watcher.line.rules.version)
                return None
            self.counters.refused += 1
            self.counters.last_refused = f"product {product}: {reason}"
            return f"not inspected: no recipe of this line serves product {product} ({reason})"

    def snapshot(self) -> dict[str, Any]:
        return vars(self.counters).copy()
