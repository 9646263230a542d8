"""Replication against lying peers: a seeded simulation over the scheduler's own code.

A fleet of 1,000 peers in 10 device classes (real `DeviceProfile`s, classed by
`scheduler.verification.classes.device_class`), 5 % of them cheaters that report a fixed 0.5-0.9x of
their true latency (every process median scaled, so their results stay self-consistent), 10,000 tasks.
Each replica of a task is picked by `scheduler.verification.replicas.pick_replicas` (distinct identities
and hosts; 2 % of the peers sit three to a host, one owner with several keys), judged by
`scheduler.verification.agreement.settle`, and under spot checks placed by
`scheduler.verification.reputation.should_check` under a campaign key (`DrawKey`) the cheaters never see.

Timing noise is this machine's: a replica's figure is the median of 3 process medians, each off its
device's true latency by a normal error with the CV of process medians measured on this machine
(../shared/notes/measurement.md, "Noise", 1 thread: ResNet18 2.4 %, MobileNetV2 6.0 %, tiny-BERT
7.4 %), and devices of one class differ by 1 % (clock bins, memory timings).

Each settlement adds every replica's offset from the others to its peer's record
(`scheduler.verification.reputation.PeerRecord.biased`); when a peer turns distrusted, every task it was an
agreeing member of is settled again without it (one more replica where the rest are no majority),
as `scheduler.state.settling` does within a campaign.

Bands come from the class's pool (`agreement.pool_error`): the process errors of replicas that agreed
with a majority, a documented prior before ten of them, never a replica's own spread.
`--strategy scattered`: the cheaters spread their process medians (some faster than the lie, some
true) so that a band set by their own spread would take their lie in.

`--strategy predicting`: the cheaters lie only where the spot-check draw sark-node derived from the
campaign id before issue 38 (`old_predicts_checked`, computable from any offer) says "not checked"
at the campaign's p, and report truly elsewhere; the scheduler's draw is the campaign's secret key,
so their prediction is worth nothing and their lies are checked at p like any others.

`--strategy sybil`: the cheaters of each class are one owner's identical devices on distinct networks
(which the network rule cannot tell apart), all reporting the owner's one factor, so any two of them in
a quorum agree on the lie.

`--strategy poison`: Sybils poisoning honest peers' records (issue 38, scope 4). The cheaters of each
class are one owner's keys, each on a network of its own (the network rule cannot tell them apart),
all reporting 0.5x, so any two of them in a group with an honest peer outvote it. Before scope 4 a
majority's word counted in full: two outvotes and the honest peer was distrusted across campaigns.
Now what a group says of a peer is weighed by the partners' records (`evidence.weigh`) and a record
turns only on three partners over two networks; "honest distrusted" counts the honest peers that were
ever distrusted during the run (by anyone: noise included).

`--strategy onehost` and `unique`: pairs of keys on one machine at the addresses a submitter sees,
and cheaters with a CPU name of their own (`replication_fleet`); "one-machine groups" counts tasks
whose group held both keys of one machine, "unverifiable" the tasks (and spot checks' added replicas)
no quorum could be placed for: never run alone under full replication (`state.replication`), the
figure shown `single` under spot checks (`state.settling`). `--strategy claims`: false calibration
claims against the claims check and the challenge (`replication_claims.py`), not a replication run.

`--reference`: each configuration runs twice, without and with a reference device per class (one more
honest peer on its own network, named in `verify.reference`): placement puts it in every quorum of its
class (`pick_replicas(references=...)`) and every spot check's replica on it, and
`scheduler.verification.references.judge` settles each group against its figure.

Reported per noise level and policy: the share of cheating results shown as a figure (`replicated`
ones and, under spot checks, `single` ones never re-run), the share of honest results flagged
(outliers or `disagreed`), and the extra tasks run over the 10,000 (replicas, tie-breakers, re-runs
and re-settlements).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the packages, before any tests/ folder of the same name

import replication_claims  # noqa: E402
import replication_fleet  # noqa: E402
from replication_fleet import Peer, fleet, with_references  # noqa: E402

from scheduler.language import Draws  # noqa: E402
from scheduler.verification import (  # noqa: E402
    Candidate,
    DrawKey,
    Outcome,
    PeerRecord,
    Replica,
    Settlement,
    by_class,
    checkable,
    distrusted,
    judge,
    pick_replicas,
    pooled_spread,
    process_error,
    should_check,
    spread_of,
    weigh,
)
from scheduler.verification.reputation import RESET_WEIGHT  # noqa: E402

NOISE = {"ResNet18 (2.4 %)": 0.024, "MobileNetV2 (6.0 %)": 0.060, "tiny-BERT (7.4 %)": 0.074}


@dataclass
class Task:
    """A settled task: where it ran, what came back, its verdict and what it counted."""

    order: list[Candidate]
    placed: list[Candidate]
    results: list[Replica]
    wanted: int
    verdict: Settlement
    counted: tuple[int, int, int, int] = (0, 0, 0, 0)  # cheating shown, honest flagged, cheating, honest
    task: int = 0
    lied: list[bool] = field(default_factory=list)  # per result: whether it lied


@dataclass
class Tally:
    cheating_shown: int = 0
    cheating: int = 0
    honest_flagged: int = 0
    honest: int = 0
    runs: int = 0
    replicated: int = 0
    single: int = 0
    disagreed: int = 0
    records: dict[str, PeerRecord] = field(default_factory=dict)
    singles: dict[str, list[bool]] = field(default_factory=dict)  # per peer: its single results (cheating?)
    spreads: dict[str, list[float]] = field(default_factory=dict)  # per class: agreeing replicas' errors
    shown: dict[str, list[Task]] = field(default_factory=dict)  # per peer: tasks it agreed in
    processes: int = 3
    key: DrawKey = field(default_factory=lambda: DrawKey(bytes(32)))  # the campaign's secret
    predicting: bool = False  # cheaters lie only where the old (campaign-id) draw predicts no check
    scattered: bool = False  # cheaters scatter their process medians to widen a band set by them
    assumed_p: float = 0.1  # the spot-check probability they assume
    references: frozenset[str] = frozenset()  # one honest reference device per class (`--reference`)
    reference_runs: int = 0  # results the reference devices ran
    honest_distrusted: set[str] = field(default_factory=set)  # honest peers ever distrusted
    unverifiable: int = 0  # tasks (or added replicas) no quorum could be placed for: never run
    machines: dict[str, str] = field(default_factory=dict)  # `--strategy onehost`: a pair's machine
    one_machine: set[int] = field(default_factory=set)  # tasks with both keys of one machine placed
    pair_tasks: set[int] = field(default_factory=set)  # tasks with a key of a pair placed


def old_predicts_checked(task: int, spot: float) -> bool:
    """The spot-check draw as sark-node derived it before issue 38, from what every offer carries
    (the campaign id, the task id): what a predicting cheater computes."""
    seed = int.from_bytes(hashlib.sha256(b"campaign-sim").digest()[:8], "big")
    digest = hashlib.sha256(f"{seed}:{task}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < spot


def replica(draws: Draws, peer: Peer, noise: float, tally: Tally, task: int) -> tuple[Replica, bool]:
    """One replica's figure and whether it lies: a cheater does unless it predicts a check
    (`--strategy predicting`)."""
    lies = peer.cheat < 1.0 and not (tally.predicting and old_predicts_checked(task, tally.assumed_p))
    factors = [peer.cheat if lies else 1.0] * tally.processes
    if lies and tally.scattered:  # some processes faster still, some true: a wide spread of its own
        factors = [(peer.cheat * 0.75, peer.cheat, 1.0)[k % 3] for k in range(tally.processes)]
    medians = [peer.latency_ms * draws.normal(1.0, noise) * f for f in factors]
    return Replica(peer.peer_id, statistics.median(medians), spread_of(medians)), lies


def run_task(
    draws: Draws,
    task: int,
    pool: tuple[Candidate, ...],
    peers: dict[str, Peer],
    noise: float,
    spot: float | None,
    tally: Tally,
) -> None:
    order = sorted(pool, key=lambda _: draws.uniform())  # placement's ranking, as a seeded shuffle
    refs = tally.references
    if spot is None and len(pick_replicas(order, 2, references=refs)) < 2:
        tally.unverifiable += 1  # no quorum: never run alone (`state.replication.place_groups`)
        return
    first = pick_replicas(
        order, 1, references=refs if spot is None else ()
    )  # a quorum's first: its reference
    if spot is not None and not checkable(first[0], order, refs):
        tally.unverifiable += 1  # nobody could check it: never run alone (`replication.spot_checkable`)
        return
    wanted = 2
    if spot is not None and not should_check(
        tally.records.get(first[0].peer_id, PeerRecord()), spot, tally.key, str(task)
    ):
        wanted = 1
    taken, hosts = [first[0].peer_id], [first[0].host]
    chosen = pick_replicas(order, wanted, taken=taken, taken_hosts=hosts, references=refs)[: wanted - 1]
    placed = list(first + chosen)
    tally.unverifiable += len(placed) < wanted  # the added replica ends `no_quorum`; the figure, single
    tally.reference_runs += sum(c.peer_id in refs for c in placed)
    made = [replica(draws, peers[c.peer_id], noise, tally, task) for c in placed]
    results, lied = [r for r, _ in made], [lie for _, lie in made]
    tally.runs += len(results)
    job = Task(order, placed, results, wanted, Settlement(Outcome.PENDING), task=task, lied=lied)
    _settle(draws, job, peers, noise, tally)
    agreed = [r for r in job.results if r.peer_id in job.verdict.agreed]  # the class's pool: honest ones
    errors = tally.spreads.setdefault(first[0].device_class.key, [])
    errors.extend(process_error(r.spread, tally.processes) for r in agreed)
    if job.verdict.outcome == Outcome.SINGLE:
        tally.single += 1
        cheat = lied[0]
        tally.singles.setdefault(results[0].peer_id, []).append(cheat)
        tally.cheating += cheat
        tally.honest += not cheat
        return
    tally.replicated += job.verdict.outcome == Outcome.REPLICATED
    tally.disagreed += job.verdict.outcome == Outcome.DISAGREED
    _count(job, peers, tally)
    _learn(draws, job, peers, noise, tally, job.results)


def _settle(draws: Draws, job: Task, peers: dict[str, Peer], noise: float, tally: Tally) -> None:
    """Settle `job` (again), with one more replica when the trusted ones are no majority."""
    spread = pooled_spread(tally.spreads.get(job.placed[0].device_class.key, []), tally.processes)
    refs = tally.references
    job.verdict = judge(job.results, job.wanted, spread, distrusted(tally.records), refs)
    if job.verdict.outcome == Outcome.PENDING:
        taken, hosts = [c.peer_id for c in job.placed], [c.host for c in job.placed]
        more = pick_replicas(job.order, 1, taken=taken, taken_hosts=hosts, references=refs)
        tally.unverifiable += not more
        tally.reference_runs += sum(c.peer_id in refs for c in more)
        job.placed += more
        made = [replica(draws, peers[c.peer_id], noise, tally, job.task) for c in more]
        job.results += [r for r, _ in made]
        job.lied += [lie for _, lie in made]
        tally.runs += len(more)
        job.verdict = judge(job.results, job.wanted, spread, distrusted(tally.records), refs)


def _count(job: Task, peers: dict[str, Peer], tally: Tally) -> None:
    """Count `job`'s verdict, in place of what it counted before."""
    shown = flagged = cheating = 0
    for r, lie in zip(job.results, job.lied, strict=True):
        cheat, inside = lie, r.peer_id in job.verdict.agreed
        cheating += cheat
        shown += cheat and inside
        flagged += (not cheat) and not inside
    counted = (shown, flagged, cheating, len(job.results) - cheating)
    machines = [tally.machines[c.peer_id] for c in job.placed if c.peer_id in tally.machines]
    if machines:
        tally.pair_tasks.add(job.task)
    if len(machines) > len(set(machines)):
        tally.one_machine.add(job.task)  # two keys of one machine in one group: must never happen
    tally.cheating_shown += counted[0] - job.counted[0]
    tally.honest_flagged += counted[1] - job.counted[1]
    tally.cheating += counted[2] - job.counted[2]
    tally.honest += counted[3] - job.counted[3]
    job.counted = counted


