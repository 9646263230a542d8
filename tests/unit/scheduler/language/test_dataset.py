"""Datasets of generate jobs: random prompts of exact token lengths from a seed, ShareGPT conversations.

The tokenizer is a real one: a byte-level BPE trained with the `tokenizers` library (`lab.bpe`).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from kit.bpe import tokenizer_json

import scheduler as sch
from protocol import GenerateSpec
from protocol.tokenizer import Pinned, TokenizerError, pin, unpack
from scheduler.language import Draws
from scheduler.language.dataset import MAX_INPUT_TOKENS, Lengths

CAMPAIGN = """
name: random
jobs:
  - endpoint: {url: http://127.0.0.1:9/v1, model: tiny}
    generate:
      tokenizer: tok
      dataset: %s
      num_prompts: %d
      max_new_tokens: 32
"""


def _spec(dataset: object, count: int, files: dict[str, bytes] | None = None) -> GenerateSpec:
    files = {"tok": tokenizer_json()} if files is None else files
    campaign = sch.parse_campaign(CAMPAIGN % (json.dumps(dataset), count), files=files)
    generate = campaign.jobs[0].spec.generate
    assert generate is not None
    return generate


def _problems(dataset: object, files: dict[str, bytes] | None = None) -> list[str]:
    with pytest.raises(sch.CampaignError) as info:
        _spec(dataset, 5, files)
    return [f"{p.path}: {p.problem}" for p in info.value.problems]


RANDOM = {
    "random": {
        "input_tokens": {"mean": 60, "stddev": 12},
        "output_tokens": {"mean": 20, "stddev": 5},
        "seed": 7,
    }
}


def test_a_random_dataset_is_the_same_bytes_from_the_same_seed_and_exact_under_its_tokenizer() -> None:
    first, again = _spec(RANDOM, 40), _spec(RANDOM, 40)
    assert first.prompts == again.prompts
    assert first.prompts_sha256 == again.prompts_sha256
    assert (first.dataset_seed, first.prompts_source) == (7, "random:seed=7")
    other = _spec({"random": {**RANDOM["random"], "seed": 8}}, 40)
    assert other.prompts_sha256 != first.prompts_sha256
    vocabulary = Pinned(tokenizer_json(), "tok")
    inputs = [p.input_tokens for p in first.prompts]
    outputs = [p.output_tokens for p in first.prompts]
    for prompt in first.prompts:
        assert len(vocabulary.encode(prompt.text)) == prompt.input_tokens  # exact, re-encoded
        assert 60 - 24 <= (prompt.input_tokens or 0) <= 60 + 24  # within two stddev
        assert 20 - 10 <= (prompt.output_tokens or 0) <= 20 + 10
    assert len(set(inputs)) > 10  # drawn, not constant
    assert len(set(outputs)) > 5
    assert 50 <= sum(x for x in inputs if x) / len(inputs) <= 70
    assert first.tokenizer is not None
    assert first.tokenizer.source().startswith("tokenizer:tok@")
    assert unpack(first.tokenizer) == tokenizer_json()


def test_zero_stddev_gives_every_prompt_the_mean() -> None:
    spec = _spec({"random": {"input_tokens": {"mean": 33}, "output_tokens": {"mean": 9}, "seed": 1}}, 12)
    assert {(p.input_tokens, p.output_tokens) for p in spec.prompts} == {(33, 9)}


def test_the_generator_is_splitmix64_and_draws_within_two_stddev() -> None:
    draws = Draws(0)
    assert draws.next64() == 0xE220A8397B1DCDAF  # splitmix64's published first output for seed 0
    lengths = Lengths(100, 30.0)
    drawn = [lengths.draw(Draws(5), MAX_INPUT_TOKENS)] + [lengths.draw(draws, 1000) for _ in range(2000)]
    assert (min(drawn), max(drawn)) == (40, 160)  # within two stddev: the tails are clipped, not redrawn


def test_sharegpt_conversations_give_their_first_human_turn_and_the_answer_as_reference() -> None:
    data = [
        {
            "id": "c1",
            "conversations": [{"from": "human", "value": "Say hi."}, {"from": "gpt", "value": "Hi there."}],
        },
        {"conversations": [{"from": "gpt", "value": "no question here"}]},
        {
            "conversations": [
                {"from": "system", "value": "Be brief."},
                {"from": "human", "value": "Why?"},
                {"from": "gpt", "value": "Because."},
                {"from": "human", "value": "later turn, not sent"},
            ]
        },
    ]
    files = {"tok": tokenizer_json(), "chats.json": json.dumps(data).encode()}
    spec = _spec({"sharegpt": "chats.json"}, 2, files)
    assert [p.id for p in spec.prompts] == ["c1", "sharegpt-3"]
    first, second = spec.prompts
    assert (first.text, first.reference, first.messages) == ("Say hi.", "Hi there.", ())
    assert [(m.role, m.content) for m in second.messages] == [("system", "Be brief."), ("user", "Why?")]
    vocabulary = Pinned(tokenizer_json(), "tok")
    assert first.output_tokens == len(vocabulary.encode("Hi there."))
    assert spec.prompts_source == "sharegpt:chats.json"
    assert sch.campaign_files(CAMPAIGN % (json.dumps({"sharegpt": "chats.json"}), 2)) == ["tok", "chats.json"]


def test_dataset_problems_are_named_at_their_path() -> None:
    assert [p.split(": ")[0] for p in _problems(RANDOM, {})] == [
        "jobs[0].generate.tokenizer",  # cannot read it (the dataset that needs it is not judged apart)
    ]
    without = CAMPAIGN.replace("      tokenizer: tok\n", "") % (json.dumps(RANDOM), 5)
    with pytest.raises(sch.CampaignError) as info:
        sch.parse_campaign(without)
    assert [p.path for p in info.value.problems] == ["jobs[0].generate.dataset.random"]  # it needs one
    bad = {"random": {"input_tokens": {"mean": 0}, "output_tokens": {"mean": 5, "stddev": -1}, "seed": -2}}
    assert [p.split(":")[0] for p in _problems(bad)] == [
        "jobs[0].generate.dataset.random.seed",
        "jobs[0].generate.dataset.random.input_tokens.mean",
        "jobs[0].generate.dataset.random.output_tokens.stddev",
    ]
    assert _problems({"random": RANDOM["random"]}, {"tok": b"not json"})[0].startswith(
        "jobs[0].generate.tokenizer: tok: not a tokenizer.json"
    )
    assert _problems({"sharegpt": "missing.json"})[0].startswith(
        "jobs[0].generate.dataset.sharegpt: cannot read"
    )
    assert _problems({"other": 1})[0].startswith("jobs[0].generate.dataset: expected one of random, sharegpt")


def test_a_pin_refuses_data_that_is_not_what_it_says() -> None:
    pinned = pin("tok", tokenizer_json())
    noise = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(40_000))  # 1.28 MB of noise
    assert pin("big", noise).data == b""  # too big for an offer: pinned by its digest only
    with pytest.raises(TokenizerError, match="sha256"):
        unpack(pinned.with_(sha256="0" * 64))
    with pytest.raises(TokenizerError, match="zlib"):
        unpack(pinned.with_(data=b"plain"))
