"""The review-and-retrain loop's commands: review a call, export a dataset, retrain one expert, put a version
into service or roll it back, and the scripted loop on the demo line (`retrain-demo`).

Each command here is glue over one room: results/reviews.py and results/dataset.py (the database),
training/retrain.py (weights), experts/versions.py (the zoo on disk) or the kiosk's API (a running line).
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import database_flags, db_url, models_of, say, scope_flags, scope_of_args, station_flags
from .exits import USAGE

if TYPE_CHECKING:
    from ..results.review_boxes import ReviewBox


def _rule_sets(paths: list[str] | None) -> list:  # noqa: ANN202 - RuleSets
    from ..app.run import DEMO_RULES, RULES_DIR
    from ..routing.rules import load_rules

    return [load_rules(p) for p in paths] if paths else [load_rules(RULES_DIR / n) for n in DEMO_RULES]


def _zoo(args: argparse.Namespace):  # noqa: ANN202 - a Zoo
    from ..experts.zoo import Zoo

    return Zoo.load(Path(args.zoo) if args.zoo else models_of(args) / "demo")


def _classes_of(args: argparse.Namespace):  # noqa: ANN202 - results.reviews.ClassesOf
    """The zoo's experts' own classes, for checking a review's class (the line's zoo, else none: the demo's)."""
    from ..app.verdict import classes_of
    from ..experts.zoo import ZooMissing

    try:
        return classes_of(_zoo(args))
    except ZooMissing:
        return None


