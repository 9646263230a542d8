"""The campaign reference (docs/campaign.md): the campaign file's JSON Schema rendered as Markdown.

One section per block of the file, headed by the path where it sits (`jobs[].generate`), with a table
of its fields: each field's type and bounds, default and purpose, read from the schema that
`scheduler.language.schema` builds, so the reference says what the schema says. `sark-node schema
campaign --markdown` prints it; a test keeps docs/campaign.md equal to what it prints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from scheduler.language.schema import campaign_schema

INTRO: Final = """\
# Campaign file reference

Every field a campaign file (campaign.yaml, or the seeds' JSON body) may hold, block by block. This
page is generated from the file's models (`scheduler/language/schema.py`) by `sark-node schema
campaign --markdown`, and a test keeps it equal to what that prints; `sark-node schema campaign`
prints the same as a JSON Schema for editors
([the JSON Schema in an editor](guide/campaigns.md#the-json-schema-in-an-editor)). A field left out
takes its default. The parser checks more than a schema can say (files, model keys, sweep values):
`sark-node plan` names every problem by its path."""


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule: lower case, punctuation out,
    spaces to hyphens)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _ref(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _children(node: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(suffix, schema) of each place a definition can sit below a field's schema."""
    yield "", node
    for option in node.get("anyOf", []):
        yield from _children(option)
    if isinstance(node.get("items"), dict):
        yield from ((f"[]{suffix}", sub) for suffix, sub in _children(node["items"]))


def block_paths(schema: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each block's definition name -> the paths in a file where it sits, the first one first (the
    root is `campaign`), in the order a reader meets them."""
    paths: dict[str, list[str]] = {"": ["campaign"]}
    queue: list[tuple[str, Mapping[str, Any]]] = [("", schema)]
    while queue:
        at, node = queue.pop(0)
        for field, sub in node.get("properties", {}).items():
            for suffix, child in _children(sub):
                name = _ref(child)
                target = schema["$defs"].get(name, {}) if name else {}
                if name is None or "properties" not in target:
                    continue
                path = f"{at}.{field}{suffix}".lstrip(".")
                if name not in paths:
                    paths[name] = []
                    queue.append((path, target))
                paths[name].append(path)
    return paths


def _figure(value: float) -> str:
    """A bound as people write it: 100,000 and 0.5, 2^63 for the seeds' limit."""
    if value == 2**63:
        return "2^63"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def _number(node: Mapping[str, Any]) -> str:
    kind = "a whole number" if node.get("type") == "integer" else "a number"
    low = (
        f"from {_figure(node['minimum'])}"
        if "minimum" in node
        else f"above {_figure(node['exclusiveMinimum'])}"
        if "exclusiveMinimum" in node
        else ""
    )
    high = (
        f"up to {_figure(node['maximum'])}"
        if "maximum" in node
        else f"below {_figure(node['exclusiveMaximum'])}"
        if "exclusiveMaximum" in node
        else ""
    )
    if low.startswith("from") and high.startswith("up to"):
        return f"{kind} {low} {high.removeprefix('up ')}"
    return ", ".join(part for part in (f"{kind} {low}".strip(), high) if part)


def _text(node: Mapping[str, Any]) -> str:
    words = ["text"]
    low, high = node.get("minLength"), node.get("maxLength")
    if high is not None:
        words.append(f"of {low or 0} to {high} characters" if low else f"of at most {high} characters")
    if "pattern" in node:
        words.append(f"matching `{node['pattern']}`")
    return " ".join(words)


def _count(node: Mapping[str, Any], noun: str) -> str:
    low, high = node.get(f"min{noun}"), node.get(f"max{noun}")
    if low and high:
        return f" ({low} to {high})"
    return f" (at least {low})" if low else f" (at most {high})" if high else ""


def type_text(node: Mapping[str, Any], schema: Mapping[str, Any], paths: Mapping[str, Sequence[str]]) -> str:
    """What a field's schema allows, in words, with a link to a block's own section."""
    name = _ref(node)
    if name is not None:
        target = schema["$defs"][name]
        if "enum" in target:
            return " \\| ".join(f"`{value}`" for value in target["enum"])
        heading = paths[name][0]
        return f"a [{heading}](#{_slug(heading)}) block"
    if "anyOf" in node:
        return ", or ".join(type_text(option, schema, paths) for option in node["anyOf"])
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " \\| ".join(f"`{value}`" for value in node["enum"])
    kind = node.get("type")
    if kind in ("integer", "number"):
        return _number(node)
    if kind == "string":
        return _text(node)
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = node.get("items") or {}
        what = type_text(items, schema, paths) if items else "values"
        return f"a list{_count(node, 'Items')}, each {what}"
    if kind == "object":
        values = node.get("additionalProperties")
        what = type_text(values, schema, paths) if isinstance(values, dict) else "values"
        keys = node.get("propertyNames", {}).get("enum")
        named = "a job field's name" if keys else "a name"
        return f"a mapping{_count(node, 'Properties')} from {named} to {what}"
    return "any value"


def _cell(text: str) -> str:
    return text.replace("|", "\\|") if "\\|" not in text else text


def _section(
    name: str, node: Mapping[str, Any], schema: Mapping[str, Any], paths: Mapping[str, Sequence[str]]
) -> list[str]:
    where = paths[name]
    lines = [f"## {where[0]}", "", node.get("description", "")]
    if len(where) > 1:
        lines += ["", "Also at " + ", ".join(f"`{path}`" for path in where[1:]) + "."]
    lines += ["", "| field | type | default | what |", "| --- | --- | --- | --- |"]
    required = set(node.get("required", []))
    for field, sub in node["properties"].items():
        default = "required" if field in required else ""
        if "default" in sub:
            default = f"`{json.dumps(sub['default'])}`"
        what = type_text(sub, schema, paths)
        lines.append(f"| `{field}` | {_cell(what)} | {default} | {_cell(sub.get('description', ''))} |")
    return [*lines, ""]


def campaign_reference() -> str:
    """docs/campaign.md: the campaign file's fields, block by block, from `campaign_schema`."""
    schema = campaign_schema()
    paths = block_paths(schema)
    lines = [INTRO, ""]
    for name in paths:
        node = schema if name == "" else schema["$defs"][name]
        lines += _section(name, node, schema, paths)
    return "\n".join(lines).rstrip("\n") + "\n"


__all__ = ["block_paths", "campaign_reference", "type_text"]
