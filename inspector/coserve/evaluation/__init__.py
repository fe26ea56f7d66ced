"""Evaluation: the benchmark, the simulator and their agreement, run over the online engine's mechanics.

    bench.py           `inspector bench`: one stream, every policy (repeated and interleaved), one table
    report.py          a run's row, the bench table, where the time goes, medians over repeats
    simulation.py      the same scheduler, pools and policies on a virtual clock, devices shared by their executors
    simcheck.py        simulator against the engine on this box
    boxes.py           box profiles to simulate on, with their memory rules (NUMA host RAM, UMA unified)
    sweep.py           a whole bench per memory size
    plots.py           PNG charts of a bench and of a sweep
    paper.py           the paper's four tasks against its reported bands
    charts/            the manual's measured chart and its JSON
"""
