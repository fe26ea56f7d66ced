"""The demo model builder and `inspector llm` chat/bench, on a tiny recipe over a copy of real library text."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from inspector.cli import main
from inspector.moe.demo.build import build_demo
from inspector.moe.demo.corpus import stdlib_corpus
from inspector.moe.engine import OffloadedLM
from inspector.moe.text import encode_prompt, load_tokenizer, read_prompts

from .moe_models import TINY_DEMO


@pytest.fixture(scope="module")
def corpus_dir(llm_corpus_dir: Path) -> Path:
    return llm_corpus_dir


@pytest.fixture(scope="module")
def demo(tiny_llm: Path) -> Path:
    return tiny_llm


def test_the_demo_build_is_a_normal_checkpoint_with_its_tokenizer_and_record(demo: Path, corpus_dir: Path) -> None:
    record = json.loads((demo / "build.json").read_text())
    assert math.isfinite(record["held_out_perplexity"]) and record["held_out_perplexity"] > 1
    assert record["tokens_seen"] == 3 * 2 * 64 and record["recipe"]["experts"] == 4
    assert not list(demo.parent.glob("*.partial"))
    again = build_demo(TINY_DEMO, root=demo.parent, corpus=stdlib_corpus(10, corpus_dir), log=lambda line: None)
    assert again.cached and again.path == demo and again.perplexity == record["held_out_perplexity"]
    tok = load_tokenizer(demo)
    ids = encode_prompt(tok, "def add(a, b):\n    return a + b\n")
    assert ids[0] == tok.bos_token_id and tok.decode(ids, skip_special_tokens=True).startswith("def add(a, b)")
    assert tok.pad_token_id != tok.bos_token_id  # generate would mask the BOS otherwise
    plain = AutoModelForCausalLM.from_pretrained(demo).eval()
    x = torch.tensor([ids])
    want = plain.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=8,
                          min_new_tokens=8)[0, len(ids):].tolist()
    got = [t for t, _ in OffloadedLM.load(demo, "daop", cache_ratio=0.5).generate(ids, 8)]
    assert got == want


def test_a_corpus_without_python_files_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no .py files"):
        stdlib_corpus(root=tmp_path)


def test_prompt_files(tmp_path: Path) -> None:
    assert len(read_prompts()) >= 8
    f = tmp_path / "p.txt"
    f.write_text("def a():\n\n    pass\n---\n\n---\nclass B:\n")
    assert read_prompts(f) == ["def a():\n\n    pass", "class B:"]
    f.write_text("---\n")
    with pytest.raises(ValueError, match="holds no prompt"):
        read_prompts(f)
    with pytest.raises(FileNotFoundError, match="separated by lines"):
        read_prompts(tmp_path / "missing.txt")


def test_chat_streams_a_completion_and_its_statistics(demo: Path, tmp_path: Path, capsys) -> None:
    rc = main(["--models", str(tmp_path), "llm", "chat", "--model", str(demo), "--prompt", "import os\n",
               "--max-new-tokens", "6", "--policy", "lru", "--cache-ratio", "0.5"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "[lru: " in out and "tokens/s" in out and "hit rate" in out


def bench_cli(demo: Path, tmp_path: Path, prompts: str, *flags: str) -> tuple[int, Path]:
    """`inspector llm bench --json` on the tiny demo with these prompts and flags: its exit code and the JSON's path."""
    (tmp_path / "prompts.txt").write_text(prompts)
    path = tmp_path / "bench.json"
    rc = main(["--models", str(tmp_path), "llm", "bench", "--model", str(demo), "--prompts",
               str(tmp_path / "prompts.txt"), "--json", str(path), *flags])
    return rc, path


def test_bench_prints_the_table_and_writes_the_issue_json(demo: Path, tmp_path: Path, capsys) -> None:
    rc, path = bench_cli(demo, tmp_path, "def f(x):\n    return\n---\nimport sys\nclass A:\n", "--policies",
                         "ondemand,accelerate,lru,daop", "--max-new-tokens", "5", "--cache-ratio", "0.5")
    out = capsys.readouterr().out
    assert rc == 0 and "all-resident ceiling" in out and "WARNING" not in out
    doc = json.loads(path.read_text())
    assert doc["cache_ratio"] == 0.5 and doc["model"] == str(demo)
    assert [r["policy"] for r in doc["runs"]] == ["ondemand", "accelerate", "lru", "daop"]
    assert all(r["same_tokens"] == 1.0 for r in doc["runs"])
    runs = {r["policy"]: r for r in doc["runs"]}
    # accelerate reads every expert of a layer for every token; ondemand only the ones routed to
    assert runs["accelerate"]["bytes_read"] > runs["ondemand"]["bytes_read"] > 0


