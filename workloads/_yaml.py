"""YAML as specs, suites and presets are read: UTF-8 text, safe tags only, no duplicate keys,
bounded in bytes and in what aliases expand to.

PyYAML keeps the last of two equal keys silently (`load:` twice: the first is lost), and reads
bytes of any encoding as text; both are errors here, each with one message that says where.
A document whose aliases expand past `MAX_YAML_NODES` nodes (the "billion laughs" bomb: nine
levels of ten aliases each) is refused after loading, before anything walks it as a tree; the
bytes themselves are read bounded by `passport._input`.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["load_yaml", "MAX_YAML_NODES"]

MAX_YAML_NODES = 1_000_000


def _expanded_nodes(value: Any, limit: int) -> int:
    """How many nodes `value` has as a tree (aliases counted at every use), up to `limit` + 1."""
    sizes: dict[int, int] = {}

    def size(item: Any) -> int:
        key = id(item)
        if key in sizes:
            return sizes[key]
        children = (list(item.keys()) + list(item.values()) if isinstance(item, dict)
                    else item if isinstance(item, list) else [])
        total = 1
        for child in children:
            total += size(child)
            if total > limit:
                break
        sizes[key] = total
        return total

    return size(value)


class _UniqueKeys(yaml.SafeLoader):
    """SafeLoader that refuses a mapping holding the same key twice."""


def _mapping(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice in one mapping (first on line {seen[key] + 1}): "
                            "keep one", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return dict(loader.construct_mapping(node, deep=deep))


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(data: bytes, source: str) -> Any:
    """Parse YAML `data` read from `source`; ValueError with a clear message for text that is not
    UTF-8, not YAML, or holds a duplicated key."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError(f"{source} is UTF-16 text; save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{source} is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x}); is it a YAML "
                         "file?") from None
    if "\x00" in text:
        raise ValueError(f"{source} holds NUL bytes: it is not a YAML text file")
    try:
        document = yaml.load(text, Loader=_UniqueKeys)  # noqa: S506 (a SafeLoader subclass)
        expanded = _expanded_nodes(document, MAX_YAML_NODES)
    except yaml.YAMLError as exc:
        raise ValueError(f"{source} is not valid YAML: {_where_and_what(exc)}") from None
    except RecursionError:
        raise ValueError(f"{source} nests deeper than a YAML document may") from None
    if expanded > MAX_YAML_NODES:
        raise ValueError(f"{source}: its aliases expand to over {MAX_YAML_NODES:,} values (an alias bomb?); write "
                         "the values out or use fewer nested aliases")
    return document


def _where_and_what(exc: yaml.YAMLError) -> str:
    """PyYAML's message on one line: `line L, column C: problem`, without its quoted snippet."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return str(exc)
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + "; ".join(part for part in (exc.context, exc.problem) if part)