def _finders(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """The zoo's taught detectors that find and their classes: their crops export with the boxes they drew (none
    without a zoo)."""
    from ..app.verdict import finding_detectors
    from ..experts.zoo import ZooMissing

    try:
        return finding_detectors(_zoo(args))
    except ZooMissing:
        return {}


def cmd_review(args: argparse.Namespace) -> int:
    """Through a kiosk (stored under the token's person), or into the database here (under --as, else the system
    account running it); either way recorded in the audit trail."""
    from dataclasses import replace

    from ..access.audit import Change
    from ..endpoint import read_token, request_json
    from ..results.reviews import ReviewRequest, record_review
    from ..results.store import ResultStore
    from .access import acting, record_here

    req = ReviewRequest(args.inspection, args.ref, args.call, args.correct_class, "", args.note, tuple(args.box or ()))
    req.check()
    if args.kiosk:
        answer = request_json(args.kiosk.rstrip("/") + "/reviews", req.to_json(), read_token(args.token_file),
                              reason=args.reason)
    else:
        who = acting(args)
        req = replace(req, reviewer=who.name)
        answer = record_review(ResultStore(db_url(args)), req, _classes_of(args))
        record_here(args, who, Change("review", f"{req.inspection_id}/{req.ref}", answer.get("before"),
                                      req.audited(), args.reason))
    print(json.dumps(answer, default=str))
    return 0


def cmd_dataset_export(args: argparse.Namespace) -> int:
    from ..results.dataset import export_dataset
    from ..results.store import Filters, ResultStore, parse_when

    filters = Filters(since=parse_when(args.since) if args.since else None,
                      until=parse_when(args.until) if args.until else None, component=args.component,
                      scope=scope_of_args(args))
    report = export_dataset(ResultStore(db_url(args)), Path(args.out), _rule_sets(args.rules), args.all, filters,
                            args.heldout_percent, _classes_of(args), _finders(args))
    for expert, counts in report.counts().items():
        print(f"{expert:16} " + "  ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        boxed = Counter(i["boxed_by"] for i in report.items if i["expert"] == expert and i.get("boxed_by"))
        if boxed:  # a detector's defect boxes: whose they are (the reviewer's, drawn on the crop, come first)
            print(f"{'':16} boxes by " + ", ".join(f"{k} {v}" for k, v in sorted(boxed.items())))
    whole = sum("expert" not in x for x in report.skipped)
    of_detectors = len(report.skipped) - whole
    print(f"{len(report.items)} crops written to {args.out}, {whole} parts left out"
          + (f", {of_detectors} crops left out of a detector's set" if of_detectors else "")
          + f" (every reason in {Path(args.out) / 'manifest.json'})")
    for reason, n in Counter(x["reason"] for x in report.skipped).most_common(5):
        print(f"  {n:6}  {reason}")
    unboxed = Counter(i["unboxed"] for i in report.items if "unboxed" in i)
    if unboxed:  # kept beside the detector's set: retraining scores its call of each, trains on none
        print(f"{sum(unboxed.values())} of the crops are a detector's without a box (its retraining scores its call "
              "of each and trains on none):")
        for reason, n in unboxed.most_common(5):
            print(f"  {n:6}  {reason}")
    return 0 if report.items else 1


def cmd_zoo_train(args: argparse.Namespace) -> int:
    from .config import from_config

    # the plant's rule for every retraining may be written in the config file ("zoo train": tolerate, taught_point):
    # it applies where it can and is said, where a flag on the command line would be refused
    filed = {dest: from_config(args, dest) for dest in ("tolerate", "taught_point")}  # the file's value in force
    plant = {dest: where if getattr(args, dest) else None for dest, where in filed.items()}  # ... and not nothing
    given = [f"--{d.replace('_', '-')}" for d, v in (("tolerate", args.tolerate is not None),
                                                      ("taught_point", args.taught_point)) if v and not filed[d]]
    if args.new and given:
        say(f"error: {' and '.join(given)} go{'es' if len(given) == 1 else ''} with --expert (a retraining, against "
            "the served weights and their point); teaching a new expert (--new) has neither")
        return USAGE
    if args.new:
        from .labelled import cmd_train_new

        return cmd_train_new(args)
    if args.check or args.tile:
        say("error: --check and --tile go with --new (teaching a new expert); retraining from reviews takes neither")
        return USAGE
    tolerance = (args.tolerate or 0.0) / 100
    if not 0.0 <= tolerance < 1.0:
        said = f"the config's tolerate ({plant['tolerate']})" if plant["tolerate"] else "--tolerate"
        say(f"error: {said} is the fall of recall the plant accepts, in points from 0 to 100 (2 for two points), "
            f"got {args.tolerate:g}")
        return USAGE
    import torch

    from ..training.retrain import format_scores, retrain_classifier

    if args.threads:
        torch.set_num_threads(args.threads)
    from ..training.labelled.retrain_detector import DETECTOR_EPOCHS, retrain_taught_detector, taught_detector_version
    from ..training.labelled.retrain_taught import retrain_taught, taught_version

    zoo = _zoo(args)
    tolerance_from = plant["tolerate"] if tolerance else None
    known = args.expert in zoo.entries
    classifier = known and taught_version(zoo, args.expert) is not None  # its own classes and folder
    taught = classifier or known and taught_detector_version(zoo, args.expert) is not None
    if taught:
        for dest, where in plant.items():
            if where:
                say(f"the plant's rule for retrainings, {where}: {dest.replace('_', '-')} "
                    f"{getattr(args, dest) if dest == 'tolerate' else 'on'}")
    if classifier:
        r = retrain_taught(zoo, args.expert, Path(args.from_dataset), args.epochs or 10, args.seed, say,
                           tolerance=tolerance, tolerance_from=tolerance_from, keep_move=not args.taught_point)
    elif taught:  # a taught detector: its own boxes
        r = retrain_taught_detector(zoo, args.expert, Path(args.from_dataset), args.epochs or DETECTOR_EPOCHS,
                                    args.seed, say, tolerance=tolerance, tolerance_from=tolerance_from,
                                    keep_move=not args.taught_point)
    elif given:
        say(f"error: {' and '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to an expert taught from the "
            f"plant's own labelled images (its gate compares it with the served weights, at their point); "
            f"{args.expert} is a demo expert, whose gate is a floor of recall under the new look: retrain it without "
            f"{'it' if len(given) == 1 else 'them'}")
        return USAGE
    else:
        for dest, where in plant.items():
            if where:
                say(f"note: the config's {dest.replace('_', '-')} ({where}) is for experts taught from the plant's "
                    f"own labelled images; {args.expert} is a demo expert, gated on a floor of recall: not applied")
        r = retrain_classifier(zoo, args.expert, Path(args.from_dataset), _rule_sets(args.rules), args.epochs or 10,
                               args.synthetic, args.seed, say)
    print(format_scores(r))
    print(f"new version of {r.expert}: {r.version['weights_sha256'][:12]} ({r.version['file']}), trained in "
          f"{r.seconds:.0f} s on {r.reviewed_train} reviewed + {r.synthetic_train} synthetic crops; not serving yet: "
          f"`inspector zoo activate --expert {r.expert} --version {r.version['weights_sha256'][:12]}` "
          "(add --kiosk URL to swap it into a running line)")
    return 0


def _at(point: dict[str, Any]) -> str:
    """An operating point after a version's line: ", threshold 0.312"."""
    from ..experts.operating import said

    return f", {said(point)}" if said(point) else ""


def cmd_zoo_versions(args: argparse.Namespace) -> int:
    from ..experts.operating import operating_point
    from ..experts.versions import served_history, versions_of

    zoo = _zoo(args)
    for name, entry in sorted(zoo.entries.items()):
        if args.expert and name != args.expert or entry.weights_sha256 is None:
            continue
        if not args.expert and not entry.versions:
            continue
        served = served_history(entry)
        print(f"{name}: serving {entry.weights_sha256[:12]}")
        for v in versions_of(entry):
            mark = "*" if v["weights_sha256"] == entry.weights_sha256 else ("s" if v["weights_sha256"] in served
                                                                            else " ")
            point = operating_point(entry.spec) if mark == "*" else v.get("operating") or {}
            print(f"  {mark} {v['weights_sha256'][:12]}  {v.get('created', '-')[:19]:19}  {v.get('origin', '')}"
                  f"{_at(point)}{_gate(v.get('gate'))}")
    return 0


def _gate(gate: dict[str, Any] | None) -> str:
    """A version's recall gate after its line (", gate REFUSED"): what `zoo activate` will do without --force."""
    if not gate:
        return ""
    if not gate.get("passed", True):
        return ", gate REFUSED (zoo activate --force serves it anyway)"
    tolerated = len(gate.get("tolerated") or ())
    return ", gate passed" + (f" ({tolerated} fall{'s' if tolerated > 1 else ''} tolerated)" if tolerated else "")


def cmd_zoo_swap(args: argparse.Namespace) -> int:
    """activate / rollback: through a running kiosk (live, at a board boundary), else in the zoo on disk."""
    from ..endpoint import read_token, request_json
    from ..experts.versions import activate, rollback, serving

    rolling = args.zoo_command == "rollback"
    if args.kiosk:
        body = {"expert": args.expert, **({"rollback": True} if rolling else {"weights_sha256": args.version,
                                                                             "force": args.force})}
        done = request_json(args.kiosk.rstrip("/") + "/experts/swap", body, read_token(args.token_file), timeout=90,
                            reason=args.reason)
        print(f"{done['expert']} now serves {done['to'][:12]}{_at(done.get('operating') or {})} on the running line "
              f"(was {str(done['from'])[:12]})")
        return 0
    from ..access.audit import Change
    from .access import acting, record_here

    who = acting(args)
    zoo = _zoo(args)
    was = zoo.entries.get(args.expert)
    entry = rollback(zoo, args.expert) if rolling else activate(zoo, args.expert, args.version, args.force)
    assert was is not None  # activate and rollback name an expert the zoo lacks
    after = serving(entry)
    record_here(args, who, Change("expert.rollback" if rolling else "expert.swap", args.expert,
                                  {**serving(was), "zoo": str(zoo.root)}, {**after, "next_start": True}, args.reason))
    print(f"{args.expert} serves {entry.weights_sha256[:12]}{_at(after['operating'])} from the next start of a line "
          f"on {zoo.root} (a running kiosk: pass --kiosk URL to swap it live)")
    return 0


def cmd_retrain_demo(args: argparse.Namespace) -> int:
    data = Path(args.data) if args.data else None
    if args.taught_detector:  # each loop's own defaults where a flag is not given
        from ..app.detector_loop_demo import DetectorLoop, run_detector_loop

        given = {k: v for k, v in (("panels", args.boards), ("fresh", args.boards), ("retrain_epochs", args.epochs))
                 if v}
        report = run_detector_loop(DetectorLoop(data=data, boxes=not args.no_boxes, **given),
                                   models_of(args), say)
    else:
        from ..app.retrain_demo import DemoLoop, run_loop

        given = {k: v for k, v in (("boards", args.boards), ("epochs", args.epochs)) if v}
        report = run_loop(DemoLoop(component=args.component, glare=args.glare, reviews=args.reviews,
                                   policy=args.policy, data=data, **given), models_of(args), say)
    print(report.table())
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1), encoding="utf-8")
    return 0 if report.ok else 1


