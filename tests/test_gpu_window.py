"""The prepared GPU script (installer/gpu-window.sh) is what a 15-minute GPU window is spent on, and no GPU is here to
try it between windows: a renamed flag or a test selection that matches nothing would waste the window. So every
step's command line is parsed by the product's own parser, the CUDA tests' selection must select tests, and the
script's own plumbing (steps, limits, the summary and the archive) runs for real on its cheapest step."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from inspector.cli import parse

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "installer" / "gpu-window.sh"


def _steps() -> dict[str, list[str]]:
    """Each `step NAME LIMIT COMMAND...` of the script: its name -> its command's words (continuations joined)."""
    text = SCRIPT.read_text(encoding="utf-8").replace("\\\n", " ")
    return {m.group(1): shlex.split(m.group(3)) for m in re.finditer(r"^step (\S+) (\d+) (.+)$", text, re.MULTILINE)}


def test_every_step_is_run_by_default_and_every_default_step_exists() -> None:
    default = re.search(r'^ALL_STEPS="([^"]+)"', SCRIPT.read_text(encoding="utf-8"), re.MULTILINE)
    assert default is not None
    assert default.group(1).split() == list(_steps())


@pytest.mark.parametrize("name", [n for n, words in _steps().items() if words[0] == "$INSPECTOR"])
def test_each_inspector_step_parses_with_this_release(name: str, tmp_path: Path) -> None:
    """The command line as the script runs it, its variables given paths here: argparse exits on a flag the
    command does not have, and a parse error would be the step's whole output in the window."""
    fast = tmp_path / "fast-feed.yaml"
    fast.write_text("{}\n", encoding="utf-8")
    words = [w.replace("$fast", str(fast)).replace("$LOGS", str(tmp_path)) for w in _steps()[name][1:]]
    assert not any("$" in w for w in words), f"step {name} uses a variable this test does not know: {words}"
    args = parse(words)
    assert args.command == words[0]


def test_the_cuda_tests_step_selects_tests() -> None:
    """Collected here (they skip without CUDA): a -k that matches nothing would pass in the window having run none."""
    words = _steps()["cuda-tests"]
    assert words[:3] == ["$PY", "-m", "pytest"]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *words[3:]], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    per_file = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+\.py): (\d+)$", out.stdout, re.MULTILINE)}
    assert out.returncode == 0, out.stdout[-2000:]
    assert set(per_file) == {w for w in words if w.endswith(".py")} and all(per_file.values()), per_file


def test_the_script_runs_a_step_and_writes_its_summary_and_archive(tmp_path: Path) -> None:
    """The script itself, on its cheapest step (the CUDA tests, which skip here): the summary names the machine and
    the commit, the step's exit, and the archive holds its log and the summary."""
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    scratch.mkdir()
    before = set(Path("/tmp").glob("gpu-window.*"))
    env = {**os.environ, "PYTHON": sys.executable, "GPU_WINDOW_STEPS": "cuda-tests", "GPU_WINDOW_COMMIT": "abc1234",
           "INSPECTOR_MODELS": str(tmp_path / "models"), "TMPDIR": str(scratch)}
    done = subprocess.run(["bash", str(SCRIPT), str(out)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = (out / "summary.txt").read_text(encoding="utf-8")
    assert "commit abc1234" in summary and "# machine: no GPU" in summary
    assert re.search(r"## cuda-tests: exit 0 after \d+ s", summary), summary
    assert "## bench" not in summary  # only the steps asked for
    assert "skipped" in summary  # the CUDA tests' own lines: each skips without CUDA, saying so
    with tarfile.open(out / "gpu-window.tar.gz") as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {"cuda-tests.log", "summary.txt", "fast-feed.yaml"} <= names
    # its logs folder is made where TMPDIR says and goes once archived
    assert not list(scratch.glob("gpu-window.*")) and set(Path("/tmp").glob("gpu-window.*")) == before
