"""`inspector config check | paths`: is the config file right, and where does everything live."""
from __future__ import annotations

import argparse

from ..paths import config_candidates, config_file, data_dir, models_dir


def cmd_paths(args: argparse.Namespace) -> int:
    found = config_file(args.config)
    print(f"config  {found or 'none'}")
    for path, _ in config_candidates(args.config):
        print(f"        {'*' if path == found else ' '} {path}")
    print(f"data    {data_dir(getattr(args, 'data', None))}")
    print(f"models  {models_dir(args.models)}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Every section against the options of its command, so a typo surfaces before a restart, not during one."""
    from . import build_parser
    from .config import command_parsers, defaults_from, load_config

    path = config_file(args.config)
    if path is None:
        print("no config file: every option has its built-in default (`inspector config paths` shows where one "
              "would be read)")
        return 0
    config = load_config(path)
    top = build_parser()
    commands = command_parsers(top)
    sections = [key for key in config if key in commands] or [""]
    for section in sections:
        defaults_from(config, str(path), top, section, commands.get(section, top))
    unknown = [k for k in config if isinstance(k, str) and " " in k and k not in commands]
    if unknown:
        raise ValueError(f"{path}: section {unknown[0]!r} names no command")
    print(f"{path}: ok ({', '.join(s for s in sections if s) or 'global options only'})")
    return 0


def add_config(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="config_command", required=True)
    check = sub.add_parser("check", help="check the config file: every key a known option, every value valid")
    check.set_defaults(func=cmd_check)
    paths = sub.add_parser("paths", help="the config file in force, the data and models directories")
    paths.set_defaults(func=cmd_paths)