def _kiosk_flags(p: argparse.ArgumentParser) -> None:
    from .access import as_flag

    p.add_argument("--kiosk", metavar="URL", help="a running kiosk (https://line-box:9108): through its API, as the "
                                                  "person whose token --token-file holds")
    p.add_argument("--token-file", help="your API token file (`inspector user token NAME --out F`; with --kiosk)")
    p.add_argument("--reason", help="why (goes into the audit trail with the change)")
    as_flag(p)


def zoo_change_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a command changing what a zoo serves: the zoo, or a running kiosk and who asks; the database
    and station its audit row goes to."""
    p.add_argument("--zoo", help="zoo directory (default: the demo zoo)")
    _kiosk_flags(p)
    database_flags(p)
    station_flags(p)


def _rules_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", action="append", metavar="FILE",
                   help="a rule set naming the component types (repeatable; default: the demo rule sets)")


def _box(text: str) -> ReviewBox:
    """X0,Y0,X1,Y1 or X0,Y0,X1,Y1:CLASS (a box of its own class)."""
    from ..results.review_boxes import ReviewBox

    where, _, defect = text.partition(":")
    try:
        x0, y0, x1, y1 = (float(v) for v in where.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not X0,Y0,X1,Y1 (four numbers, crop pixels), optionally "
                                         ":CLASS after them") from None
    return ReviewBox((x0, y0, x1, y1), defect or None)


def add_review(p: argparse.ArgumentParser) -> None:
    from ..results.reviews import CALLS, PART_CLASSES

    p.add_argument("--inspection", required=True, help="the board's inspection id (UUID)")
    p.add_argument("--ref", required=True, help="the part's designator (R12)")
    p.add_argument("--call", required=True, choices=CALLS,
                   help="what the part really was: the line's fail a confirmed defect, or a false call (the part was "
                        "good); its pass an escape (a missed defect)")
    p.add_argument("--correct-class", help="what the part really is (escapes: its defect): one of the part's "
                                           f"expert's classes ('ok' for good; the demo experts': "
                                           f"{', '.join(PART_CLASSES)})")
    p.add_argument("--zoo", help="the zoo whose experts made the calls (default: the line's demo zoo): a taught "
                                 "expert's classes are checked against it")
    p.add_argument("--note", help="a free-text note kept with the review")
    p.add_argument("--box", type=_box, action="append", metavar="X0,Y0,X1,Y1[:CLASS]",
                   help="where a defect is on the part's kept crop (crop pixels, top left 0,0), of its own CLASS where "
                        "given (else the review's): what teaches a detector an escape (a finder the defect, a verifier "
                        "the body), or puts right the box it drew. Repeat it for each defect on the part: a finder "
                        "learns every box, and a defect left unboxed as background")
    database_flags(p)
    station_flags(p)
    _kiosk_flags(p)
    p.set_defaults(func=cmd_review)


def add_dataset(p: argparse.ArgumentParser) -> None:
    ds_sub = p.add_subparsers(dest="dataset_command", required=True)
    exp = ds_sub.add_parser("export", help="reviewed crops as ImageFolder (classifiers) and YOLO/COCO (detectors)")
    exp.add_argument("--out", required=True, help="a new directory (or one a dataset was exported to before)")
    exp.add_argument("--all", action="store_true", help="also parts nobody reviewed, labelled with the line's call")
    exp.add_argument("--component", help="only this component type")
    exp.add_argument("--since", help="boards inspected from (ISO time)")
    exp.add_argument("--until", help="boards inspected before (ISO time)")
    exp.add_argument("--heldout-percent", type=int, default=30, help="parts held out for evaluation (default 30)")
    exp.add_argument("--zoo", help="the zoo whose experts made the calls (default: the line's demo zoo): an expert "
                                   "taught its own classes gets its crops under them, a detector that finds them "
                                   "the boxes its reviewers drew, else those it drew itself")
    scope_flags(exp)
    _rules_flag(exp)
    database_flags(exp)
    exp.set_defaults(func=cmd_dataset_export)
    from .labelled import add_dataset_windows

    add_dataset_windows(ds_sub)


def add_zoo_parsers(zoo_sub: argparse._SubParsersAction) -> None:
    """zoo train, versions, activate, rollback (beside zoo build)."""
    from .labelled import add_evaluate, add_new_flags

    tr = zoo_sub.add_parser("train", help="fine-tune one expert on a reviewed dataset (--expert: a classifier, or a "
                                          "taught detector that finds), or teach a new one from a labelled folder "
                                          "(--new)")
    which = tr.add_mutually_exclusive_group(required=True)
    which.add_argument("--expert", help="the expert to fine-tune on reviews (cls-R0603)")
    which.add_argument("--new", metavar="EXPERT", help="a new expert's name, taught from the labelled folder --from")
    tr.add_argument("--from", dest="from_dataset", required=True, metavar="DIR",
                    help="--expert: a directory written by `inspector dataset export`; --new: a labelled folder")
    tr.add_argument("--zoo", help="zoo directory (default: the demo zoo; --new makes one where there is none)")
    tr.add_argument("--epochs", type=int, help="at most (default 10 to fine-tune a classifier, 20 a detector, 30 to "
                                               "teach; early-stopped)")
    tr.add_argument("--synthetic", type=int, default=300, help="synthetic crops rendered beside the reviewed ones")
    tr.add_argument("--seed", type=int, default=0,
                    help="the seed of the split, the synthetic crops and training (default 0)")
    tr.add_argument("--threads", type=int, help="torch threads (default: torch's): the same seed, torch release and "
                                                "thread count train the same weights (each version records its own "
                                                "as trained_with)")
    tr.add_argument("--tolerate", type=float, metavar="PTS",
                    help="retraining a taught expert: a fall of recall on a held-out set the gate passes, in points, "
                         "where the most it could be (95%% one-sided bound on the paired calls) is within it (default: "
                         "none; any fall refuses)")
    tr.add_argument("--taught-point", action=argparse.BooleanOptionalAction, default=False,
                    help="retraining a taught expert: serve the new weights at the point teaching's rule chooses for "
                         "them, leaving behind a move the plant made to the served point (a tune, an escape rate; "
                         "kept by default), where these reviews taught what the move made up for; --no-taught-point "
                         "keeps the move where the config file's taught_point leaves it")
    _rules_flag(tr)
    add_new_flags(tr)
    tr.set_defaults(func=cmd_zoo_train)
    add_evaluate(zoo_sub)

    ver = zoo_sub.add_parser("versions", help="the weights versions of retrained experts (* serving)")
    ver.add_argument("--expert", help="only this expert's versions (default: every retrained expert's)")
    ver.add_argument("--zoo", help="zoo directory (default: the demo zoo)")
    ver.set_defaults(func=cmd_zoo_versions)

    for verb, text in (("activate", "serve a version of one expert's weights"),
                       ("rollback", "serve the version one expert served before")):
        p = zoo_sub.add_parser(verb, help=text)
        p.add_argument("--expert", required=True, help="the expert whose weights to swap (cls-R0603)")
        if verb == "activate":
            p.add_argument("--version", required=True, help="its weights hash (8+ hex digits)")
            p.add_argument("--force", action="store_true", help="serve it even though its retraining's recall gate "
                                                                "refused it")
        zoo_change_flags(p)
        p.set_defaults(func=cmd_zoo_swap)


def add_retrain_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--component", default="R0603", help="the component type the glare falls on (default R0603)")
    p.add_argument("--glare", type=float, default=0.5, help="its strength (default 0.5)")
    p.add_argument("--taught-detector", action="store_true",
                   help="the loop of a detector taught from labelled boxes instead: synthetic bare boards, a new "
                        "look on the line, every call reviewed, retrained, old against new on panels nobody "
                        "reviewed (--boards: panels, default 100; --epochs: the retraining's)")
    p.add_argument("--no-boxes", action="store_true",
                   help="with --taught-detector: the operator draws no box (on escapes, or where the detector's box is "
                        "off the defect): what reviews without boxes teach")
    p.add_argument("--boards", type=int, help="boards before and after the swap (default 40)")
    p.add_argument("--reviews", type=int, default=50, help="flagged parts the operator reviews (default 50)")
    p.add_argument("--epochs", type=int, help="the fine-tuning's epochs at most (default 10; a detector's 20)")
    p.add_argument("--policy", default="coserve", help="the engine's scheduling policy on the demo line (default "
                                                       "coserve; `inspector bench --help` lists them)")
    p.add_argument("--data", help="work directory (default: a temporary one)")
    p.add_argument("--json", help="also write the report as JSON here")
    p.set_defaults(func=cmd_retrain_demo)
