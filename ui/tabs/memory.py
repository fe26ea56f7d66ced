"""Tab 4, memory allocation and executors: what runs now, what the planner would choose, an edit with its
expected effect (simulated on this box's profile) before it is applied, and whether it applies live."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.access.roles import Permission
from inspector.app.allocation import Allocation, Effect, expected_effect, planned
from inspector.coserve.offline.planner import format_plan

from ..style import ERROR_TEXT, fit_height
from ..worker import Job

EFFECT_ROWS = (("executors", "Executors", "{}"), ("batch_mb", "Batch memory per executor", "{:.1f} MiB"),
               ("experts_fit", "Most-used experts the pool holds", "{}"),
               ("usage_covered", "Their share of usage (hit-rate ceiling)", "{:.1%}"),
               ("switches_per_board", "Simulated switches per board", "{:.1f}"))
SPEED_ROWS = ("Simulated throughput, relative to now", "Expected on this line (live rate × that)")
EFFECT_COLUMNS = ("Now", "With the edit")  # after Apply: "Before" and "Applied" (the estimate is then history)


class MemoryTab(QWidget):
    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        self._loaded = False
        self._jobs: list[Job] = []

        self.executors = QTableWidget(0, 5)
        self.executors.setHorizontalHeaderLabels(("Executor", "Device", "Threads", "Batch memory", "Queue"))
        self.executors.verticalHeader().setVisible(False)
        self.executors.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.executors.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.executors.setMaximumHeight(200)
        self.running = QLabel("")
        self.running.setWordWrap(True)
        now = QGroupBox("Running now")
        nv = QVBoxLayout(now)
        nv.addWidget(self.running)
        nv.addWidget(self.executors)

        self.device_mb = QDoubleSpinBox(decimals=0, minimum=16, maximum=1_000_000, suffix=" MiB", singleStep=16)
        self.pool_mb = QDoubleSpinBox(decimals=0, minimum=1, maximum=1_000_000, suffix=" MiB", singleStep=8)
        self.count = QSpinBox(minimum=0, maximum=64, specialValueText="box default (one per core)")
        for w in (self.device_mb, self.pool_mb, self.count):
            w.valueChanged.connect(self._edited)
        form = QFormLayout()
        form.addRow("Device memory (experts + batches)", self.device_mb)
        form.addRow("Expert pool", self.pool_mb)
        form.addRow("Executors on the main device", self.count)
        self.how = QLabel("")
        self.how.setWordWrap(True)
        self.estimate_btn, self.apply_btn = QPushButton("Estimate the effect"), QPushButton("Apply")
        self.estimate_btn.clicked.connect(self.estimate)
        self.apply_btn.clicked.connect(self.apply)
        self.effect = QTableWidget(len(EFFECT_ROWS) + len(SPEED_ROWS), 2)
        self.effect.setHorizontalHeaderLabels(EFFECT_COLUMNS)
        self.effect.setVerticalHeaderLabels([label for _, label, _ in EFFECT_ROWS] + list(SPEED_ROWS))
        self.effect.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.effect.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        fit_height(self.effect)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        edit = QGroupBox("Edit the allocation")
        ev = QVBoxLayout(edit)
        ev.addLayout(form)
        ev.addWidget(self.how)
        row = QHBoxLayout()
        row.addWidget(self.estimate_btn)
        row.addWidget(self.apply_btn)
        row.addStretch(1)
        ev.addLayout(row)
        ev.addWidget(self.effect)
        ev.addWidget(self.status)
        ev.addStretch(1)

        self.plan_btn = QPushButton("Run the offline planner (simulated)")
        self.use_plan_btn = QPushButton("Use the plan's values")
        self.plan_btn.clicked.connect(self.run_planner)
        self.use_plan_btn.clicked.connect(self.use_plan)
        self.use_plan_btn.setEnabled(False)
        self.trail = QPlainTextEdit(readOnly=True)
        self.trail.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.trail.setPlaceholderText("The planner's trail appears here: executor trials, the decay window's steps, "
                                      "the chosen split and the placement.")
        plan = QGroupBox("Planner (CoServe §4.4)")
        pv = QVBoxLayout(plan)
        prow = QHBoxLayout()
        prow.addWidget(self.plan_btn)
        prow.addWidget(self.use_plan_btn)
        prow.addStretch(1)
        pv.addLayout(prow)
        pv.addWidget(self.trail)
        self._plan = None
        self._live_rate = 0.0

        column = QWidget()  # scrolls on a short screen (768 px) instead of squeezing the effect table
        left = QVBoxLayout(column)
        left.setContentsMargins(0, 0, 0, 0)
        left.addWidget(now)
        left.addWidget(edit, 1)
        scroll = QScrollArea(widgetResizable=True, frameShape=QScrollArea.Shape.NoFrame)
        scroll.setWidget(column)
        root = QHBoxLayout(self)
        root.addWidget(scroll, 1)
        root.addWidget(plan, 1)
        if not backend.can_control:
            for w in (self.estimate_btn, self.plan_btn):  # they simulate this box's zoo: a local line's
                w.setEnabled(False)
        self.permit()

    def permit(self) -> None:
        """The signed-in role: an engineer moves memory, anyone else sees the split."""
        allowed = self.backend.may(Permission.ALLOCATION)
        self.apply_btn.setEnabled(allowed)
        if not self.backend.can_control:
            for w in (self.device_mb, self.pool_mb, self.count):
                w.setEnabled(allowed)
            self.status.setText("Attached to a kiosk: Apply sends the split to its API; the kiosk applies a new pool "
                                "size live and saves anything else for its next start." if allowed else
                                "Read-only: the memory split is an engineer's change.")
        elif not allowed:
            self.status.setText("Read-only: the memory split is an engineer's change (estimates are open to all).")

    # -- what runs --------------------------------------------------------------------------------
    def refresh(self, snap: dict[str, Any]) -> None:
        alloc = snap.get("allocation")
        if not alloc:
            return
        eng = snap["engine"]
        pools = ", ".join(f"{p['name']} {p['capacity_bytes'] / 2**20:.0f} MiB" for p in eng["pools"])
        devices = ", ".join(f"{d['device']} {d['total_bytes'] / 2**20:.0f} MiB" for d in eng.get("devices", []))
        backend = (snap.get("backend") or {}).get("name", "torch")
        self.running.setText(f"Policy <b>{alloc['policy']}</b>, experts on <b>{backend}</b>; device memory {devices}; "
                             f"expert pool {pools}.")
        self.executors.setRowCount(len(eng["executors"]))
        for i, ex in enumerate(eng["executors"]):
            for j, v in enumerate((ex["name"], ex["device"], str(ex.get("threads", "")),
                                   f"{ex.get('batch_bytes', 0) / 2**20:.1f} MiB", str(ex["queue_depth"]))):
                item = QTableWidgetItem(v)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.executors.setItem(i, j, item)
        if not self._loaded:
            self._loaded = True
            self.device_mb.setValue(alloc["device_mb"])
            self.pool_mb.setValue(alloc["expert_pool_mb"])
            self.count.setValue(alloc["executors"] or 0)
            self._edited()

    def proposed(self) -> Allocation:
        return Allocation(self.device_mb.value(), self.pool_mb.value(), self.count.value() or None)

    def _edited(self) -> None:
        running = self.backend.controller.allocation() if self.backend.can_control else None
        if running is None:
            self.how.setText("")
            return
        new = self.proposed()
        if new == running:
            self.how.setText("No change from what runs now.")
        elif new.live_over(running):
            self.how.setText("<b>Applies live</b>: only the split between the expert pool and the batches changes; "
                             "the engine evicts down to the new pool size and no board waits.")
        else:
            self.how.setText("<b>Applies on restart</b>: a new executor count or device total needs new executors; "
                             "the line stops taking boards, inspects what it accepted, and starts again.")

    # -- estimate, apply ----------------------------------------------------------------------------
    def _inputs(self, what: str) -> tuple | None:
        """(rules, zoo, profiles, config) of the running line, or None (and says why)."""
        ctl = self.backend.controller
        service = ctl.service
        if service is None or ctl.profiles is None:
            self.status.setText(f"Start the line first: {what} runs over its rule set on this box's profile.")
            return None
        return service.line.rules, ctl.zoo(), ctl.profiles, service.line.config

    def estimate(self) -> None:
        inputs = self._inputs("the estimate")
        if inputs is None:
            return
        rules, zoo, profiles, config = inputs
        new = self.proposed().applied_to(config)
        self._live_rate = (self.backend.snapshot().get("throughput") or {}).get("parts_per_s", 0.0)
        self.effect.setHorizontalHeaderLabels(EFFECT_COLUMNS)
        self.status.setText("simulating the current and the edited allocation…")
        self.estimate_btn.setEnabled(False)
        job = Job(lambda: (expected_effect(rules, zoo, profiles, config), expected_effect(rules, zoo, profiles, new)),
                  "estimate")
        job.done.connect(self._show_effect)
        job.failed.connect(self._failed)
        self._jobs.append(job.start())

    def _show_effect(self, effects: tuple[Effect, Effect]) -> None:
        self.estimate_btn.setEnabled(True)
        for col, effect in enumerate(effects):
            for row, (key, _, fmt) in enumerate(EFFECT_ROWS):
                item = QTableWidgetItem(fmt.format(getattr(effect, key)))
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.effect.setItem(row, col, item)
        now, new = effects
        ratio = new.parts_per_s / now.parts_per_s if now.parts_per_s else 0.0
        speed = (("100%", f"{ratio:.0%}"), (f"{self._live_rate:.0f} parts/s", f"{self._live_rate * ratio:.0f} parts/s"))
        for i, pair in enumerate(speed):
            for col, text in enumerate(pair):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(f"simulated: {effects[col].parts_per_s:.0f} parts/s on the profile alone (no cutting, "
                                "writing or display), so only the ratio is carried over")
                self.effect.setItem(len(EFFECT_ROWS) + i, col, item)
        self.status.setText(f"Expected: {ratio - 1:+.0%} throughput. The simulator runs this rule set's "
                            f"{now.experts_total} experts on this box's measured profile, now and with the edit.")

    def _failed(self, message: str) -> None:
        self.estimate_btn.setEnabled(True)
        self.plan_btn.setEnabled(self.backend.can_control)
        self.status.setText(message)
        self.status.setStyleSheet(f"color: {ERROR_TEXT}")

    def apply(self) -> None:
        self.status.setStyleSheet("")
        try:
            how = self.backend.apply_allocation(self.proposed())
        except (RuntimeError, ValueError) as exc:
            self._failed(str(exc))
            return
        if self.effect.item(0, 0) is not None:  # the estimate on screen was of the allocation before this one
            self.effect.setHorizontalHeaderLabels(("Before", "Applied" if how == "live" else "Saved"))
        self.status.setText("Applied live." if how == "live" else
                            "Draining the line to restart it with the new executors…" if self.backend.can_control else
                            "Saved on the kiosk: it applies at the kiosk's next start (systemctl restart).")
        self._loaded = how == "live"

    # -- planner --------------------------------------------------------------------------------------
    def run_planner(self) -> None:
        inputs = self._inputs("the planner")
        if inputs is None:
            return
        rules, zoo, profiles, config = inputs
        self.plan_btn.setEnabled(False)
        self.trail.setPlainText("planning on the simulator…")
        job = Job(lambda: planned(rules, zoo, profiles, config), "planner")
        job.done.connect(self._show_plan)
        job.failed.connect(self._failed)
        self._jobs.append(job.start())

    def _show_plan(self, plan: Any) -> None:
        self._plan = plan
        self.plan_btn.setEnabled(True)
        self.use_plan_btn.setEnabled(True)
        self.trail.setPlainText(format_plan(plan))

    def use_plan(self) -> None:
        if self._plan is None:
            return
        w = self._plan.workload
        self.device_mb.setValue((w.device_bytes or 0) / 2**20)
        self.pool_mb.setValue(w.expert_pool_bytes / 2**20)
        main = "cuda" if self._plan.executors.get("cuda") else "cpu"
        self.count.setValue(self._plan.executors[main])

