"""Sessions in a dataset (issue 51): `turns:` beside a ShareGPT or OpenAI-messages file, or a random set,
makes each conversation's later user turns its `follow_ups`; the first turn alone stays the default.

The tokenizer is a real one (`kit.bpe`), as in `test_dataset`.
"""

from __future__ import annotations

import json

import pytest
from kit.bpe import tokenizer_json

import scheduler as sch
from protocol import GenerateSpec
from protocol.generation import MAX_TURNS

CAMPAIGN = """
name: sessions
jobs:
  - endpoint: {url: http://127.0.0.1:9/v1, model: tiny}
    generate:
      tokenizer: tok
      dataset: %s
      max_new_tokens: 32
      %s
"""

CHATS = [
    {
        "id": "c1",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Say hi."},
            {"from": "gpt", "value": "Hi there."},
            {"from": "human", "value": "Again?"},
            {"from": "gpt", "value": "the dataset's answer, never sent"},
            {"from": "human", "value": "Third."},
        ],
    },
    {"id": "c2", "conversations": [{"from": "human", "value": "One turn only."}]},
]
MESSAGES = [
    {
        "id": "m1",
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
    },
    {"id": "m2", "messages": [{"role": "user", "content": "d"}]},
]


def _spec(dataset: object, extra: str = "", files: dict[str, bytes] | None = None) -> GenerateSpec:
    files = {"tok": tokenizer_json(), "chats.json": json.dumps(CHATS).encode()} | (files or {})
    campaign = sch.parse_campaign(CAMPAIGN % (json.dumps(dataset), extra), files=files)
    generate = campaign.jobs[0].spec.generate
    assert generate is not None
    return generate


def _problems(dataset: object, extra: str = "") -> list[str]:
    with pytest.raises(sch.CampaignError) as info:
        _spec(dataset, extra)
    return [f"{p.path}: {p.problem}" for p in info.value.problems]


def test_the_first_turn_alone_stays_the_default() -> None:
    spec = _spec({"sharegpt": "chats.json"})
    assert [p.follow_ups for p in spec.prompts] == [(), ()]
    assert not spec.sessions()


def test_turns_all_keeps_every_later_user_turn_and_none_of_the_datasets_answers() -> None:
    spec = _spec({"sharegpt": "chats.json", "turns": "all"}, "think_time_s: 0.5")
    first, second = spec.prompts
    assert (first.text, first.follow_ups, first.reference) == ("Say hi.", ("Again?", "Third."), "Hi there.")
    assert second.follow_ups == ()
    assert spec.sessions()
    assert spec.think_time_s == 0.5
    assert "never sent" not in json.dumps(spec.model_dump(mode="json"))
    assert _spec({"sharegpt": "chats.json", "turns": 2}).prompts[0].follow_ups == ("Again?",)


def test_the_openai_messages_layout_reads_as_json_or_jsonl() -> None:
    lines = "\n".join(json.dumps(m) for m in MESSAGES).encode()
    for data in (json.dumps(MESSAGES).encode(), lines):
        spec = _spec({"sharegpt": "m.jsonl", "turns": "all"}, files={"m.jsonl": data})
        assert [(p.id, p.text, p.follow_ups, p.reference) for p in spec.prompts] == [
            ("m1", "a", ("c",), "b"),
            ("m2", "d", (), None),
        ]


def test_a_random_set_with_turns_is_a_synthetic_session_set_from_its_seed() -> None:
    random = {"input_tokens": {"mean": 12}, "output_tokens": {"mean": 4}, "seed": 3}
    spec = _spec({"random": random, "turns": 3})
    assert len(spec.prompts) == 100
    assert all(len(p.follow_ups) == 2 for p in spec.prompts)
    assert spec.prompts == _spec({"random": random, "turns": 3}).prompts  # the same bytes again
    assert next(p.text for p in _spec({"random": random}).prompts) == spec.prompts[0].text  # turn 1 alike


def test_sessions_refuse_what_they_cannot_replay() -> None:
    assert any("dataset.turns" in p for p in _problems({"sharegpt": "chats.json", "turns": 0}))
    assert any("dataset.turns" in p for p in _problems({"sharegpt": "chats.json", "turns": MAX_TURNS + 1}))
    random = {"input_tokens": {"mean": 12}, "output_tokens": {"mean": 4}}
    assert any("dataset.turns" in p for p in _problems({"random": random, "turns": "all"}))
    assert any("chat: false" in p for p in _problems({"sharegpt": "chats.json", "turns": 2}, "chat: false"))
    capacity = "capacity: {slo: {ttft_ms: 100}, max_concurrency: 4}"
    assert any("capacity" in p for p in _problems({"sharegpt": "chats.json", "turns": 2}, capacity))
    assert any("think_time_s" in p for p in _problems({"sharegpt": "chats.json"}, "think_time_s: 1"))
    assert any("dataset" in p for p in _problems({"sharegpt": "chats.json", "extra": 1}))
