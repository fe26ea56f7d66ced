"""`inspector` command line: argument parsing only; the work lives in the rooms below.

Commands are registered by name with a one-line help and the function that adds their options; only the
command being run gets its options (and imports what they need), so `inspector --help` starts in a blink
and a headless box never imports the dashboard's or the language model's packages.

    common.py   paths, the results database, the line's setup shared by run, kiosk and gui
    line.py     run, kiosk, gui, soak, accuracy, llm beside-line
    engine.py   bench, plan, profile, zoo build
    loop.py     review, dataset export, zoo train / versions / activate / rollback, retrain-demo
    operate.py  zoo operate: an expert's operating point
    results.py  export, db prune
    access.py   user, audit, tls
    setup.py    config check / paths
    lineio.py   camera list / video, bench-io
    config.py   the config file: its values become the parsers' defaults, flags win
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from ..errors import UnknownChoice
from ..extras import MissingExtra, missing_extra
from .exits import FAILED, REFUSED, USAGE

# name -> (help, "module:function" adding its options to its parser)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("the main job: inspect a board stream into the results database", "line:add_run"),
    "kiosk": ("run the line as a headless service (systemd notify, metrics, health)", "line:add_kiosk"),
    "gui": ("the operator dashboard (PySide6): run a line here, or --attach to a kiosk [gui]", "line:add_gui"),
    "export": ("export results", "results:add_export"),
    "db": ("the results database: retention, schema upgrade and status", "results:add_db"),
    "plant": ("every line of the plant at a glance (the shared database and each kiosk)", "plant:add_plant"),
    "review": ("mark a stored part's call: confirmed, false_call or escape", "loop:add_review"),
    "dataset": ("training sets from reviewed crops", "loop:add_dataset"),
    "zoo": ("expert zoos: build, train, versions, activate, rollback, operate", "engine:add_zoo"),
    "retrain-demo": ("the whole loop on the demo line: glare, reviews, retrain, live swap", "loop:add_retrain_demo"),
    "bench": ("run one workload under several policies side by side", "engine:add_bench"),
    "plan": ("offline configuration: executor counts, memory split, placement", "engine:add_plan"),
    "profile": ("profile the workload's architectures on every device", "engine:add_profile"),
    "accuracy": ("recall and false alarms on held-out boards under camera conditions", "line:add_accuracy"),
    "soak": ("run the line on synthetic boards for a long time and report memory (RSS)", "line:add_soak"),
    "llm": ("the Mixture-of-Experts language model on the shared runtime [llm]", "line:add_llm"),
    "config": ("the config file: check it, show where things are", "setup:add_config"),
    "camera": ("industrial cameras (list), conveyor streams (video), frames (render), lens and light correction "
               "(calibrate, reference)", "lineio:add_camera"),
    "user": ("users, roles and API tokens (admins only)", "access:add_user"),
    "audit": ("the audit trail of every change: list, verify, export; rule sets by version", "access:add_audit"),
    "tls": ("certificates for the kiosk's and the model server's HTTPS", "access:add_tls"),
    "board": ("a plant's own board: a rule set from its CAD or centroid file (import)", "board:add_board"),
    "bench-io": ("the PLC's trigger to the verdict at the PLC, through an emulated camera and the line",
                 "lineio:add_bench_io"),
}
GLOBAL_VALUE_FLAGS = ("--models", "--config", "--log-level", "--tls-ca", "--tls-pin")


def _adder(spec: str) -> Callable[[argparse.ArgumentParser], None]:
    module, function = spec.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def selected(argv: list[str]) -> str | None:
    """The command argv names (the first word that is one), skipping the global flags' values."""
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in GLOBAL_VALUE_FLAGS:
            skip = True
        elif token in COMMANDS:
            return token
    return None


