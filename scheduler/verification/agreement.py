"""When replicas of one task on one device class agree, and how a disagreement is settled.

Each replica is one peer's accepted result for the same task (same model, spec and class), reduced to
the figure the row shows (the median of its process medians, as `protocol.derive` computes it), its
relative standard error (from the scatter of its process medians) and its outputs' fingerprint. The
rule:

    two replicas agree  <=>  same fingerprint  and  |a - b| / min(a, b)  <=  band
    band                 =   K * sqrt(2 * (s_class^2 + BOARD^2)), never over CEILING (50 %)
    s_class              =   e_class / sqrt(P)     (P: the task's processes)
    e_class              =   median process error of the class's honest replicas in the submitter's
                             store (POOL_MIN of them on), else PRIOR; a single-process replica's
                             error is its distance from the others of its agreeing group (`pair_error`)

A replica's own spread never widens the band: its process medians are its own word, and a cheater that
scatters them (some fast, some true) would choose its own tolerance. The class's error is what the
submitter saw of replicas that agreed with an independent majority, kept in its store across campaigns
(`pool_error`), and a replica whose own spread is over FAR times its class's (never under FAR times
the board's, `vouching_limit`) cannot vouch for anything (it is never a member of a majority, and the
reason says so). That spread is read from the processes its figure rests on (`core_spread`: the
majority of its process medians nearest its figure, the median), so that a burst of other work that
slowed one process whole (README's one-machine lab beside other sessions' bursty work: process medians
1.63, 6.25 and 1.56 ms, a spread of 119 % against the class's 5.4 %, its figure 1.63 ms within 4 % of
its partner's) does not bar a figure the burst did not move. The cheater's view: a worker chooses
every process median it reports, so it chooses its figure; the figure is judged against an independent
replica within the class's band, which no replica's spread widens. Scattering a minority of its
processes moves neither its figure nor the band; it could as well have sent them equal, so the core
gives it nothing it did not have. A replica whose figure's own processes scatter (1, 2 and 3 ms) is
still barred. Only replicas whose whole spread is within FAR of the class's teach the class its error
(`settling`): a burst's process does not widen the band of later campaigns.

Why it holds on this machine. Process medians of one model scatter with a CV of 2.4 % (ResNet18,
1 thread), 6.0 % (MobileNetV2) and 7.4 % (tiny-BERT) when quiet (../shared/notes/measurement.md,
"Noise"); the submitter sees that scatter in every honest replica's processes and pools it over the
class's replicas (three processes estimate it poorly alone; the median over a class does not), and
before it has POOL_MIN of them it assumes the noisiest of those (PRIOR). K =
3.5 standard errors of a difference keeps honest pairs together (about 1 pair in 2,000 apart by
noise alone); BOARD = 1 % is what one replica's processes cannot see, devices of one class
differing by about that much (clock bins, memory timings), added to each replica's error, so the
band is never under 5 % (it was a 4 % floor beside the processes' error, which flagged honest
replicas of a quiet class running many processes: 1.2 % of them at 7 processes, 0.3 % now). A peer
that reports 0.9x its latency is then caught in one comparison where the class is quiet (2.4 %:
every cheat of 0.5-0.9x) and may pass one where process medians scatter by 6 % or more; there,
the offsets each settlement hands its peer's record (`Settlement.offsets`,
`reputation.PeerRecord.biased`) catch it over a few tasks. The row says the band it was judged
with, and benchmarks/replication_sim.py gives the shares per noise level.

Settling: two replicas that disagree ask one more, once; the largest group of mutually agreeing
replicas that is a strict majority wins (of two such groups, the tighter: a third replica between an
honest one and a cheater agrees with both, and sits closer to the honest one); its members are
`replicated k/n` and the others outliers with their figure beside the agreed one; with no majority
the task is `disagreed` and no figure is shown as verified. A peer caught more often than it agreed
(`reputation.PeerRecord.distrusted`) is never a member of a majority: two cheaters of one class that
meet cannot outvote the truth once either has met an honest peer before.

A timed closed loop's replicas agree on its pace too (`pace_of`): the slot time each recorded request
took, its slots x the run's duration (the task's, not the worker's) over its records. A gray-box
closed loop's records are held by nothing else of the worker's choosing alone: its server is its own,
so no floor or count is taken of it (`serverfloor`), and the slot bound divides by its records' own
shortest E2E. Padding such a loop while keeping its median (as many records of half a microsecond as
it has real ones: none is in flight as long as the overlap tolerance, so the slots hold them) doubled
its count and passed replication on the median alone. Its pace is then half the honest replica's, a
figure its worker cannot move without sending the requests: its slots and duration are the task's,
and each record it adds lowers it. The cheater's view: it sees its own records and deal, not the other
replica's, and chooses its count; a count within the band of the class's (plus one request a slot, the
loop's last being cut at the duration by either) is all padding can buy. The paces of two honest
servers of one class differ as their mean E2E do (a slow request moves the mean, not the median): a
replica slowed so is an outlier of a third replica's majority, or the task `disagreed`, never verified
on a count no one else reached.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from protocol import Measurement, TaskSpec
from protocol.genstats import outputs_fingerprint

BOARD: Final = 0.01
"""How far apart devices of one class sit (clock bins, memory timings): each replica's figure is off
its class's by this much on top of its own processes' error, which they cannot see."""
"""The smallest band: differences between devices of one class that one replica cannot see."""
K: Final = 3.5
"""The band in standard errors of the difference of two replicas' figures."""
POOL_MIN: Final = 10
"""Honest replicas of a class before its pooled error replaces PRIOR."""
POOL_KEEP: Final = 200
"""The most recent honest replicas' errors a class's pool keeps (the store keeps no more)."""
PRIOR: Final = 0.093
"""A class's process error before its pool has POOL_MIN replicas: sqrt(pi/2) x the CV of process
medians of the noisiest model measured on this machine (tiny-BERT, 7.4 %): the band is then 26 % at
3 processes, so a 0.7x claim (43 % apart) never agrees, and an honest pair on a noisy model rarely
disagrees."""
FAR: Final = 4.0
"""A replica whose own spread exceeds FAR times its class's (never under FAR times the board's,
`vouching_limit`) cannot vouch for anything: its figure is its own word within a range wider than the
class ever shows."""
CEILING: Final = 0.5
"""The widest band: replicas whose processes scatter so much that K standard errors exceed it (a
loaded machine: process medians 1.5 ms and 9 ms) are held to 50 %, so a cheat of 2x or more never
agrees with an honest replica however noisy both are; honest replicas that noisy may then
disagree, which is the truth about them (a third replica, or `disagreed`)."""


