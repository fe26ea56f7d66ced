"""Wiring of a running line (the operator's room): source -> crops -> engine -> verdicts -> results.

- verdict.py      a finished request + its rule -> the part's verdict and defect class
- line.py         the Line: one rule set over one engine; boards in, board records out; rules swap between boards
- service.py      LineService: source thread, ingest queue, Line, result writer, crop keeper, published sinks,
                  and the one clean stop that `run`, `kiosk` and the dashboard share
- rules_watch.py  applying an edited rule file to the running line (a bad file is refused, the set stays)
- snapshot.py     the live state as plain data (kiosk /status and metrics, the dashboard)
- detection.py    verdicts scored against a synthetic source's truth
- run.py          `inspector run`: a whole source through a LineService, with progress and a summary
- soak.py         `inspector soak`: the line for a long time, RSS after warm-up, middle and end
- beside.py       `inspector llm beside-line`: the line and the model (its own process), each alone and together
- expert_swap.py  a version of one expert's weights into the running line at a board boundary, or back
- retrain_demo.py `inspector retrain-demo`: the whole loop scripted on the demo line
"""
