"""Evaluation: the benchmark, the simulator and their agreement, run over the online engine's mechanics.

    bench.py           `inspector bench`: one stream, every policy, one table
    simulation.py      the same scheduler, pools and policies on a virtual clock
    simcheck.py        simulator against the engine on this box
"""
