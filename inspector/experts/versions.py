"""Versions of one expert's weights in a zoo: added beside the first, put into service, rolled back.

A retrained expert's weights are written as `<name>@<sha12>.safetensors` next to the zoo's first file and
recorded in its manifest entry's `versions`; nothing serves them until they are **activated**, which makes
them the entry's file and hash and appends the hash to `served`. Rollback activates the hash served before. A
version may carry its operating point (`operating`: a retrained detector's threshold, chosen for its own box
scores; operating.py): activation serves it there, and the version it replaces is stamped with the point it was
served at, so a rollback serves the old weights where they were served (older versions without one keep the
entry's).
Every manifest change is one atomic replace, so a power cut leaves the old manifest or the new one. A version's
file is never deleted here: a rollback must find it, and results name the hash they were given with.
Every change is also made on the entry as the manifest holds it then, under the zoo's lock (a file lock beside the
manifest), whatever the `Zoo` passed in read: a retraining that loaded the zoo minutes before records its version
without putting back what a running line served meanwhile. A running line's swap holds that lock from reading the
entry until it has swapped it in and written it (`put_in_service`): a change made meanwhile by another process
waits for the swap and is then made on the entry it served.

The running line takes the same change live through app/expert_swap.py; this module only writes the zoo.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from datetime import datetime, timezone
from typing import Any

import torch
from safetensors.torch import save

from ..runtime.diskio import drop_pages, write_atomically
from .operating import at_point, operating_point
from .zoo import MANIFEST, ExpertEntry, Zoo

LOCK = ".manifest.lock"


class VersionError(ValueError):
    """A version that does not exist, or a rollback with nothing to roll back to."""


def versions_of(entry: ExpertEntry) -> list[dict[str, Any]]:
    """Every version of an expert, the first (the zoo build's) included, oldest first."""
    first = {"weights_sha256": entry.weights_sha256, "file": f"{entry.name}.safetensors", "origin": "zoo build",
             "val_accuracy": entry.val_accuracy}
    known = list(entry.versions)
    if not any(v["weights_sha256"] == first["weights_sha256"] for v in known):
        known.insert(0, first)
    return known


def served_history(entry: ExpertEntry) -> list[str]:
    """The hashes put into service, oldest first; the last is the one the entry serves."""
    return list(entry.served) if entry.served else [entry.weights_sha256 or ""]


def add_version(zoo: Zoo, name: str, state: dict[str, torch.Tensor], **meta: Any) -> dict[str, Any]:
    """Write new weights of `name` beside its others and record them (not served yet); the version record."""
    return add_version_file(zoo, name, save({k: v.contiguous() for k, v in state.items()}), **meta)


def add_version_file(zoo: Zoo, name: str, data: bytes, **meta: Any) -> dict[str, Any]:
    """A weights file's bytes (a plant's release, already checked against its hash) as a version of `name`."""
    entry_of(zoo, name)
    sha = hashlib.sha256(data).hexdigest()
    file = f"{name}@{sha[:12]}.safetensors"
    path = zoo.root / file
    if not path.is_file():
        write_atomically(path, data)
        drop_pages(path)  # out of the page cache, like every expert file: its first load is a disk read
    version = {"weights_sha256": sha, "file": file, "created": datetime.now(timezone.utc).isoformat(), **meta}

    def added(entry: ExpertEntry) -> ExpertEntry:  # the entry as the manifest holds it now, whatever `zoo` holds
        known = [v for v in versions_of(entry) if v["weights_sha256"] != sha]
        return replace(entry, versions=(*known, version), served=tuple(served_history(entry)))

    _update(zoo, name, added)
    return version


def activation(entry: ExpertEntry, sha: str, force: bool = False) -> ExpertEntry:
    """`entry` serving version `sha` (a prefix of 8+ hex digits will do); nothing is written. A version its
    retraining's recall gate refused (training/retrain.py) is served only with `force`."""
    version = find_version(entry, sha)
    gate = version.get("gate")
    if gate and not gate.get("passed", True) and not force:
        raise VersionError(f"version {version['weights_sha256'][:12]} of {entry.name} was refused by its recall gate "
                           f"({'; '.join(gate.get('reasons', []))}); review more parts and retrain, or serve it "
                           "anyway with --force (API: \"force\": true)")
    history = served_history(entry)
    if history[-1] != version["weights_sha256"]:
        history.append(version["weights_sha256"])
    return _serving(entry, version, history)


def rollback_of(entry: ExpertEntry) -> ExpertEntry:
    """`entry` serving the version served before its current one; VersionError when there is none."""
    history = served_history(entry)
    if len(history) < 2:
        raise VersionError(f"expert {entry.name} has served only one version ({history[-1][:12]}): nothing to roll "
                           "back to")
    history.pop()
    return _serving(entry, find_version(entry, history[-1]), history)


def operated(entry: ExpertEntry, point: dict[str, float | None]) -> ExpertEntry:
    """`entry` calling at `point`, its weights unchanged (an engineer's threshold, a board tune's margin); the
    version it serves stamped with it, so a rollback to this version later serves it there. Nothing is written."""
    spec = at_point(entry.spec, point)
    return replace(entry, spec=spec, versions=_stamped(entry, spec), served=tuple(served_history(entry)))


def operate(zoo: Zoo, name: str, point: dict[str, float | None]) -> ExpertEntry:
    """Serve `name` at `point` from the next start of a line on this zoo (the running line: app/expert_swap.py)."""
    return _update(zoo, name, lambda entry: operated(entry, point))


def activate(zoo: Zoo, name: str, sha: str, force: bool = False) -> ExpertEntry:
    """Make version `sha` the one `name` serves, on disk (the running line: app/expert_swap.py)."""
    return _update(zoo, name, lambda entry: activation(entry, sha, force))


def rollback(zoo: Zoo, name: str) -> ExpertEntry:
    """Serve the version served before the current one, on disk."""
    return _update(zoo, name, lambda entry: rollback_of(entry))


def find_version(entry: ExpertEntry, sha: str) -> dict[str, Any]:
    sha = sha.strip().lower()
    if len(sha) < 8:
        raise VersionError(f"give at least 8 hex digits of the weights hash, not {sha!r}")
    found = [v for v in versions_of(entry) if (v["weights_sha256"] or "").startswith(sha)]
    if len(found) != 1:
        names = ", ".join(v["weights_sha256"][:12] for v in versions_of(entry))
        raise VersionError(f"expert {entry.name} has {'no' if not found else 'more than one'} version {sha}; "
                           f"its versions: {names}")
    return found[0]


def _serving(entry: ExpertEntry, version: dict[str, Any], history: list[str]) -> ExpertEntry:
    """`entry` serving `version` at its operating point (else the entry's), the outgoing version stamped with the
    point it was served at."""
    known = _stamped(entry, entry.spec)
    incoming = next(v for v in known if v["weights_sha256"] == version["weights_sha256"])
    spec = at_point(entry.spec, incoming["operating"]) if incoming.get("operating") else entry.spec
    return replace(entry, file=version["file"], weights_sha256=version["weights_sha256"], spec=spec,
                   versions=known, served=tuple(history))


def serving(entry: ExpertEntry) -> dict[str, Any]:
    """What `entry` serves, as an audit row's before or after says it: its weights hash and operating point."""
    return {"weights_sha256": entry.weights_sha256, "operating": operating_point(entry.spec)}


def _stamped(entry: ExpertEntry, spec: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The entry's versions, the one it serves stamped with the operating point of `spec`."""
    point = operating_point(spec)
    return tuple({**v, "operating": point} if v["weights_sha256"] == entry.weights_sha256 else v
                 for v in versions_of(entry))


def entry_of(zoo: Zoo, name: str) -> ExpertEntry:
    """`name`'s entry as `zoo` read it, a trained expert's (VersionError: no such expert, or an untrained one)."""
    return _trained(zoo.entries.get(name), name, zoo, zoo.entries)


def _trained(entry: ExpertEntry | None, name: str, zoo: Zoo, names: Iterable[str]) -> ExpertEntry:
    """`entry`, a trained expert's; VersionError where there is none (naming the experts there are) or it is an
    untrained benchmark expert's (it has no versions)."""
    if entry is None:
        raise VersionError(f"the zoo at {zoo.root} has no expert {name!r}; its experts: {', '.join(sorted(names))}")
    if entry.weights_sha256 is None:
        raise VersionError(f"expert {name} of the zoo at {zoo.root} has no recorded weights hash (an untrained "
                           "benchmark expert); only trained experts have versions")
    return entry


def put_in_service(zoo: Zoo, name: str, change: Callable[[ExpertEntry], ExpertEntry],
                   serve: Callable[[ExpertEntry], None]) -> ExpertEntry:
    """`change` made to `name`'s entry as the manifest holds it, put in service by `serve` (a running line's swap at
    its next board boundary), and only then written; the zoo's lock held throughout, so a change another process
    makes meanwhile (a point moved, a version added or served) waits and is made on what this one served instead of
    being overwritten by it. `serve` raising (a swap that timed out) leaves the manifest as it was; a manifest that
    cannot be written (a full disk) is served as it was again, and the OSError raised."""
    return _update(zoo, name, change, serve)


def _update(zoo: Zoo, name: str, change: Callable[[ExpertEntry], ExpertEntry],
            serve: Callable[[ExpertEntry], None] | None = None) -> ExpertEntry:
    """Under the zoo's lock: `name`'s entry as the manifest holds it, changed, served where `serve` is given, and
    written back in one replace."""
    path = zoo.root / MANIFEST
    with _locked(zoo):
        doc = json.loads(path.read_text(encoding="utf-8"))
        raw = next((e for e in doc["experts"] if e["name"] == name), None)
        held = _trained(None if raw is None else ExpertEntry.from_json(raw), name, zoo,
                        (e["name"] for e in doc["experts"]))
        entry = change(held)
        if serve is not None:
            serve(entry)
        doc["experts"] = [asdict(entry) if e["name"] == name else e for e in doc["experts"]]
        try:
            write_atomically(path, json.dumps(doc, indent=1).encode())
        except OSError:  # the manifest could not be written (a full disk): the line serves what it says again
            if serve is not None:
                serve(held)
            raise
    return entry


@contextmanager
def _locked(zoo: Zoo) -> Iterator[None]:
    """The zoo's manifest lock (an advisory lock on a file beside it, held by one writer at a time; released by
    the system when its holder dies). Where the system has no such locks (not a Linux box), changes are unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - the box is Linux; elsewhere the atomic replace alone
        yield
        return
    with open(zoo.root / LOCK, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
