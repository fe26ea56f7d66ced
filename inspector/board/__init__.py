"""A plant's own board (issue 53): its CAD imported, its packages looked up, a rule set written for the line, and
the image work that teaching it from golden photos needs.

- design.py        the neutral design every format is read into: placed parts in the file's own millimetres and
                   degrees (each format's zero and direction made explicit), pads and body, side, outline.
- kicad.py         KiCad boards (.kicad_pcb, KiCad 5's `module` to KiCad 9's `footprint`), read with sexpdata.
- eagle.py         Eagle boards (.brd, the XML of Eagle 6-9).
- ipc2581.py       IPC-2581 (revisions B and C); ipc2581_xml.py its XML's units and numbers; ipc2581_copper.py
                   the pads a package lists once that its copper flashes again (a connector's two MP pads).
- odbpp.py         ODB++ jobs (a folder, a step's folder, .tgz / .zip; files kept with Unix compress).
- odbpp_panel.py   an ODB++ panel (step-and-repeat) as the one board the line carries: its copies placed, numbered.
- bottom_fit.py    how a file's bottom parts wear their packages, read from where the file places their pins.
- drawn_bodies.py  a part's body from its file's assembly drawing where the package outline is a courtyard;
                   ipc2581_drawings.py and odbpp_drawings.py read those drawings from each format.
- mask_openings.py a fiducial's bare ring from its side's solder-mask layer; odbpp_mask.py reads ODB++'s.
- centroid.py      pick-and-place / centroid files (KiCad .pos/.csv, Altium .txt/.csv, JLC, EasyEDA, Proteus, Eagle
                   .mnt/.mnb, saved profiles): what each column means, the units, each row a placed part.
- centroid_table.py  such a file's text as a table: its encoding, its delimiter or its columns' alignment, its
                   preamble's units.
- importing.py     one import as the CLI and the dashboard run it: the file by its kind, the rule set written.
- library.py       the plant's package library: package -> class, body, polarity, drawn shape; unknown ones asked.
- ipc7351.py       the body an IPC-7351 land-pattern name states (RESC1005X40N, QFN50P400X400X100-25N);
                   klc_names.py the body a KiCad library name states (QFN-32-1EP_5x5mm, CP_EIA-3528-21).
- flip.py          a design as the camera over its bottom side sees it (the board turned over: x mirrored).
- to_rules.py      a design, the library and the camera's scale -> a rule set the line runs (each type's lands and
                   body from its footprint, for the renderer), and every part's fate.
- geometry.py      the outline and pads written beside the rule set (RULES.board.json), for teaching.
- outline.py       a board found in a photo by its outline (each side the straightest run of its solder mask's
                   edge), registered to the CAD's outline box at the turn its pads agree with.
- register.py      the registration itself (photo px -> the rule set's frame): on picked points, a photo refined
                   on the golden board by ECC, a frame aligned on the golden board alone.
- mark_search.py   a board found in a photo by its fiducials where its outline is not; golden_marks.py where the
                   marks lie on the golden board; tilt.py and edge_check.py the tilt and fit the pads' rims tell.
- bend.py          what a homography leaves against the golden board (a lens, a bow), measured tile by tile and
                   taken out.
- drawn_golden.py  a CAD-only board's golden image drawn by the renderer, added to its rule set to align on.
- light.py         another photo's exposure and white balance matched to the golden board's, fitted on the board.
- photo_camera.py  the camera settings golden photos say they were taken with -> the taught set's `camera:`; a
                   check's photos taken otherwise named.
- made_defects.py  defects made from a golden photo's own crops, and good crops as another photo would show them.
- presence.py      is the part there: its body's colour against the board's around it, on the golden crop and the
                   live one; the least share teaching sets, and the line's pass overruled as missing under it.

The room reads files and images and writes rule sets, checked by the rule-set schema (routing/); it never imports
the line, the training or Qt (teaching, which trains, lives in app/board_teach.py).
"""
