"""A campaign file's text as plain data: JSON, or YAML with its aliases bounded before anything is built.

YAML aliases let a few hundred bytes stand for billions of values ("billion laughs": each level lists
the previous one ten times). PyYAML shares aliased nodes while composing, so the bomb costs nothing
until something walks the expanded value: validation, or the repr in an error message. Here the
composed node graph is measured first, counting every node as often as aliases repeat it (each
distinct node is visited once, so the count itself stays cheap), and a document past `MAX_NODES`
expanded nodes, a recursive alias or nesting past the interpreter's limit is refused with a reason
before a single Python value is constructed.
"""

from __future__ import annotations

import json
from typing import Final

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_TEXT: Final = 1 << 20  # a campaign file is a page of YAML: 1 MiB is far beyond any real one
MAX_NODES: Final = 100_000  # expanded YAML nodes (each alias counted as the whole value it repeats)


class DocumentError(ValueError):
    """The text cannot become data: not JSON or YAML, or too large once its aliases are expanded.

    Attributes:
        detail: why, for the user; never branched on.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def load_document(text: str) -> object:
    """The data in a campaign file's text: JSON when it starts with ``{``, YAML otherwise.

    Raises:
        DocumentError: the text is too long, malformed, nested too deep, or expands past `MAX_NODES`.
    """
    if len(text) > MAX_TEXT:
        raise DocumentError(f"the file has {len(text)} characters, at most {MAX_TEXT} are read")
    try:
        if text.lstrip().startswith("{"):
            return _json(text)
        return _yaml(text)
    except RecursionError:
        raise DocumentError("values are nested too deep") from None


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def _yaml(text: str) -> object:
    try:
        loader = yaml.SafeLoader(text)  # the reader checks the characters here already
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            expanded_size(node)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        raise DocumentError(f"not valid YAML: {where}{getattr(exc, 'problem', None) or exc}") from None


def expanded_size(node: Node, limit: int = MAX_NODES) -> int:
    """How many nodes the document has once every alias is replaced by the value it names.

    Raises:
        DocumentError: past `limit` (the walk stops there), or an alias inside the value it names.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(current: Node) -> int:
        key = id(current)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise DocumentError("a YAML alias refers to a value that contains it (a recursive alias)")
        open_nodes.add(key)
        total = 1
        for child in _children(current):
            total += size(child)
            if total > limit:
                raise DocumentError(
                    f"the YAML expands to more than {limit} values once its aliases (*name) are"
                    " repeated; a campaign file needs far fewer (an alias bomb?)"
                )
        open_nodes.discard(key)
        sizes[key] = total
        return total

    return size(node)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []
