"""Runtime shared by the inspection engine and the MoE language-model engine.

Devices, memory ledgers with byte budgets, grants of a budget to another process on a lease (grants.py),
the tiered weight store
(disk -> host RAM -> device pool, weights checked against their sha256) and
giving freed heap back to the OS (heap.py). Imports nothing else of ours.
"""
