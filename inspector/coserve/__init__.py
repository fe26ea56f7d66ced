"""The CoServe collaboration-of-experts engine (ASPLOS '25).

Mechanics exist once (queues, executors, expert manager, accounting); every
policy, ours and the Samba-CoE baselines, is a small object the engine asks
"which queue?", "where in it?", "what to evict?" and "what to prefetch?".

Three rooms, each with its own map:
    online/      the engine that serves: requests, usage, workload, profile data, queues, policies,
                 scheduler, expert manager, executors, engine, executor plan
    offline/     the profiler and the planner (§4.1, §4.4): run before serving
    evaluation/  the benchmark, the simulator and the simulator's check against the engine
online/ imports neither of the others; offline/ and evaluation/ build on online/ (the planner scores
candidates on evaluation's simulator, the benchmark profiles through offline's profiler).

Only runtime/ and experts/ are imported from here; nothing here imports Qt.
"""
