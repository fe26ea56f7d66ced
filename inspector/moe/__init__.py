"""The MoE language-model engine (the LLM room): Hugging Face MoE checkpoints with offloaded experts.

Online (serving a request):
- checkpoint.py   a local checkpoint directory: config, shards, where each expert's tensors lie, the
                  non-expert weights; supported architectures and their key names
- store.py        expert weights by (layer, expert): read whole or by projection (sub-experts) from the
                  shards, a pool under the shared runtime budget, and the host-RAM tier below it
- runtime.py      the mechanics every policy shares: slots, reads ahead, staging, the prefill pipeline
- counters.py     what a pool counts (hits, misses, prefetches, guesses), read by policies and reports
- offloaded.py    the experts module put in place of transformers' fused one: same math, weights
                  fetched through the runtime
- engine.py       build the model on the meta device, load the non-expert weights, put the offloaded
                  experts in, generate
- expert_maps.py  fMoE's bounded, de-duplicated store of per-iteration expert maps
- policies/       what stays, what is read ahead, what leaves: one file per paper (base.py: the hooks)
- session.py, text.py, commands.py   chat, tokenizer and prompts, the `inspector llm` commands

Offline (calibration.py is its data; offline/ runs the model to produce it):
- offline/collect.py    calibration runs: popularity and the routing trace, cached
- offline/predictor.py  DuoServe's ExpertMLP, trained from the trace

Serving (service/): `inspector llm serve`, the OpenAI-compatible endpoint over an engine thread that batches
decode steps, and the lease on memory the kiosk lends.

Evaluation: bench.py (`inspector llm bench`), bench_concurrency.py (`--concurrency`), accelerate_baseline.py
(the real accelerate disk offload as a bench row).
"""