@dataclass(frozen=True)
class Replica:
    """One peer's accepted result of a replicated task.

    Attributes:
        peer_id: the worker.
        median_ms: the figure its row shows (median of process medians).
        spread: the relative standard error of its figure from all its process medians (`spread_of`).
        fingerprint: its outputs' fingerprint ("" when the task has none).
        core: the same from the processes its figure rests on (`core_spread`); None: `spread`.
        pace_ms: a timed closed loop's slot time a recorded request (`pace_of`); None for any other
            task, or a result accepted before it was kept.
        pace_cut: how much the duration's cut can move that pace, relatively (`Pace.cut`).
    """

    peer_id: str
    median_ms: float
    spread: float
    fingerprint: str = ""
    core: float | None = None
    pace_ms: float | None = None
    pace_cut: float = 0.0

    @property
    def vouching_spread(self) -> float:
        """The spread that says whether it can vouch (`barred`): of the processes its figure rests on
        (`core`), else its whole spread (a replica given no core: one of before)."""
        return self.spread if self.core is None else self.core


def spread_of(process_medians: Sequence[float]) -> float:
    """The relative standard error of a replica's figure, the median of its process medians:
    sqrt(pi/2) x their standard deviation / sqrt(P), over the figure (0 with fewer than two)."""
    if len(process_medians) < 2:
        return 0.0
    middle = statistics.median(process_medians)
    error = math.sqrt(math.pi / 2) * statistics.stdev(process_medians) / math.sqrt(len(process_medians))
    return error / middle if middle > 0 else 0.0


