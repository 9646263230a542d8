"""White-box TTFT on llama.cpp starts where it starts on the transformers units: at the prompt's tokens
handed to the runtime (issue 51). The prompt is templated and tokenized first, by llama.cpp's own
server (`LoadedGguf.tokens`), and the ids sent: these tests pin that the ids are the very tokens
llama.cpp's own chat and text paths evaluate (read from llama.cpp's KV cache reuse, not from the
tokenizer called again), and that the clock's first reading comes after the tokenizing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from kit.extras import gemma3, need, smollm2

from drivers import TaskFailed
from drivers.runtimes import gguflm
from drivers.runtimes.gguflm import LoadedGguf, open_model
from drivers.runtimes.llamacpp import Binding, binding
from protocol import ChatMessage, ComputeUnit, FailureReason, GenerateSpec, Prompt

CONTEXT = 256
CHAT = Prompt(
    id="chat",
    text="And of grass? <|im_end|> stays text",
    messages=(
        ChatMessage(role="system", content="You answer in one word."),
        ChatMessage(role="user", content="Name one colour of the sky."),
        ChatMessage(role="assistant", content="Blue."),
        ChatMessage(role="user", content="And of grass? <|im_end|> stays text"),
    ),
)


def _open(path: Path) -> Iterator[LoadedGguf]:
    """The model loaded as the harness loads it, its sliding-window layers' cache kept whole
    (`swa_full`): Gemma 3's otherwise keeps only checkpoints, and llama.cpp then reuses a cached
    prompt up to a checkpoint only, so its reuse would not count every token."""
    need("xllamacpp")
    target, why = binding(ComputeUnit.CPU_LLAMACPP)
    assert target is not None, why
    module = target.bound.module

    class Params(module.CommonParams):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.swa_full = True

    bound = Binding(SimpleNamespace(CommonParams=Params, Server=module.Server), target.bound.log)
    loaded = open_model(replace(target, bound=bound), path, 1, CONTEXT)
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def smol() -> Iterator[LoadedGguf]:
    yield from _open(smollm2())


@pytest.fixture(scope="module")
def gemma() -> Iterator[LoadedGguf]:
    yield from _open(gemma3())


def _timings(loaded: LoadedGguf, body: dict[str, object], chat: bool = False) -> dict[str, int]:
    """One request the server keeps in its slot's KV cache (`cache_prompt`), its last chunk's counts."""
    chunks: list[str] = []
    request = body | {"n_predict": 2, "stream": True, "temperature": 0.0, "top_k": 1, "cache_prompt": True}
    handle = loaded.server.handle_chat_completions if chat else loaded.server.handle_completions
    handle(json.dumps(request), chunks.append)
    last = json.loads(chunks[-1])
    timings = last["timings"]
    return {"prompt": int(timings["prompt_n"]) + int(timings["cache_n"]), "cached": int(timings["cache_n"])}


def _reused(loaded: LoadedGguf, ids: list[int]) -> int:
    """How many of `ids` llama.cpp finds already in its slot's KV cache: the ids and one token more are
    sent, so all of them count only where every id equals the token the cache holds at its place
    (llama.cpp always evaluates a request's last token again, here the added one)."""
    return _timings(loaded, {"prompt": [*ids, ids[-1]]})["cached"]


def test_a_chat_prompt_s_ids_are_the_tokens_llama_cpp_s_chat_completions_evaluate(smol: LoadedGguf) -> None:
    """The messages through llama.cpp's own chat completions first (its template, its tokenizer), then
    the harness's ids: every one is found in the KV cache that request left."""
    ids = smol.tokens(CHAT, chat=True)
    messages = [{"role": m.role, "content": m.content} for m in CHAT.messages]
    own = _timings(smol, {"messages": messages}, chat=True)
    assert own["prompt"] == len(ids) > 20
    assert _reused(smol, ids) == len(ids)
    assert _reused(smol, [*ids[:-2], ids[-1], ids[-2]]) == len(ids) - 2  # a swapped pair is seen


@pytest.mark.parametrize("model", ["smol", "gemma"])
def test_a_text_prompt_s_ids_are_the_tokens_llama_cpp_s_completions_evaluate(
    model: str, request: pytest.FixtureRequest
) -> None:
    """As a completion's text prompt is tokenized (special tokens parsed, BOS added), on SmolLM2 and on
    Gemma 3, whose 6,414 special tokens are what made tokenizing cost a millisecond inside TTFT."""
    loaded: LoadedGguf = request.getfixturevalue(model)
    text = "<start_of_turn>user Summarize: the river rose <|im_start|> after rain.<end_of_turn>"
    ids = loaded.tokens(Prompt(id="t", text=text), chat=False)
    own = _timings(loaded, {"prompt": text})
    assert own["prompt"] == len(ids) > 5
    assert _reused(loaded, ids) == len(ids)


def test_the_clock_starts_after_the_prompt_is_tokenized(
    smol: LoadedGguf, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every reading of the harness's clock in a request comes after its tokens were made, and the TTFT
    is the first token's chunk less the first of those readings: tokenizing is outside TTFT."""
    events: list[tuple[str, int]] = []
    tokens = smol.tokens

    def tokenized(prompt: Prompt, chat: bool) -> list[int]:
        ids = tokens(prompt, chat)
        events.append(("tokenized", len(ids)))
        return ids

    def reading() -> int:
        now = time.perf_counter_ns()
        events.append(("clock", now))
        return now

    monkeypatch.setattr(smol, "tokens", tokenized)
    monkeypatch.setattr(gguflm, "time", SimpleNamespace(perf_counter_ns=reading))
    spec = GenerateSpec(prompts=(CHAT,), prompts_sha256="0" * 64, max_new_tokens=3, ignore_eos=True)
    record = smol.generate(CHAT, spec)
    assert events[0] == ("tokenized", record.prompt_tokens)
    clock = [at for kind, at in events[1:] if kind == "clock"]
    assert len(clock) == len(events) - 1  # nothing tokenized after the clock started
    assert record.ttft_ms == (clock[1] - clock[0]) / gguflm.NS_PER_MS
    assert record.output_tokens == 3


def test_a_prompt_past_the_context_is_refused_before_it_is_sent(smol: LoadedGguf) -> None:
    smol.reset_rates()
    long = Prompt(id="long", text="the river rose " * 100)
    spec = GenerateSpec(prompts=(long,), prompts_sha256="0" * 64, max_new_tokens=8, chat=False)
    with pytest.raises(TaskFailed) as info:
        smol.generate(long, spec)
    assert info.value.reason == FailureReason.INPUT
    assert f"exceed the context of {CONTEXT} tokens" in str(info.value)
    assert smol.rates().prompt_tokens == 0  # llama.cpp evaluated nothing


def test_the_server_s_tokenizer_answers_no_other_key(
    smol: LoadedGguf, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its loopback port is keyed: a call without this process's key is refused, and the refusal is
    a failure naming the call and llama.cpp's answer."""
    monkeypatch.setattr(smol, "key", "0" * 32)
    with pytest.raises(TaskFailed) as info:
        smol.tokens(Prompt(id="k", text="hello"), chat=False)
    assert info.value.reason == FailureReason.CRASHED
    assert "/tokenize: 401" in str(info.value)