def build_parser(only: str | None = None, every: bool = True) -> argparse.ArgumentParser:
    """The parser; with `only`, just that command gets its options (the others keep their help line)."""
    from ..logs import LEVELS

    parser = argparse.ArgumentParser(prog="inspector", description="Circuit-board inspection appliance",
                                     epilog="exit codes: 0 done; 1 the job ran and failed its purpose; 2 usage (the "
                                            "command line is wrong); 3 a command's own no (a sign-in or role "
                                            "refused, `board import` asking, `llm plan` does not fit)")
    parser.add_argument("--version", action=_Version, help="the release (and the checkout's commit, where it runs "
                                                           "from one), and exit")
    parser.add_argument("--models", help="models directory (default: $INSPECTOR_MODELS, or models/ in the data "
                                         "directory; `inspector config paths` prints it)")
    parser.add_argument("--config", help="config file (default: $INSPECTOR_CONFIG, ~/.config/inspector/"
                                         "inspector.yaml, /etc/inspector/inspector.yaml)")
    parser.add_argument("--log-level", default="info", choices=LEVELS, help="least important messages shown "
                                                                         "(default info)")
    parser.add_argument("--tls-ca", help="trust HTTPS kiosks and model servers signed by this CA file (a self-signed "
                                         "certificate is its own CA; default $INSPECTOR_TLS_CA, else the system's)")
    parser.add_argument("--tls-pin", help="trust exactly the HTTPS server with this certificate fingerprint "
                                          "(SHA256:AB:..., as `inspector tls make` prints it; default "
                                          "$INSPECTOR_TLS_PIN)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (text, spec) in COMMANDS.items():
        p = sub.add_parser(name, help=text)
        if name == only:
            _adder(spec)(p)
        elif every and only is None:  # the whole tree (config check, tests): a command whose extra is missing
            try:                       # keeps its help line and says what to install when it is run
                _adder(spec)(p)
            except (MissingExtra, ModuleNotFoundError) as exc:
                if isinstance(exc, ModuleNotFoundError) and missing_extra(exc) is None:
                    raise
    return parser


def version_line() -> str:
    """`inspector 0.1.0`, with the commit where the package runs from a git checkout (what a bug report needs)."""
    import subprocess

    from .. import __version__

    line = f"inspector {__version__}"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isdir(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True,
                                 text=True, timeout=5)
            if out.returncode == 0 and out.stdout.strip():
                line += f" (commit {out.stdout.strip()})"
        except (OSError, subprocess.SubprocessError):
            pass  # no git on the box: the release alone
    return line


class _Version(argparse.Action):
    """`--version`, worked out only when asked (it may run git)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()


def _configured(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Apply the config file in force (if any) as defaults; `--config` is read before anything else is parsed."""
    from ..paths import config_file
    from .config import apply_config, load_config

    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config")
    known, _ = early.parse_known_args(argv)
    path = config_file(known.config)
    if path is not None:
        apply_config(load_config(path), str(path), parser, argv)


def parse(argv: list[str]) -> argparse.Namespace:
    """argv over the config file's values over the defaults; the Namespace keeps argv (a reload parses it again)."""
    parser = build_parser(only=selected(argv), every=False)
    _configured(parser, argv)
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def printable_anywhere() -> None:
    """Tables print `±` and `…`: on a terminal or service whose locale is plain ASCII (LC_ALL=C), a character the
    stream cannot encode becomes `?` instead of stopping the command."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if encoding != "utf8" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def main(argv: list[str] | None = None) -> int:
    from ..logs import setup

    printable_anywhere()
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    try:
        args = parse(argv)
        setup(args.log_level)
        for flag, env in (("tls_ca", "INSPECTOR_TLS_CA"), ("tls_pin", "INSPECTOR_TLS_PIN")):
            if getattr(args, flag, None):  # the environment carries it to every client here and to child processes
                os.environ[env] = getattr(args, flag)
        done = args.func(args)
        sys.stdout.flush()  # inside the guard: a reader gone by now is met below, not at the interpreter's exit
        return done
    except ModuleNotFoundError as exc:  # a package of an extra that is not installed: say which extra to add
        extra = missing_extra(exc)
        if extra is None:
            raise  # anything else is a real bug
        print(f"inspector: error: {extra}", file=sys.stderr)
        return FAILED
    except UnknownChoice as exc:  # a name or option that is not one of the known ones, or flags that do not go
        print(f"inspector: usage: {exc}", file=sys.stderr)  # together: the command line is wrong
        return USAGE
    except (ValueError, FileNotFoundError, KeyError, RuntimeError) as exc:  # MissingExtra is a RuntimeError
        print(f"inspector: error: {exc}", file=sys.stderr)
        return FAILED
    except PermissionError as exc:  # a sign-in refused, a role that may not (inspector/access)
        print(f"inspector: refused: {exc}", file=sys.stderr)
        return REFUSED
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as other tools do, not a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return FAILED
    except ConnectionError as exc:  # a kiosk or a model server refused (endpoint.EndpointError: its own words and
        refused = getattr(exc, "status", None) in (401, 403)  # status), or did not answer
        print(f"inspector: {'refused' if refused else 'error'}: {exc}", file=sys.stderr)
        return REFUSED if refused else FAILED


if __name__ == "__main__":
    raise SystemExit(main())
