"""The CoServe collaboration-of-experts engine (ASPLOS '25).

Mechanics exist once (queues, executors, expert manager, accounting); every
policy, ours and the Samba-CoE baselines, is a small object the engine asks
"which queue?", "where in it?", "what to evict?" and "what to prefetch?".

Map of this room (one idea per module):
    request.py         requests, routes (classifier -> shared detector), results
    usage.py           usage probabilities and dependencies from routes and counts (§4.5)
    workload.py        workload YAML -> typed Workload; zoo plan, board-scan stream
    profile.py         measured costs (K, B, max batch, loads per tier); box profiles; served refit
    profiler.py        the microbenchmarks that fill a profile
    queue.py           an executor's queue of same-expert groups (+ bounded front lane)
    policies.py        assigners, arrangers, evictors and the named policies
    scheduler.py       predict added latency, assign, arrange (§4.2)
    expert_manager.py  one device pool: residency, pinning, eviction order, loads, prefetch (§4.3)
    executor.py        executor core (what the scheduler sees) and the worker thread
    engine.py          wiring: pools per device, executors, scheduler; submit / drain / stop
    executor_plan.py   workload + policy -> executors, threads and budgets on a box
    bench.py           `inspector bench`: one stream, every policy, one table
    simulation.py      the same scheduler, pools and policies on a virtual clock
    simcheck.py        simulator against the engine on this box
    planner.py         offline phase: executor counts, memory split, placement (§4.1, §4.4)

Only runtime/ and experts/ are imported from here; nothing here imports Qt.
"""
