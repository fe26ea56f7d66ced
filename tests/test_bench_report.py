"""The bench table: ratios against the baseline and the warning when the feed, not the engine, limits."""
from inspector.coserve.evaluation.report import BenchReport, RunReport, format_table

WORKLOAD = {"name": "w", "component_types": 3, "requests": 100, "expert_pool_mb": 1.0,
            "experts_total_mb": 4.0, "arrival_interval_ms": 4.0}


def _report(ceiling: float, interval_ms: float) -> BenchReport:
    runs = [RunReport("samba", 20.0, 200, 100, 0, 1.0, 2.0, 0.1, 0.1),
            RunReport("coserve", 100.0, 20, 100, 0, 0.2, 0.5, 1.0, 0.05)]
    return BenchReport({**WORKLOAD, "arrival_interval_ms": interval_ms}, "cpu", ceiling, runs, True)


def test_table_reports_ratio_and_switch_reduction() -> None:
    table = format_table(_report(120.0, 2.0))
    row = next(line for line in table.splitlines() if line.startswith("coserve"))
    assert "5.00x" in row and "90.0%" in row
    assert "warning" not in table


def test_table_warns_when_the_feed_caps_the_ceiling() -> None:
    table = format_table(_report(220.0, 4.0))  # feed 250 req/s, ceiling at 88% of it
    assert "warning: the feed offers 250 req/s" in table


def test_no_warning_for_a_backlog_stream() -> None:
    assert "warning" not in format_table(_report(220.0, 0.0))
