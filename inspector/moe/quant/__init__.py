"""Quantized experts: weight-only int8/int4 (and bf16) copies of a checkpoint's routed experts.

weights.py is one quantized matrix and its product (PyTorch's own int8/int4 CPU kernels where their shape rules
hold, a dequantizing product elsewhere); copy.py writes a checkpoint's experts into a quantized copy on disk,
one expert at a time, and says where each quantized expert lies, so the engine's reads shrink with the bits.
Nothing here knows about policies or the pool. This file stays free of torch: the CLI names the choices.
"""
EXPERT_DTYPES = ("native", "bf16", "int8", "int4")  # native: the experts as the checkpoint stores them
