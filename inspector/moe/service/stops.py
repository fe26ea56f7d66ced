"""Stop strings: text is released only once no stop string can still begin inside it.

`push` takes the newest text and returns what may be sent now; when a stop string
appears, everything before it is released, nothing after it, and `stopped` is set.
"""
from __future__ import annotations


class StopScanner:
    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""
        self.stopped = False

    def push(self, piece: str) -> str:
        if self.stopped:
            return ""
        text = self.held + piece
        hits = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.stopped, self.held = True, ""
            return text[:min(hits)]
        keep = max((n for s in self.stops for n in range(1, len(s)) if text.endswith(s[:n])), default=0)
        self.held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def flush(self) -> str:
        """The end of the text: what was held back (a prefix of a stop string that never completed)."""
        out, self.held = self.held, ""
        return "" if self.stopped else out
