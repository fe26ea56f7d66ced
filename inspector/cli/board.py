"""`inspector board`: a plant's own board from its CAD (inspector/board)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .exits import REFUSED, UsageError

if TYPE_CHECKING:
    from ..board.station import Station


def add_board(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="board_command", required=True)
    imp = sub.add_parser("import", help="a rule set from a board's CAD: KiCad .kicad_pcb, Eagle .brd, IPC-2581 "
                                        ".xml, an ODB++ job (its folder, a step's folder, .tgz or .zip), or a "
                                        "pick-and-place / centroid file (Eagle .mnt/.mnb, KiCad .pos/.csv, Altium's "
                                        ".txt/.csv, JLC, EasyEDA, Proteus, any table naming its columns)")
    imp.add_argument("file", help="the CAD or centroid file (or an ODB++ job's folder, or a Gerber X3 set's folder "
                                  "or zip, whose component layers place its parts)")
    imp.add_argument("--out", required=True, help="the rule set to write (YAML)")
    imp.add_argument("--side", choices=["top", "bottom"], default="top", help="the side the camera sees")
    scale = imp.add_mutually_exclusive_group(required=True)
    scale.add_argument("--px-per-mm", type=float, help="the camera's scale on the board")
    scale.add_argument("--camera", help="a camera file (JSON) with px_per_mm")
    imp.add_argument("--library", help="the plant's package library (YAML, inspector/board/packages.yaml's "
                                       "sections), read before the product's own")
    imp.add_argument("--profile", help="a centroid file's profile (YAML: columns, units, y_up, bottom_x)")
    imp.add_argument("--gerber", help="the board's fabrication Gerbers (a folder or zip) beside a placement file: "
                                      "every part's pads and the board's edge from them")
    imp.add_argument("--bom", help="the board's bill of materials (CSV, TXT, or a workbook: .xlsx, .xls, .ods): parts "
                                   "it does not list or marks not fitted are not placed, and each listed part gets its "
                                   "line's value, package, manufacturer, part number and mounting")
    imp.add_argument("--bom-profile", help="a BOM's profile, where its columns have names of their own (YAML: "
                                           "columns: {refs, quantity, value, package, part_number, ...})")
    imp.add_argument("--before-through-hole", action="store_true",
                     help="the station stands before the through-hole parts go in (an AOI after paste or reflow): "
                          "they are not inspected, except those placed in paste (the BOM's or placement's mounting "
                          "says pin-in-paste, or --pin-in-paste names them)")
    imp.add_argument("--pin-in-paste", help="through-hole parts the placement machine puts in paste before reflow, "
                                            "inspected before the through-hole parts (designators: J1,J2 or J1-J4)")
    imp.add_argument("--fitted-later", help="parts fitted after this station (by hand, a press, a later line: a "
                                            "battery, a heat sink), not inspected here (designators: BT1,HS1)")
    imp.add_argument("--recipe", help="the recipe's name (default: the file's name)")
    imp.add_argument("--step", help="an ODB++ job's step to import, where several place parts (the board, or the "
                                    "panel of it the line carries: a panel is read as one board of every copy)")
    imp.add_argument("--json", help="also write every part, its type and whether (and why not) it is inspected")
    imp.set_defaults(func=cmd_import)
    teach = sub.add_parser("teach", help="teach an imported board from photos of good boards: registered to the CAD, "
                                         "made defects from their own crops, a golden-comparison expert per type")
    teach.add_argument("--rules", required=True, help="the imported rule set (board import's RULES.yaml)")
    teach.add_argument("--golden", required=True, nargs="+", help="photos of good boards (one is enough to start), "
                                                                  "or a folder of them")
    teach.add_argument("--every-board", action="store_true",
                       help="take every board a golden photo shows (a tray of golden boards), not only the first "
                            "registered")
    teach.add_argument("--out", help="the taught rule set to write (default: RULES.taught.yaml)")
    teach.add_argument("--work", help="where the crops, overlays and zoo go (default: RULES.teach/)")
    teach.add_argument("--defects", help="real labelled crops to teach too: DIR/<class>/<REF>__name.png, a defect "
                                         "class's or good/ for good parts the golden boards do not show (an "
                                         "alternate part the line flagged and an engineer found good)")
    teach.add_argument("--escape-rate", type=float,
                       help="give each type the threshold letting at most this share of its held-out defects pass "
                            "(default: every type serves the teaching's threshold, 1%% false calls)")
    teach.add_argument("--comparison", choices=["composite", "colour", "matched", "none"], default="composite",
                       help="what each expert reads: the crop beside the golden board's window in grey (composite, "
                            "the default), the same counting colour changes (colour), the same on the golden "
                            "window's grey scale, keeping how dark a window is (matched), or the live crop alone "
                            "(none)")
    teach.add_argument("--experts", choices=["classifier", "anomaly"], default="classifier",
                       help="serve each type the shared classifier taught on made defects (default), or an expert of "
                            "its good crops alone (an anomaly score over that classifier's features)")
    teach.add_argument("--no-presence", dest="presence", action="store_false",
                       help="serve no presence check beside the experts (by default a part whose body shows the "
                            "board's own colour where the golden board shows a body is called missing)")
    teach.add_argument("--epochs", type=int, default=30,
                       help="train at most this many epochs; the one with the best defect recall on the training "
                            "parts set aside for choosing it (15%% of each type of 4 or more parts, never trained "
                            "on) is kept, and training stops after 6 epochs without a better one")
    teach.add_argument("--heldout", type=float, default=0.25,
                       help="the share of parts held out to choose the threshold and validate on (default 0.25); every "
                            "type of two or more parts keeps at least one on each side")
    teach.add_argument("--seed", type=int, default=0,
                       help="the seed of the made defects and of training: the same photos and seed teach the same "
                            "expert on one machine (another CPU or thread count may round its way to another)")
    teach.add_argument("--threads", type=int, help="torch threads (default: torch's): the same seed, torch release "
                                                   "and thread count teach the same weights (each version records "
                                                   "its own as trained_with)")
    teach.add_argument("--json", help="also write the registrations, crops and validation table as JSON")
    teach.set_defaults(func=cmd_teach)
    check = sub.add_parser("check", help="photos of boards registered to a taught rule set and inspected by the line: "
                                         "what it flags on boards whose answer you know")
    check.add_argument("photos", nargs="+", help="photos, each holding one board or several, or folders of them")
    check.add_argument("--rules", required=True, help="the taught rule set (board teach's RULES.taught.yaml)")
    check.add_argument("--zoo", required=True, help="its zoo (board teach's WORK/zoo)")
    check.add_argument("--work", help="where the overlays go (default: beside the zoo); the profiles are the box's "
                                          "(--models), as the line's")
    check.add_argument("--json", help="also write every board, its registration and flagged parts as JSON")
    check.add_argument("--good", action="store_true",
                       help="the photos show good boards: say what passing each flagged part would cost in held-out "
                            "recall (each type's threshold lowered just under it, nearest first)")
    check.set_defaults(func=cmd_check)
    from .board_install import add_install
    from .board_revise import add_revise
    from .board_tune import add_tune
    from .common import photo_board_flags

    add_tune(sub)
    add_revise(sub)
    add_install(sub)
    approve = sub.add_parser("approve", help="approve another make of a part (a second source) on a taught board: "
                                            "its window, from a board that carries it, becomes a second golden "
                                            "window of that part")
    approve.add_argument("refs", nargs="+", help="the parts to approve, by reference (as `board check` lists them)")
    approve.add_argument("--rules", required=True, help="the taught rule set (it gains `alternates:`)")
    given = approve.add_mutually_exclusive_group(required=True)
    given.add_argument("--photo", help="a photo (or the line's frame) of a board that carries the approved parts")
    given.add_argument("--crop", help="a crop the line kept of the one part named (its window as the line cut it)")
    photo_board_flags(approve)
    approve.add_argument("--make", help="the approved make's name, its part number (e.g. LIS2DH12TR): the window's "
                                        "file is named after it, and so is every part the line compares with it in "
                                        "the results (default: the photo's or crop's name)")
    approve.set_defaults(func=cmd_approve)
    marks = sub.add_parser("marks", help="a panel's bad-mark pads read on photos as the line reads them: each pad's "
                                         "level, the clean pad's, the share a mark took and whether it reads "
                                         "marked (to place the pads and set their contrast)")
    marks.add_argument("photos", nargs="+", help="frames of the line's camera, each one panel")
    marks.add_argument("--rules", required=True, help="the panel's rule set (its `panel: bad_marks:`)")
    marks.add_argument("--json", help="also write every pad as read, photo by photo, as JSON")
    marks.set_defaults(func=cmd_marks)
    golden = sub.add_parser("golden", help="draw a board's golden image with the product's renderer and align each "
                                           "frame on it (a board with no fiducials, known from its CAD alone)")
    golden.add_argument("--rules", required=True, help="the imported rule set (it gains `golden:` and "
                                                       "`photo_registration: {using: golden}`)")
    golden.add_argument("--out", help="the image to write (default: RULES.golden.png beside the rule set)")
    golden.add_argument("--seed", type=int, default=0, help="the renderer's seed")
    golden.set_defaults(func=cmd_golden)


def _px_per_mm(args: argparse.Namespace) -> float:
    if args.px_per_mm is not None:
        return float(args.px_per_mm)
    try:
        doc = json.loads(Path(args.camera).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--camera {args.camera}: cannot be read as JSON ({exc})") from None
    value = doc.get("px_per_mm") if isinstance(doc, dict) else None
    if not isinstance(value, (int, float)) or value <= 0:
        raise UsageError(f"--camera {args.camera}: no positive px_per_mm in it; give --px-per-mm instead")
    return float(value)


def _path(value: str | None) -> Path | None:
    """An optional argument's path, None where it is not given."""
    return Path(value) if value else None


