"""The offline phase (§4.1, §4.4): measuring a box and planning a configuration before serving.

    profiler.py        the microbenchmarks that fill a profile (online/profile.py holds the data), concurrency
    curve.py           timing batches: one call, the batch-latency curve in rounds, its max batch, K and B, cold_s
    planner.py         executor counts, memory split, placement; evaluates candidates on the simulator
"""