def _learn(
    draws: Draws, job: Task, peers: dict[str, Peer], noise: float, tally: Tally, results: list[Replica]
) -> None:
    """Add what a settled `job` says of `results`' peers to their records (`evidence.weigh`, the
    scheduler's own: weighed by the partners' records, a majority counting against a peer only
    from two networks); a peer caught (counted against in full) has its unverified results run
    again, and one that turns distrusted has its agreed ones settled again."""
    group = [r.peer_id for r in job.results]
    networks = {p: peers[p].candidate.host for p in group}
    said = dict(weigh(job.verdict, group, networks, tally.records, tally.references))
    for r in results:
        ev = said.get(r.peer_id)
        if ev is None:
            continue
        record = tally.records.get(r.peer_id, PeerRecord())
        tally.records[r.peer_id] = record.after(ev)
        if ev.agreed:
            tally.shown.setdefault(r.peer_id, []).append(job)
        elif ev.weight >= RESET_WEIGHT:
            tally.runs += len(tally.singles.pop(r.peer_id, []))
        if tally.records[r.peer_id].distrusted and not record.distrusted:
            if peers[r.peer_id].cheat == 1.0:
                tally.honest_distrusted.add(r.peer_id)
            _caught(draws, r.peer_id, peers, noise, tally)


def _caught(draws: Draws, peer_id: str, peers: dict[str, Peer], noise: float, tally: Tally) -> None:
    """Every task `peer_id` agreed in, settled again now that it is distrusted."""
    tally.runs += len(tally.singles.pop(peer_id, []))
    for job in tally.shown.pop(peer_id, []):
        if peer_id not in job.verdict.agreed:
            continue  # settled again since
        before = len(job.results)
        _settle(draws, job, peers, noise, tally)
        _count(job, peers, tally)
        _learn(draws, job, peers, noise, tally, job.results[before:])


