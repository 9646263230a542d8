"""A session run's figures from its records: TTFT by turn index, and each session's duration, turns and
tokens (`FORMULAS`: ttft_ms_by_turn and after).

A session replays a conversation turn by turn (`Prompt.turn`): each record carries its session's ordinal
and its turn (`RequestRecord.session`, `turn`); a failed turn ends its session. Pure, like `genstats`,
which calls it, so the submitter derives these figures again from the raw records.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from protocol.generation import GenerateSpec, RequestRecord, SessionStats, TurnStats
from protocol.stats import summarize


def by_turn(records: Sequence[RequestRecord]) -> tuple[TurnStats, ...]:
    """One `TurnStats` per turn index the records reached, in order (() for a run without sessions)."""
    turns: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.turn is not None:
            turns[r.turn].append(r)
    out = []
    for k in sorted(turns):
        ok = [r for r in turns[k] if r.error is None]
        out.append(
            TurnStats(
                turn=k,
                requests=len(turns[k]),
                errors=len(turns[k]) - len(ok),
                ttft_ms=summarize([r.ttft_ms for r in ok if r.ttft_ms is not None]),
                prompt_tokens_mean=sum(r.prompt_tokens for r in ok) / len(ok) if ok else 0.0,
            )
        )
    return tuple(out)


def sessions_of(records: Sequence[RequestRecord], spec: GenerateSpec) -> SessionStats | None:
    """The run's sessions, each from its records: None for a run without sessions."""
    grouped: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.session is not None:
            grouped[r.session].append(r)
    if not grouped:
        return None
    asked = {p.id: p.turns() for p in spec.prompts}
    done, completed, durations, prompt_in, output = [], 0, [], [], []
    for turns in grouped.values():
        ok = [r for r in turns if r.error is None]
        wanted = asked.get(turns[0].prompt_id, len(turns))
        done.append((len(ok), wanted))
        completed += len(ok) == wanted
        start = min(r.started_s for r in turns)
        durations.append(max(r.started_s + r.e2e_ms / 1e3 for r in turns) - start)
        prompt_in.append(sum(r.prompt_tokens for r in ok))
        output.append(sum(r.output_tokens for r in ok))
    n = len(grouped)
    return SessionStats(
        sessions=n,
        completed=completed,
        turns_mean=sum(d for d, _ in done) / n,
        turns_asked_mean=sum(w for _, w in done) / n,
        duration_s=summarize(durations),
        prompt_tokens_mean=sum(prompt_in) / n,
        output_tokens_mean=sum(output) / n,
    )


def ttft_by_turn_text(turns: Sequence[TurnStats]) -> str:
    """TTFT medians by turn as one line, `1:120.3 2:45.1 ...` (a turn no request succeeded in: `-`)."""
    return " ".join(f"{t.turn}:{t.ttft_ms.median:.1f}" if t.ttft_ms.n else f"{t.turn}:-" for t in turns)


__all__ = ["by_turn", "sessions_of", "ttft_by_turn_text"]
