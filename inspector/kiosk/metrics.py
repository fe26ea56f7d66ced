"""Prometheus metrics of a running line, read from one snapshot per scrape.

A custom collector, not counters bumped on the hot path: the engine already
counts everything, so a scrape costs one snapshot and inference pays nothing.
Names follow Prometheus conventions (`_total` counters, base units).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from ..results.reviews import CALL_COUNTS, RATE_BOARDS

Snapshot = Callable[[], dict[str, Any]]


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _labelled(name: str, doc: str, label: str, values: dict[str, float]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, n in sorted(values.items()):
        family.add_metric([key], n)
    return family


def _hermes(h: dict[str, Any]) -> Iterator[Any]:
    """The Hermes lanes (IPC-HERMES-9852): boards taken from the machine before and handed on to the one after, by
    quality, what the box holds, and each lane's connection, so a plant's Grafana sees a lane stop moving."""
    yield _counter("inspector_hermes_boards_taken", "Boards taken from the machine before on its Hermes lane",
                   h["taken"])
    yield _counter("inspector_hermes_boards_passed_uninspected", "Boards the machine before failed, handed on "
                   "without inspection", h["passed_uninspected"])
    yield _labelled("inspector_hermes_boards_handed_on", "Boards handed on to the machine after, by the quality they "
                    "went on with", "quality", {"good": h["handed_on"] - h["handed_failed"],
                                                "failed": h["handed_failed"]})
    yield _gauge("inspector_hermes_boards_inside", "Boards taken and not yet handed on", h["inside"])
    yield _gauge("inspector_hermes_buffer_boards", "Boards the box holds between taking and handing on (its "
                 "conveyor's places)", h["buffer"])
    lanes = {name: h[name] for name in ("upstream", "downstream") if h.get(name) is not None}
    connected = GaugeMetricFamily("inspector_hermes_lane_connected", "1 while the Hermes lane to the machine before "
                                  "(upstream) or after (downstream) is connected", labels=["lane"])
    for name, lane in lanes.items():
        connected.add_metric([name], 1.0 if lane["connected"] else 0.0)
    yield connected
    if "upstream" in lanes:
        yield _counter("inspector_hermes_upstream_reconnects", "Connections to the machine before made again after "
                       "one was lost", lanes["upstream"]["reconnects"])
    if "downstream" in lanes:
        yield _counter("inspector_hermes_downstream_refused_connections", "Connections the machine after made and "
                       "the box refused (a second one while one serves the lane)",
                       lanes["downstream"]["refused_connections"])
    products = h.get("products")
    if products is not None:  # --hermes-follow-product: a product no recipe serves fails its boards
        yield _counter("inspector_hermes_product_changeovers", "Changeovers to the product a board from upstream "
                       "named", products["changeovers"])
        yield _counter("inspector_hermes_products_refused", "Boards from upstream not inspected: no recipe of the "
                       "line serves their product", products["refused"])


class Labelled(Collector):
    """Another collector's samples with the box's `line` and `station` added: a plant's Prometheus scrapes many
    boxes, and its Grafana selects and sums by line (nothing a box serves is plant-wide: each reports its own)."""

    def __init__(self, inner: Collector, labels: dict[str, str]) -> None:
        self.inner, self.labels = inner, labels

    def collect(self) -> Iterator[Any]:
        for family in self.inner.collect():
            family.samples = [sample._replace(labels={**sample.labels, **self.labels}) for sample in family.samples]
            yield family


class LineCollector(Collector):
    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[Any]:  # noqa: C901 - a flat list of metrics
        s = self.snap()
        line = s["line"]
        yield InfoMetricFamily("inspector_line", "Line, station, policy and the rule set in force",
                               value={k: str(v) for k, v in line.items()})
        yield _labelled("inspector_boards", "Boards inspected by overall verdict", "verdict",
                        {v: s["verdicts"].get(v, 0) for v in ("pass", "fail", "error")})
        if s.get("panel_boards"):  # a panel line: its boards one by one, what a per-board yield counts
            yield _labelled("inspector_panel_boards", "Boards of panels inspected by their own verdict", "verdict",
                            {v: s["panel_boards"].get(v, 0) for v in ("pass", "fail", "error")})
            yield _counter("inspector_bad_marks", "Boards of panels read as x-outs on their bad-mark pads, not "
                           "inspected", s.get("bad_marks", 0))
            units = s.get("unit_serials") or {}
            yield _labelled("inspector_unit_codes", "Codes of a panel's boards by how they read (read, noread)",
                            "result", {"read": units.get("read", 0), "noread": units.get("noreads", 0)})
        yield _counter("inspector_board_changes", "Live changeovers to another board with its own zoo (board serve, "
                       "a recipe of another board)", s.get("board_changes", 0))
        if s.get("hermes") is not None:
            yield from _hermes(s["hermes"])
        yield _counter("inspector_parts", "Component results produced", s["parts"])
        yield _labelled("inspector_part_defects", "Flagged parts by defect class", "defect", s["defects"])
        yield _counter("inspector_boards_rejected", "Board images refused before inspection (unreadable, wrong size)",
                       s["rejected_boards"])
        reg = s["registration"]
        yield _counter("inspector_boards_registered", "Boards registered on their fiducials", reg["registered"])
        yield _counter("inspector_boards_registration_failed",
                       "Boards not inspected: a fiducial not found or the fiducials disagree", reg["failed"])
        if reg["residual_px_max"] is not None:
            yield _gauge("inspector_registration_residual_max_px", "Largest registration residual so far, px",
                         reg["residual_px_max"])
        yield _gauge("inspector_registration_tilt_suspected", "1 when the boards' fiducials say the camera is tilted "
                     "against the rule set's transform (/health says what to set)", 1.0 if reg.get("hint") else 0.0)
        yield _gauge("inspector_boards_in_flight", "Boards inside the engine now", s["in_flight"])
        if s.get("last_board_at") is not None:  # a timestamp: time() - it is the age, and it survives a missed scrape
            yield _gauge("inspector_last_board_timestamp_seconds", "Unix time the last board finished",
                         s["last_board_at"])
        for what, doc in (("board", "Seconds from a board's cut to its last part's result"),
                          ("part", "Seconds from a part's request to its result")):
            h = s["latency_histograms"][what]
            yield HistogramMetricFamily(f"inspector_{what}_latency_seconds", doc, sum_value=h["sum"],
                                        buckets=[(repr(float(le)), n) for le, n in h["buckets"]]
                                        + [("+Inf", h["count"])])
        e = s["engine"]
        yield _counter("inspector_requests_failed", "Component requests that ended in an error", e["failed"])
        yield _counter("inspector_expert_switches", "Expert loads into a device pool while serving", e["switches"])
        yield _counter("inspector_expert_hits", "Batches whose expert was already resident", e["hits"])
        yield _counter("inspector_expert_evictions", "Experts evicted from a device pool", e["evictions"])
        yield _labelled("inspector_expert_loads", "Expert loads by source tier", "tier", e["loads_by_tier"])
        yield _counter("inspector_scheduler_seconds", "Time spent in scheduling decisions", e["sched_overhead_s"])
        depth = GaugeMetricFamily("inspector_executor_queue_depth", "Requests queued per executor",
                                  labels=["executor"])
        for ex in e["executors"]:
            depth.add_metric([ex["name"]], ex["queue_depth"])
        yield depth
        used = GaugeMetricFamily("inspector_pool_used_bytes", "Bytes of experts resident per pool", labels=["pool"])
        cap = GaugeMetricFamily("inspector_pool_capacity_bytes", "Budget per pool", labels=["pool"])
        for pool in e["pools"]:
            used.add_metric([pool["name"]], pool["used_bytes"])
            cap.add_metric([pool["name"]], pool["capacity_bytes"])
        yield used
        yield cap
        i = s["ingest"]
        yield _gauge("inspector_ingest_queue_depth", "Boards waiting in the ingest queue", i["depth"])
        yield _counter("inspector_ingest_dropped", "Boards dropped because the ingest queue was full", i["dropped"])
        yield _counter("inspector_source_frames", "Images the source delivered", i["source"]["frames"])
        yield _counter("inspector_source_unreadable", "Images that could not be read", i["source"]["unreadable"])
        yield _counter("inspector_source_reconnects", "Camera reconnects", i["source"]["reconnects"])
        r = s["results"]
        yield _counter("inspector_results_written", "Boards acknowledged by the database", r["written"])
        yield _gauge("inspector_results_spooled", "Boards waiting on disk for the database", r["spooled"])
        yield _gauge("inspector_results_pending", "Boards waiting in memory for the writer", r["pending"])
        yield _counter("inspector_crops_kept", "Crops kept as files", r["crops_kept"])
        yield _counter("inspector_crops_failed", "Crops that could not be written", r["crops_failed"])
        if s.get("mqtt"):
            m = s["mqtt"]
            yield _gauge("inspector_mqtt_connected", "1 while the MQTT broker is connected", int(m["connected"]))
            yield _counter("inspector_mqtt_published", "Board messages acknowledged by the broker", m["published"])
            yield _gauge("inspector_mqtt_queued", "Board messages not yet acknowledged", m["queued"])
        if s.get("rules"):
            yield _counter("inspector_rules_applied", "Rule files applied while running", s["rules"]["applied"])
            yield _counter("inspector_rules_refused", "Rule files refused (the running set stayed)",
                           s["rules"]["refused"])
        if s.get("reviews") is not None:
            yield from _review_metrics(s["reviews"])
        yield from _audit_metrics(s.get("audit"))
        weights = InfoMetricFamily("inspector_expert_weights", "The weights version each trained expert serves",
                                   labels=["expert"])
        for row in s["experts"]:
            if row.get("weights_sha256"):
                weights.add_metric([row["expert"]], {"sha256": row["weights_sha256"]})
        yield weights


def _audit_metrics(audit: dict[str, Any] | None) -> Iterator[Any]:
    """The plant's audit trail as this box sees it: its rows never go down (a drop is rows deleted)."""
    if not audit:
        return
    yield _gauge("inspector_audit_rows", "Rows of the plant's audit trail (never fewer than before)", audit["rows"])
    yield InfoMetricFamily("inspector_audit_head", "The newest audit row's hash (the chain's end, kept by Prometheus)",
                           value={"sha256": str(audit["head"])})


