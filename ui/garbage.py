"""Python's cycle collector, run only in the GUI thread.

The collector runs in whichever thread allocates when a threshold is crossed. The dashboard shares its
process with the line's threads: the PLC servers, the camera and the engine. When the collector runs in
one of those threads and frees a Qt wrapper caught in a reference cycle, Qt destroys the object outside
its owner thread and the process crashes. CI saw exactly that, in an OPC UA server thread. So while the
dashboard runs, automatic collection is off, and a timer in the GUI thread collects whichever generation
the standard thresholds say is due.
"""
from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 500


class GuiThreadCollector(QObject):
    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.check)
        self.was_enabled = gc.isenabled()

    def start(self) -> GuiThreadCollector:
        gc.disable()
        self.timer.start()
        return self

    def check(self) -> int:
        """Collect the oldest generation whose count passed its threshold (as the automatic collector would);
        the generation collected, or -1."""
        counts = gc.get_count()
        due = -1
        for generation in range(3):
            if counts[generation] > self.thresholds[generation]:
                due = generation
        if due >= 0:
            gc.collect(due)
        return due

    def stop(self) -> None:
        """Back to automatic collection, after a last full collection here."""
        self.timer.stop()
        gc.collect()
        if self.was_enabled:
            gc.enable()
