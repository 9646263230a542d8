"""A generate block's `tokenizer:` and `dataset:` fields -> the pinned tokenizer and the prompts they make.

```yaml
generate:
  tokenizer: tok/            # a folder with tokenizer.json, or the file itself
  dataset: {random: {input_tokens: {mean: 256, stddev: 32}, output_tokens: {mean: 64}, seed: 7}}
  # or: dataset: {sharegpt: conversations.json}            (the first turn of each conversation)
  # or: dataset: {sharegpt: conversations.json, turns: all} (sessions: every turn, replayed in order)
  # or: dataset: {random: {...}, turns: 4}                  (synthetic sessions of 4 turns)
  num_prompts: 200
```

Pure: the files arrive as bytes keyed by the name the campaign wrote (`campaign_files`). Every
problem is recorded at its field path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from protocol import Prompt, TokenizerPin
from protocol.generation import MAX_TURNS
from protocol.tokenizer import Pinned, TokenizerError, pin
from scheduler.language import dataset
from scheduler.language.problems import Problems, check_keys, describe, unread

DATASET_KINDS: Final = ("random", "sharegpt")
RANDOM_FIELDS: Final = ("input_tokens", "output_tokens", "seed")
NO_PLAIN_TOKEN: Final = (
    "no ordinary token (each is special, blank or unprintable) to build random prompts from"
)


@dataclass(frozen=True)
class Made:
    """What a dataset made: its prompts, their digest, where they came from, and the random seed."""

    prompts: tuple[Prompt, ...]
    digest: str
    source: str
    seed: int | None = None


def dataset_files(block: Mapping[str, object]) -> list[str]:
    """The files a generate block's `tokenizer:` and `dataset:` name (for node/ to read first)."""
    names = [block["tokenizer"]] if isinstance(block.get("tokenizer"), str) else []
    chosen = block.get("dataset")
    if isinstance(chosen, dict) and isinstance(chosen.get("sharegpt"), str):
        names.append(chosen["sharegpt"])
    return [str(n) for n in names]


def tokenizer_of(
    raw: Mapping[str, object], where: str, files: Mapping[str, bytes], problems: Problems
) -> tuple[TokenizerPin, Pinned] | None:
    """The block's pinned tokenizer, loaded, or None (not asked for, or a problem recorded)."""
    name = raw.get("tokenizer")
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        problems.add(
            f"{where}.tokenizer", f"expected a tokenizer.json file or its folder, got {describe(name)}"
        )
        return None
    if name not in files:
        problems.add(
            f"{where}.tokenizer",
            unread(files, name, f"cannot read tokenizer {name!r} (a tokenizer.json or its folder)"),
        )
        return None
    try:
        loaded = Pinned(files[name], name)  # the bounds first: pinning compresses the whole file
        return pin(name, files[name]), loaded
    except TokenizerError as exc:
        problems.add(f"{where}.tokenizer", str(exc))
        return None


