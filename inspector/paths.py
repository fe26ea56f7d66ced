"""Where the product keeps things, for a service and for a desktop user alike.

Never the working directory: a dashboard started from the desktop menu runs in $HOME, a service in /.
In order, the first that says:
  data    --data, the config file's `data`, $INSPECTOR_DATA, systemd's $STATE_DIRECTORY, the user's data dir
  models  --models, the config file's `models`, $INSPECTOR_MODELS, models/ in the default data directory
          (not in a --data given for one command: a scratch data directory must not retrain the zoo)
  config  --config, $INSPECTOR_CONFIG, systemd's $CONFIGURATION_DIRECTORY/inspector.yaml,
          the user's config dir (~/.config/inspector/inspector.yaml), /etc/inspector/inspector.yaml
"""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "inspector"
CONFIG_NAME = "inspector.yaml"
SYSTEM_CONFIG = Path("/etc/inspector") / CONFIG_NAME
SHIPPED_BOXES = Path(__file__).resolve().parent / "profiles"  # box profiles to simulate on (bench, plan --box)


def shipped_boxes() -> list[str]:
    """The names of the shipped box profiles: what `--box NAME` accepts besides a file."""
    return sorted(p.stem for p in SHIPPED_BOXES.glob("*.json"))


def _first_of(env: str) -> str | None:
    """systemd's *_DIRECTORY variables may list several directories (colon-separated); the first is ours."""
    value = os.environ.get(env, "")
    return value.split(":")[0] or None


def data_dir(arg: str | None = None) -> Path:
    chosen = arg or os.environ.get("INSPECTOR_DATA") or _first_of("STATE_DIRECTORY")
    return Path(chosen) if chosen else Path(platformdirs.user_data_dir(APP, appauthor=False))


def models_dir(arg: str | None = None) -> Path:
    chosen = arg or os.environ.get("INSPECTOR_MODELS")
    return Path(chosen) if chosen else data_dir() / "models"


def config_candidates(arg: str | None = None) -> list[tuple[Path, bool]]:
    """(path, explicit) in the order they are tried; an explicit one must exist."""
    if arg:
        return [(Path(arg), True)]
    if os.environ.get("INSPECTOR_CONFIG"):
        return [(Path(os.environ["INSPECTOR_CONFIG"]), True)]
    out = []
    if systemd := _first_of("CONFIGURATION_DIRECTORY"):
        out.append((Path(systemd) / CONFIG_NAME, False))
    out.append((Path(platformdirs.user_config_dir(APP, appauthor=False)) / CONFIG_NAME, False))
    out.append((SYSTEM_CONFIG, False))
    return out


def config_file(arg: str | None = None) -> Path | None:
    """The config file in force, or None; an explicit one that is missing is an error, not a silent default."""
    for path, explicit in config_candidates(arg):
        if path.is_file():
            return path
        if explicit:
            raise FileNotFoundError(f"config file {path} does not exist; write one (installer/inspector.yaml is "
                                    f"the documented example) or leave --config / $INSPECTOR_CONFIG unset")
    return None
