"""Edge appliance for circuit-board inspection.

Rooms (arrows point down; see ARCHITECTURE.md in the shared folder):
    cli/      -> argument parsing only (a module per family of commands; the config file)
    coserve/  -> the collaboration-of-experts engine (scheduler, expert manager, policies, bench)
    experts/  -> expert architectures behind one interface; zoo building
    runtime/  -> devices, memory ledgers, tiered weight store (imports nothing of ours)
"""

__version__ = "0.1.0"