def _review_metrics(reviews: dict[str, dict[str, Any]]) -> Iterator[Any]:
    """Operators' reviews per component type, and the false-call and escape rates they give (per part stored),
    over this line's last boards (results/reviews.py RATE_BOARDS): gauges, since old boards leave the window."""
    window = f"among this line's last {RATE_BOARDS} boards"
    calls = GaugeMetricFamily("inspector_reviewed_parts", f"Reviewed parts by component type and call, {window}",
                              labels=["component_type", "call"])
    false_rate = GaugeMetricFamily("inspector_false_call_rate", f"Reviewed false calls per part stored, {window}",
                                   labels=["component_type"])
    escape_rate = GaugeMetricFamily("inspector_escape_rate",
                                    f"Reviewed escapes (missed defects) per part stored, {window}",
                                    labels=["component_type"])
    for ctype, r in sorted(reviews.items()):
        for call, key in CALL_COUNTS.items():
            calls.add_metric([ctype, call], r[key])
        false_rate.add_metric([ctype], r["false_call_rate"])
        escape_rate.add_metric([ctype], r["escape_rate"])
    yield calls
    yield false_rate
    yield escape_rate


class BuildCollector(Collector):
    """inspector_build_info: what this box runs (the product, Python, torch), to tell boxes apart on one board;
    read once (package metadata is files on disk), not at every scrape."""

    def __init__(self) -> None:
        self.info = build_info()

    def collect(self) -> Iterator[Any]:
        yield InfoMetricFamily("inspector_build", "The product's version and what it runs on", value=self.info)


def build_info() -> dict[str, str]:
    import platform
    from importlib import metadata

    import torch

    try:
        version = metadata.version("inspector")
    except metadata.PackageNotFoundError:  # a source tree on PYTHONPATH
        from .. import __version__ as version
    return {"version": version, "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda or "none"}


def line_registry(snap: Snapshot, line: str, station: str) -> CollectorRegistry:
    """The line's metrics, the build, and the process's (CPU seconds, resident memory, open files: process_*),
    every sample labelled with the box's line and station."""
    registry = CollectorRegistry(auto_describe=False)
    where = {"line": line, "station": station}
    for collector in (LineCollector(snap), BuildCollector(), ProcessCollector(registry=None),
                      PlatformCollector(registry=None)):
        registry.register(Labelled(collector, where))
    return registry
