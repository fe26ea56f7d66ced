"""A plant's own board (issue 53): its CAD imported, its packages looked up, a rule set written for the line.

- design.py    the neutral design every format is read into: placed parts in the file's own millimetres and
               degrees (each format's zero and direction made explicit), pads and body, side, outline, fiducials.
- kicad.py     KiCad boards (.kicad_pcb, KiCad 5's `module` to KiCad 9's `footprint`), read with sexpdata.
- centroid.py  pick-and-place / centroid files (KiCad .pos/.csv, Altium, JLC, Eagle .mnt/.mnb, saved profiles).
- library.py   the plant's package library: package -> class, body, polarity, drawn shape; unknown ones asked for.
- to_rules.py  a design, the library and the camera's scale -> a rule set the line runs (routing_rules/README.md),
               and every part's fate: inspected, or why not.

The room reads files and writes rule sets, checked by the rule-set schema (routing/); it never imports the
line, the training or Qt.
"""