def core_spread(process_medians: Sequence[float]) -> float:
    """`spread_of` of the processes a replica's figure rests on: the smallest majority of its process
    medians (P // 2 + 1) nearest their median, which sets the figure whatever the others show (two
    of three, three of five). With fewer than three processes, all of them."""
    if len(process_medians) < 3:
        return spread_of(process_medians)
    middle = statistics.median(process_medians)
    nearest = sorted(process_medians, key=lambda m: abs(m - middle))[: len(process_medians) // 2 + 1]
    return spread_of(nearest)


def replica_of(peer_id: str, m: Measurement, spec: TaskSpec) -> Replica:
    """A peer's accepted result as a replica: the figure its row shows, its spread and its outputs'
    fingerprint (a local model's greedy generation: its texts; else the fingerprints its processes
    agreed on, joined); a peaks task's figure as the time its unit takes per 10^12 operations (or
    bytes), whatever size each replica's sweep settled on. The submitter settles with it and
    `sark-node verify` recomputes it."""
    fingerprint = "+".join(sorted(set(m.output_fingerprints)))  # processes of one worker agree
    local = spec.generate is not None and spec.generate.endpoint is None
    if m.generation is not None and local:  # greedy on its own model: the texts are the outputs
        fingerprint = outputs_fingerprint(m.generation.records)
    run = m.peak_run
    if run is not None and run.peak.per_s > 0:  # a peaks figure: ms per 10^12 operations or bytes, so
        return Replica(peer_id, 1e3 / run.peak.per_s, 0.0, fingerprint)  # replicas agree on the figure
    medians = m.process_medians_ms
    figure, spread, core = m.inference_ms.median, spread_of(medians), core_spread(medians)
    pace = pace_of(m, spec)
    if pace is None:
        return Replica(peer_id, figure, spread, fingerprint, core)
    return Replica(peer_id, figure, spread, fingerprint, core, pace.ms, pace.cut)


class Pace(NamedTuple):
    """A timed closed loop's slot time per recorded request (ms), and how much the duration's cut can
    move it: each slot's last request starts before the end or does not, one request a slot, so
    `cut` is its slots over its records, relatively."""

    ms: float
    cut: float


def pace_of(m: Measurement, spec: TaskSpec) -> Pace | None:
    """A timed closed loop's pace: its slots x its duration, both as the task asks (a lone loop of
    `concurrency` slots for `duration_s`), over its records (each a request its worker says it sent,
    failed ones too). None for any other load (an open loop's count is its schedule's, a search's
    levels are its own, a fleet's members are held to each other) and for a task with no load."""
    load = spec.generate
    if load is None or m.generation is None or load.duration_s is None or not m.generation.records:
        return None
    if load.request_rate is not None or load.capacity is not None or load.fleet_size is not None:
        return None
    requests = len(m.generation.records)
    return Pace(load.concurrency * load.duration_s * 1e3 / requests, load.concurrency / requests)


def comparison_error(class_spread: float) -> float:
    """The standard error of the difference (log of the ratio) of two replicas' figures of a class
    whose spread is `class_spread`: each replica's error and its board's (`BOARD`)."""
    return math.sqrt(2 * (class_spread**2 + BOARD**2))


def band(class_spread: float) -> float:
    """The relative difference within which two replicas of a class agree: K standard errors of
    their difference (`comparison_error`), from the class's spread as the submitter knows it
    (`pooled_spread`), never from either replica's own."""
    return min(CEILING, K * comparison_error(class_spread))


def agree(a: Replica, b: Replica, class_spread: float) -> bool:
    """Whether two replicas agree on the figure, on the outputs and, for a timed closed loop, on its
    pace (`paces_agree`)."""
    return _same_figure(a, b, class_spread) and paces_agree(a, b, class_spread)


def _same_figure(a: Replica, b: Replica, class_spread: float) -> bool:
    """Whether two replicas agree on the outputs and on the figure, within the class's band."""
    if a.fingerprint != b.fingerprint:
        return False
    low = min(a.median_ms, b.median_ms)
    return low > 0 and abs(a.median_ms - b.median_ms) / low <= band(class_spread)


def paces_agree(a: Replica, b: Replica, class_spread: float) -> bool:
    """Whether two replicas' paces (`pace_of`) are within the class's band of each other, plus what the
    duration's cut can move the smaller count by (`Pace.cut`: of the two, the larger; a padded count
    only makes its own smaller). Replicas without a pace (any other task) agree on it."""
    if a.pace_ms is None or b.pace_ms is None:
        return True
    low = min(a.pace_ms, b.pace_ms)
    if low <= 0:
        return False
    return abs(a.pace_ms - b.pace_ms) / low <= band(class_spread) + max(a.pace_cut, b.pace_cut)


class Outcome(enum.StrEnum):
    """How a row was verified."""

    REPLICATED = "replicated"  # a strict majority of at least two replicas agreed
    SINGLE = "single"  # one result: not verified
    DISAGREED = "disagreed"  # no strict majority agreed
    PENDING = "pending"  # two replicas disagreed: one more is needed
    UNVERIFIABLE = "unverifiable"  # its named reference gave no result, and no fallback is allowed


@dataclass(frozen=True)
class Settlement:
    """The verdict over a task's replicas.

    Attributes:
        outcome: how the row is verified.
        agreed: the peers of the agreeing majority (empty unless replicated).
        outliers: each peer outside it with its figure.
        figure_ms: the agreed figure (median of the majority's), None unless replicated.
        reason: for people: who disagreed with whom, and the band.
        offsets: each timed replica's log of its figure over the others' (the rest of the majority
            for a member, the agreed figure for an outlier of the same outputs): what
            `reputation.PeerRecord` adds up to find a peer that is off its class for good.
        reference: the reference device that vouched for the agreed figure (`references`), or "".
        error: where a reference vouched, the standard error of each offset against it
            (`comparison_error` of the class's spread: `offsets.ReferenceOffsets`); else 0.
    """

    outcome: Outcome
    agreed: tuple[str, ...] = ()
    outliers: tuple[tuple[str, float], ...] = ()
    figure_ms: float | None = None
    reason: str = ""
    offsets: tuple[tuple[str, float], ...] = ()
    reference: str = ""
    error: float = 0.0

    def offset_of(self, peer_id: str) -> float | None:
        """The peer's offset in this settlement, if it had one."""
        return next((o for p, o in self.offsets if p == peer_id), None)

    def label(self, total: int) -> str:
        """`replicated k/n`, `single`, `disagreed` or `pending` as a row says it."""
        if self.outcome == Outcome.REPLICATED:
            return f"replicated {len(self.agreed)}/{total}"
        return self.outcome.value


def _groups(
    replicas: Sequence[Replica], class_spread: float, distrusted: Mapping[str, str]
) -> list[list[Replica]]:
    """Every maximal set of trusted replicas that agree pairwise, largest first and, among groups of
    one size, tightest first (the smallest relative range: a replica between an honest one and a
    cheater agrees with both, and sits closer to the honest one). n is small: at most a few."""
    trusted = [r for r in replicas if r.peer_id not in distrusted]
    found: list[list[Replica]] = []
    for seed in trusted:
        group = [seed]
        for other in trusted:
            if other is not seed and all(agree(other, member, class_spread) for member in group):
                group.append(other)
        if {r.peer_id for r in group} not in [{r.peer_id for r in g} for g in found]:
            found.append(group)
    return sorted(found, key=lambda g: (-len(g), _range(g)))


def _range(group: Sequence[Replica]) -> float:
    figures = [r.median_ms for r in group]
    return (max(figures) - min(figures)) / min(figures) if min(figures) > 0 else math.inf


def settle(
    replicas: Sequence[Replica],
    wanted: int,
    class_spread: float = PRIOR / math.sqrt(3),
    distrusted: Mapping[str, str] | None = None,
) -> Settlement:
    """The verdict once `replicas` have arrived for a task that asked for `wanted` of them.

    One replica is `single`. A strict majority (more than half of those that arrived, at least two)
    that agrees pairwise makes the row `replicated` (of two such groups, the tighter); without one,
    the first time (as many as were wanted arrived) is `pending`: one more replica is asked, once;
    after it, `disagreed`, and a replica whose outputs differ from a strict majority's is an outlier
    in either case (`_wrong_outputs`). `class_spread` is the class's spread as the submitter knows
    it (`pooled_spread`; the default: PRIOR at 3 processes); `distrusted` peers, each with why
    (`reputation.distrusted`), and replicas whose own spread is far over the class's (`barred`)
    are never members of a majority, and their reasons say why.
    """
    distrusted = barred(replicas, class_spread, distrusted or {})
    if len(replicas) <= 1:
        return Settlement(Outcome.SINGLE, reason="one result: not verified")
    groups = _groups(replicas, class_spread, distrusted) or [[]]
    group = groups[0]
    if len(group) >= 2 and 2 * len(group) > len(replicas):
        inside = {r.peer_id for r in group}
        figure = statistics.median(r.median_ms for r in group)
        outliers = tuple((r.peer_id, r.median_ms) for r in replicas if r.peer_id not in inside)
        why = "; ".join(
            _outlier_reason(r, figure, group[0], class_spread, distrusted)
            for r in replicas
            if r.peer_id not in inside
        )
        offsets = _offsets(replicas, group, figure)
        return Settlement(Outcome.REPLICATED, tuple(sorted(inside)), outliers, figure, why, offsets)
    wrong = _wrong_outputs(replicas, distrusted)
    outliers = tuple((r.peer_id, r.median_ms) for r in wrong)
    distrust = [f"{r.peer_id}: {distrusted[r.peer_id]}" for r in replicas if distrusted.get(r.peer_id)]
    why = "; ".join(
        [
            *(f"{r.peer_id}: outputs differ from the majority's" for r in wrong),
            *distrust,
            _disagreement(replicas),
        ]
    )
    if len(replicas) == wanted:
        return Settlement(Outcome.PENDING, outliers=outliers, reason=why)
    return Settlement(Outcome.DISAGREED, outliers=outliers, reason=why)


def _offsets(
    replicas: Sequence[Replica], group: Sequence[Replica], figure: float
) -> tuple[tuple[str, float], ...]:
    """Each replica's log of its figure over the others': the rest of the group for a member, the
    agreed figure for an outlier whose outputs match the group's (one with other outputs is wrong,
    not off)."""
    offsets: list[tuple[str, float]] = []
    for r in replicas:
        if r in group:
            others = [m.median_ms for m in group if m is not r]
            reference = statistics.median(others)
        elif r.fingerprint == group[0].fingerprint:
            reference = figure
        else:
            continue
        if r.median_ms > 0 and reference > 0:
            offsets.append((r.peer_id, math.log(r.median_ms / reference)))
    return tuple(offsets)


def _wrong_outputs(replicas: Sequence[Replica], distrusted: Mapping[str, str]) -> list[Replica]:
    """The replicas whose outputs differ from a strict majority (at least two trusted replicas with one
    fingerprint): their outputs are wrong whatever the timings say, so they are outliers even when the
    others' timings are too far apart to agree (a loaded machine)."""
    counts = Counter(r.fingerprint for r in replicas if r.peer_id not in distrusted)
    if len(counts) < 2:
        return []
    fingerprint, n = counts.most_common(1)[0]
    if n < 2 or 2 * n <= len(replicas):
        return []
    return [r for r in replicas if r.fingerprint != fingerprint]


def process_error(spread: float, processes: int) -> float:
    """A replica's spread as one process's error (spread x sqrt(processes)), what a class's pool
    keeps so that tasks of any process count share it."""
    return spread * math.sqrt(max(processes, 1))


PAIR_SCALE: Final = math.sqrt(math.pi / 2) / (0.6745 * math.sqrt(2))
"""From the distance between two single-process replicas to one process's error (`pair_error`): the
median of |d| for d ~ N(0, 2 s^2) is 0.6745 sqrt(2) s, and a process error is sqrt(pi/2) s."""


def pair_error(figure: float, others: Sequence[float]) -> float:
    """A single-process replica's contribution to its class's pool: its distance from the other agreeing
    replicas' median, as one process's error (`PAIR_SCALE`), 0 where there is none.

    One process has no scatter of process medians to show (its spread is 0), so a class measured only
    with `processes: 1` never learnt its error and kept the prior's band (46 % at one process) for
    good: a 0.72x liar beside one honest peer agreed. The distance between replicas on distinct
    peers is what the submitter measured across them, not any one worker's word; pooled as a median
    over the class's agreeing groups (`pool_error`), no one replica sets it. The cheater's view: a
    liar in a group moves its own distance, one entry of a median over the class's last 200; to widen
    the band it must be in more than half of the class's agreeing groups.
    """
    if not others or figure <= 0 or min(others) <= 0:
        return 0.0
    return PAIR_SCALE * abs(math.log(figure / statistics.median(others)))


def judged_band(errors: Sequence[float], processes: int) -> tuple[float, int]:
    """The band a replica of `processes` processes is judged with in a class whose pool is `errors`,
    and how many replicas it was learnt from (0: the prior, a fresh class): what `plan` says."""
    known = [e for e in errors if e > 0][-POOL_KEEP:]
    return band(pooled_spread(errors, processes)), len(known) if len(known) >= POOL_MIN else 0


def pool_error(errors: Sequence[float]) -> float:
    """A class's process error as the submitter knows it: the median of its honest replicas' errors
    (the last POOL_KEEP: two processes or more by their spread, one by `pair_error`; from POOL_MIN
    on), else PRIOR. Three processes
    estimate one replica's spread poorly (two degrees of freedom); the median over a class does
    not, and no one replica sets it."""
    known = [e for e in errors if e > 0][-POOL_KEEP:]
    return statistics.median(known) if len(known) >= POOL_MIN else PRIOR


def pooled_spread(errors: Sequence[float], processes: int) -> float:
    """The spread of a replica of `processes` processes in a class whose honest replicas' process
    errors are `errors` (`pool_error` over sqrt(processes))."""
    return pool_error(errors) / math.sqrt(max(processes, 1))


def vouching_limit(class_spread: float) -> float:
    """The widest spread a replica may show and still vouch: FAR times its class's, never under FAR
    times the board's (`BOARD`), 4 %.

    Not FAR times the class's spread alone: a class whose processes time alike to a hundredth of a
    percent (the labs' paced workload, a quiet accelerator) then barred an honest replica whose
    processes were 0.2 % apart (10.1 ms; CI-equivalent at 087e4b8), a scatter far inside what the band
    already allows between two devices of the class (never under 5 %). A class whose spread is 1 % or
    more (ResNet18's 2.4 % scatter of process medians at up to 9 processes a replica, the noisier models
    at more) is held to FAR times its own spread as before. The cheater's view: the limit reads nothing
    it reports; a figure inside the limit is still judged against an independent replica within the
    class's band, which its spread never widens, and processes that scatter past 4 % of the figure (1, 2
    and 3 ms: 42 %) are barred as before."""
    return FAR * max(class_spread, BOARD)


def barred(replicas: Sequence[Replica], class_spread: float, distrusted: Mapping[str, str]) -> dict[str, str]:
    """The replicas that cannot be members of a majority, each with why: its peer is distrusted
    (`reputation.distrusted`), or the spread of the processes its figure rests on
    (`Replica.vouching_spread`) is over its class's `vouching_limit` (it cannot vouch)."""
    out = {p: f"distrusted: {why}" for p, why in distrusted.items()}
    limit = vouching_limit(class_spread)
    for r in replicas:
        if r.peer_id not in out and r.vouching_spread > limit:
            out[r.peer_id] = (
                f"cannot vouch: its own spread {r.vouching_spread:.1%} is over {limit:.1%} "
                f"({FAR:g}x its class's {class_spread:.1%}, or the board's {BOARD:.0%})"
            )
    return out


def teaches(spread: float, class_spread: float) -> bool:
    """Whether an agreeing replica's whole spread is within FAR of its class's: only then does its
    process error join the class's pool (a process slowed whole by a burst says nothing of the
    class's error, and a replica with one could not vouch before `core_spread`)."""
    return spread <= FAR * class_spread


def _outlier_reason(
    r: Replica, figure: float, member: Replica, class_spread: float, distrusted: Mapping[str, str]
) -> str:
    """Why `r` is out of the majority: its outputs, else its figure outside the band (named first: a
    lie about the time is the figure, whatever else bars the replica), and what bars it (distrusted,
    or its own spread too wide to vouch), each that holds."""
    if r.fingerprint != member.fingerprint:
        return f"{r.peer_id}: outputs differ from the majority's"
    against = f"{r.median_ms:.4g} ms against the agreed {figure:.4g} ms (band {band(class_spread):.1%})"
    against = apart_by_pace(r, member, class_spread) or against  # its figure agrees, its count does not
    barred_by = distrusted.get(r.peer_id)
    if not barred_by:
        return f"{r.peer_id}: {against}"
    if agree(r, member, class_spread):  # inside the band: only what bars it keeps it out
        return f"{r.peer_id}: {r.median_ms:.4g} ms, {barred_by}"
    return f"{r.peer_id}: {against}, {barred_by}"


def apart_by_pace(r: Replica, other: Replica, class_spread: float) -> str | None:
    """Why `r` is apart from `other` when its pace alone is (its outputs and figure agree), as its
    reason says it; None when it is not apart so."""
    if not _same_figure(r, other, class_spread) or paces_agree(r, other, class_spread):
        return None
    cut = max(r.pace_cut, other.pace_cut)
    return (
        f"{r.pace_ms:.4g} ms of its slots' time a request against {other.pace_ms:.4g} ms (its count, for "
        f"its figure {r.median_ms:.4g} ms agrees; band {band(class_spread):.1%} and the cut {cut:.1%})"
    )


def _disagreement(replicas: Sequence[Replica]) -> str:
    said = ", ".join(f"{r.peer_id} {r.median_ms:.4g} ms{_paced(r)}" for r in replicas)
    return f"no majority within the band: {said}"


def _paced(r: Replica) -> str:
    return "" if r.pace_ms is None else f" ({r.pace_ms:.4g} ms of its slots' time a request)"
