"""The plant's alerting rules, checked and unit-tested by Prometheus' own promtool on made-up series of two lines
(tests/prometheus/alerts_test.yml): each alert fires for the line in trouble, names it, and stays quiet for the
healthy one."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .services import ensure_debian_packages

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "installer" / "prometheus-alerts.yml"


def promtool() -> str:
    ensure_debian_packages("promtool", ["prometheus"])
    return shutil.which("promtool") or "/usr/bin/promtool"


def test_the_alerting_rules_load_and_fire_for_the_line_in_trouble_only() -> None:
    tool = promtool()
    checked = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, encoding="utf-8")
    assert checked.returncode == 0 and "SUCCESS: 5 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = subprocess.run([tool, "test", "rules", "alerts_test.yml"], cwd=REPO / "tests" / "prometheus",
                            capture_output=True, encoding="utf-8")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