def simulate(
    seed: int, noise: float, spot: float | None, args: argparse.Namespace, *, reference: bool = False
) -> dict[str, float]:
    draws = Draws(seed)
    everyone = fleet(
        draws,
        args.peers,
        args.classes,
        args.cheaters,
        sybil=args.strategy == "sybil",
        poison=args.strategy == "poison",
    )
    if reference:
        everyone = with_references(Draws(seed + 1_000_003), everyone, args.classes)
    machines: dict[str, str] = {}
    if args.strategy == "onehost":
        everyone, machines = replication_fleet.one_host(everyone, args.classes)
    if args.strategy == "unique":
        everyone = replication_fleet.unique(everyone, args.classes)
    peers = {p.peer_id: p for p in everyone}
    classes = by_class(p.candidate for p in everyone)
    pools = list(classes.values())
    tally = Tally(
        processes=args.processes,
        key=DrawKey(hashlib.sha256(f"key-{seed}".encode()).digest()),
        predicting=args.strategy == "predicting",
        scattered=args.strategy == "scattered",
        assumed_p=args.spot,
        references=frozenset(p.peer_id for p in everyone if p.peer_id.startswith("ref-")),
        machines=machines,
    )
    for task in range(args.tasks):
        if args.strategy == "unique":  # a class of one gets its peer's share of the tasks, not a class's
            pool = classes[everyone[draws.below(len(everyone))].candidate.device_class]
        else:
            pool = pools[draws.below(len(pools))]
        run_task(draws, task, pool, peers, noise, spot, tally)
    kept_single_cheats = sum(sum(v) for v in tally.singles.values())  # never re-run: shown unverified
    return {
        "cheating_shown_pct": 100 * (tally.cheating_shown + kept_single_cheats) / max(tally.cheating, 1),
        "cheating_replicated_pct": 100 * tally.cheating_shown / max(tally.cheating, 1),
        "honest_flagged_pct": 100 * tally.honest_flagged / max(tally.honest, 1),
        "extra_tasks_pct": 100 * (tally.runs - args.tasks) / args.tasks,
        "reference_runs_pct": 100 * tally.reference_runs / args.tasks,
        "replicated": tally.replicated,
        "single": tally.single,
        "disagreed": tally.disagreed,
        "honest_distrusted": len(tally.honest_distrusted),
        "unverifiable_pct": 100 * tally.unverifiable / args.tasks,
        "one_machine_quorums": len(tally.one_machine),
        "pair_tasks": len(tally.pair_tasks),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--peers", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--cheaters", type=float, default=0.05)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--spot", type=float, default=0.1, help="spot-check probability for trusted peers")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=1, help="fleets to average over (seed, seed + 1, ...)")
    parser.add_argument("--processes", type=int, default=3, help="processes per replica (the task's)")
    parser.add_argument(
        "--strategy",
        choices=("scaled", "predicting", "scattered", "sybil", "poison", "onehost", "unique", "claims"),
        default="scaled",
        help="scaled: cheaters lie on every result; predicting: only where the draw sark-node derived "
        "from the campaign id before issue 38 says 'not checked' (the secret draw ignores it); "
        "scattered: they lie with their process medians spread (0.75x, 1x, 1/cheat x of the lie) to "
        "widen a band their own spread would set (the class's pool sets it); sybil: a class's cheaters "
        "are one owner's devices on distinct networks, all with one factor (they agree on the lie); "
        "poison: they are one owner's keys on distinct networks, all at 0.5x, outvoting honest peers; "
        "onehost: they are pairs of keys on one machine (loopback, one v4 address, one v6 /64, v4 and "
        "::ffff:v4), one factor a pair; unique: each advertises a CPU name of its own (a class of one); "
        "claims: they advertise 1.5-8x their calibration (replication_claims.py: claims and challenge)",
    )
    parser.add_argument(
        "--challenge-noise",
        type=Path,
        default=ROOT / "benchmarks" / "out" / "challenge_noise.json",
        help="claims: the ratios benchmarks/challenge_noise.py measured on this machine",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="each configuration without and with a reference device per class",
    )
    parser.add_argument(
        "--only-reference", action="store_true", help="with a reference device per class only"
    )
    args = parser.parse_args()
    if args.strategy == "claims":
        replication_claims.main(args)
        return
    rows = []
    print(
        f"{'noise (CV of process medians)':32} {'policy':22} {'reference':>9} {'cheating shown':>15} "
        f"{'as replicated':>14} {'honest flagged':>15} {'extra tasks':>12} {'on references':>14}"
        f" {'honest distrusted':>18} {'unverifiable':>13} {'one-machine groups / pair tasks':>32}"
        f"  (means over {args.seeds} fleet(s); shown: worst)"
    )
    for label, noise in NOISE.items():
        for policy, spot in (("full (2 + tie-break)", None), (f"spot checks p={args.spot:g}", args.spot)):
            for reference in (
                (True,) if args.only_reference else (False, True) if args.reference else (False,)
            ):
                rows.append(_row(label, noise, policy, spot, args, reference))
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    name = f"replication_sim_{args.strategy}.json" if args.strategy != "scaled" else "replication_sim.json"
    (out / name).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1, default=str))


