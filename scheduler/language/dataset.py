"""A generate job's `dataset:`: random prompts of exact token lengths, or a ShareGPT file's conversations.

Pure and deterministic: the random draws come from a seeded splitmix64 generator written here (no
`random`), so the same seed and the same pinned tokenizer give the same prompts, byte for byte, on
every parse of the campaign (submit, plan, resume); the submitter builds them once and every worker
sends exactly these. A prompt's length is exact under the pinned tokenizer: random plain tokens are
decoded to text, and the text re-encoded and trimmed or extended until it encodes to the length
drawn (`input_tokens`). Lengths are drawn from a normal distribution and kept within two standard
deviations of the mean (and at least 1); the output length drawn is sent as the request's
`max_tokens` (and `min_tokens` with `ignore_eos`), and kept in each request's record.

ShareGPT (a JSON list of ``{"conversations": [{"from": "human"|"gpt"|"system", "value": text}]}``), or
the OpenAI-messages layout (``{"messages": [{"role": "user"|"assistant"|"system", "content": text}]}``),
either as one JSON list or one conversation per line (JSONL): each conversation's first human turn is
the prompt (after its system turn, if it opens with one), and the first answer after it is the
reference (ROUGE) and, with a pinned tokenizer, the output length asked (its token count). By default
later turns are not sent; with `turns` (`dataset: {sharegpt: FILE, turns: all}`, or a number) the
conversation's later user turns become the prompt's `follow_ups`, replayed as a session: each turn's
request carries the earlier turns with the answers the server gave, never the dataset's answers.

A random set with `turns: N` (``dataset: {random: {...}, turns: N}``) is a synthetic session set: each
prompt has N - 1 follow-up turns, each of a length drawn as the first one's.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from protocol import ChatMessage, Prompt
from protocol.arrivals import SplitMix64
from protocol.generation import MAX_PROMPTS

MAX_INPUT_TOKENS: Final = 6_000  # mean + 2 stddev: a prompt stays under MAX_PROMPT_CHARS
MAX_OUTPUT_TOKENS: Final = 32_768
SPREAD: Final = 2.0  # lengths are kept within this many standard deviations of the mean
ROUNDS: Final = 32  # re-encodings tried before a prompt keeps the length it has
DEFAULT_PROMPTS: Final = 100


class Vocabulary(Protocol):
    """A pinned tokenizer as the dataset uses it (`protocol.tokenizer.Pinned`)."""

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`, without special tokens."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`."""
        ...

    def plain_ids(self) -> list[int]:
        """Ids of ordinary tokens: not special, each decoding to printable text."""
        ...


class Draws(SplitMix64):
    """The seeded SplitMix64 stream (`protocol.arrivals`) with the draws a dataset needs."""

    def uniform(self) -> float:
        """A float in [0, 1)."""
        return self.next_float()

    def below(self, n: int) -> int:
        """An int in [0, n)."""
        return self.next64() % n

    def normal(self, mean: float, stddev: float) -> float:
        """A normal draw (Box-Muller)."""
        u1, u2 = 1.0 - self.uniform(), self.uniform()
        return mean + stddev * math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@dataclass(frozen=True)
class Lengths:
    """A token length's distribution: mean and standard deviation (0: every prompt the same)."""

    mean: int
    stddev: float = 0.0

    def bounds(self, cap: int) -> tuple[int, int]:
        """The lengths a draw is kept within: two standard deviations either side, at least 1."""
        low = max(1, math.ceil(self.mean - SPREAD * self.stddev))
        return low, min(cap, math.floor(self.mean + SPREAD * self.stddev))

    def draw(self, draws: Draws, cap: int) -> int:
        low, high = self.bounds(cap)
        return min(high, max(low, round(draws.normal(self.mean, self.stddev))))


@dataclass(frozen=True)
class RandomSet:
    """`dataset: {random: {input_tokens: {mean, stddev}, output_tokens: {mean, stddev}, seed}}`."""

    input_tokens: Lengths
    output_tokens: Lengths
    seed: int
    count: int = DEFAULT_PROMPTS
    turns: int = 1  # a synthetic session set: each prompt's turns


def random_prompts(spec: RandomSet, vocabulary: Vocabulary) -> tuple[Prompt, ...]:
    """`spec.count` prompts of exact token lengths under `vocabulary`, deterministic from the seed."""
    draws = Draws(spec.seed)
    plain = vocabulary.plain_ids()
    prompts = []
    for i in range(spec.count):
        wanted = spec.input_tokens.draw(draws, MAX_INPUT_TOKENS)
        output = spec.output_tokens.draw(draws, MAX_OUTPUT_TOKENS)
        text, length = _exact(wanted, plain, vocabulary, draws)
        later = tuple(
            _exact(spec.input_tokens.draw(draws, MAX_INPUT_TOKENS), plain, vocabulary, draws)[0]
            for _ in range(spec.turns - 1)
        )
        prompts.append(
            Prompt(
                id=f"random-{i + 1:04d}",
                text=text,
                input_tokens=length,
                output_tokens=output,
                follow_ups=later,
            )
        )
    return tuple(prompts)


