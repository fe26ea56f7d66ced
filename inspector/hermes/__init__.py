"""IPC-HERMES-9852: the box's board handover with the machines beside it on an SMT line.

messages.py  the XML messages and the stream's framing
states.py    the lane's state machine, the same on both ends
lane.py      the giver (downstream interface, server) and the taker (upstream interface, client)
peer.py      a line's neighbours for tests, bench-io and a plant's commissioning: an upstream machine that
             hands boards in, a downstream machine that takes them
Imports nothing else of ours: the line's wiring is app/hermes_link.py.
"""
