"""YAML in, with the line of every key and item kept, so config errors name file and line.

Configs (workloads now, routing rules later) are validated once at the edge
into typed objects; `ConfigError` carries `file:line: message` plus what to do.
"""
from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    def __init__(self, source: str, line: int | None, message: str) -> None:
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.line = line


class LinedDict(dict):
    """A mapping that remembers the line of itself and of each key (1-based)."""

    line: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines: dict[str, int] = {}


class LinedList(list):
    line: int = 0
    item_lines: list[int]


class _Loader(yaml.SafeLoader):
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LinedDict:
    loader.flatten_mapping(node)
    out = LinedDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LinedList:
    out = LinedList(loader.construct_object(n, deep=True) for n in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [n.start_mark.line + 1 for n in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise ConfigError(source, line, f"not valid YAML: {exc.problem}") from None


def beside(source: str, name: str) -> str:
    """A file a config names, relative to the config file's folder unless absolute (as an absolute path)."""
    path = Path(name)
    return str(path if path.is_absolute() else Path(source).parent / path)


def line_of(container: Any, key: Any) -> int | None:
    """Best line for an error about `key` inside `container` (falls back to the container)."""
    if isinstance(container, LinedDict):
        return container.key_lines.get(key, container.line)
    if isinstance(container, LinedList) and isinstance(key, int) and key < len(container.item_lines):
        return container.item_lines[key]
    return getattr(container, "line", None)


class Fields:
    """Typed reads from one mapping with errors that point at the offending line."""

    def __init__(self, data: Any, source: str, where: str = "") -> None:
        if not isinstance(data, dict):
            raise ConfigError(source, getattr(data, "line", None), f"{where or 'document'} must be a mapping")
        self.data = data
        self.source = source
        self.where = where

    def error(self, key: Any, message: str) -> ConfigError:
        label = f"{self.where}.{key}" if self.where else str(key)
        return ConfigError(self.source, line_of(self.data, key), f"{label}: {message}")

    def unknown(self, allowed: Collection[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.error(key, f"unknown key; allowed: {', '.join(sorted(allowed))}")

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def number(self, key: str, default: float | None = None, minimum: float | None = None,
               maximum: float | None = None, integer: bool = False) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is None:
                raise self.error(key, "is required")
            return default
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
            raise self.error(key, f"must be {'an integer' if integer else 'a number'}, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum}, got {value}")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        if key not in self.data or self.data[key] is None:
            if default is None:
                raise self.error(key, "is required")
            return default
        value = self.data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"must be a non-empty string, got {value!r}")
        return value.strip()

    def sub(self, key: str) -> Fields:
        return Fields(self.data.get(key) or LinedDict(), self.source, f"{self.where}.{key}" if self.where else key)
