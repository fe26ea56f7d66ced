"""The LLM room's offline phase: runs of the model that policies learn from, cached per checkpoint.

- collect.py    calibration runs: expert popularity and the per-step routing trace
- predictor.py  DuoServe-MoE's ExpertMLP, trained from the trace by `inspector llm train-predictor`
"""
