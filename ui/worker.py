"""Slow calls off the GUI thread: a plain thread runs the call, a queued Qt signal brings the answer back."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal


class Job(QObject):
    """`Job(fn).start()`; connect `done(result)` and `failed(message)`; they arrive on the GUI thread."""

    done = Signal(object)
    failed = Signal(str)

    def __init__(self, fn: Callable[[], Any], name: str = "gui-job") -> None:
        super().__init__()
        self.fn = fn
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Job:
        self.thread.start()
        return self

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    def _run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:  # noqa: BLE001 - shown to the operator
            self.failed.emit(f"{exc.__class__.__name__}: {exc}")
            return
        self.done.emit(result)


class OneJobAtATime:
    """A widget's slow steps, one at a time: `busy` while one runs (its answer may arrive while its thread still
    ends: this, not the thread, says), then `done(result)` or its error said (`_say(text, error=True)`), and the
    widget's buttons enabled again (`_enable`). The widget defines `_say` and `_enable`."""

    job: Job | None = None
    busy = False
    job_name = "gui-job"

    def _run(self, fn: Callable[[], Any], done: Callable[[Any], None]) -> None:
        self.job = Job(fn, self.job_name)
        self.job.done.connect(lambda result: self._finished(done, result))
        self.job.failed.connect(lambda message: self._finished(lambda m: self._say(m, error=True), message))
        self.busy = True
        self.job.start()
        self._enable()

    def _finished(self, then: Callable[[Any], None], result: Any) -> None:
        self.busy = False
        then(result)
        self._enable()
