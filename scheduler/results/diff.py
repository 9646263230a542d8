"""Two campaigns compared: their tasks paired by worker or device, each pair's change tested.

Pure: no files, clock, plotting or printing. `node.report.tables` and `render` show the rows.

The diff compares two campaigns per device and compute unit (a generate task: its `llmview` figures
first, each tested on its per-request values, then its end-to-end latency; then each cost figure of
`costview` both sides have, with each side's price and its source, untested). Its significance test is the
Mann-Whitney U test on the raw inference samples (normal approximation with tie and continuity
corrections, two-sided). Samples of one process are not independent of each other (a process can
sit at 2x for its whole life on a shared machine), so a change counts as significant only when
the test's p-value is below `alpha`, the medians differ by at least `threshold_pct`, and, where
both sides ran at least two processes, no process median of one side falls inside the range of the
other's (the process is the unit that repeats).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from protocol import Value
from scheduler.results.costview import COST_FIGURES, RANKS, CostFigure, price_text
from scheduler.results.llmview import E2E, LLM_FIGURES, LlmFigure, headline, per_request
from scheduler.results.report import NO_DEVICE, VERIFY_LABELS, ReportEntry, device_label, verification_of
from scheduler.results.significance import MannWhitney, mann_whitney

DEFAULT_THRESHOLD_PCT: Final = 5.0
DEFAULT_ALPHA: Final = 0.05


class DiffRow(Value):
    """One device and unit compared between two campaigns (before = A, after = B)."""

    device: str
    column: str
    metric: str = "latency ms"
    before_ms: float | None = None
    after_ms: float | None = None
    change_pct: float | None = None
    p_value: float | None = None
    significant: bool = False
    regression: bool = False
    improvement: bool = False
    verdict: str
    note: str = ""
    n_before: int = 0
    n_after: int = 0


def _by_worker(e: ReportEntry) -> tuple[object, ...] | None:
    """The same worker: identical boards of one hostname are told apart by their peer ids."""
    return (e.worker, e.unit, e.job_index) if e.worker else None


def _by_fingerprint_and_name(e: ReportEntry) -> tuple[object, ...] | None:
    return (e.fingerprint, e.device, e.unit, e.job_index)


def _by_fingerprint(e: ReportEntry) -> tuple[object, ...] | None:
    """A renamed device: the same fingerprint under another name."""
    return (e.fingerprint, e.unit, e.job_index) if e.fingerprint else None


def _by_name(e: ReportEntry) -> tuple[object, ...] | None:
    return (e.device, e.unit, e.job_index)


_KEYS: Final[tuple[Callable[[ReportEntry], tuple[object, ...] | None], ...]] = (
    _by_worker,
    _by_fingerprint_and_name,
    _by_fingerprint,
    _by_name,
)
"""How two campaigns' entries are paired, tried in turn: same worker (peer id), same device
fingerprint and name, same fingerprint (a renamed device), same name."""


Pair = tuple[ReportEntry | None, ReportEntry | None]


def match_entries(before: Sequence[ReportEntry], after: Sequence[ReportEntry]) -> list[Pair]:
    """Pair the tasks of two campaigns by worker or device, and (unit, job).

    The worker's peer id first (a lab of identical boards with one hostname: only the id tells them
    apart); then device fingerprint and name together, the fingerprint alone, the name alone (a worker
    with a new identity), each only where it picks exactly one task on both sides. Tasks that never
    reached a device are left out; the rest that found no partner come back alone.
    """
    left = [e for e in before if e.device != NO_DEVICE]
    right = [e for e in after if e.device != NO_DEVICE]
    pairs: list[Pair] = []
    for key in _KEYS:
        groups_a: dict[tuple[object, ...], list[ReportEntry]] = {}
        groups_b: dict[tuple[object, ...], list[ReportEntry]] = {}
        for entries, groups in ((left, groups_a), (right, groups_b)):
            for e in entries:
                k = key(e)
                if k is not None:
                    groups.setdefault(k, []).append(e)
        for k, found in groups_a.items():
            other = groups_b.get(k, [])
            if len(found) == 1 and len(other) == 1:
                pairs.append((found[0], other[0]))
                left.remove(found[0])
                right.remove(other[0])
    pairs.extend((e, None) for e in left)
    pairs.extend((None, e) for e in right)
    return pairs


def _separated(a: Sequence[float], b: Sequence[float]) -> bool | None:
    """Whether the process medians of two sides do not overlap (None: fewer than two processes a side)."""
    if len(a) < 2 or len(b) < 2:
        return None
    return max(a) < min(b) or max(b) < min(a)


def _alone(a: ReportEntry | None, b: ReportEntry | None) -> DiffRow | None:
    one = a or b
    assert one is not None
    column = f"{one.unit} · job {one.job_index}" if one.job_index else one.unit
    row = DiffRow(device=one.device, column=column, verdict="")
    if a is None or b is None:
        return row.with_(verdict="only in A" if b is None else "only in B")
    if not a.complete or not b.complete:
        missing = " and ".join(n for n, e in (("A", a), ("B", b)) if not e.complete)
        why = "; ".join(f"{n} {e.verified}" for n, e in (("A", a), ("B", b)) if not e.complete and e.verified)
        return row.with_(
            verdict=f"no result in {missing}", before_ms=a.median_ms, after_ms=b.median_ms, note=why
        )
    return None


def _notes(
    a: ReportEntry,
    b: ReportEntry,
    test: MannWhitney | None,
    change: float,
    separated: bool | None,
    bounds: tuple[float, float],
) -> list[str]:
    """Why a change did not count, and which side was flagged unstable."""
    threshold_pct, alpha = bounds
    notes = []
    if test is None:
        notes.append("no raw samples")
    elif test.p_value >= alpha:
        notes.append(f"p >= {alpha:g}")
    if abs(change) < threshold_pct:
        notes.append(f"change under {threshold_pct:g}%")
    if separated is False:
        notes.append("process medians overlap")
    notes.extend(f"{n} unstable" for n, e in (("A", a), ("B", b)) if e.unstable)
    notes.extend(f"{n} throttled ({e.throttled})" for n, e in (("A", a), ("B", b)) if e.throttled)
    # how each side's figure was verified, where its campaign asked (replicated k/n, or single)
    notes.extend(f"{n} {verification_of(e, True)}" for n, e in (("A", a), ("B", b)) if e.verified)
    return notes


def compare(
    a: ReportEntry | None,
    b: ReportEntry | None,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = DEFAULT_ALPHA,
) -> DiffRow:
    """One diff row: change of the median from A to B, the test on raw samples, and the verdict."""
    alone = _alone(a, b)
    if alone is not None:
        return alone
    assert a is not None
    assert a.median_ms is not None
    assert b is not None
    assert b.median_ms is not None
    change = (b.median_ms - a.median_ms) / a.median_ms * 100.0 if a.median_ms > 0 else 0.0
    test = mann_whitney(a.samples_ms, b.samples_ms) if a.samples_ms and b.samples_ms else None
    separated = _separated(a.process_medians_ms, b.process_medians_ms)
    significant = (
        test is not None and test.p_value < alpha and abs(change) >= threshold_pct and separated is not False
    )
    verdict = ("regression" if change > 0 else "improvement") if significant else "no significant change"
    return DiffRow(
        device=a.device if a.device == b.device else f"{a.device} / {b.device}",
        column=f"{a.unit} · job {a.job_index}" if a.job_index else a.unit,
        metric=E2E.label if a.generation is not None and b.generation is not None else "latency ms",
        before_ms=a.median_ms,
        after_ms=b.median_ms,
        change_pct=change,
        p_value=test.p_value if test is not None else None,
        significant=significant,
        regression=significant and change > 0,
        improvement=significant and change < 0,
        verdict=verdict,
        note="; ".join(_notes(a, b, test, change, separated, (threshold_pct, alpha))),
        n_before=len(a.samples_ms),
        n_after=len(b.samples_ms),
    )


def compare_figure(a: ReportEntry, b: ReportEntry, figure: LlmFigure, bounds: tuple[float, float]) -> DiffRow:
    """One LLM figure of two generate tasks compared, tested on its per-request values, better either way."""
    threshold_pct, alpha = bounds
    before, after = headline(a.generation, figure), headline(b.generation, figure)
    change = (after - before) / before * 100.0 if before and after is not None else 0.0
    xs, ys = per_request(a.generation, figure), per_request(b.generation, figure)
    test = mann_whitney(xs, ys) if xs and ys else None
    significant = test is not None and test.p_value < alpha and abs(change) >= threshold_pct
    worse = change < 0 if figure.higher_is_better else change > 0
    return compare(a, b, threshold_pct, alpha).with_(
        metric=figure.label,
        before_ms=before,
        after_ms=after,
        change_pct=change,
        p_value=test.p_value if test is not None else None,
        significant=significant,
        regression=significant and worse,
        improvement=significant and not worse,
        verdict=("regression" if worse else "improvement") if significant else "no significant change",
        note="; ".join(_notes(a, b, test, change, None, bounds)),
        n_before=len(xs),
        n_after=len(ys),
    )


def compare_cost(a: ReportEntry, b: ReportEntry, figure: CostFigure, threshold_pct: float) -> DiffRow:
    """One cost figure of a pair: its change and each side's price with its source. Not tested on its
    own: a cost is the price times a figure the rows above test, so its verdict only says which way it
    moved past the threshold."""
    before, after = figure.of(a.costs), figure.of(b.costs)
    assert before is not None
    assert after is not None
    change = (after - before) / before * 100.0 if before else 0.0
    worse = change < 0 if figure.higher_is_better else change > 0
    moved = abs(change) >= threshold_pct
    return compare(a, b, threshold_pct).with_(
        metric=figure.label,
        before_ms=before,
        after_ms=after,
        change_pct=change,
        p_value=None,
        significant=False,
        regression=False,
        improvement=False,
        verdict=("worse" if worse else "better") if moved else "no change past the threshold",
        note=f"not tested (price x a tested figure); A {price_text(a.price)}; B {price_text(b.price)}",
    )


def _rows_of(a: ReportEntry | None, b: ReportEntry | None, bounds: tuple[float, float]) -> list[DiffRow]:
    """A pair's rows: a generate task's LLM figures that both sides have first, then its latency, then
    the cost figures both sides have."""
    latency = compare(a, b, *bounds)
    if not (a and b and a.complete and b.complete):
        return [latency]
    costs = [
        compare_cost(a, b, f, bounds[0]) for f in COST_FIGURES if None not in (f.of(a.costs), f.of(b.costs))
    ]
    if not (a.generation and b.generation):
        return [latency, *costs]
    both = [f for f in LLM_FIGURES if None not in (headline(a.generation, f), headline(b.generation, f))]
    return [*(compare_figure(a, b, f, bounds) for f in both), latency, *costs]


def _rank_of(pair: Pair, rank: str) -> tuple[bool, float]:
    """Where a pair stands in a ranking by B's cost figure `rank` (the best first; none last)."""
    figure = RANKS[rank]
    b = pair[1]
    value = figure.of(b.costs) if b is not None and b.complete else None
    if value is None:
        return (True, 0.0)
    return (False, -value if figure.higher_is_better else value)


