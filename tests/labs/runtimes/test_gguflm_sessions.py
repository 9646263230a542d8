"""White-box sessions (issue 51): a conversation's turns generated one after another in the measuring
child, each turn's prompt carrying the earlier turns with the model's own answers, the think time
between them; the records say their session and turn, and the figures come by turn index."""

from __future__ import annotations

import itertools

from kit.extras import need, smollm2

from drivers import measure
from protocol import ComputeUnit, GenerateSpec, Prompt, TaskSpec

THINK_S = 0.2
NEW_TOKENS = 4


def test_a_white_box_session_carries_the_models_own_answers_turn_by_turn() -> None:
    need("xllamacpp")
    conversations = (
        Prompt(id="c1", text="Name a colour.", follow_ups=("Another one?", "And a third?")),
        Prompt(id="c2", text="Say hello.", follow_ups=("Once more.",)),
    )
    generate = GenerateSpec(
        prompts=conversations,
        prompts_sha256="0" * 64,
        max_new_tokens=NEW_TOKENS,
        ignore_eos=True,
        think_time_s=THINK_S,
    )
    spec = TaskSpec(
        compute_unit=ComputeUnit.CPU_LLAMACPP,
        load_runs=1,
        warmups=1,
        timeout_s=200,
        threads=1,
        generate=generate,
    )
    gen = measure(smollm2(), spec).generation
    assert gen is not None
    assert [(r.prompt_id, r.session, r.turn) for r in gen.records] == [
        ("c1", 0, 1), ("c1", 0, 2), ("c1", 0, 3), ("c2", 1, 1), ("c2", 1, 2),
    ]  # fmt: skip
    for before, after in itertools.pairwise(gen.records):
        if after.session == before.session:
            # the next turn's prompt holds the earlier one and the model's answer to it (4 tokens), then more
            assert after.prompt_tokens > before.prompt_tokens + NEW_TOKENS
            assert after.started_s >= before.started_s + before.e2e_ms / 1e3 + THINK_S
    assert [(t.turn, t.requests) for t in gen.by_turn] == [(1, 2), (2, 2), (3, 1)]
    assert gen.sessions is not None
    assert (gen.sessions.sessions, gen.sessions.completed, gen.sessions.turns_mean) == (2, 2, 2.5)
