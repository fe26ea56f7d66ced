"""Wiring of a running line (the operator's room): source -> crops -> engine -> verdicts -> results.

- verdict.py  a finished request + its rule -> the part's verdict and defect class
- line.py     the Line: one rule set, one engine, one result writer; boards in, board records out
- run.py      `inspector run`: a source through the line, printing progress and a summary
"""
