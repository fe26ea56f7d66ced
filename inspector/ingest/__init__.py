"""Ingest (the camera room): where board images come from and how they wait for the line.

- sources.py    synthetic boards, a folder (watched or not), a replay list, a camera (OpenCV VideoCapture);
                every frame with its inspection id
- images.py     one image file's bytes -> pixels, or the reason it is refused (empty, truncated, too big)
- synthetic.py  the demo board renderer with known defects (also the training data)
- silkscreen.py the outlines it prints, kept out of other parts' windows
- lands.py      a footprint's own lands (a rule set's `pads:`) and where a bridge between them shows
- crops.py      a board image cut into component crops by the rule set's layout
- bad_marks.py  a panel's bad-mark pads read: the x-outs the board maker marked, not inspected
- queue.py      the bounded hand-over between a source thread and the line: wait or drop, counted
"""