def _exact(wanted: int, plain: Sequence[int], vocabulary: Vocabulary, draws: Draws) -> tuple[str, int]:
    """A text that encodes to `wanted` tokens (or as near as `ROUNDS` re-encodings got), and its length."""
    text = vocabulary.decode([plain[draws.below(len(plain))] for _ in range(wanted)])
    length = len(vocabulary.encode(text))
    for _ in range(ROUNDS):
        if length == wanted and text.strip():
            break
        ids = vocabulary.encode(text)
        if len(ids) > wanted:
            text = vocabulary.decode(ids[:wanted])
        else:
            more = max(1, wanted - len(ids))
            text += vocabulary.decode([plain[draws.below(len(plain))] for _ in range(more)])
        length = len(vocabulary.encode(text))
    return text, length


def sharegpt_prompts(
    data: bytes, name: str, vocabulary: Vocabulary | None, count: int | None, turns: int = 1
) -> tuple[tuple[Prompt, ...], list[str]]:
    """The prompts of a ShareGPT or OpenAI-messages file (see the module docstring), and what was
    wrong with it; each prompt with up to `turns` - 1 follow-up turns.

    Conversations without a human turn are skipped (not an error); none usable is one.
    """
    entries, problem = _entries(data, name)
    if problem:
        return (), [problem]
    prompts: list[Prompt] = []
    for index, entry in enumerate(entries):
        if (count is not None and len(prompts) >= count) or len(prompts) >= MAX_PROMPTS:
            break
        prompt = _conversation(entry, index, vocabulary, turns)
        if prompt is not None:
            prompts.append(prompt)
    return tuple(prompts), [] if prompts else [f"{name}: no conversation with a human turn"]


def _entries(data: bytes, name: str) -> tuple[list[object], str]:
    """The file's conversations: one JSON list, or one JSON object a line (JSONL)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], f"{name}: not a JSON file ({exc})"
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            entries = [json.loads(line) for line in lines] if len(lines) > 1 else None
        except (json.JSONDecodeError, RecursionError):
            entries = None
        if entries is None:
            return [], f"{name}: not a JSON file ({exc})"
    except RecursionError:
        return [], f"{name}: values nested deeper than the JSON reader follows (not a ShareGPT file)"
    if isinstance(entries, dict):  # one conversation: a one-line JSONL file
        entries = [entries]
    if not isinstance(entries, list):
        return [], f'{name}: expected a JSON list of {{"conversations": [...]}} or {{"messages": [...]}}'
    return entries, ""


_ROLES: Final = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
}


def _said(entry: object) -> list[tuple[str | None, object]] | None:
    """A conversation's (role, text) turns in either layout, or None when it is neither."""
    if not isinstance(entry, dict):
        return None
    keys = ("from", "value") if isinstance(entry.get("conversations"), list) else ("role", "content")
    turns = entry.get("conversations") if keys[0] == "from" else entry.get("messages")
    if not isinstance(turns, list):
        return None
    return [
        (_ROLES.get(str(t.get(keys[0]))), t.get(keys[1]))
        for t in turns
        if isinstance(t, dict) and isinstance(t.get(keys[1]), str)
    ]


def _conversation(entry: object, index: int, vocabulary: Vocabulary | None, turns: int) -> Prompt | None:
    said = _said(entry)
    if said is None:
        return None
    asked = next((i for i, (role, _) in enumerate(said) if role == "user"), None)
    if asked is None or not str(said[asked][1]).strip():
        return None
    system = [ChatMessage(role="system", content=str(v)) for r, v in said[:asked] if r == "system"][:1]
    question = str(said[asked][1])
    answer = next((str(v) for r, v in said[asked + 1 :] if r == "assistant"), None)
    ident = entry.get("id") if isinstance(entry, dict) else None
    output = len(vocabulary.encode(answer)) if vocabulary is not None and answer else None
    later = tuple(str(v) for r, v in said[asked + 1 :] if r == "user" and str(v).strip())[: turns - 1]
    try:
        return Prompt(
            id=str(ident)[:128] if ident else f"sharegpt-{index + 1}",
            text=question,
            reference=answer or None,
            messages=(*system, ChatMessage(role="user", content=question)) if system else (),
            input_tokens=len(vocabulary.encode(question)) or None if vocabulary is not None else None,
            output_tokens=min(output, MAX_OUTPUT_TOKENS) if output else None,
            follow_ups=later,
        )
    except ValueError:  # a turn past the prompt's size limits: skipped like one without a question
        return None


def digest(prompts: Sequence[Prompt]) -> str:
    """The sha256 of the prompts' canonical JSON: the same prompts, the same digest."""
    canonical = json.dumps(
        [p.model_dump(mode="json") for p in prompts], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
