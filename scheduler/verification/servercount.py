"""A load's count held to the server's own: no more requests or tokens than the server saw.

Where a job's endpoint names the server's Prometheus metrics (`endpoint.metrics_url`), this submitter
reads them itself, from its own socket, before the job is dealt (before its floor probe) and again
when each result arrives (`node.submitter.floors`); the rise of a counter between the two reads is
what the server did in the meantime, for everyone. A result is refused `invalid` when its successful
records claim more than that rise plus `slack` (`count_problems`), naming the field, the figure, the
counter and its rise. A job's results are held together: each with the job's results accepted before
it (a fleet's members, whose merged row is made of those; a job's devices or replicas), every one
sent after the first read, so the merged row never counts more than the server saw.

What is counted (`COUNTERS`), per server family, only where the counter's meaning is a sound upper
bound on what an honest client records:

- requests, a successful record each: vLLM `vllm:request_success_total` (every finish reason summed),
  SGLang `sglang:num_requests_total`, TGI `tgi_request_success`;
- generated tokens, a record's `output_tokens` (one where the client counted them itself, without the
  server's usage: a client's count of the text is not the server's): vLLM
  `vllm:generation_tokens_total`, SGLang `sglang:generation_tokens_total`, llama.cpp
  `llamacpp:tokens_predicted_total`;
- prompt tokens, a record's `prompt_tokens`: llama.cpp `llamacpp:prompt_tokens_total` plus
  `llamacpp:prompt_tokens_cached_total` (the first excludes cached tokens, so it is used only with the
  second). vLLM's and SGLang's prompt counters are not used: whether they count a cached prefix
  differs between their versions, and a bound that an honest record can pass is no bound.

Every sample of a counter is summed (label sets: a model name, a finish reason), so a server with
several models bounds the job by all of them: an upper bound, never a count to meet.

The cheater's view: a worker sees its task, the server, and (it can reach the server) possibly the
same metrics; it chooses every record it signs. It does not see when this submitter read the counter,
nor its figures, and it cannot lower a counter (a Prometheus counter only rises; a restart that resets
it makes the rise negative, and then nothing is read). Padding a closed loop up to its slot bound with
plausible records at the floor (the `serverfloor` gap) adds requests and tokens the server never
counted. What it can still do: on a server shared with strangers, the rise counts the strangers too,
so a liar may claim up to what they sent (the rule is "no more than the server saw", never "as many
as it saw"); in a fleet, a member that reports first may take the others' share of the rise, and a
member that reports after it is then the one refused (the submitter cannot tell which member's
records were not sent; the merged row still counts no more than the server did). A liar that marks
its padded records as counted by itself is held to one generated token each.

The slack (`slack_for`): a request's counter may be written a moment after its last byte reached the
client (llama.cpp counts a slot's generated tokens after it sent the final chunk: `send_final_response`
then `metrics.on_prediction`), so at most one request per slot of the result just arrived may be
missing from the rise when it is read (those accepted before were read again since): `slots`
(`concurrency`) requests and `slots x max_new_tokens` generated tokens; an open loop's last requests
ended at its client before its result was signed and sent, so the same allowance covers its race.
Prompt tokens need none: the one prompt counter read (llama.cpp's) is written when the prompt is
evaluated, before the request's first token is sent (`metrics.on_prompt_eval` at `n_decoded == 1`),
so a record with a first token was counted before it ended. The submitter's own floor probe requests
fall inside the rise and are left in it (five requests of one token: a looser bound by five, never a
tighter one that an honest run could fail).

The count is this submitter's own observation, like the floor: `sark-node verify` cannot read a
server's counters of the past, so a bundle's proof re-derives the rows from the records without it
(a result refused here is not in the bundle's rows; one accepted passed it).

Untrusted text: `parse_counters` reads at most `MAX_METRICS_BYTES` and `MAX_METRICS_LINES`, takes
only the counters it knows, each declared `# TYPE ... counter` and each value a finite number at least
zero, and never raises: a failure is a `CountRead` with its reason (the job then goes on with the
floor alone, the reason in the `server_count` event).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, Literal

from protocol import FailureReason, GenerateSpec, GenerationStats, Measurement, TaskSpec
from scheduler.verification.figures import Refusal

MAX_METRICS_BYTES: Final = 2 * 1024 * 1024
"""A metrics page read, at most: vLLM's with its histograms is about 40 KiB a model."""
MAX_METRICS_LINES: Final = 50_000
Quantity = Literal["requests", "generation_tokens", "prompt_tokens"]


