"""Put a version of one expert's weights into service on a running line, or roll it back; and say what runs.

The zoo's manifest on disk holds every version (experts/versions.py). A swap reads it fresh under the zoo's lock,
works out the entry, swaps the running line at a board boundary (Line.swap_weights), and only then writes the
manifest and lets the lock go: a swap that times out changes neither the line nor the disk, a kiosk restarted after
a swap serves what it served, and a change another process makes to the zoo meanwhile waits for the swap instead of
being overwritten by it. The version's operating point goes with it (a retrained detector's own threshold:
experts/operating.py).
"""
from __future__ import annotations

from typing import Any

from ..experts.operating import operating_point
from ..experts.versions import (
    activation,
    add_version_file,
    operated,
    put_in_service,
    rollback_of,
    served_history,
    versions_of,
)
from ..experts.zoo import Zoo
from ..results.releases import fetch
from ..results.store import ResultStore
from .line import Line
from .verdict import review_classes


def swap_live(line: Line, name: str, sha: str | None = None, rollback: bool = False,
              timeout: float = 60.0, force: bool = False) -> dict[str, Any]:
    """Serve version `sha` of expert `name` (or, with `rollback`, the version served before); what changed."""
    if not rollback and sha is None:
        raise ValueError("name the version to serve (its weights hash, 8+ hex digits) or ask for a rollback")
    before = line.zoo.entries[name]
    entry = put_in_service(Zoo.load(line.zoo.root), name,
                           lambda current: rollback_of(current) if rollback else activation(current, sha, force),
                           lambda entry: line.swap_weights(entry, timeout))
    return {"expert": name, "from": before.weights_sha256, "to": entry.weights_sha256, "file": entry.file,
            "rolled_back": rollback, "operating_from": operating_point(before.spec),
            "operating": operating_point(entry.spec)}


def operate_live(line: Line, name: str, point: dict[str, float | None], timeout: float = 60.0) -> dict[str, Any]:
    """Serve expert `name` at operating point `point` (its weights unchanged) from the next board on: at a board
    boundary, as a version swap is, so no board is called at two points; then the manifest. What changed."""
    before = line.zoo.entries[name]
    entry = put_in_service(Zoo.load(line.zoo.root), name, lambda current: operated(current, point),
                           lambda entry: line.swap_weights(entry, timeout))
    return {"expert": name, "weights_sha256": entry.weights_sha256, "operating_from": operating_point(before.spec),
            "operating": operating_point(entry.spec)}


def install_release(line: Line, store: ResultStore, name: str, sha: str, timeout: float = 60.0) -> dict[str, Any]:
    """Serve the plant's release `sha` of expert `name` (results/releases.py): its bytes, checked against their
    hash, become a version in this box's zoo, then are swapped in like any version; what changed."""
    release, data = fetch(store, name, sha)
    add_version_file(Zoo.load(line.zoo.root), name, data, origin="plant release",
                     published_by=release.published_by, published_at=release.published_at.isoformat())
    return swap_live(line, name, release.weights_sha256, timeout=timeout)


def expert_versions(zoo: Zoo) -> dict[str, Any]:
    """Every trained expert's serving hash and known versions (GET /experts, the dashboard's experts table)."""
    out = {}
    reviewable = review_classes(zoo)
    for name, entry in sorted(zoo.entries.items()):
        if entry.weights_sha256 is None:
            continue
        out[name] = {"serving": entry.weights_sha256, "role": entry.role, "operating": operating_point(entry.spec),
                     "review_classes": list(reviewable(name)),  # what a review of its calls may name
                     "served": served_history(entry),
                     "versions": [{k: v for k, v in ver.items() if k != "eval"} for ver in versions_of(entry)]}
    return {"zoo": str(zoo.root), "experts": out}
