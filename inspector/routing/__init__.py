"""Routing rules: which expert inspects which component on which board (the plant engineer's room).

- rules.py   the rule-set schema, validated once at the edge into typed objects (file:line errors),
             its version hash, and what the engine needs from it: routes and usage probabilities (§4.5).
- shapes.py  the component shapes the synthetic board renderer knows.

A rule set never imports the engine's internals beyond routes and workloads; the engine never
imports this package.
"""
