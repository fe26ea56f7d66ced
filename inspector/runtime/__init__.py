"""Runtime shared by the inspection engine and the MoE language-model engine.

Devices, memory ledgers with byte budgets, and the tiered weight store
(disk -> host RAM -> device pool). Imports nothing else of ours.
"""
