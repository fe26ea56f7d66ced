"""Each test file's measured seconds (tests/seconds.json), which conftest.py orders the files by, longest first.

Two workers take the files in that order (`--dist loadfile --no-loadscope-reorder`): the longest start first and the
short ones fill in at the end, so neither worker waits long for the other's last file. pytest-xdist's own order
(files with the most tests first) once left a 100-second file of three tests to start last.

Refresh after a file's time changes much: `python -m pytest --junitxml=/tmp/suite.xml` then
`python -m tests.seconds /tmp/suite.xml`. A file not in the table is taken as the table's median.
"""
from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from statistics import median

TABLE = Path(__file__).with_name("seconds.json")


def read_table() -> dict[str, float]:
    return json.loads(TABLE.read_text(encoding="utf-8")) if TABLE.is_file() else {}


def file_seconds(junit: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests) from a JUnit XML report."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit).iter("testcase"):
        seconds[case.get("classname", "").replace(".", "/") + ".py"] += float(case.get("time", 0.0))
    return dict(seconds)


def cost(table: dict[str, float]):  # noqa: ANN201 - a key function for list.sort
    """A test item's file's seconds, or the table's median for a file it does not name."""
    typical = median(table.values()) if table else 0.0
    return lambda nodeid: table.get(nodeid.split("::", 1)[0], typical)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python -m tests.seconds JUNIT.xml (from python -m pytest --junitxml=JUNIT.xml)", file=sys.stderr)
        return 2
    seconds = file_seconds(Path(argv[0]))
    TABLE.write_text(json.dumps({f: round(s) for f, s in sorted(seconds.items())}, indent=1) + "\n",
                     encoding="utf-8")
    print(f"wrote {TABLE}: {len(seconds)} files, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
