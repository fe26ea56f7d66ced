"""`inspector retrain-demo --taught-detector`: the loop of a detector taught from labelled boxes, run whole."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_the_taught_detectors_loop_runs_whole_and_reports_each_step(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "inspector.cli", "--models", str(tmp_path / "models"), "retrain-demo",
                        "--taught-detector", "--boards", "30", "--epochs", "2", "--data", str(tmp_path / "work"),
                        "--json", str(tmp_path / "report.json")], capture_output=True, encoding="utf-8",
                       cwd=tmp_path, timeout=900)
    assert r.returncode in (0, 1), r.stderr[-3000:]  # 1: the gate refused the new version (said in the table)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["loop"]["panels"] == 30 and report["loop"]["retrain_epochs"] == 2
    flagged = report["reviews"].get("confirmed", 0) + report["reviews"].get("false_call", 0)
    assert flagged > 0, report["reviews"]  # the taught detector calls defects on the line's panels
    # every reviewed window whose call it made is in its set or left out with a reason
    assert sum(report["exported"].values()) + sum(report["left_out"].values()) >= flagged
    # the scripted operator boxes every defect of escapes and of windows the detector's one box cannot cover (off its
    # defect, or one of several): those boxes are what the detector learns that crop by (the rest by the boxes it
    # drew itself)
    boxed = sum(n for call, n in report["reviews"].items() if call.endswith((", boxed", " boxes")))
    assert boxed > 0, report["reviews"]  # a detector new to the line's narrow voids misses them: escapes
    assert report["boxed_by"].get("reviewer", 0) == boxed and "boxes its defects are taught by" in r.stdout
    assert report["boxed_by"].get("detector", 0) == report["reviews"].get("confirmed", 0)
    # each version at its own threshold, and the new weights at the old one's too (where the two differ)
    assert {"old", "new"} <= set(report["after"]) <= {"old", "new", "new, old's"}
    assert report["after"]["old"]["threshold"] == report["threshold"]
    if "new, old's" in report["after"]:
        assert report["after"]["new, old's"]["threshold"] == report["threshold"] != report["after"]["new"]["threshold"]
    for figures in report["after"].values():  # 60 windows of 30 fresh panels, each of one kind
        assert sum(figures[k][1] for k in ("defective", "narrow void", "holed", "plain")) == 60
    assert ("recall gate: passed" in r.stdout) == (r.returncode == 0)
    assert "windows of 30 panels nobody reviewed" in r.stdout and "retraining (old against new" in r.stdout
    version = report["retrained"]["version"]
    zoo = json.loads((tmp_path / "work" / "zoo" / "manifest.json").read_text())
    det = next(e for e in zoo["experts"] if e["name"] == "det-panel")
    assert [v["weights_sha256"] for v in det["versions"]][-1] == version and det["weights_sha256"] != version
    assert det["versions"][-1]["operating"] == {"threshold": report["after"]["new"]["threshold"]}
    # run again into the same directory: refused, naming what is there (nothing of the first run is overwritten)
    again = subprocess.run([sys.executable, "-m", "inspector.cli", "--models", str(tmp_path / "models"),
                            "retrain-demo", "--taught-detector", "--data", str(tmp_path / "work")],
                           capture_output=True, encoding="utf-8", cwd=tmp_path, timeout=300)
    assert again.returncode != 0 and "holds an earlier run of this demo" in again.stderr, again.stderr[-2000:]