def made_dataset(
    raw: object,
    where: str,
    files: Mapping[str, bytes],
    vocabulary: Pinned | None,
    count: int | None,
    problems: Problems,
) -> Made | None:
    """The prompts a `dataset:` block makes, or None with its problems recorded."""
    kinds = [k for k in raw if k in DATASET_KINDS] if isinstance(raw, dict) else []
    if not isinstance(raw, dict) or len(kinds) != 1 or set(raw) - {kinds[0], "turns"}:
        problems.add(
            where, f"expected one of {', '.join(DATASET_KINDS)} (and turns) as a mapping, got {describe(raw)}"
        )
        return None
    kind, body = kinds[0], raw[kinds[0]]
    turns = _turns(raw.get("turns", 1), kind, f"{where}.turns", problems)
    if turns is None:
        return None
    if kind == "sharegpt":
        if not isinstance(body, str) or body not in files:
            fallback = f"cannot read ShareGPT file {describe(body)}"
            problems.add(
                f"{where}.sharegpt", unread(files, body, fallback) if isinstance(body, str) else fallback
            )
            return None
        try:
            prompts, bad = dataset.sharegpt_prompts(files[body], body, vocabulary, count, turns)
        except TokenizerError as exc:  # counting the turns' tokens
            problems.add(f"{where}.sharegpt", str(exc))
            return None
        for problem in bad:
            problems.add(f"{where}.sharegpt", problem)
        return Made(prompts, dataset.digest(prompts), f"sharegpt:{body}") if not bad else None
    if vocabulary is None:
        problems.add(
            f"{where}.random", "a random dataset needs generate.tokenizer (its token lengths are exact)"
        )
        return None
    spec = _random_set(body, f"{where}.random", count, problems)
    if spec is None:
        return None
    spec = dataclasses.replace(spec, turns=turns)
    try:
        if not vocabulary.plain_ids():
            problems.add(f"{where}.random", f"{vocabulary.name}: {NO_PLAIN_TOKEN}")
            return None
        prompts = dataset.random_prompts(spec, vocabulary)
    except TokenizerError as exc:
        problems.add(f"{where}.random", str(exc))
        return None
    return Made(prompts, dataset.digest(prompts), f"random:seed={spec.seed}", spec.seed)


def _turns(raw: object, kind: str, where: str, problems: Problems) -> int | None:
    """`turns:` as the most turns a session replays: 1 (the first turn alone, the default), a number,
    or `all` (a ShareGPT file's every turn, up to `MAX_TURNS`); None with its problem recorded."""
    if raw == "all" and kind == "sharegpt":
        return MAX_TURNS
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_TURNS:
        allowed = f"a whole number from 1 to {MAX_TURNS}" + (" or all" if kind == "sharegpt" else "")
        problems.add(where, f"expected {allowed}, got {describe(raw)}")
        return None
    return raw


def _random_set(raw: object, where: str, count: int | None, problems: Problems) -> dataset.RandomSet | None:
    if not isinstance(raw, dict):
        problems.add(where, f"expected a mapping ({', '.join(RANDOM_FIELDS)}), got {describe(raw)}")
        return None
    before = len(problems.items)
    check_keys(raw, where, RANDOM_FIELDS, problems)
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        problems.add(f"{where}.seed", f"expected a whole number from 0, got {describe(seed)}")
    lengths = {
        name: _lengths(raw.get(name), f"{where}.{name}", cap, problems)
        for name, cap in (
            ("input_tokens", dataset.MAX_INPUT_TOKENS),
            ("output_tokens", dataset.MAX_OUTPUT_TOKENS),
        )
    }
    inputs, outputs = lengths["input_tokens"], lengths["output_tokens"]
    if len(problems.items) > before or inputs is None or outputs is None or not isinstance(seed, int):
        return None
    return dataset.RandomSet(inputs, outputs, seed, count or dataset.DEFAULT_PROMPTS)


def _lengths(raw: object, where: str, cap: int, problems: Problems) -> dataset.Lengths | None:
    if not isinstance(raw, dict):
        problems.add(where, f"expected {{mean, stddev}} in tokens, got {describe(raw)}")
        return None
    check_keys(raw, where, ("mean", "stddev"), problems)
    mean, stddev = raw.get("mean"), raw.get("stddev", 0)
    if isinstance(mean, bool) or not isinstance(mean, int) or not 1 <= mean <= cap:
        problems.add(
            f"{where}.mean", f"expected a whole number of tokens from 1 to {cap}, got {describe(mean)}"
        )
        return None
    if isinstance(stddev, bool) or not isinstance(stddev, int | float) or stddev < 0:
        problems.add(f"{where}.stddev", f"expected a number of tokens from 0, got {describe(stddev)}")
        return None
    lengths = dataset.Lengths(mean, float(stddev))
    if lengths.bounds(cap)[1] < lengths.bounds(cap)[0] or mean + dataset.SPREAD * stddev > cap:
        problems.add(where, f"mean + {dataset.SPREAD:g} stddev is past {cap} tokens")
        return None
    return lengths
