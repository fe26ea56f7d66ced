"""Tab 6, the MoE language model: a chat that streams tokens, with the offloading engine's live statistics
(tokens/s, expert-cache hit rate, loads, prediction accuracy) and each layer's residency by tier."""
from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.endpoint import read_token
from inspector.moe.engine import GenStats
from inspector.moe.policies import POLICIES
from inspector.moe.service.client import EndpointChat
from inspector.moe.session import ChatSession

from ..style import fit_height
from ..worker import Job

STAT_ROWS = ("Tokens", "Tokens/s", "First token after", "Expert-cache hit rate", "Expert loads",
             "Next-layer prediction", "Prefetches used / started", "Peak pool memory")


def demo_model(models_dir: Path) -> Path | None:
    """The newest built demo model under models/llm, if any (`inspector llm build-demo`)."""
    built = sorted((models_dir / "llm").glob("demo-*/build.json"), key=lambda p: p.stat().st_mtime)
    return built[-1].parent if built else None


class LlmTab(QWidget):
    def __init__(self, models_dir: Path, model: Path | None = None,
                 borrow: Callable[[int], Any] | None = None,
                 person_token: Callable[[], str | None] | None = None) -> None:
        super().__init__()
        # a model server's token: $INSPECTOR_LLM_TOKEN_FILE when set, else the signed-in person's own (a server
        # started with --db knows the plant's users)
        self.person_token = person_token
        # where an in-process model's memory comes from: the line's side (set aside here, or the kiosk's lease)
        self.borrow = borrow
        self.session: ChatSession | EndpointChat | None = None  # in this process, or a server's (a URL)
        self._loading: Job | None = None
        self._tokens: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._generating: threading.Thread | None = None
        self.calibration_dir = models_dir / "llm" / "calibration"
        self.pieces_received = 0  # text pieces of the current answer shown so far (one per decodable token)

        model = model or demo_model(models_dir)
        self.model = QLineEdit(str(model) if model else "")
        self.model.setPlaceholderText("a local MoE checkpoint directory (inspector llm build-demo), or the URL of "
                                      "a running `inspector llm serve` (http://127.0.0.1:8000)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.policy = QComboBox()
        self.policy.addItems([p for p in POLICIES if p != "daop+degrade"])
        self.policy.setCurrentText("daop")
        self.ratio = QDoubleSpinBox(decimals=2, minimum=0.05, maximum=1.0, singleStep=0.05, value=0.25)
        self.max_new = QSpinBox(minimum=1, maximum=1024, value=64)
        self.load_btn = QPushButton("Load model")
        self.load_btn.clicked.connect(self.load)
        self.model_state = QLabel("no model loaded")
        self.model_state.setWordWrap(True)
        mrow = QHBoxLayout()
        mrow.addWidget(self.model, 1)
        mrow.addWidget(browse)
        form = QFormLayout()
        form.addRow("Model", mrow)
        form.addRow("Offloading policy", self.policy)
        form.addRow("Experts kept per layer (cache ratio)", self.ratio)
        form.addRow("New tokens per answer", self.max_new)
        setup = QGroupBox("Model")
        sv = QVBoxLayout(setup)
        sv.addLayout(form)
        lrow = QHBoxLayout()
        lrow.addWidget(self.load_btn)
        lrow.addWidget(self.model_state, 1)
        sv.addLayout(lrow)

        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.transcript = QPlainTextEdit(readOnly=True)
        self.transcript.setFont(mono)
        self.prompt = QPlainTextEdit()
        self.prompt.setFont(mono)
        self.prompt.setPlaceholderText("a prompt (the demo model continues Python source)")
        self.prompt.setMaximumHeight(110)
        self.send_btn, self.stop_btn = QPushButton("Send"), QPushButton("Stop")
        self.send_btn.clicked.connect(self.send)
        self.stop_btn.clicked.connect(self._stop.set)
        self.send_btn.setEnabled(False)
        self.stop_btn.setEnabled(False)
        chat = QGroupBox("Chat")
        cv = QVBoxLayout(chat)
        cv.addWidget(self.transcript, 1)
        cv.addWidget(self.prompt)
        crow = QHBoxLayout()
        crow.addStretch(1)
        crow.addWidget(self.send_btn)
        crow.addWidget(self.stop_btn)
        cv.addLayout(crow)

        self.stats = QTableWidget(len(STAT_ROWS), 1)
        self.stats.setVerticalHeaderLabels(STAT_ROWS)
        self.stats.horizontalHeader().setVisible(False)
        self.stats.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.stats.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        fit_height(self.stats)
        stats = QGroupBox("Engine (this answer)")
        QVBoxLayout(stats).addWidget(self.stats)
        self.layers = QTableWidget(0, 3)
        self.layers.setHorizontalHeaderLabels(("Layer", "In the pool", "On disk"))
        self.layers.verticalHeader().setVisible(False)
        self.layers.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.layers.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        layers = QGroupBox("Experts per layer by tier")
        QVBoxLayout(layers).addWidget(self.layers)
        right = QVBoxLayout()
        right.addWidget(stats)
        right.addWidget(layers, 1)

        left = QVBoxLayout()
        left.addWidget(setup)
        left.addWidget(chat, 1)
        root = QHBoxLayout(self)
        root.addLayout(left, 3)
        root.addLayout(right, 2)
        self._pump = QTimer(self, interval=50)  # while generating: tokens appear as they come
        self._pump.timeout.connect(self.drain)

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "A MoE checkpoint directory", self.model.text())
        if path:
            self.model.setText(path)

    # -- loading ----------------------------------------------------------------------------------------
    def load(self) -> Job | None:
        path = self.model.text().strip()
        if not path:
            self.model_state.setText("no model: build the demo with `inspector llm build-demo`, or pick a checkpoint")
            return None
        if self.session is not None:
            self.session.close()
            self.session = None
        policy, ratio = self.policy.currentText(), self.ratio.value()
        self.load_btn.setEnabled(False)
        self.send_btn.setEnabled(False)
        if path.startswith(("http://", "https://")):  # a server in its own process: it has its policy and pool
            self.model_state.setText(f"connecting to {path}…")
            file = os.environ.get("INSPECTOR_LLM_TOKEN_FILE")
            token = read_token(file) if file else (self.person_token() if self.person_token else None)
            job = Job(lambda: EndpointChat(path, token), "llm-load")
        else:
            self.model_state.setText(f"loading {path} with {policy} (calibrating on first use)…")
            job = Job(lambda: ChatSession(path, policy, ratio, self.calibration_dir, borrow=self.borrow), "llm-load")
        job.done.connect(self._loaded)
        job.failed.connect(self._load_failed)
        self._loading = job.start()
        return job

    def _loaded(self, session: ChatSession | EndpointChat) -> None:
        self.session = session
        self.load_btn.setEnabled(True)
        self.send_btn.setEnabled(True)
        self.model_state.setText(session.describe())
        self._show_layers()

    def _load_failed(self, message: str) -> None:
        self.load_btn.setEnabled(True)
        self.model_state.setText(message)

    # -- chat -----------------------------------------------------------------------------------------
    def send(self) -> None:
        text = self.prompt.toPlainText()
        if self.session is None or not text.strip() or self.busy:
            return
        self.transcript.appendPlainText(f"> {text}\n")
        self._stop.clear()
        self.pieces_received = 0
        self.send_btn.setEnabled(False)
        self.stop_btn.setEnabled(True)
        session, n = self.session, self.max_new.value()

        def generate() -> None:
            try:
                for piece, stats in session.complete(text, n):
                    self._tokens.put((piece, stats))
                    if self._stop.is_set():
                        break
            except Exception as exc:  # noqa: BLE001 - shown in the transcript; the tab stays usable
                self._tokens.put((f"\n[failed: {exc}]", None))
            self._tokens.put(None)

        self._generating = threading.Thread(target=generate, name="llm-generate", daemon=True)
        self._generating.start()
        self._pump.start()

    @property
    def busy(self) -> bool:
        return self._generating is not None and self._generating.is_alive()

    def drain(self) -> None:
        """Move the tokens that arrived onto the screen (GUI thread)."""
        last: GenStats | None = None
        while True:
            try:
                item = self._tokens.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._pump.stop()
                self.transcript.appendPlainText("")
                self.send_btn.setEnabled(True)
                self.stop_btn.setEnabled(False)
                break
            piece, stats = item
            self.pieces_received += 1
            cursor = self.transcript.textCursor()
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(piece)
            self.transcript.setTextCursor(cursor)
            last = stats or last
        if last is not None:
            self._show_stats(last)
            self._show_layers()

    def _show_stats(self, s: GenStats) -> None:
        acc = s.prediction_accuracy
        values = (str(s.tokens), f"{s.tokens_per_s:.1f}", f"{s.ttft_s:.2f} s", f"{s.hit_rate:.2f}",
                  str(s.expert_loads), "—" if acc is None else f"{acc:.2f}", f"{s.prefetch_used} / {s.prefetches}",
                  f"{s.peak_pool_bytes / 2**20:.1f} MiB")
        for row, v in enumerate(values):
            item = QTableWidgetItem(v)
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.stats.setItem(row, 0, item)

    def _show_layers(self) -> None:
        if self.session is None:
            return
        rows = self.session.residency()
        self.layers.setRowCount(len(rows))
        for i, r in enumerate(rows):
            self.layers.setItem(i, 0, QTableWidgetItem(str(r.layer)))
            bar = self.layers.cellWidget(i, 1)
            if not isinstance(bar, QProgressBar):
                bar = QProgressBar()
                self.layers.setCellWidget(i, 1, bar)
            bar.setRange(0, r.experts)
            bar.setValue(r.resident)
            bar.setFormat(f"{r.resident} of {r.experts} (slots {r.slots})")
            self.layers.setItem(i, 2, QTableWidgetItem(str(r.experts - r.resident)))

    def close_session(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._generating is not None:
            self._generating.join(timeout)
        if self.session is not None:
            self.session.close()
            self.session = None