@dataclass(frozen=True)
class Counter:
    """One quantity as one server family counts it: the sum of `names`' samples (all of them needed)."""

    quantity: Quantity
    names: tuple[str, ...]


COUNTERS: Final[tuple[Counter, ...]] = (
    Counter("requests", ("vllm:request_success_total",)),
    Counter("requests", ("sglang:num_requests_total",)),
    Counter("requests", ("tgi_request_success",)),
    Counter("generation_tokens", ("vllm:generation_tokens_total",)),
    Counter("generation_tokens", ("sglang:generation_tokens_total",)),
    Counter("generation_tokens", ("llamacpp:tokens_predicted_total",)),
    Counter("prompt_tokens", ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total")),
)
"""Each quantity's counters, the first one a page has per quantity used (module docstring)."""

_SAMPLE: Final = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$")
_TYPE: Final = re.compile(r"^#[ \t]+TYPE[ \t]+([A-Za-z_:][A-Za-z0-9_:]*)[ \t]+(\w+)[ \t]*$")


@dataclass(frozen=True)
class CountRead:
    """A metrics page read: each known quantity's value and the counters it came from, or why none.

    Attributes:
        values: quantity -> (the summed value, the counter names that gave it).
        error: why nothing was read ("" when `values` holds at least one quantity).
    """

    values: dict[Quantity, tuple[float, str]] = field(default_factory=dict)
    error: str = ""


def parse_counters(text: bytes) -> CountRead:
    """The known counters of a Prometheus text page (module docstring); never raises."""
    if len(text) > MAX_METRICS_BYTES:
        return CountRead(error=f"the metrics page passed {MAX_METRICS_BYTES} bytes")
    try:
        page = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        return CountRead(error=f"the metrics page is not UTF-8 ({exc.reason} at byte {exc.start})")
    lines = page.split("\n")
    if len(lines) > MAX_METRICS_LINES:
        return CountRead(error=f"the metrics page has more than {MAX_METRICS_LINES} lines")
    wanted = {name for c in COUNTERS for name in c.names}
    types: dict[str, str] = {}
    sums: dict[str, float] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if line.startswith("#"):
            declared = _TYPE.match(line)
            if declared is not None:
                types[declared[1]] = declared[2]
            continue
        sample = _SAMPLE.match(line) if line else None
        if sample is None or sample[1] not in wanted:
            continue
        name = sample[1]
        kind = types.get(name, types.get(name.removesuffix("_total")))
        if kind != "counter":
            declared_as = kind or "without a TYPE"
            return CountRead(error=f"line {number}: {name} is declared {declared_as}, not a counter")
        try:
            value = float(sample[3])
        except ValueError:
            return CountRead(error=f"line {number}: {name}'s value {sample[3][:40]!r} is not a number")
        if not math.isfinite(value) or value < 0:
            return CountRead(error=f"line {number}: {name}'s value {value!r} is no counter's")
        sums[name] = sums.get(name, 0.0) + value
    values: dict[Quantity, tuple[float, str]] = {}
    for counter in COUNTERS:
        if counter.quantity not in values and all(n in sums for n in counter.names):
            values[counter.quantity] = (sum(sums[n] for n in counter.names), " + ".join(counter.names))
    if not values:
        return CountRead(error="the metrics page has none of the counters this submitter reads")
    return CountRead(values)


@dataclass(frozen=True)
class ServerCount:
    """What the server counted between this submitter's two reads: each quantity's rise, its counter,
    and where it was read (for a refusal)."""

    rises: dict[Quantity, float]
    names: dict[Quantity, str]
    url: str


def count_rise(before: CountRead, after: CountRead, url: str) -> ServerCount | str:
    """The rise of every quantity both reads have, or why there is none (a read failed, or a counter
    fell: the server restarted between the reads)."""
    if before.error or after.error:
        return before.error or after.error
    rises: dict[Quantity, float] = {}
    names: dict[Quantity, str] = {}
    for quantity, (was, name) in before.values.items():
        now = after.values.get(quantity)
        if now is None or now[1] != name:
            continue
        if now[0] < was:
            return f"{name} fell from {was:g} to {now[0]:g} between the reads (the server restarted)"
        rises[quantity], names[quantity] = now[0] - was, name
    if not rises:
        return "the two reads share no counter"
    return ServerCount(rises, names, url)


@dataclass(frozen=True)
class Claimed:
    """What a load's successful records claim the server did, per quantity."""

    requests: int = 0
    generation_tokens: int = 0
    prompt_tokens: int = 0

    def __add__(self, other: Claimed) -> Claimed:
        return Claimed(
            self.requests + other.requests,
            self.generation_tokens + other.generation_tokens,
            self.prompt_tokens + other.prompt_tokens,
        )

    def of(self, quantity: Quantity) -> int:
        return int(getattr(self, quantity))


def claimed(m: Measurement) -> Claimed:
    """The successful requests and their tokens of every load of `m` (a search's every level)."""
    loads: list[GenerationStats] = [m.generation] if m.generation is not None else []
    if m.capacity is not None:
        loads = [level.generation for level in m.capacity.levels]
    total = Claimed()
    for stats in loads:
        ok = [r for r in stats.records if r.error is None]
        generated = sum(1 if r.tokens_counted else r.output_tokens for r in ok)
        total += Claimed(len(ok), generated, sum(r.prompt_tokens for r in ok))
    return total


def slack_for(spec: GenerateSpec, slots: int) -> Claimed:
    """The requests (and their tokens) a load of `slots` may have ended before the server counted them
    (module docstring)."""
    return Claimed(slots, slots * spec.max_new_tokens, 0)


def count_problems(
    claims: Claimed, count: ServerCount | None, slack: Claimed, before: Claimed | None = None, who: str = ""
) -> Iterator[str]:
    """The first quantity whose claim (with `before`: the members of the job accepted before this one)
    passes the server's rise plus `slack`, named with the figures; nothing without a count."""
    if count is None:
        return
    for quantity, rise in sorted(count.rises.items()):
        total = claims.of(quantity) + (before.of(quantity) if before is not None else 0)
        allowed = rise + slack.of(quantity)
        if total > allowed:
            field_name = _FIELDS[quantity]
            with_others = ""
            if before is not None and before.of(quantity):
                with_others = f" (with the {before.of(quantity)} of the job's results accepted before it)"
            by = f" ({who})" if who else ""
            yield (
                f"{field_name}: {total}{with_others}, more than the server counted: {count.names[quantity]} "
                f"rose by {rise:g} between this submitter's reads of {count.url} (plus a slack of "
                f"{slack.of(quantity)} for requests the server had not counted yet){by}"
            )
            return


def within_count(
    figures: Measurement, spec: TaskSpec, signed: TaskSpec | None, count: ServerCount, before: Claimed
) -> Measurement | Refusal:
    """The figures unchanged when their successful records, with `before` (the job's results accepted
    before them), claim no more than the server's `count` plus the slack of this load's slots, else
    the refusal naming the quantity; `signed`: the offer's spec (a fleet member's deal names it).
    The submitter's verdict and a bundle's proof both judge by this."""
    generate = spec.generate
    if generate is None:
        return figures
    deal = signed.generate.deal if signed is not None and signed.generate is not None else None
    who = f"fleet member {deal.member} of {deal.size}" if deal is not None else ""
    # the results accepted before were counted when they arrived: only this one's last requests race
    slack = slack_for(generate, generate.concurrency)
    problem = next(count_problems(claimed(figures), count, slack, before, who), None)
    return figures if problem is None else Refusal(FailureReason.INVALID, problem)


_FIELDS: Final[dict[Quantity, str]] = {
    "requests": "generation.records (successful)",
    "generation_tokens": "generation.records[].output_tokens (summed)",
    "prompt_tokens": "generation.records[].prompt_tokens (summed)",
}


__all__ = [
    "COUNTERS",
    "MAX_METRICS_BYTES",
    "MAX_METRICS_LINES",
    "Claimed",
    "CountRead",
    "Counter",
    "Quantity",
    "ServerCount",
    "claimed",
    "count_problems",
    "count_rise",
    "parse_counters",
    "slack_for",
    "within_count",
]
