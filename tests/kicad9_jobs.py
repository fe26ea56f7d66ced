"""KiCad 9's ODB++ export of tests/cad/bodies-kicad9 (make_bodies_kicad9.py), copied with some of its files changed
or left out, for the tests that need a job the exporter would not write."""
from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

BODIES_JOB = Path(__file__).parent / "cad" / "bodies-kicad9-odb.zip"


def edited_job(out: Path, edit: Callable[[str, bytes], bytes | None]) -> Path:
    """The job copied to `out`, each member as `edit(its name, its bytes)` returns it (None: left out)."""
    with zipfile.ZipFile(BODIES_JOB) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = edit(info.filename, src.read(info))
            if data is not None:
                dst.writestr(info, data)
    return out
