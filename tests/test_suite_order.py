"""The suite's own order: tests/seconds.json names the test files as they are (tests/seconds.py)."""
from __future__ import annotations

from pathlib import Path

from .seconds import TABLE, cost, read_table

ROOT = Path(__file__).resolve().parent.parent


def test_the_seconds_table_names_only_test_files_there_are() -> None:
    table = read_table()
    gone = sorted(f for f in table if not (ROOT / f).is_file())
    assert not gone, f"{TABLE.name} names test files that are gone: {gone}; refresh it (tests/seconds.py says how)"
    seconds = cost(table)
    assert seconds("tests/test_gui.py::test_x") == table["tests/test_gui.py"]
    assert min(table.values()) <= seconds("tests/test_not_measured_yet.py::test_x") <= max(table.values())
