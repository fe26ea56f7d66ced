"""The offline phase (§4.1, §4.4): measuring a box and planning a configuration before serving.

    profiler.py        the microbenchmarks that fill a profile (online/profile.py holds the data), concurrency
    curve.py           a batch-latency curve timed in rounds, so a slow spell of the box does not move the max batch
    planner.py         executor counts, memory split, placement; evaluates candidates on the simulator
"""
