"""The prompts of a generate job: a JSONL file's bytes or `builtin:summaries`, parsed without I/O.

A JSONL line is ``{"prompt": text, "reference": text?, "id": text?}``; blank lines are skipped. Every
bad line is reported with its line number. `num_prompts` takes the first n prompts, or cycles through
them to n (cycled prompts get ids ``<id>#<round>``). The digest pins the source: the file's bytes, or
the canonical JSON of the built-in set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Final

from pydantic import ValidationError

from protocol import Prompt
from protocol.generation import MAX_PROMPTS
from scheduler.language.summaries import INSTRUCTION, SUMMARIES

BUILTIN_PREFIX: Final = "builtin:"
BUILTIN_SETS: Final = ("summaries",)
_LINE_FIELDS: Final = frozenset({"prompt", "reference", "id"})


def builtin_prompts(name: str) -> tuple[tuple[Prompt, ...], str]:
    """A built-in prompt set and its digest (KeyError for an unknown name)."""
    if name != "summaries":
        raise KeyError(name)
    prompts = tuple(
        Prompt(id=f"summaries-{i + 1:02d}", text=INSTRUCTION + passage, reference=summary)
        for i, (passage, summary) in enumerate(SUMMARIES)
    )
    canonical = json.dumps([p.model_dump() for p in prompts], sort_keys=True, separators=(",", ":"))
    return prompts, hashlib.sha256(canonical.encode()).hexdigest()


def parse_jsonl(data: bytes, name: str) -> tuple[tuple[Prompt, ...], list[str]]:
    """The prompts of a JSONL file, and one problem per bad line ("line N: ...")."""
    problems: list[str] = []
    prompts: list[Prompt] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = data[: exc.start].count(b"\n") + 1
        return (), [f"line {where}: not UTF-8 text"]
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        prompt = _line(line, number, problems)
        if prompt is not None:
            prompts.append(prompt)
    if not prompts and not problems:
        problems.append(f"{name} holds no prompts")
    if len(prompts) > MAX_PROMPTS:
        problems.append(f"{len(prompts)} prompts; at most {MAX_PROMPTS}")
    return tuple(prompts), problems


def _line(line: str, number: int, problems: list[str]) -> Prompt | None:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as exc:
        problems.append(f"line {number}: not JSON ({exc.msg} at column {exc.colno})")
        return None
    except RecursionError:
        problems.append(f"line {number}: values nested deeper than the JSON reader follows")
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("prompt"), str):
        problems.append(f'line {number}: expected {{"prompt": text, "reference": text}}')
        return None
    unknown = sorted(set(entry) - _LINE_FIELDS)
    if unknown:
        problems.append(f"line {number}: unknown field(s) {', '.join(unknown)}")
        return None
    try:
        return Prompt(
            id=str(entry.get("id", f"line-{number}")), text=entry["prompt"], reference=entry.get("reference")
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        problems.append(f"line {number}: {field}: {first['msg']}")
        return None


def take(prompts: Sequence[Prompt], count: int | None) -> tuple[Prompt, ...]:
    """The first `count` prompts, cycling through them again when `count` is larger (all when None)."""
    if count is None:
        return tuple(prompts)
    out: list[Prompt] = []
    for i in range(count):
        base = prompts[i % len(prompts)]
        rounds = i // len(prompts)
        out.append(base if rounds == 0 else base.with_(id=f"{base.id}#{rounds + 1}"))
    return tuple(out)


def digest_bytes(data: bytes) -> str:
    """The sha256 of a prompts file's bytes."""
    return hashlib.sha256(data).hexdigest()
