"""`inspector llm ...`: build-demo, chat and bench on the command line (the GUI's LLM tab uses the same API)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .policies import ALIASES, POLICIES, parse_spec
from .quant import EXPERT_DTYPES
from .service.threads import REMEASURE_S

DEFAULT_POLICIES = "ondemand,lru,fiddler,moesys,daop,fmoe,firm,duoserve"


def _say(line: str) -> None:
    print(line, flush=True)


def _llm_root(args: argparse.Namespace) -> Path:
    from ..paths import models_dir

    return models_dir(args.models) / "llm"


def resolve_model(args: argparse.Namespace) -> Path:
    """--model DIR, or the demo model (built first when it is not there yet: about ten minutes)."""
    if args.model:
        return Path(args.model)
    from .demo.build import build_demo

    build = build_demo(root=_llm_root(args), log=_say)
    if not build.cached:
        _say(f"demo model built in {build.seconds:.0f} s: {build.path}")
    return build.path


def cmd_build_demo(args: argparse.Namespace) -> int:
    from .demo.build import DemoRecipe, build_demo

    recipe = DemoRecipe(steps=args.steps) if args.steps else DemoRecipe()
    build = build_demo(recipe, root=_llm_root(args), force=args.force, log=_say, device=args.device)
    state = "cached, built earlier" if build.cached else "built"
    _say(f"demo model {state} in {build.seconds:.0f} s: {build.path}")
    _say(f"held-out perplexity {build.perplexity:.2f}")
    return 0


def _prompt_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    from .text import encode_prompt

    return [encode_prompt(tokenizer, t) for t in texts]


def _calibration(model: Path, tokenizer, args: argparse.Namespace):
    from .offline.collect import calibrate_on_texts

    return calibrate_on_texts(model, tokenizer, _llm_root(args) / "calibration", _say)


def _quant_dir(args: argparse.Namespace) -> Path:
    return _llm_root(args) / "quantized"


def cmd_chat(args: argparse.Namespace) -> int:
    from .session import ChatSession

    _check_plan(args, resolve_model(args), 1)
    session = ChatSession(resolve_model(args), args.policy, args.cache_ratio, _llm_root(args) / "calibration",
                          args.device, log=_say, host_ratio=args.host_ratio, expert_dtype=args.expert_dtype,
                          quant_dir=_quant_dir(args))
    try:
        while True:
            if args.prompt is not None:
                text = args.prompt
            else:
                try:
                    text = input("> ")
                except EOFError:
                    return 0
            if text.strip():
                for piece, _ in session.complete(text, args.max_new_tokens):
                    sys.stdout.write(piece)
                    sys.stdout.flush()
                s = session.stats
                acc = f", prediction {s.prediction_accuracy:.2f}" if s.prediction_accuracy is not None else ""
                cut = f", {s.truncated} oldest prompt tokens dropped to fit the context" if s.truncated else ""
                print(f"\n[{session.policy.name}: {s.tokens} tokens, {s.tokens_per_s:.1f} tokens/s, first after "
                      f"{s.ttft_s:.2f} s, hit rate {s.hit_rate:.2f}, {s.expert_loads} expert loads{acc}{cut}]",
                      flush=True)
            if args.prompt is not None:
                return 0
    finally:
        session.close()


def cmd_serve(args: argparse.Namespace) -> int:
    from .service.server import ServeConfig, serve

    _check_plan(args, resolve_model(args), args.max_batch)
    cfg = ServeConfig(resolve_model(args), args.policy, args.cache_ratio, args.device, args.host_ratio,
                      _llm_root(args) / "calibration", args.listen, args.token_file, args.name, args.threads,
                      args.nice, args.max_batch, args.max_waiting, args.ledger, args.ledger_token_file,
                      remeasure_s=args.remeasure_threads, db=args.db, tls_cert=args.tls_cert, tls_key=args.tls_key,
                      tls_client_ca=args.tls_client_ca, expert_dtype=args.expert_dtype, quant_dir=_quant_dir(args))
    return serve(cfg, _say)


def _check_plan(args: argparse.Namespace, model: Path, sequences: int) -> None:
    """Before loading: refuse choices whose plan cannot fit the device (always on a GPU; on the CPU when
    --memory is given), naming the figure."""
    if args.memory is None and not args.device.startswith("cuda"):
        return
    from .plan import check_fits, parse_size

    memory = parse_size(args.memory) if args.memory else None
    check_fits(model, args.device, memory, args.expert_dtype, args.policy, args.cache_ratio, sequences,
               args.host_ratio, args.context)


def cmd_plan(args: argparse.Namespace) -> int:
    from .plan import device_memory, format_plan, make_plan, model_shape, parse_size

    model = resolve_model(args)
    shape = model_shape(model)
    memory = parse_size(args.memory) if args.memory else device_memory(args.device)
    plan = make_plan(shape, args.device, memory, args.expert_dtype, args.policy, args.context, args.sequences,
                     args.host_ratio)
    print(format_plan(plan, shape, model.name), flush=True)
    return 0 if plan.fits else 3


def cmd_quantize(args: argparse.Namespace) -> int:
    """Write the quantized copy (once) and say what it costs: size, and held-out perplexity beside native."""
    from .checkpoint import MoECheckpoint
    from .quant.copy import open_quantized

    model = resolve_model(args)
    ckpt = MoECheckpoint.open(model)
    copy = open_quantized(ckpt, args.expert_dtype, args.device, _quant_dir(args), _say)
    native = sum(s.nbytes for s in ckpt.experts.values())
    _say(f"{args.expert_dtype} experts: {copy.nbytes / 2**20:.1f} MiB ({copy.nbytes / native:.3f} of "
         f"{native / 2**20:.1f} MiB as stored) in {copy.path}")
    if args.windows:
        from .demo.build import token_stream
        from .demo.corpus import Corpus, stdlib_corpus
        from .quality import compare, quality_table
        from .text import load_tokenizer

        stream = token_stream(load_tokenizer(model), Corpus.read(stdlib_corpus().held_out))
        seq_len = min(256, int(getattr(ckpt.config, "max_position_embeddings", 0) or 256))
        rows = compare(model, ["native", args.expert_dtype], stream, seq_len, args.windows, args.device,
                       _quant_dir(args))
        print(quality_table(rows), flush=True)
    return 0


def cmd_bench_realsize(args: argparse.Namespace) -> int:
    import multiprocessing
    import random
    import resource

    from .bench_realsize import bench_realsize, build_realsize, format_realsize
    from .checkpoint import MoECheckpoint
    from .offline.collect import calibrate

    root = Path(args.out) if args.out else _llm_root(args) / f"realsize-mixtral-{args.layers}l"
    if not root.is_dir():  # built in a child process: the build holds the whole model, the bench must not
        ctx = multiprocessing.get_context("spawn")
        child = ctx.Process(target=build_realsize, args=(root, args.layers, None, print))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"building the real-size checkpoint failed (exit {child.exitcode})")
    ckpt = MoECheckpoint.open(root)
    experts = sum(s.nbytes for s in ckpt.experts.values())
    rng = random.Random(0)
    vocab = int(ckpt.config.vocab_size)
    prompts = [[1] + [rng.randrange(3, vocab) for _ in range(args.prompt_tokens)] for _ in range(args.prompts)]
    t0 = time.perf_counter()
    cal = calibrate(root, prompts, new_tokens=args.max_new_tokens, cache_dir=_llm_root(args) / "calibration")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    _say(f"calibration ({time.perf_counter() - t0:.0f} s, or cached): peak RSS {rss / 2**30:.2f} GiB, the experts "
         f"{experts / 2**30:.2f} GiB ({rss / experts:.2f} of them)")
    dtypes = [d.strip() for d in args.expert_dtypes.split(",") if d.strip()]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    pool_bytes = None
    if args.pool_memory:
        from .plan import parse_size

        pool_bytes = parse_size(args.pool_memory)
    bandwidth, rows = bench_realsize(root, dtypes, policies, args.cache_ratio, prompts, args.max_new_tokens, cal,
                                     _quant_dir(args), _say, pool_bytes, args.device)
    budget = f"cache ratio {args.cache_ratio:g}" if pool_bytes is None else \
        f"expert pool {pool_bytes / 2**30:.2f} GiB for every dtype"
    print(format_realsize(root, bandwidth, rows, budget, len(prompts), args.max_new_tokens, args.device),
          flush=True)
    return 0


def _ratios(args: argparse.Namespace) -> list[float]:
    if args.cache_ratios:
        try:
            return [float(r) for r in args.cache_ratios.split(",") if r.strip()]
        except ValueError:
            raise ValueError(f"--cache-ratios wants numbers separated by commas, got {args.cache_ratios!r}") from None
    return [args.cache_ratio]


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import ABLATION_LABELS, ABLATIONS, bench, format_report
    from .checkpoint import MoECheckpoint
    from .engine import pool_slots
    from .text import load_tokenizer, read_prompts

    if args.ablation:
        policies = ["ondemand", *ABLATIONS[args.ablation]]
    else:
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if args.degrade and "daop+degrade" not in policies:
        policies.append("daop+degrade")
    if args.concurrency and "accelerate" in policies:
        raise ValueError("accelerate is not a policy of the serving engine, so it has no --concurrency run; leave "
                         "it out of --policies here")
    for spec in policies:
        if spec != "accelerate":  # the real accelerate disk offload: a bench row, not a policy of our runtime
            parse_spec(spec)  # a typo is refused before anything loads
    model = resolve_model(args)
    ratios = _ratios(args)
    ckpt = MoECheckpoint.open(model)
    for ratio in ratios:
        pool_slots(ckpt, ratio)  # a ratio below one layer's top-k: refused first
    tokenizer = load_tokenizer(model)
    prompts = _prompt_ids(tokenizer, read_prompts(args.prompts))
    cal = _calibration(model, tokenizer, args)
    if args.concurrency:
        return _bench_concurrency(args, model, policies, ratios, prompts, cal)
    reports = []
    for ratio in ratios:
        report = bench(model, policies, ratio, prompts, args.max_new_tokens, cal, args.device, log=_say,
                       repeat=args.repeat, host_ratio=args.host_ratio, expert_dtype=args.expert_dtype,
                       quant_dir=_quant_dir(args))
        print(format_report(report, labels=ABLATION_LABELS if args.ablation else None), flush=True)
        reports.append(report)
        exact = [r for r in report.runs if not r.approximate]
        if exact and any(r.same_tokens != 1.0 for r in exact):
            print("WARNING: exact policies disagree on the tokens; this is a bug, please report it")
    if args.json:
        doc = reports[0].to_json() if len(reports) == 1 else {"reports": [r.to_json() for r in reports]}
        Path(args.json).write_text(json.dumps(doc, indent=2))
        print(f"report written to {args.json}")
    return 0


def _levels(spec: str) -> list[int]:
    try:
        levels = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--concurrency wants client counts separated by commas (e.g. 1,4), got {spec!r}") from None
    if not levels or min(levels) < 1:
        raise ValueError(f"--concurrency wants client counts of at least 1, got {spec!r}")
    return levels


def _bench_concurrency(args: argparse.Namespace, model: Path, policies: list[str], ratios: list[float],
                       prompts: list[list[int]], cal) -> int:  # noqa: ANN001 - Calibration
    from .bench_concurrency import bench_concurrency, format_concurrency

    levels = _levels(args.concurrency)
    docs = []
    for ratio in ratios:
        runs = bench_concurrency(model, policies, ratio, prompts, args.max_new_tokens, levels, cal, args.device,
                                 args.host_ratio, log=_say, repeat=args.repeat, threads=args.threads,
                                 expert_dtype=args.expert_dtype, quant_dir=_quant_dir(args))
        print(format_concurrency(runs, str(model), ratio, len(prompts), args.max_new_tokens, args.device,
                                 args.repeat), flush=True)
        docs.append({"cache_ratio": ratio, "runs": [r.to_json() for r in runs]})
    if args.json:
        Path(args.json).write_text(json.dumps(docs[0] if len(docs) == 1 else {"reports": docs}, indent=2))
        print(f"report written to {args.json}")
    return 0


def cmd_train_predictor(args: argparse.Namespace) -> int:
    from .checkpoint import MoECheckpoint
    from .offline.predictor import PredictorRecipe, predictor_path, train_predictor
    from .text import load_tokenizer

    model = resolve_model(args)
    ckpt = MoECheckpoint.open(model)
    cal = _calibration(model, load_tokenizer(model), args)
    recipe = PredictorRecipe(epochs=args.epochs) if args.epochs else PredictorRecipe()
    path = predictor_path(cal.path, recipe)
    if path.is_file() and not args.force:
        _say(f"predictor already trained: {path} (--force trains it again)")
        return 0
    predictor, report = train_predictor(cal.trace, ckpt.num_experts, ckpt.top_k, recipe, log=_say)
    predictor.save(path, recipe, report)
    _say(f"DuoServe predictor trained on {report.train_samples} samples from {cal.texts} calibration texts in "
         f"{report.seconds:.1f} s: held-out accuracy {report.accuracy:.3f}, popularity alone "
         f"{report.popularity_accuracy:.3f} ({report.heldout_samples} held-out samples); saved to {path}")
    return 0


def add_llm_commands(llm: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """The `inspector llm` commands under `llm`; their subparsers, for commands that also need the line (cli/)."""
    llm_sub = llm.add_subparsers(dest="llm_command", required=True)

    build = llm_sub.add_parser("build-demo", help="train the demo MoE (Mixtral, 8 layers x 16 experts) on the "
                                                  "standard library and save it under models/llm (cached)")
    build.add_argument("--steps", type=int, help="training steps (default: the recipe's)")
    build.add_argument("--force", action="store_true", help="build again even when a cached model exists")
    build.add_argument("--device", default="cpu", help="train on cpu or cuda (default cpu)")
    build.set_defaults(func=cmd_build_demo)

    def model_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="a local Hugging Face MoE checkpoint directory (default: the demo model)")
        p.add_argument("--cache-ratio", type=float, default=0.25,
                       help="experts resident in the pool / all experts (default 0.25)")
        p.add_argument("--max-new-tokens", type=int, default=None,
                       help="tokens generated for each prompt at most (serve: each request's max_tokens decides)")
        p.add_argument("--device", default="cpu", help="the pool's device: cpu or cuda (default cpu)")
        p.add_argument("--expert-dtype", choices=EXPERT_DTYPES, default="native",
                       help="serve the routed experts as stored (native) or from a copy quantized once to bf16, "
                            "int8 (per channel) or int4 (groups of 128): fewer bytes per switch")
        p.add_argument("--host-ratio", type=float, default=None,
                       help="experts held in a host-RAM tier between the pool and the disk / all experts "
                            "(default: all on a GPU box, none on a CPU-only box)")

    def plan_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--memory", help="the device memory to plan for (e.g. 24G; default: the device's own, or "
                                        "this box's RAM less 4 GiB for the system)")
        p.add_argument("--context", type=int, help="tokens per sequence to plan the KV cache for (default 4096 or "
                                                   "the model's context, the smaller)")

    plan = llm_sub.add_parser("plan", help="what fits where before loading: non-expert weights, KV cache, "
                                           "activations, the expert pool and its cache ratio, the host tier (exit 3 "
                                           "when it does not fit)")
    plan.add_argument("model", nargs="?", help="a checkpoint directory (only its config.json is read)")
    plan.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    plan.add_argument("--expert-dtype", choices=EXPERT_DTYPES, default="native",
                      help="plan for the routed experts as stored (native) or quantized (bf16, int8, int4)")
    plan.add_argument("--policy", default="daop", help="its read buffers are part of the pool (default daop)")
    plan.add_argument("--sequences", type=int, default=1, help="sequences decoding together (default 1)")
    plan.add_argument("--host-ratio", type=float, default=None, help="experts wanted in pinned host RAM (GPU)")
    plan_flags(plan)
    plan.set_defaults(func=cmd_plan)

    quant = llm_sub.add_parser("quantize", help="write the experts' quantized copy once (int8, int4 or bf16) and "
                                                "compare its held-out perplexity with the experts as stored")
    quant.add_argument("--model", help="a local Hugging Face MoE checkpoint directory (default: the demo model)")
    quant.add_argument("--expert-dtype", choices=EXPERT_DTYPES[1:], default="int4",
                       help="the copy's type: bf16, int8 (per channel) or int4 (groups of 128; default)")
    quant.add_argument("--device", default="cpu", help="the device it will be served on: cpu or cuda (the int4 "
                                                       "layout differs)")
    quant.add_argument("--windows", type=int, default=16, help="held-out windows of the demo corpus to compare "
                                                               "perplexity on (0: skip)")
    quant.set_defaults(func=cmd_quantize)

    real = llm_sub.add_parser("bench-realsize", help="a Mixtral-shaped checkpoint with real-size experts (4096 x "
                                                     "14336, 8 per layer, top-2; random weights, built once): "
                                                     "each expert dtype and policy against the disk's bandwidth")
    real.add_argument("--layers", type=int, default=3, help="decoder layers (default 3: 8.3 GiB of bf16 experts)")
    real.add_argument("--out", help="where the checkpoint is built (default: models/llm/realsize-mixtral-<N>l)")
    real.add_argument("--expert-dtypes", default="bf16,int8,int4",
                      help="the experts' types to bench, comma-separated (each quantized once, then cached)")
    real.add_argument("--policies", default="ondemand,lru,daop,firm,duoserve",
                      help="the offloading policies to run on each type, comma-separated")
    real.add_argument("--cache-ratio", type=float, default=0.25, help="the same cache ratio for every dtype")
    real.add_argument("--pool-memory", help="instead: the same pool bytes for every dtype (e.g. 3G), each at the "
                                            "largest cache ratio that fits")
    real.add_argument("--device", default="cpu", help="the pool's device: cpu or cuda (default cpu)")
    real.add_argument("--prompts", type=int, default=2, help="prompts decoded by each policy (random tokens, seed 0)")
    real.add_argument("--prompt-tokens", type=int, default=16, help="tokens in each prompt")
    real.add_argument("--max-new-tokens", type=int, default=12, help="tokens generated for each prompt")
    real.set_defaults(func=cmd_bench_realsize)

    chat = llm_sub.add_parser("chat", help="stream a completion in the terminal (a prompt per line, or --prompt)")
    model_flags(chat)
    plan_flags(chat)
    chat.add_argument("--policy", default="daop", help="a policy spec: " + ", ".join([*POLICIES, *ALIASES]) +
                      ", optionally with options as name:option=value (default daop)")
    chat.add_argument("--prompt", help="complete this one prompt and exit")
    chat.set_defaults(func=cmd_chat, max_new_tokens=96)

    srv = llm_sub.add_parser("serve", help="an OpenAI-compatible endpoint (/v1/completions, /v1/chat/completions) "
                                           "in this process, with its own thread count")
    model_flags(srv)
    plan_flags(srv)
    srv.add_argument("--policy", default="daop", help="a policy spec (default daop)")
    srv.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT (default 127.0.0.1:8000)")
    srv.add_argument("--token-file", help="a file (mode 0600) holding a service bearer token /v1 requests may "
                                          "send (people use their own: --db)")
    srv.add_argument("--name", help="the model's name in the API (default: the checkpoint directory's name)")
    srv.add_argument("--threads", type=int, help="torch threads for this process (default: the fastest of 1, 2, 4, "
                                                 "... cores, measured on the first decode steps)")
    srv.add_argument("--remeasure-threads", type=float, default=REMEASURE_S, metavar="S",
                     help=f"without --threads: try the thread counts again once a choice is S seconds old (what "
                          f"else runs on the box changes; default {REMEASURE_S:g}, 0: never)")
    srv.add_argument("--nice", type=int, default=0, help="lower this process's CPU priority by N (beside the line)")
    srv.add_argument("--max-batch", type=int, default=8, help="sequences decoding together at most (default 8)")
    srv.add_argument("--max-waiting", type=int, default=64,
                     help="requests waiting beyond that before new ones get 429 (default 64)")
    srv.add_argument("--ledger", help="the kiosk that owns this box's memory (its API, e.g. http://127.0.0.1:9108): "
                                      "the model borrows its bytes from the kiosk's --llm-mb on a lease")
    srv.add_argument("--ledger-token-file", help="the kiosk's service token file (asking for memory changes its state)")
    srv.add_argument("--db", help="the results database whose users may use the model with their API tokens "
                                  "(`inspector user token`); with --token-file, the service token works too")
    srv.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM; required beyond 127.0.0.1)")
    srv.add_argument("--tls-key", help="... and its private key")
    srv.add_argument("--tls-client-ca", help="also demand client certificates signed by this CA")
    srv.set_defaults(func=cmd_serve)

    bench = llm_sub.add_parser("bench", help="several policies at one cache ratio, side by side, with the ceiling")
    model_flags(bench)
    bench.add_argument("--policies", default=DEFAULT_POLICIES,
                       help="comma list of policy specs: " + ", ".join(POLICIES) + ", daop+degrade (approximate); "
                            "options as name:option=value, e.g. daop:predict_from=4 or firm:parts=1; and "
                            "accelerate: the real accelerate disk offload (transformers' device map, experts on disk)")
    bench.add_argument("--cache-ratios", help="comma list of cache ratios, one table each (e.g. 0.125,0.25,0.5)")
    bench.add_argument("--repeat", type=int, default=1,
                       help="run each policy (and concurrency level) N times, interleaved; report medians")
    bench.add_argument("--ablation", choices=["firm"],
                       help="instead of --policies: FIRM-MoE's ablation (base, +fine-grained, +MoL, +HEOP)")
    bench.add_argument("--prompts", help="prompt file, prompts separated by lines holding only --- "
                                         "(default: the built-in set)")
    bench.add_argument("--degrade", action="store_true",
                       help="also run DAOP with graceful degradation and report its accuracy cost")
    bench.add_argument("--concurrency", help="instead of one prompt at a time: N clients at once through the "
                                             "serving engine, for each N of a comma list (e.g. 1,4)")
    bench.add_argument("--threads", type=int, help="with --concurrency: the serving engine's torch threads (default: "
                                                  "measured by each engine on its first decode steps)")
    bench.add_argument("--json", help="also write the report as JSON to this path")
    bench.set_defaults(func=cmd_bench, max_new_tokens=48)

    train = llm_sub.add_parser("train-predictor", help="calibrate (cached) and train DuoServe-MoE's expert predictor "
                                                       "from the routing trace; prints its held-out accuracy")
    train.add_argument("--model", help="a local Hugging Face MoE checkpoint directory (default: the demo model)")
    train.add_argument("--epochs", type=int, help="training epochs (default: the recipe's)")
    train.add_argument("--force", action="store_true", help="train again even when a trained predictor is cached")
    train.set_defaults(func=cmd_train_predictor)
    return llm_sub
