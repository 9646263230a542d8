"""Malformed dataset, prompts and tokenizer files: a campaign problem or a campaign, never another
exception (no RecursionError, ZeroDivisionError, pyo3 PanicException, nothing with a traceback).

In-process, the parse path itself (`parse_campaign` with the files' bytes, the ShareGPT and JSONL
readers, the tokenizer's load, vocabulary scan and encoding) over bytes, JSON trees, deep nesting and
tokenizer.json files with one part replaced by arbitrary JSON or a backtracking regex (integers stay
small: a padding of gigabytes is the child's memory cap's business, not this process's). Then a
few of the same files through the real child (`node.submitter.vetting.vet_local`), which must answer
with problems, not stop.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.bpe import tokenizer_json
from kit.extras import needs

import scheduler as sch
from node.submitter.vetting import vet_local
from protocol.tokenizer import Pinned, TokenizerError
from scheduler.language import parse_jsonl, sharegpt_prompts

CAMPAIGN = """name: fuzz
jobs:
  - endpoint: {model: served}
    generate:
      tokenizer: tok.json
      dataset: %s
      num_prompts: 3
      max_new_tokens: 8
"""
RANDOM = "{random: {input_tokens: {mean: 12, stddev: 3}, output_tokens: {mean: 4}, seed: 3}}"
SHAREGPT = "{sharegpt: chats.json}"
REGEXES = [r"(\S+\s*)*\d$", r"(.*)*x", r"(a|aa)+$", r"\p{L}+", r"[", r"(?<=a+)b", r"\s+", ""]
# Every test here reads a tokenizer.json with the tokenizers library (the llm extra), in this process or
# in the child; the module imports without it (the trained tokenizer is built when a test draws it).
pytestmark = needs("tokenizers")
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-1000, 1000), st.floats(allow_nan=False), st.text(max_size=12)
)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
turns = st.fixed_dictionaries(
    {
        "from": st.sampled_from(["human", "gpt", "system", "user", 3, None]),
        "value": st.one_of(st.text(), trees),
    }
)
chats = st.lists(
    st.one_of(st.fixed_dictionaries({"conversations": st.lists(turns, max_size=4)}), trees), max_size=5
)
nesting = st.builds(
    lambda n, open_, close: open_ * n + close * n,
    st.integers(1, 100_000),
    st.sampled_from(["[", '{"a":']),
    st.sampled_from(["]", "}"]),
)


@cache
def _base() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(tokenizer_json())
    return loaded


def _paths(value: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if not isinstance(value, dict) or len(prefix) >= 3:
        return []
    found = []
    for key, inner in value.items():
        if key in ("vocab", "merges") and prefix:  # replaced whole, never walked item by item
            found.append((*prefix, key))
            continue
        found += [(*prefix, key), *_paths(inner, (*prefix, key))]
    return found


def _replaced(path: tuple[str, ...], value: object) -> bytes:
    document = json.loads(tokenizer_json())
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(document).encode()


splits = st.builds(
    lambda regex, invert: {
        "type": "Split",
        "pattern": {"Regex": regex},
        "behavior": "Isolated",
        "invert": invert,
    },
    st.sampled_from(REGEXES),
    st.booleans(),
)
tokenizers = st.one_of(
    st.builds(_replaced, st.deferred(lambda: st.sampled_from(_paths(_base()))), trees),  # drawn, not imported
    st.builds(_replaced, st.just(("pre_tokenizer",)), splits),
    st.builds(
        _replaced,
        st.just(("model", "vocab")),
        st.dictionaries(st.text(max_size=4), st.integers(-5, 40), max_size=6),
    ),
    st.binary(max_size=64),
    nesting.map(str.encode),
)
datasets = st.one_of(
    chats.map(lambda c: json.dumps(c).encode()), st.binary(max_size=200), nesting.map(str.encode)
)


def _parse(dataset: str, files: dict[str, bytes]) -> None:
    """Parse the campaign with these files: a campaign, or problems at the generate block only."""
    problems: tuple[sch.FieldProblem, ...] = ()
    try:
        sch.parse_campaign(CAMPAIGN % dataset, files=files)
    except sch.CampaignError as exc:
        problems = exc.problems
    assert all(p.path.startswith("jobs[0].generate") for p in problems), problems


@FUZZ
@given(datasets)
def test_any_sharegpt_or_jsonl_bytes_give_prompts_or_problems(data: bytes) -> None:
    prompts, problems = sharegpt_prompts(data, "chats.json", None, None)
    assert prompts or problems
    parse_jsonl(data, "prompts.jsonl")
    _parse(SHAREGPT, {"tok.json": tokenizer_json(), "chats.json": data})


@FUZZ
@given(tokenizers, st.sampled_from([RANDOM, SHAREGPT]))
def test_any_tokenizer_file_gives_a_campaign_or_its_problem(data: bytes, dataset: str) -> None:
    chats = [
        {"conversations": [{"from": "human", "value": "count 12 tokens"}, {"from": "gpt", "value": "ok"}]}
    ]
    _parse(dataset, {"tok.json": data, "chats.json": json.dumps(chats).encode()})
    problem = ""
    try:
        vocabulary = Pinned(data, "tok.json")
        vocabulary.plain_ids()
        vocabulary.decode(vocabulary.encode("the quick brown fox 123 jumps"))
    except TokenizerError as exc:
        problem = str(exc)
    assert not problem or problem.startswith("tok.json: ")


CHILD_FUZZ = settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@CHILD_FUZZ
@given(tokenizers, datasets)
def test_the_child_answers_for_any_files_and_never_stops(
    tmp_path: Path, tokenizer: bytes, data: bytes
) -> None:
    (tmp_path / "tok.json").write_bytes(tokenizer)
    (tmp_path / "chats.json").write_bytes(data)
    problems: tuple[sch.FieldProblem, ...] = ()
    try:
        trio.run(vet_local, CAMPAIGN % SHAREGPT, tmp_path / "campaign.yaml")
    except sch.CampaignError as exc:
        problems = exc.problems
    assert all(p.path.startswith("jobs[0].generate") for p in problems), problems  # never "stopped"
