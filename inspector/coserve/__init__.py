"""The CoServe collaboration-of-experts engine (ASPLOS '25).

Mechanics exist once (queues, executors, expert manager, accounting); every
policy, ours and the Samba-CoE baselines, is a small object the engine asks
"which queue?", "where in it?", "what to evict?" and "what to prefetch?".
"""
