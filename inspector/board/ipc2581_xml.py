"""The small things every part of the IPC-2581 reader needs of its XML: tags without the namespace, numbers read
with an error that names the element, and lengths in millimetres by the file's (or a dictionary's own) units."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from .design import CadError

UNITS = {"MILLIMETER": 1.0, "MICRON": 0.001, "INCH": 25.4}


def local(root: ET.Element) -> None:
    """Every tag and attribute without its namespace (files come with and without the standard's)."""
    for node in root.iter():
        if "}" in node.tag:
            node.tag = node.tag.split("}", 1)[1]
        for key in [k for k in node.attrib if "}" in k]:
            node.attrib[key.split("}", 1)[1]] = node.attrib.pop(key)


def value(node: ET.Element, key: str, default: float = 0.0) -> float:
    """An attribute as a number; CadError naming the element where it is not one."""
    try:
        return float(node.get(key, default))
    except ValueError:
        raise CadError(f"<{node.tag}> has {key}={node.get(key)!r}, not a number") from None


def units_scale(node: ET.Element | None, default: float, where: str) -> float:
    """Millimetres per unit of `node`'s own `units`, else `default`."""
    units = node.get("units") if node is not None else None
    if units is None:
        return default
    if units.upper() not in UNITS:
        raise CadError(f"{where} has units={units!r}; IPC-2581 writes one of {', '.join(UNITS)}")
    return UNITS[units.upper()]
