"""The online engine (the serving room): what runs while boards are inspected.

    request.py         requests, routes (classifier -> shared detector), results
    components.py      component types and the detectors they share (torch-free: rule sets read them)
    usage.py           usage probabilities and dependencies from routes and counts (§4.5)
    workload.py        workload YAML -> typed Workload; zoo plan, board-scan stream
    profile.py         measured costs (K, B, max batch, loads per tier); box profiles; served refit
    queue.py           an executor's queue of same-expert groups (+ bounded front lane)
    policies.py        assigners, arrangers, evictors and the named policies (coserve-paper, the ladder)
    pools.py           one pool per executor (the paper) or per device (ours)
    timeline.py        where an executor's time goes; what shares a device's compute now
    scheduler.py       predict added latency, assign, arrange (§4.2)
    expert_manager.py  one pool: residency, pinning, eviction order, loads, prefetch, shells back (§4.3)
    executor.py        executor core (what the scheduler sees) and the worker thread
    engine.py          wiring: pools, executors, scheduler; submit / drain / stop
    executor_plan.py   workload + policy -> executors, threads and budgets on a box

Imports nothing from offline/ or evaluation/.
"""