def diff_entries(
    before: Sequence[ReportEntry],
    after: Sequence[ReportEntry],
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = DEFAULT_ALPHA,
    rank: str = "",
) -> tuple[DiffRow, ...]:
    """Every matched device and unit of two campaigns compared (see the module docstring for the rule).

    Args:
        before: campaign A's entries.
        after: campaign B's entries.
        threshold_pct: the smallest change of the median that can count, in percent.
        alpha: the significance level of the Mann-Whitney test.
        rank: a cost figure (`costview.RANKS` key) to rank the pairs by, B's value, the best first;
            "" sorts them by device then column.

    Returns:
        One row per pair and per unmatched task (a generate task's pair: one per LLM figure, then its
        end-to-end latency; then the cost figures both sides have), the figures of a pair in their order.

    Raises:
        KeyError: `rank` names no cost figure.
    """
    before, after = _asked(before), _asked(after)
    pairs = match_entries(before, after)
    rows = [
        (_rank_of((a, b), rank) if rank else (False, 0.0), r.with_(device=_pair_label(a, b, before, after)))
        for a, b in pairs
        for r in _rows_of(a, b, (threshold_pct, alpha))
    ]
    ordered = sorted(rows, key=lambda kr: (kr[0], kr[1].device, kr[1].column))  # stable: a pair's order kept
    return tuple(r for _, r in ordered)


def _asked(entries: Sequence[ReportEntry]) -> list[ReportEntry]:
    """A campaign's entries, each `verified` blanked where the campaign asked no verification (every
    row then says `single`, which would be noise in the diff's notes)."""
    if any(e.verified.startswith(VERIFY_LABELS) for e in entries):
        return list(entries)
    return [e.with_(verified="") for e in entries]


def _pair_label(
    a: ReportEntry | None, b: ReportEntry | None, before: Sequence[ReportEntry], after: Sequence[ReportEntry]
) -> str:
    """A pair's device as its rows name it: `device_label` on each side (a worker's id tail where
    workers share a device name), once when both sides agree."""
    labels = [device_label(e, side) for e, side in ((a, before), (b, after)) if e is not None]
    return labels[0] if len(set(labels)) == 1 else " / ".join(labels)
