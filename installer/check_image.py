"""What the box's image lacks: run by install.sh --system-site-packages before it touches anything.

A venv made with --system-site-packages borrows the image's packages (its CUDA or Jetson build of torch above
all), and installs the product without them. This script runs inside a throwaway venv made exactly like the one
the installer is about to make, walks the product's requirements (pyproject.toml, the extras asked for, and each
found package's own requirements) and reports what is missing or too old. It also writes the pins that keep the
image's torch as it is: torch, torchvision and everything they need that the image has, at the image's versions.

Standard library only, plus `packaging` (the image's, or the copy vendored in pip; and pip's tomli on Python
3.10, which has no tomllib): the product is not installed yet. Exit 0: nothing missing; 1: something missing
(the list is written); 2: the image's torch itself does not do, and nothing can be added that would fix it without
replacing the image's build; 3: cannot check.
"""
from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (Ubuntu 22.04): pip's own copy of tomli reads the same files
    try:
        from pip._vendor import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:
        print("check_image: Python 3.10 without pip cannot read pyproject.toml; install python3-pip", file=sys.stderr)
        sys.exit(3)

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # an image without packaging: pip's own copy
    try:
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
        from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]
    except ImportError:
        print("check_image: neither packaging nor pip is importable here; cannot read requirements", file=sys.stderr)
        sys.exit(3)

# the image's build of these is why the plant uses --system-site-packages: never replaced by a generic wheel
IMAGE_ROOTS = ("torch", "torchvision")
# the installer's own tools: a venv may carry its own copies (ensurepip), so they are added like any package
TOOLS = ("pip", "setuptools", "wheel")


@dataclass
class Shortfall:
    """One requirement the image does not meet: not installed, or installed at a version outside it."""

    requirement: str
    needed_by: str
    found: str | None  # the installed version, None when absent

    def line(self) -> str:
        have = f"{self.found} installed" if self.found else "not installed"
        return f"{self.requirement:<34} (needed by {self.needed_by}): {have}"


@dataclass
class Report:
    shortfalls: list[Shortfall] = field(default_factory=list)
    found: dict[str, str] = field(default_factory=dict)  # canonical name -> version, every package met
    pins: dict[str, str] = field(default_factory=dict)  # the image's torch and what it stands on


def product_requirements(pyproject: Path, extras: list[str]) -> list[Requirement]:
    """The product's own requirements for these extras; `name[a,b]` of itself expands to those extras."""
    project = tomllib.loads(pyproject.read_text())["project"]
    name, optional = canonicalize_name(project["name"]), project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"check_image: unknown extra {', '.join(unknown)}; known: {', '.join(sorted(optional))}")
    wanted, todo, out = set(), list(extras), [Requirement(r) for r in project.get("dependencies", [])]
    while todo:
        extra = todo.pop()
        if extra in wanted:
            continue
        wanted.add(extra)
        for text in optional[extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == name:
                todo.extend(req.extras)
            else:
                out.append(req)
    return out


def applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in (extras or {""}))


def installed(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def walk(roots: list[Requirement], product: str) -> Report:
    """Every requirement reachable from the product through packages the image has, checked once each."""
    report = Report()
    todo: list[tuple[Requirement, str]] = [(r, product) for r in roots if applies(r, set())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, parent = todo.pop(0)
        key = canonicalize_name(req.name)
        dist = installed(req.name)
        if dist is None or not req.specifier.contains(dist.version, prereleases=True):
            report.shortfalls.append(Shortfall(str(req).split(";")[0].strip(), parent, dist and dist.version))
            continue
        report.found[key] = dist.version
        extras = frozenset(req.extras)
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        for text in dist.requires or []:
            sub = Requirement(text)
            if applies(sub, set(extras)):
                todo.append((sub, key))
    report.shortfalls = _unique(report.shortfalls)
    report.pins = image_pins()
    return report


def _unique(shortfalls: list[Shortfall]) -> list[Shortfall]:
    out: dict[str, Shortfall] = {}
    for s in shortfalls:
        out.setdefault(s.requirement, s)
    return list(out.values())


def image_pins() -> dict[str, str]:
    """torch, torchvision and every package of the image they stand on, at the image's versions."""
    pins: dict[str, str] = {}
    todo = list(IMAGE_ROOTS)
    while todo:
        name = todo.pop()
        key = canonicalize_name(re.split(r"[\s\[;(<>=!~]", name, maxsplit=1)[0])
        dist = installed(key)
        if dist is None or key in pins or key in TOOLS:
            continue
        pins[key] = dist.version
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub.name)
    return pins


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pyproject", type=Path, required=True)
    ap.add_argument("--extras", default="", help="comma-separated extras, as install.sh --extras")
    ap.add_argument("--image", default=sys.base_prefix, help="the interpreter the venv borrows from, for the report")
    ap.add_argument("--missing-out", type=Path, help="write the requirements to add, one a line")
    ap.add_argument("--pins-out", type=Path, help="write pip constraints that keep the image's torch")
    args = ap.parse_args(argv)
    extras = [e for e in args.extras.split(",") if e]
    name = tomllib.loads(args.pyproject.read_text())["project"]["name"]
    report = walk(product_requirements(args.pyproject, extras), name)
    torch_at = f"torch {report.pins['torch']}" if "torch" in report.pins else "no torch"
    print(f"the image ({args.image}, Python {sys.version.split()[0]}, {torch_at}) provides "
          f"{len(report.found)} of the {len(report.found) + len(report.shortfalls)} packages "
          f"{name}{'[' + ','.join(extras) + ']' if extras else ''} needs")
    if args.pins_out:
        args.pins_out.write_text("".join(f"{k}=={v}\n" for k, v in sorted(report.pins.items())))
    if args.missing_out:
        args.missing_out.write_text("".join(s.requirement + "\n" for s in report.shortfalls))
    for s in report.shortfalls:
        print("  missing: " + s.line())
    stuck = [s for s in report.shortfalls
             if canonicalize_name(Requirement(s.requirement).name) in {*IMAGE_ROOTS, *report.pins}]
    if stuck:
        return 2
    return 1 if report.shortfalls else 0


if __name__ == "__main__":
    sys.exit(main())