def _row(
    label: str, noise: float, policy: str, spot: float | None, args: argparse.Namespace, reference: bool
) -> dict[str, object]:
    """One configuration over `args.seeds` fleets, printed and returned as a JSON row."""
    runs = [simulate(args.seed + k, noise, spot, args, reference=reference) for k in range(args.seeds)]
    got = {key: statistics.mean(run[key] for run in runs) for key in runs[0]}
    worst = max(run["cheating_shown_pct"] for run in runs)
    shown, replicated = got["cheating_shown_pct"], got["cheating_replicated_pct"]
    flagged, extra, on_refs = got["honest_flagged_pct"], got["extra_tasks_pct"], got["reference_runs_pct"]
    print(
        f"{label:32} {policy:22} {'yes' if reference else 'no':>9} {shown:14.2f}% {replicated:13.2f}% "
        f"{flagged:14.2f}% {extra:11.1f}% {on_refs:13.1f}% {got['honest_distrusted']:18.1f} "
        f"{got['unverifiable_pct']:12.1f}% {got['one_machine_quorums']:15.1f} / {got['pair_tasks']:<14.1f}"
        f"  ({worst:.2f}%)",
        flush=True,
    )
    return {
        "noise": label,
        "policy": policy,
        "strategy": args.strategy,
        "reference": reference,
        **got,
        "cheating_shown_worst_pct": worst,
    }


if __name__ == "__main__":
    main()
