"""Secrets of the results room (the database URL, the broker's password), from where a plant keeps them.

Never from the command line: argv is readable by every local user in /proc. In order: an environment
variable (the systemd unit's EnvironmentFile, mode 0640), then a systemd credential ($CREDENTIALS_DIRECTORY,
`LoadCredential=`). A URL given on the command line is accepted only when it carries no password.
"""
from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

DB_ENV, DB_CREDENTIAL = "INSPECTOR_DB_URL", "db-url"
MQTT_PASSWORD_ENV, MQTT_CREDENTIAL = "INSPECTOR_MQTT_PASSWORD", "mqtt-password"


def credential(env: str, name: str) -> str | None:
    """The secret in $env, else in the systemd credential `name`; None when neither is set."""
    value = os.environ.get(env)
    if value:
        return value.strip()
    folder = os.environ.get("CREDENTIALS_DIRECTORY")
    if folder:
        path = Path(folder) / name
        if path.is_file():
            return path.read_text(encoding="utf-8").strip() or None
    return None


def database_url(arg: str | None, default: str) -> str:
    """The results database's URL: --db (without a password), $INSPECTOR_DB_URL, the credential db-url, or
    `default` (SQLite in the data directory)."""
    if arg:
        try:
            password = make_url(arg).password
        except ArgumentError:
            raise ValueError("--db is not a database URL; write e.g. postgresql+psycopg2://USER@HOST/DB or "
                             "sqlite:////var/lib/inspector/results.sqlite") from None
        if password:
            raise ValueError(f"--db carries a password, which any local user can read from the process list; put the "
                             f"URL in {DB_ENV} (the kiosk's environment file, /etc/inspector/kiosk.env) or in a "
                             f"systemd credential named {DB_CREDENTIAL}, and drop --db")
        return arg
    return credential(DB_ENV, DB_CREDENTIAL) or default