def _station(args: argparse.Namespace) -> Station:
    """Where the station stands (board/station.py), as the command line says."""
    from ..board.station import Station

    return Station.read(args.before_through_hole, args.pin_in_paste or "", args.fitted_later or "")


def cmd_import(args: argparse.Namespace) -> int:
    from ..board.importing import PackagesAsked, import_board

    file, out, station = Path(args.file), Path(args.out), _station(args)
    t0 = time.perf_counter()
    try:
        design, imported = import_board(file, out, _px_per_mm(args), args.side, _path(args.library),
                                        _path(args.profile), args.recipe, args.step, _path(args.gerber),
                                        _path(args.bom), _path(args.bom_profile), station)
    except PackagesAsked as exc:  # its own "no": answers wanted before anything is written (exit 3)
        print(f"inspector: asks: {exc}", file=sys.stderr)
        return REFUSED
    inspected = [f for f in imported.fates if f.inspected]
    print(f"{file}: {design.format}; {len(design.parts)} parts, {len(inspected)} inspected ({args.side} side), "
          f"{len(imported.types)} component types, {len(imported.fiducials)} fiducials "
          f"({', '.join(imported.fiducials) or 'none'}); board {imported.board_px[0]}x{imported.board_px[1]} px")
    print(f"{'type':<48}{'parts':>6}")
    for t, n in sorted(imported.types.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{t:<48}{n:>6}")
    left = imported.left_out()
    if left:
        print("left out:")
        for why, n in sorted(left.items(), key=lambda kv: -kv[1]):
            print(f"  {n:>4}  {why}")
    for note in imported.notes:
        print(f"note: {note}")
    if imported.rules_text:
        print(f"wrote {out} ({time.perf_counter() - t0:.2f} s)")
    if args.json:
        doc = {"file": str(file), "format": design.format, "side": args.side, "rules": str(out),
               "board_px": list(imported.board_px), "px_per_mm": imported.px_per_mm,
               "image_origin_mm": list(imported.origin_mm), "y_up": design.y_up, "types": imported.types,
               "fiducials": imported.fiducials, "station": station.describe(),
               "notes": imported.notes, "parts": [f.to_json() for f in imported.fates]}
        Path(args.json).write_text(json.dumps(doc, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    if not imported.rules_text:
        raise ValueError(f"no part of {file} is inspected from the {args.side} side (every one is left out, above): "
                         "there is nothing for a rule set to inspect, and none was written")
    return 0


def cmd_teach(args: argparse.Namespace) -> int:
    from ..app.board_teach import BoardTeachPlan, format_checks, teach_board
    from .common import photos_given, say

    rules = Path(args.rules)
    if args.threads is not None:
        if args.threads < 1:
            raise UsageError(f"--threads is a count of torch threads, 1 or more, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    if args.escape_rate is not None and not 0 <= args.escape_rate < 1:
        raise UsageError("--escape-rate is a share: 0 or more, below 1 (0.01 lets 1% of defects pass)")
    if not 0 < args.heldout < 1:
        raise UsageError("--heldout is a share of the parts: above 0, below 1 (0.25 holds out about a quarter)")
    out = Path(args.out) if args.out else rules.with_name(rules.stem + ".taught.yaml")
    work = Path(args.work) if args.work else rules.with_name(rules.stem + ".teach")
    plan = BoardTeachPlan(rules, photos_given(args.golden), work, out,
                          _path(args.defects), args.escape_rate, epochs=args.epochs,
                          seed=args.seed, comparison=args.comparison, experts=args.experts,
                          presence=args.presence, every_board=args.every_board, heldout_share=args.heldout)
    taught = teach_board(plan, say)
    print(format_checks(taught))
    print("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in taught.seconds.items()))
    print(f"wrote {out} (golden board {out.stem}.golden.png) and the zoo {taught.zoo}: run it with "
          f"`inspector run --rules {out} --zoo {taught.zoo}`, or check photos first with "
          f"`inspector board check --rules {out} --zoo {taught.zoo} PHOTO...`")
    if args.json:
        Path(args.json).write_text(json.dumps(taught.to_json(), indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ..app.board_check import check_photos, format_checked
    from .common import models_of, photos_given, say

    zoo = Path(args.zoo)
    work = Path(args.work) if args.work else zoo.parent / "check"
    checked, overlays, seconds = check_photos(Path(args.rules), zoo, photos_given(args.photos), work,
                                              models_of(args), say)
    print(format_checked(checked))
    boards = [c for c in checked if c.inspected]
    print(f"{len(boards)} of {len(checked)} boards registered and inspected ({seconds:.2f} s on the line); "
          f"overlays: {', '.join(str(o) for o in overlays)}")
    if args.good:
        from ..app.board_costs import flags_of, format_costs, read_heldout, served_thresholds, stale_types
        from ..experts.zoo import Zoo
        from ..routing.rules import load_rules

        rules, served, held = load_rules(Path(args.rules)), Zoo.load(zoo), read_heldout(zoo)
        print(format_costs(flags_of(checked, rules), served_thresholds(rules, served), held,
                           stale_types(held, rules, served) if held is not None else []))
    if args.json:
        Path(args.json).write_text(json.dumps([c.to_json() for c in checked], indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    from ..app.board_approve import approve, check_refs, window_from_crop, windows_from_photo
    from ..routing.rules import load_rules

    rules_path = Path(args.rules)
    rules = load_rules(rules_path)
    check_refs(rules, args.refs)
    if args.crop:
        if len(args.refs) != 1:
            raise UsageError("--crop is one part's window: name that one part")
        windows, source = {args.refs[0]: window_from_crop(rules, args.refs[0], Path(args.crop))}, Path(args.crop).stem
    else:
        windows = windows_from_photo(rules_path, rules, Path(args.photo), args.refs, args.board,
                                     Path(args.correction) if args.correction else None)
        source = Path(args.photo).stem
    for a in approve(rules_path, windows, source, args.make):
        print(f"{a.ref}: approved {a.file}" + (" (it looks like a make approved already)" if a.already else ""))
    print(f"{rules_path}: `alternates:` updated; the line compares each of these parts with the nearest of its "
          "golden and approved windows from the rule set's next version (a kiosk reloads it)")
    return 0


def cmd_marks(args: argparse.Namespace) -> int:
    from ..app.bad_mark_check import read_panel
    from ..app.board_photos import read_photo
    from ..routing.rules import load_rules
    from .common import photos_given

    rules = load_rules(args.rules)
    if rules.panel is None or rules.panel.bad_marks is None:
        raise UsageError(f"{args.rules} names no bad-mark pads: add `bad_marks:` under its `panel:` "
                         "(docs/pages/reference/rule-sets.md, Panels)")
    marks, unread, out = rules.panel.bad_marks, 0, {}
    print(f"{rules.recipe}: {len(marks.at)} bad-mark pads, {marks.mark} marks, contrast {marks.contrast:g} "
          f"(a pad is marked past it); read against {'the golden board' if rules.golden else 'the panel'}")
    print(f"{'photo':<32}{'board':>6}{'level':>8}{'clean':>8}{'taken':>8}  marked")
    for photo in photos_given(args.photos):
        try:
            readings = read_panel(read_photo(photo), rules)
        except ValueError as exc:  # unreadable, the wrong size, not registered: said, the next photo read
            unread += 1
            print(f"{photo}: not read: {exc}")
            out[str(photo)] = {"error": str(exc)}
            continue
        for r in readings:
            print(f"{photo.name[:31]:<32}{r.board:>6}{r.level:>8.1f}{r.clean:>8.1f}{r.taken:>8.2f}  "
                  f"{'yes' if r.marked else 'no'}")
        pads = [{k: None if v != v else v for k, v in vars(r).items()} for r in readings]  # nan: off the photo
        out[str(photo)] = {"pads": pads}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 1 if unread else 0


def cmd_golden(args: argparse.Namespace) -> int:
    from ..board.drawn_golden import draw_golden

    rules = Path(args.rules)
    image, added = draw_golden(rules, Path(args.out) if args.out else None, args.seed)
    print(f"drew the golden board of {rules} to {image}; added to the rule set:\n{added}")
    return 0
