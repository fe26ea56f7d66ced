"""Tab 2, throughput and experts: live charts, the experts table by tier, memory per pool against its budget."""
from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..series import LiveSeries
from ..style import mib

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
EXPERT_COLUMNS = ("Expert", "Role", "Tier", "Usage p", "Hits", "Loads", "Last use", "MiB", "Weights")


class _Number(QTableWidgetItem):
    """A cell that sorts by its number, not its text."""

    def __init__(self, text: str, value: float) -> None:
        super().__init__(text)
        self.value = value
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        return self.value < getattr(other, "value", 0.0)


def _plot(title: str, unit: str) -> pg.PlotWidget:
    w = pg.PlotWidget()
    w.setBackground("w")
    w.setTitle(title, color="#222", size="11pt")
    w.setLabel("left", unit, color="#444")
    w.setLabel("bottom", "seconds", color="#444")
    w.showGrid(x=True, y=True, alpha=0.25)
    w.setMouseEnabled(x=False, y=False)
    w.setMenuEnabled(False)
    w.addLegend(offset=(-8, 4), labelTextColor="#222", brush=pg.mkBrush(255, 255, 255, 220), pen=pg.mkPen("#bbb"))
    w.getPlotItem().setContentsMargins(4, 4, 8, 4)
    return w


class ThroughputTab(QWidget):
    def __init__(self) -> None:
        super().__init__()
        self.series = LiveSeries()
        self.p_rate = _plot("Throughput", "parts/s")
        self.p_lat = _plot("Part latency", "ms")
        self.p_queue = _plot("Queue depth per executor", "requests")
        self.p_switch = _plot("Expert switches", "per minute")
        self.c_rate = self.p_rate.plot(pen=pg.mkPen(PALETTE[0], width=2), name="parts/s")
        self.c_p50 = self.p_lat.plot(pen=pg.mkPen(PALETTE[2], width=2), name="median")
        self.c_p95 = self.p_lat.plot(pen=pg.mkPen(PALETTE[3], width=2), name="95th pct")
        self.c_switch = self.p_switch.plot(pen=pg.mkPen(PALETTE[4], width=2), name="switches/min")
        self.c_queues: dict[str, pg.PlotDataItem] = {}
        charts = QWidget()
        grid = QGridLayout(charts)
        grid.setContentsMargins(0, 0, 0, 0)
        for i, w in enumerate((self.p_rate, self.p_lat, self.p_queue, self.p_switch)):
            w.setMinimumHeight(150)
            grid.addWidget(w, i // 2, i % 2)

        self.experts = QTableWidget(0, len(EXPERT_COLUMNS))
        self.experts.setHorizontalHeaderLabels(EXPERT_COLUMNS)
        self.experts.verticalHeader().setVisible(False)
        self.experts.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.experts.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.experts.setAlternatingRowColors(True)
        self.experts.setSortingEnabled(True)
        header = self.experts.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.experts.sortByColumn(3, Qt.SortOrder.DescendingOrder)
        self.tier_summary = QLabel("")
        experts_box = QGroupBox("Experts")
        ev = QVBoxLayout(experts_box)
        ev.addWidget(self.tier_summary)
        ev.addWidget(self.experts)

        self.pools_box = QGroupBox("Memory per pool (used / budget)")
        self.pools_layout = QVBoxLayout(self.pools_box)
        self.pool_bars: dict[str, QProgressBar] = {}
        self.pools_layout.addStretch(1)

        bottom = QWidget()
        bl = QHBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(experts_box, 3)
        bl.addWidget(self.pools_box, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(charts)
        split.addWidget(bottom)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([560, 440])
        QVBoxLayout(self).addWidget(split)

    def refresh(self, snap: dict[str, Any], draw: bool = True) -> None:
        """Every tick: add the sample; redraw only when on screen (`draw`)."""
        self.series.add(snap)
        s = self.series
        t = list(s.t)
        if not t or not draw:
            return
        self.c_rate.setData(t, list(s.parts_per_s))
        self.c_p50.setData(t, list(s.latency_p50), connect="finite")
        self.c_p95.setData(t, list(s.latency_p95), connect="finite")
        self.c_switch.setData(t, list(s.switches_per_min))
        for i, (name, values) in enumerate(s.queues.items()):
            curve = self.c_queues.get(name)
            if curve is None:
                curve = self.c_queues[name] = self.p_queue.plot(pen=pg.mkPen(PALETTE[i % len(PALETTE)], width=2),
                                                                name=name)
            curve.setData(t, list(values), connect="finite")
        self._pools(snap)

    def refresh_slow(self, snap: dict[str, Any]) -> None:
        """Once a second: the experts table (sorting hundreds of rows at 5 Hz would be wasted work)."""
        rows = snap.get("experts") or []
        table = self.experts
        table.setSortingEnabled(False)
        table.setRowCount(len(rows))
        tiers: dict[str, int] = {}
        for r, e in enumerate(rows):
            tiers[e["tier"]] = tiers.get(e["tier"], 0) + 1
            last = e.get("last_use_s")
            cells = [QTableWidgetItem(e["expert"]), QTableWidgetItem(e["role"]), QTableWidgetItem(e["tier"]),
                     _Number(f"{e['usage']:.3f}", e["usage"]), _Number(str(e["hits"]), e["hits"]),
                     _Number(str(e["loads"]), e["loads"]),
                     _Number("never" if last is None else _ago(last), math.inf if last is None else last),
                     _Number(f"{e['size_mb']:.1f}", e["size_mb"]),
                     QTableWidgetItem((e.get("weights_sha256") or "untrained")[:12])]
            for c, item in enumerate(cells):
                table.setItem(r, c, item)
        table.setSortingEnabled(True)
        self.tier_summary.setText("  ·  ".join(f"{tier}: {n}" for tier, n in sorted(tiers.items())) or "no line")

    def _pools(self, snap: dict[str, Any]) -> None:
        pools = list(snap["engine"]["pools"])
        for d in snap["engine"].get("devices", []):
            pools.append({"name": f"{d['device']} device (allocated)", "used_bytes": d["allocated_bytes"],
                          "capacity_bytes": d["total_bytes"]})
        for p in pools:
            bar = self.pool_bars.get(p["name"])
            if bar is None:
                bar = self.pool_bars[p["name"]] = QProgressBar()
                bar.setRange(0, 1000)
                bar.setMinimumHeight(26)
                self.pools_layout.insertWidget(self.pools_layout.count() - 1, QLabel(p["name"]))
                self.pools_layout.insertWidget(self.pools_layout.count() - 1, bar)
            cap = max(1, p["capacity_bytes"])
            bar.setValue(int(1000 * min(1.0, p["used_bytes"] / cap)))
            bar.setFormat(f"{mib(p['used_bytes'])} / {mib(cap)}"
                          + (f"  ({p['resident']} experts)" if "resident" in p else ""))


def _ago(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"
