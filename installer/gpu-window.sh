#!/usr/bin/env bash
# The prepared GPU script: every CUDA path of the product, run whole on a GPU box in under 10 minutes, every table
# written with the machine, the date and the commit. GPU time comes in short windows, so this is what a window is
# spent on (README: "A GPU window"), and a new GPU box is qualified with the same run.
#
#   bash installer/gpu-window.sh OUT_DIR          (OUT_DIR defaults to $OUT, else ./gpu-window-out)
#
# Steps, most wanted first, each with its own time limit cut to what the window has left (GPU_WINDOW_S, default
# 560 s); a step that fails or runs out is reported and the next one runs. GPU_WINDOW_STEPS="llm-bench realsize"
# runs only those (a second call on the still-warm machine: what the first one built is still there). A window of
# 15 minutes fits two calls: "cuda-tests bench llm-build llm-bench" (about 440 s), then the rest.
#   cuda-tests   the tests that only run where CUDA is (the MoE engine's GPU paths)
#   bench        inspector bench, a feed 8x the default (one crop every 0.25 ms), --repeat 3, --json
#   llm          inspector llm build-demo --device cuda, then llm bench --device cuda (every policy, exact tokens,
#                the copy stream's hidden share) and --concurrency 1,4
#   realsize     inspector llm bench-realsize --device cuda: the Mixtral-shaped checkpoint (2 layers), int4 experts,
#                ondemand, daop, firm and duoserve at cache ratio 0.25
#   check-sim    inspector bench --check-sim --feed 2 (twice the ceiling it measures first): the simulator on this GPU's
#                profile against runs where the engine sets the pace;
#                --save-box writes what the runs served as a box (served-box.json) to simulate this GPU on elsewhere
#   planned      inspector bench --planned on the fast feed (the planner's CUDA executor count)
# Writes OUT_DIR/summary.txt (every table) and OUT_DIR/gpu-window.tar.gz (every log, JSON report and the measured
# device profiles, for the simulated GPU box).
#
# Needs a Python with torch built for CUDA; the product's other packages may come as wheels in .whl/ (installed
# into a throwaway folder, never into that Python). The commit is GPU_WINDOW_COMMIT, else git's.
# The lent GPU image (Python 3.12, torch, onnxruntime, transformers, accelerate, opencv headless) lacked, on
# 2026-11-26, these 27 (17 MB; .whl/ ignored through .git/info/exclude, `pip download --no-deps --only-binary=:all:
# --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 ... -d .whl NAME==VERSION`, the
# versions of the product's own venv): ultralytics ultralytics-thop ultralytics-platform sqlalchemy alembic mako
# paho-mqtt platformdirs zxing-cpp asyncua aiosqlite pytz pymodbus argon2-cffi argon2-cffi-bindings cryptography
# cffi pycparser fastapi starlette pydantic pydantic-core annotated-types typing-inspection uvicorn
# opentelemetry-api typing-extensions. The device call carries it: carry [".whl"].
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-./gpu-window-out}}
mkdir -p "$OUT_DIR"
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/gpu-window.XXXXXX")
trap 'rm -rf "$LOGS"' EXIT  # the archive keeps every log
SUMMARY="$OUT_DIR/summary.txt"
BUDGET=${GPU_WINDOW_S:-560}
START=$(date +%s)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu-window-site \
        .whl/*.whl >"$LOGS/wheels.log" 2>&1 || { echo "installing .whl failed: see wheels.log"; }
    export PYTHONPATH="$PWD:/tmp/gpu-window-site${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export INSPECTOR_MODELS=${INSPECTOR_MODELS:-$PWD/models}

commit=${GPU_WINDOW_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU")
{
    echo "# gpu-window: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit"
    echo "# machine: $gpu; $(nproc) cores; $($PY -c 'import torch,platform; print(f"python {platform.python_version()}, torch {torch.__version__}, cuda {torch.cuda.is_available()}")' 2>&1)"
} | tee "$SUMMARY"

INSPECTOR="$PY -m inspector.cli"
ALL_STEPS="cuda-tests bench llm-build llm-bench llm-concurrency realsize check-sim planned"

# step NAME LIMIT_S COMMAND...: run with the smaller of LIMIT_S and what the window has left; its output to
# LOGS/NAME.log and the summary
step() {
    local name=$1 limit=$2; shift 2
    case " ${GPU_WINDOW_STEPS:-$ALL_STEPS} " in *" $name "*) ;; *) return ;; esac
    local left=$(( BUDGET - ($(date +%s) - START) ))
    if [ "$left" -lt 20 ]; then
        echo "## $name: skipped, the window has ${left} s left" | tee -a "$SUMMARY"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    local t0=$(date +%s)
    echo "## $name (limit ${limit} s): $*" | tee -a "$SUMMARY"
    timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    local took=$(( $(date +%s) - t0 ))
    # the tables and verdict lines, not the progress
    grep -v -E '^\s*$|it/s\]|s/it\]|%\|' "$LOGS/$name.log" | tail -n 80 >>"$SUMMARY"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "## $name: ran out of its ${limit} s (exit $rc) after ${took} s" | tee -a "$SUMMARY"
    else
        echo "## $name: exit $rc after ${took} s" | tee -a "$SUMMARY"
    fi
}

fast=$LOGS/fast-feed.yaml
$PY - "$fast" <<'EOF'
import sys
from importlib.resources import files

import yaml

w = yaml.safe_load(files("inspector.workloads").joinpath("default.yaml").read_text())
# the name stays: the zoo is cached by name and experts, so both feeds share one
w["arrival_interval_ms"] = 0.25  # 4000 req/s offered: 8x the default, above any ceiling measured on a GPU
open(sys.argv[1], "w").write(yaml.safe_dump(w))
EOF

# one process: the lent image has no pytest-xdist, and the project's addopts ask for two workers
step cuda-tests 60 $PY -m pytest -q -p no:cacheprovider -o addopts= -x tests/test_moe_seed_systems.py \
    tests/test_moe_quant.py -k "gpu or pinning"
step bench 170 $INSPECTOR bench --workload "$fast" --repeat 3 --json "$LOGS/bench-fast-repeat3.json"
step llm-build 60 $INSPECTOR llm build-demo --device cuda
step llm-bench 150 $INSPECTOR llm bench --device cuda --json "$LOGS/llm-bench.json"
step llm-concurrency 90 $INSPECTOR llm bench --device cuda --concurrency 1,4
step realsize 200 $INSPECTOR llm bench-realsize --device cuda --layers 2 --expert-dtypes int4 \
    --policies ondemand,daop,firm,duoserve --cache-ratio 0.25
step check-sim 60 $INSPECTOR bench --check-sim --feed 2 --save-box "$LOGS/served-box.json"
step planned 90 $INSPECTOR bench --workload "$fast" --planned --json "$LOGS/bench-fast-planned.json"

echo "# gpu-window: wall time $(( $(date +%s) - START )) s" | tee -a "$SUMMARY"
find "$INSPECTOR_MODELS" -path '*profiles*' -name '*.json' -exec cp --backup=numbered {} "$LOGS/" \; 2>/dev/null
cp "$SUMMARY" "$LOGS/"
tar -czf "$OUT_DIR/gpu-window.tar.gz" -C "$LOGS" .