def test_bench_concurrency_serves_clients_at_once_with_the_same_tokens(demo: Path, tmp_path: Path, capsys) -> None:
    rc, path = bench_cli(demo, tmp_path, "def f(x):\n    return\n---\nimport sys\n---\nclass A:\n---\nfor i in",
                         "--policies", "daop,fmoe", "--max-new-tokens", "6", "--cache-ratio", "0.5",
                         "--concurrency", "1,4", "--repeat", "2")
    out = capsys.readouterr().out
    assert rc == 0 and "agg tok/s" in out and "medians of 2 interleaved runs" in out
    runs = {(r["policy"], r["concurrency"]): r for r in json.loads(path.read_text())["runs"]}
    assert set(runs) == {("daop", 1), ("daop", 4), ("fmoe", 1), ("fmoe", 4)}
    assert all(r["same_tokens"] == 1.0 and r["new_tokens"] == 4 * 6 for r in runs.values())
    assert runs[("daop", 4)]["mean_batch"] > 1.0  # daop batches decode steps
    # a batch's rows pick experts of their own: a step of several runs more distinct experts than a step of one
    assert runs[("daop", 4)]["step_experts"] > runs[("daop", 1)]["step_experts"] > 0
    assert "exp/step" in out and "reads/tok" in out
    # half the experts resident: every run reads some from disk, and waits for some of those reads
    assert all(r["reads_per_token"] > 0 and 0 < r["waiting"] < 1 for r in runs.values())
    # the disk was busy part of each run (reads at once counted once), and the overlap bound is no lower than
    # what the run reached: it takes the larger of the disk's busy time and the run less its waits
    assert all(0 < r["disk_busy"] <= 1.01 and r["bound_tokens_per_s"] >= 0.99 * r["tokens_per_s"]
               for r in runs.values())
    assert "bound" in out
    assert runs[("fmoe", 4)]["mean_batch"] == 1.0  # fMoE keeps per-sequence state: one at a time


def test_bench_refuses_a_budget_below_one_layer_topk(demo: Path, tmp_path: Path, capsys) -> None:
    rc = main(["--models", str(tmp_path), "llm", "bench", "--model", str(demo), "--cache-ratio", "0.25",
               "--max-new-tokens", "2"])
    assert rc == 1 and "smallest ratio that works is 0.500" in capsys.readouterr().err


def test_bench_runs_ratios_repeats_and_the_firm_ablation(demo: Path, tmp_path: Path, capsys) -> None:
    rc, path = bench_cli(demo, tmp_path, "def f(x):\n    return\n---\nimport sys\nclass A:\n", "--policies",
                         "ondemand,firm,duoserve", "--max-new-tokens", "4", "--cache-ratios", "0.5,1.0",
                         "--repeat", "2")
    out = capsys.readouterr().out
    assert rc == 0 and out.count("all-resident ceiling") == 2 and "median of 2" in out and "WARNING" not in out
    doc = json.loads(path.read_text())
    assert [r["cache_ratio"] for r in doc["reports"]] == [0.5, 1.0]
    assert all(run["repeats"] == 2 and run["same_tokens"] == 1.0 for r in doc["reports"] for run in r["runs"])
    rc = main(["--models", str(tmp_path), "llm", "bench", "--model", str(demo), "--ablation", "firm",
               "--prompts", str(tmp_path / "prompts.txt"), "--max-new-tokens", "4", "--cache-ratio", "0.5"])
    out = capsys.readouterr().out
    assert rc == 0 and all(label in out for label in ("firm base", "+fine-grained", "+MoL", "+HEOP"))
    rc = main(["--models", str(tmp_path), "llm", "bench", "--model", str(demo), "--policies", "firm:depth=2"])
    assert rc == 2 and "bad option 'depth=2'" in capsys.readouterr().err


def test_train_predictor_reports_its_accuracy_against_popularity_and_caches(demo: Path, tmp_path: Path,
                                                                             capsys) -> None:
    args = ["--models", str(tmp_path), "llm", "train-predictor", "--model", str(demo), "--epochs", "5"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "held-out accuracy" in out and "popularity alone" in out
    (saved,) = (tmp_path / "llm" / "calibration").glob("*.predictor-*.pt")
    assert main(args) == 0 and "already trained" in capsys.readouterr().out
    assert saved.is_file()
