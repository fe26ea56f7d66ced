"""The config file: the same options as the command line, kept in one YAML file a plant's engineer can edit.

    # /etc/inspector/inspector.yaml (installer/inspector.yaml is the documented example)
    data: /var/lib/inspector        # applies to every command that takes --data; likewise models, db, log_level
    kiosk:                          # a section per command, keys as its long options (--device-mb: device_mb
      source: watch:/var/lib/inspector/inbox   #  or device-mb)
      device_mb: 160
    "llm serve":                    # a sub-command's section names the whole command
      policy: daop

A flag on the command line wins over the file; the file wins over the built-in default. Each value is
checked as the flag would be (type, choices), and an error names the file and line, like the rule sets'.
"""
from __future__ import annotations

import argparse
import difflib
from pathlib import Path
from typing import Any

from ..yamlio import ConfigError, LinedDict, line_of, load_yaml

GLOBAL_KEYS = ("models", "data", "db", "log_level", "line", "station")  # outside a section: every command that has it


def load_config(path: Path) -> LinedDict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read the config file: {exc.strerror}") from None
    data = load_yaml(text, str(path))
    if data is None:
        return LinedDict()
    if not isinstance(data, dict):
        raise ConfigError(str(path), getattr(data, "line", None), "the config file must be a mapping of options "
                          "and command sections (installer/inspector.yaml shows one)")
    return data


def command_parsers(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command path ("kiosk", "llm serve") and its parser, for checking section names."""
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk over subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                out[path] = sub
                out.update(command_parsers(sub, path))
    return out


def chosen_command(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[str, argparse.ArgumentParser]:
    """The command path argv selects and its parser (the innermost one), without parsing argv."""
    path, current, rest = "", parser, list(argv)
    while True:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        token = next((t for t in rest if subs and t in subs[0].choices), None)
        if token is None:
            return path, current
        current = subs[0].choices[token]
        path = f"{path} {token}".strip()
        rest = rest[rest.index(token) + 1:]


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions  # noqa: SLF001
            if a.option_strings and a.dest not in ("help",) and not isinstance(a, argparse._SubParsersAction)}  # noqa: SLF001


def _value(action: argparse.Action, raw: Any, error: Any) -> Any:
    """The config value as the flag would have parsed it."""
    if action.nargs == 0:  # store_true / store_false
        if not isinstance(raw, bool):
            raise error(f"must be true or false, got {raw!r}")
        return raw
    if isinstance(action, argparse._AppendAction):  # noqa: SLF001
        items = raw if isinstance(raw, list) else [raw]
        return [_scalar(action, v, error) for v in items]
    return _scalar(action, raw, error)


def _scalar(action: argparse.Action, raw: Any, error: Any) -> Any:
    if isinstance(raw, (dict, list)) or raw is None:
        raise error(f"must be a single value, got {raw!r}")
    text = str(raw).lower() if isinstance(raw, bool) else str(raw)
    try:
        value = action.type(text) if callable(action.type) else text
    except (TypeError, ValueError) as exc:
        raise error(f"{raw!r} is not valid here ({exc})") from None
    if action.choices is not None and value not in action.choices:
        raise error(f"{raw!r} is not one of: {', '.join(map(str, action.choices))}")
    return value


def _key_error(source: str, container: Any, key: str, section: str) -> Any:
    def error(message: str) -> ConfigError:
        label = f"{section}.{key}" if section else key
        return ConfigError(source, line_of(container, key), f"{label}: {message}")
    return error


def defaults_from(config: LinedDict, source: str, top: argparse.ArgumentParser, path: str,
                  command: argparse.ArgumentParser) -> tuple[dict[str, Any], dict[str, Any]]:
    """(top-level defaults, the command's defaults) the file sets, checked; errors carry file:line."""
    known = command_parsers(top)
    for key in config:
        if not isinstance(key, str) or (key.replace("-", "_") not in GLOBAL_KEYS and key not in known
                                        and key.split()[0] not in known):  # a sub-command's, checked when it runs
            near = difflib.get_close_matches(str(key), [*GLOBAL_KEYS, *known], n=1)
            raise ConfigError(source, line_of(config, key),
                              f"{key!r} is neither an option for every command ({', '.join(GLOBAL_KEYS)}) nor a "
                              f"command's section" + (f"; did you mean {near[0]!r}?" if near else ""))
    top_opts, cmd_opts = _options(top), _options(command)
    top_out: dict[str, Any] = {}
    cmd_out: dict[str, Any] = {}
    for key in config:
        dest = key.replace("-", "_")
        if dest not in GLOBAL_KEYS:
            continue
        error = _key_error(source, config, key, "")
        if dest in top_opts:
            top_out[dest] = _value(top_opts[dest], config[key], error)
        elif dest in cmd_opts:
            cmd_out[dest] = _value(cmd_opts[dest], config[key], error)
    section = config.get(path) if path else None
    if section is None:
        return top_out, cmd_out
    if not isinstance(section, dict):
        raise ConfigError(source, line_of(config, path), f"section {path!r} must be a mapping of its options")
    for key in section:
        dest = str(key).replace("-", "_")
        error = _key_error(source, section, str(key), path)
        if dest not in cmd_opts:
            near = difflib.get_close_matches(dest, list(cmd_opts), n=1)
            raise error(f"`inspector {path}` has no option --{dest.replace('_', '-')}"
                        + (f"; did you mean {near[0]!r}?" if near else f"; its options: {', '.join(sorted(cmd_opts))}"))
        cmd_out[dest] = _value(cmd_opts[dest], section[key], error)
    return top_out, cmd_out


CONFIGURED = "configured"  # the Namespace's record of what the file set: {dest: (value, "file:line")}


def apply_config(config: LinedDict, source: str, top: argparse.ArgumentParser, argv: list[str]) -> None:
    """Make the file's values the parsers' defaults, so flags given on the command line still win; the command's
    Namespace also records which values the file set, and where (`configured`)."""
    path, command = chosen_command(top, argv)
    top_defaults, cmd_defaults = defaults_from(config, source, top, path, command)
    top.set_defaults(**top_defaults)
    section = config.get(path) if path else None
    section = section if isinstance(section, dict) else {}
    configured = {dest: (value, _where(source, section if _key(section, dest) is not None else config, dest))
                  for dest, value in {**top_defaults, **cmd_defaults}.items()}
    command.set_defaults(**cmd_defaults, **{CONFIGURED: configured})


def _key(container: Any, dest: str) -> Any:
    """The container's key for option `dest` (written with - or _), or None."""
    return next((k for k in container if str(k).replace("-", "_") == dest), None)


def _where(source: str, container: Any, dest: str) -> str:
    line = line_of(container, _key(container, dest))
    return f"{source}:{line}" if line else source


def from_config(args: argparse.Namespace, dest: str) -> str | None:
    """Where the config file set option `dest` ("file:line"), if the value in force is the file's (the command
    line did not set another); None otherwise."""
    value, where = getattr(args, CONFIGURED, {}).get(dest, (None, None))
    return where if where is not None and getattr(args, dest, None) == value else None
