"""Tab 7, camera and PLC: the camera's live view, state and settings; the board gate; the line controller's
connection, tags and last handshakes. What a controls engineer looks at when the line and the box disagree."""
from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inspector.access.roles import Permission
from inspector.camera.settings import PIXEL_FORMATS, TRIGGER_SOURCES

HANDSHAKE_COLUMNS = ("Seq", "Serial", "Verdict", "Reject", "Latency ms", "Why")


class LineIoTab(QWidget):
    def __init__(self, backend: Any) -> None:
        super().__init__()
        self.backend = backend
        self.view = QLabel("no camera frame yet")
        self.view.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.view.setMinimumSize(320, 200)
        self.view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.view.setStyleSheet("background: #202020; color: #ddd;")
        self.camera_state = QLabel("-")
        self.gate_state = QLabel("-")
        for label in (self.camera_state, self.gate_state):
            label.setWordWrap(True)
        left = QVBoxLayout()
        left.addWidget(self.view, 1)
        left.addWidget(self.camera_state)
        left.addWidget(self.gate_state)

        self.settings_box = QGroupBox("Camera settings (GenICam SFNC)")
        form = QFormLayout(self.settings_box)
        self.exposure = _spin(10, 1e6, " µs", 0)
        self.gain = _spin(0, 48, " dB", 1)
        self.rate = _spin(0.1, 1000, " fps", 1)
        self.pixel_format = QComboBox()
        self.pixel_format.addItems(PIXEL_FORMATS)
        self.trigger_source = QComboBox()
        self.trigger_source.addItems(TRIGGER_SOURCES)
        form.addRow("ExposureTime", self.exposure)
        form.addRow("Gain", self.gain)
        form.addRow("AcquisitionFrameRate", self.rate)
        form.addRow("PixelFormat", self.pixel_format)
        form.addRow("TriggerSource", self.trigger_source)
        self.trigger_mode = QLabel("-")
        form.addRow("TriggerMode", self.trigger_mode)
        self.apply = QPushButton("Apply to the camera")
        self.apply.clicked.connect(self._apply)
        self.answer = QLabel("")
        self.answer.setWordWrap(True)
        form.addRow(self.apply)
        form.addRow(self.answer)

        plc_box = QGroupBox("Line controller (OPC UA / Modbus)")
        plc = QVBoxLayout(plc_box)
        self.plc_state = QLabel("no line controller linked (kiosk --opcua / --modbus)")
        self.plc_state.setWordWrap(True)
        self.handshakes = QTableWidget(0, len(HANDSHAKE_COLUMNS))
        self.handshakes.setHorizontalHeaderLabels(HANDSHAKE_COLUMNS)
        self.handshakes.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.handshakes.verticalHeader().setVisible(False)
        self.handshakes.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.handshakes.horizontalHeader().setStretchLastSection(True)
        plc.addWidget(self.plc_state)
        plc.addWidget(self.handshakes, 1)

        right = QVBoxLayout()
        right.addWidget(self.settings_box)
        right.addWidget(plc_box, 1)
        layout = QHBoxLayout(self)
        layout.addLayout(left, 3)
        layout.addLayout(right, 2)
        self._settings_shown: dict[str, Any] | None = None

    # -- reading ---------------------------------------------------------------------------------------------
    def refresh(self, snap: dict[str, Any]) -> None:
        camera = snap.get("camera")
        source = ((snap.get("ingest") or {}).get("source") or {}).get("name", "?")
        if camera:
            state = "connected" if camera.get("connected") else "NOT CONNECTED"
            model = " ".join(x for x in (camera.get("vendor"), camera.get("model"), camera.get("serial")) if x)
            text = (f"{source}: {state}{' · ' + model if model else ''} · triggers {camera.get('triggers', 0)} · "
                    f"reconnects {camera.get('reconnects', 0)}")
        else:
            text = f"source {source}: not a camera"
        if snap.get("correction") is not None:  # the camera's correction file and its frames' exposure
            text += f"\ncorrection: {snap['correction']} · exposure: {snap.get('exposure') or 'fine'}"
        self.camera_state.setText(text)
        gate, ident = snap.get("gate"), snap.get("identity") or {}
        text = (f"board gate: {gate['frames']} frames -> {gate['boards']} boards; moving {gate['moving']}, empty "
                f"{gate['empty']}, held {gate['held']}" if gate else "board gate: off (one frame, one board)")
        if ident.get("code"):
            text += f" · serials read {ident.get('read', 0)}, NOREAD {ident.get('noreads', 0)}"
        self.gate_state.setText(text)
        self._show_settings((camera or {}).get("settings"), snap.get("sets") or {})
        self._show_plc(snap.get("plc"))

    def refresh_slow(self) -> None:
        """The live view: one frame a second (a frame over the network costs the kiosk an encode)."""
        frame = self.backend.camera_frame() if hasattr(self.backend, "camera_frame") else None
        if frame is None:
            return
        self.view.setPixmap(_pixmap(frame).scaled(self.view.size(), Qt.AspectRatioMode.KeepAspectRatio,
                                                  Qt.TransformationMode.SmoothTransformation))

    def _show_settings(self, settings: dict[str, Any] | None, sets: dict[str, Any]) -> None:
        editable = bool(settings) and self.backend.may(Permission.CAMERA)
        self.settings_box.setEnabled(editable)
        self.apply.setToolTip("" if editable else "a GenICam camera's settings: an engineer's change")
        recipe = sets.get("recipe_settings") or {}
        for box, key in self._fields():  # what the rule set in force asks for is its rule file's to change
            box.setEnabled(key not in recipe)
            box.setToolTip(f"set by recipe {sets.get('recipe')} (its rule set's camera:), at its changeover"
                           if key in recipe else "the station's: kept in the camera settings file")
        if not settings or settings == self._settings_shown:
            return
        self._settings_shown = settings
        for box, key in ((self.exposure, "ExposureTime"), (self.gain, "Gain"), (self.rate, "AcquisitionFrameRate")):
            if settings.get(key) is not None:
                box.setValue(float(settings[key]))
        for combo, key in ((self.pixel_format, "PixelFormat"), (self.trigger_source, "TriggerSource")):
            if settings.get(key):
                combo.setCurrentText(str(settings[key]))
        self.trigger_mode.setText(f"{settings.get('TriggerMode', '?')} (changed in the settings file: a restart)")

    def _show_plc(self, plc: dict[str, Any] | None) -> None:
        if not plc:
            return
        t, c = plc["tags"], plc["counters"]
        where = " · ".join(x for x in (plc.get("opcua"), f"modbus {plc['modbus']}" if plc.get("modbus") else None) if x)
        self.plc_state.setText(
            f"{where}\nhealth {t['health']} · ready {t['ready']} · recipe {t['recipe'] or '-'} · heartbeat "
            f"{t['heartbeat']} · sequence {t['sequence']} (acknowledged {t['acknowledge']})\n"
            f"published {c['published']} · rejected {c['rejected']} · deadline missed {c['deadline_missed']} · "
            f"late {c['late']} · unacknowledged {c['unacknowledged']} · triggers {c['triggers']} "
            f"({c['triggers_refused']} refused)" + (f"\n{t['recipe_error']}" if t.get("recipe_error") else ""))
        rows = list(reversed(plc.get("history") or []))
        self.handshakes.setRowCount(len(rows))
        for i, h in enumerate(rows):
            latency = "" if h.get("latency_ms") is None else f"{h['latency_ms']:.0f}"
            for j, value in enumerate((h["sequence"], h["serial"], h["verdict"], _reject_text(h), latency,
                                       h.get("reason") or "")):
                self.handshakes.setItem(i, j, QTableWidgetItem(str(value)))

    def _fields(self) -> tuple[tuple[QWidget, str], ...]:
        return ((self.exposure, "ExposureTime"), (self.gain, "Gain"), (self.rate, "AcquisitionFrameRate"),
                (self.pixel_format, "PixelFormat"), (self.trigger_source, "TriggerSource"))

    # -- changing --------------------------------------------------------------------------------------------
    def _apply(self) -> None:
        settings = {"ExposureTime": self.exposure.value(), "Gain": self.gain.value(),
                    "AcquisitionFrameRate": self.rate.value(), "PixelFormat": self.pixel_format.currentText(),
                    "TriggerSource": self.trigger_source.currentText()}
        try:
            self.answer.setText(self.backend.apply_camera(settings))
        except (ValueError, RuntimeError) as exc:
            self.answer.setText(f"refused: {exc}")
        self._settings_shown = None


def _spin(lo: float, hi: float, suffix: str, decimals: int) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setDecimals(decimals)
    box.setSuffix(suffix)
    return box


def _pixmap(image: np.ndarray) -> QPixmap:
    rgb = np.ascontiguousarray(image[..., ::-1])
    h, w = rgb.shape[:2]
    return QPixmap.fromImage(QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy())


def _reject_text(handshake: dict[str, Any]) -> str:
    """`no`, `yes`, or for a panel's failed boards `boards 2, 5` (RejectBoards; a kiosk of an earlier release sends
    none)."""
    if not handshake["reject"]:
        return "no"
    mask = handshake.get("reject_boards") or 0
    boards = [str(k + 1) for k in range(mask.bit_length()) if mask >> k & 1]
    return f"board{'s' if len(boards) > 1 else ''} {', '.join(boards)}" if boards else "yes"
