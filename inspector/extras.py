"""The optional parts of the install, and what to say when one is missing.

The base install is the headless line: engine, results, kiosk. `inspector[gui]` adds the dashboard,
`inspector[llm]` the language model and its endpoint, `inspector[postgres]` the PostgreSQL driver,
`inspector[genicam]` Basler's pylon binding for industrial cameras, `inspector[openvino]` the OpenVINO backend
(`inspector[all]` all five). A command
that needs a missing part stops with the pip line that adds it.
A leaf module: it imports nothing of ours.
"""
from __future__ import annotations

import importlib.util

EXTRAS: dict[str, tuple[str, ...]] = {
    "gui": ("PySide6", "pyqtgraph"),
    "llm": ("transformers", "fastapi", "uvicorn", "accelerate"),
    "postgres": ("psycopg2",),
    "genicam": ("pypylon",),
    "openvino": ("openvino",),
}
PURPOSE = {"gui": "the dashboard", "llm": "the language model", "postgres": "a PostgreSQL results database",
           "genicam": "an industrial (GenICam) camera", "openvino": "the openvino backend"}


class MissingExtra(RuntimeError):
    """A command needs an optional part that is not installed."""


def _message(extra: str, module: str) -> str:
    return (f"{PURPOSE[extra]} needs the {extra!r} extra ({module} is not installed): "
            f"pip install 'inspector[{extra}]' in the product's environment")


def extra_of(module: str) -> str | None:
    root = module.split(".")[0]
    return next((extra for extra, mods in EXTRAS.items() if root in mods), None)


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The install hint for an import that failed because an extra is missing, else None."""
    if (exc.name or "").split(".")[0] == "psycopg":  # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3
        return ("a postgresql:// URL without a driver means psycopg 3, which is not installed: write "
                "postgresql+psycopg2://USER@HOST/DB (the driver pip install 'inspector[postgres]' installs)")
    extra = extra_of(exc.name or "")
    return _message(extra, exc.name) if extra else None


def require(extra: str) -> None:
    """Raise MissingExtra unless every package of `extra` can be imported (nothing is imported here)."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a broken or half-removed install counts as missing
            found = False
        if not found:
            raise MissingExtra(_message(extra, module))
