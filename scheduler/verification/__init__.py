"""Verification: whether a result's figures can stand, and whether peers that measured one thing agree.

Pure, like the rest of `scheduler`, and built on the campaign language alone: these judgements know
nothing of the scheduler's tasks, and a peer only as `peers.Advertised` (id, host, profile), so the
state machine and the results room build on them, never the other way. A single result is checked
against its own raw parts and against physics (`figures`, `bounds`, `sendcheck`), each refusal a
value with its reason.
Replicas are picked from peers of one device class on distinct hosts (`classes`, `replicas`); their
figures agree or not (`agreement`); a peer's record of that feeds its spot checks (`reputation`); an
advertised calibration is believed or not (`claims`), or measured by a drawn product (`challenge`).
Where these meet the scheduler's tasks (a replicated job's placement, a replica group settled) is
`scheduler.state`'s: `replication`, `settling`.

Modules:
    figures    check_figures: a result's figures derived again from its raw parts, or a Refusal
    bounds     out_of_bounds: readings without raw parts held to physics, the worker's profile, the task;
               placed_profile
    sendcheck  check_sends: a load client's records against the schedule the submitter gave it (a fleet
               member's deal, a lone open loop's seed), or a Refusal
    serverfloor ServerFloor: the least time a server answers, as the submitter measured it itself; records
               under it refused, a closed loop's slot bound divided by it
    servercount a server's own counters (Prometheus), read by the submitter: no load claims more requests
               or tokens than they rose by
    classes    device classes: the profile parts two peers share exactly when their timings should agree
    replicas   pick_replicas: N peers of one class, distinct identity, owner, network; checkable; voter_name
    networks   network_of: a host's network (IPv4 /24, IPv6 /64, mapped v4 as v4, loopback one, relayed "")
    agreement  when replicas agree (a band from their pooled spread; a timed closed loop's pace too), settle:
               replicated k/n, disagreed
    references judge: a group with a reference device (the submitter's own) settled against its figure
    reputation a peer's record of agreements, whose evidence it holds, decaying; adaptive spot checks
    offsets    ReferenceOffsets: a peer's offsets against reference devices, judged by its class's error
    evidence   weigh: what a settled group says of each peer, weighed by its partners' records and networks
    draws      DrawKey: the campaign's secret, and the keyed draws of every choice a worker could exploit
    claims     a peer's advertised calibration against physics and its class: claim_unverified
    peakcheck  a peaks task's raw parts against its task, its figure against the challenged calibration
    challenge  a drawn matmul's sizing, seed and checked rows, its rows and time judged: claim_unverified
    peers      Advertised: what a judgement reads of a peer (id, host, profile; PeerView is one)

A load's records against its schedule
-------------------------------------

A load client's records are checked against the schedule the submitter gave it before they are stored
(`scheduler/verification/sendcheck.py` `check_sends`, called in `verdict.judge` after `check_figures`, with
the attempt's signed spec). A fleet member's against the deal the submitter signed into its offer: no more
records than planned sends, the first planned sends in order (a client sends them so; none skipped), each
`planned_s` one of the deal's times (within 1 ns) with the prompt the deal gave it, none twice, each
`started_s` no earlier than its planned time less the member's clock bound and no later than it plus the
bound plus 1 s (100 x the 10 ms lag that flags `ClientSaturated`, so an honest client that falls behind is
shown saturated long before it is refused), and `unsent` the rest of the deal; a closed loop's records carry
no planned time and start within `duration_s` plus bound and slack. Every load's successful records are
first held to physics (`physics_problems`): E2E at least TTFT, both above zero, TTFT above half the worker's
median round trip to the server; and a closed loop to at most slots x span / its shortest E2E records
(`slots_problems`: zero-length records never overlap, so the in-flight check alone passed 4,900 of them).
Both read what the worker signs (its round trip, its records' shortest E2E), so 4,900 records of 0.5 us
passed them too (issue 50): a fleet's or a timed closed loop's records are then held to the floor this
submitter measured of the server itself before it was loaded (`serverfloor`, `node.submitter.floors`):
none quicker than half the server's shortest first token less the submitter's round trip, the slot bound
divided by it (a lone open loop's too: its first tokens are the worker's word). Records at or above the
floor that were never sent (a closed loop padded up to its slot bound) are refused by the server's own
count where the campaign names its metrics (`servercount`, `endpoint.metrics_url`): the submitter reads
the server's Prometheus counters itself before the job and when each result arrives, and no result (a
fleet member with those accepted before it) may claim more requests or tokens than they rose by, plus
one request per slot not yet counted. A gray-box server has neither (see `serverfloor`). A
refusal is `invalid` and names the field, the worker's value and the bound. The member's offer spec (its
deal, without the endpoint's API key, which `attempt.with_key` adds only to the signed offer) is kept in the
campaign store's `offers` table when the offer goes out, and a lease reclaimed after a submitter restart
(`loop._start_reclaim`) is checked against it; only a store that kept none (written before it did) leaves a
reclaimed member unverifiable, refused `internal`.

Sessions
--------

A session run (a dataset's `turns:`) is held turn by turn (`sendcheck.session_problems`): a planned send
is a session's first turn; each later turn follows its session's previous one, succeeded, after its
last token plus `think_time_s`, within its conversation's turns, each once; a closed loop's slots count
every turn; a load without sessions carries no session or turn (a worker cannot hide requests from the
plan by calling them later turns).

Open loops, closed loops and rate searches
------------------------------------------

A lone worker's open loop (`request_rate`, no fleet) and a search over request rates
(`sendcheck.draws_seed`) plan their sends from a seed the submitter draws for each offer
(`GenerateSpec.arrival_seed`, `loop._seeded`, kept in the `offers` table like a deal), so the submitter
knows every planned send (`protocol.arrivals.open_loop`, which the worker's sender uses too) and the prompt
each carries: the records must be the first planned sends, each once with its planned time (within 1 ns) and
prompt, none sent early, and `unsent` must be the rest of the schedule; late sends are not refused (a lone
client that falls behind is shown `ClientSaturated` with its lag), so a client that plans a slower schedule
of its own, skips sends or hides its backlog is refused `invalid` naming the field
(`tests/labs/e2e/test_load_trust.py`, real `join` liars under `submit` and `serve`). A closed loop (a lone
one, a fleet member's slots, each level of a concurrency search) is held to its slots: each slot sends its
next request after its last one ended, so records with more requests in flight at once (`started_s` to
`started_s` + `e2e_ms`, 1 µs of rounding allowed) than its slots were never sent by it
(`in_flight_problems`). A rate search's levels all plan from the offer's seed (common random numbers: levels
differ by their rate, not their draws), each at most the requests its budget left
(`protocol.capacity.level_budgets`, which the driver and the check share): a level that ran to its end is
held to its schedule as a lone open loop is; one that ended early left its requests in flight out, so its
records are held to their planned sends and its `unsent` to no more than its schedule left
(`rate_levels_problems`).

Figures derived again, readings bounded
---------------------------------------

Figures are derived on the submitter. A `Measurement` carries its raw parts beside its figures: the timed
samples with `process_runs` (how many each process took), `load_samples_ms` (`load_runs` per process),
`first_inferences_ms`, and for generate tasks every `RequestRecord` with the run's `wall_s`.
`protocol.derive` (`protocol/aggregate.py`, over `protocol/stats.py`, `genstats.py`, `rouge.py`, moved there
from `drivers/` so both sides import the same pure arithmetic) computes every figure from them (energy too:
`protocol/energy.py` divides the processes' `energy_readings`, net of idle, by their timed runs or their
requests' output tokens): the worker's harness and endpoint run build the raw parts and call it, and the
submitter's loop calls `scheduler.check_figures` on each verified result before storing it. That refuses
`invalid` (NaN or infinity anywhere, negative durations or gaps between tokens, a record marked
`text_dropped` that still carries a text, a duration over the task's timeout by more than 5 %, a request
ending after the run's wall time, counts that do not fit the spec or each other, more requests than the
records a result keeps; in `attempt.py`, a signed body that fails the schema) and then, after deriving
again, `inconsistent` (the first three fields that differ beyond `math.isclose(rel_tol=1e-9, abs_tol=1e-9)`,
each with the worker's value and the derived one: the wire carries float64 unchanged and both sides run the
same Python arithmetic, so an honest result derives again to the bit). A refusal is a `ResultRejected` with
that `FailureReason`: the attempt fails, the task retries elsewhere within its budget, and
`scheduler/state/retry.py` never offers a retry to a peer with a refused attempt (`DISTRUSTED`; tasks
already placed on it still run and are checked). An accepted result's rows are rendered from the derived
measurement, which the store keeps beside the worker's signed envelope (they agree within that tolerance:
`scheduler.results`, "The room, and how a result travels"). A capacity search is derived level by level
(`protocol.capacity.derive_capacity`): each level's figures from its records, its early end judged again on
them, the search replayed from the verdicts (a level off the search's path is not kept, so it differs) and
the knee taken from them; the task's row is the `Capacity` row (`scheduler/results/caprows.py`), and
`outputs.campaign_rows` puts one row per level after it (from the stored envelope, without samples or a
signed part of their own; the report's entries leave them out, so report.html and `report --format md` show
the Capacity row only, and have no capacity table yet). A result cut to fit (`protocol`, "Result size") gets
no exemption: its figures are those of the records it kept, `Trimmed` says which figures were narrowed, and
an altered figure is still `inconsistent`. Single readings have no raw parts and are bounded, in the same
`invalid` pass, by `scheduler/verification/bounds.py` (its docstring gives each bound and why): physics
(power 0..10 kW, energy 0..10 kW x its own seconds, temperatures -40..150 C, clocks 0..10 GHz, shares 0..1),
the worker's profile as the submitter placed the task by (`scheduler.placed_profile` over the scheduler's
peers: the live-confirmed signed advert; the result's own `device` only for a peer the scheduler no longer
knows) for cores busy, CPU time, peak memory (RAM x 1.1), GPU memory, GPU telemetry and the energy method
(NVML needs a GPU and, for a model task, a usable GPU unit it ran on; RAPL needs Linux and a CPU unit) and
the result's own `device` (its hardware the placed profile's, its calibration within physics), the task's
timeout for times without raw parts (telemetry, marks, RTT, TLS, token times), the task's prompts and max
tokens for each request's token counts, and the same result's other readings (NVML energy within a factor 2
or 25 W of its GPU power telemetry; a window's energy not below half its idle power x the window; a tensor
task's energy window no shorter than the runs it wraps). Each refusal names the field path, the worker's
value and the bound. The campaign is bounded where it is parsed: a capacity rate range needing more levels
than a result holds (64), and a fleet's rate x duration per member (`fleet: all` with the most members a
fleet may have). The live view's heartbeat median is the worker's word until the result arrives.

How a replicated task is verified
---------------------------------

    discovery: Node.profile_and_host -> PeerView.host (the IP the profile's connection reached, "" relayed)
               discovery._view: protocol.owner_of(AdvertBody.owner, peer id) -> PeerView.owner (Owner: the
               owner's id when its statement, signed by the owner key of `join --owner-key` over
               "sark-owner/v1:" + this peer id, verifies; "" none; refused with why: placement's
               _check_owner, Misfit.OWNER_REFUSED, no field allows it) with_claims -> PeerView.claim
               (scheduler.verification.claims: physics, the round's peers of its class) ->
               CampaignLoop._vouched -> Challenger.vouch (node/submitter/challenge.py; campaigns whose
               verify: sets anything, under submit and serve; plan too, with a key of its own) before the
               scheduler sees the round: each new peer with a calibration (a refusal again 30 s later, 3
               challenges at most), over
               /sark/challenge/1.2.0 (protocol/challenge.py): ping, chain seed (DrawKey CHALLENGE_SEED; 512
               rows, steps for the claim: challenge.size) -> the worker's node/worker/challenge.py hands it
               to drivers/measuring/challengechild.py in a spawned child (duplex pipe; the chain in numpy)
               -> row digests -> rows drawn (CHALLENGE_ROWS), revealed, recomputed in float64 in a thread
               (exact); scheduler.verification.challenge judges rows and time (best of 3 rounds >= 1/1.82 of
               cpu_gflops); then each gpu_tflops[device] claim over /sark/challenge/1.1.0 (>= 1/2.5)
               (drivers/measuring/chainchild.py through torch on the device; up to 16,384 rows, size_chain);
               a failure is one more PeerView.claim reason (pinned by
               tests/unit/scheduler/verification/test_challenge.py,
               tests/unit/node/p2p/test_challenge_wire.py, tests/labs/e2e/test_challenge.py); `peers
               --challenge` (node/cli/peerchallenge.py) runs Challenger.measure on every listed peer
    parse_campaign: verify: {replicas, spot_check, unverified, same_host, reference}
               (scheduler/language/verify.py; a job's block replaces the campaign's; reference: peer ids or
               owner ids, a problem per bad entry by index; references.reference_peers resolves an owner id
               to its devices' peer ids)
    placement: _check_claim (Misfit.CLAIM_UNVERIFIED unless unverified: allow); a replicated job ->
               replication.place_groups: devices: counts groups, each pick_replicas(N) over the ranking (one
               class, distinct ids, owners (Candidate.voter: its owner's id, else its own) and networks:
               verification.networks.network_of, IPv4 /24, IPv6 /64, mapped v4 as v4, loopback one, relayed
               "" never placed; same_host: allow makes the id the network, never the owner; a reference
               device of the class first, in every group, never taken: replication.class_references tells
               plan which classes have one); a group is placed whole or not at all: JobPlan.unverifiable,
               the shortfall naming the rule and the field that would allow it (same_host: allow when it
               would)
    fanout.fanned: TaskView.replica_group (the group's first task id), device_class (the class key); the
               tasks no peer took end at once: UNVERIFIABLE (Lapse.NO_QUORUM, Status Unverifiable) when
               peers fit but no independent quorum, else UNSCHEDULABLE
    drivers/measuring/child.py: first inference's outputs -> drivers.measuring.outputs.output_fingerprint (4
               significant digits, sha256) -> Measurement.output_fingerprints (one per process)
    verdict.judge: ResultAccepted(median, spread_of(process medians), fingerprints joined, core_spread(the
               processes the median rests on: what bars a replica); a generate task
               on the worker's own model: genstats.outputs_fingerprint of its records' greedy texts)
    machine.handle -> settling.settle_groups(SettlingState: what it reads of the machine) -> Settled
               (labelled tasks, added replicas, commands, the peers' records), which the machine applies;
               for every group whose tasks all ended: references.judge (a group holding a reference's
               result: settled against its figure, the others outliers whatever the majority,
               Settlement.reference named in the label, the reference counting as independent evidence;
               else) agreement.settle over its accepted tasks (the band from the class's pool: pooled_spread
               over SettlingState.errors[pool_key: class/model], the prior before POOL_MIN; never a
               replica's own spread; a replica over agreement.vouching_limit and distrusted peers barred
               from a majority) -> PENDING or a spot check's draw (reputation.should_check under the
               campaign's DrawKey; p = 1 until PeerRecord.trusted: a streak and a cleared mean offset): one
               more task in the group on quorum.more_peer (its class, another network, the class's reference
               device first, else in the order of the key's REPLICA_PEER draw), or ended unverifiable
               (NO_QUORUM) if none; else TaskView.verified/verify_detail on each and ReplicasSettled(agreed,
               outliers, offsets, evidence: evidence.weigh's Evidence for each fresh replica's peer); a peer
               whose record turns distrusted (PeerRecord.biased: mean offset past 4 % by 3 standard errors
               over >= 8, or its offsets against a reference alone past 4 % by 3 of the class's standard
               errors over >= 4: offsets.ReferenceOffsets, Settlement.error -> Evidence.error) has the
               groups it agreed in settled again in the next round (unsettled_groups), only the new
               replicas' records added
    evidence.weigh(Settlement, group, networks (network_of the real host, never the lab switch), records,
               references, now, owners: one owner's devices one witness, named by the owner's id, and a
               majority must span >= 2 owners as it spans networks): a member's agreement (offset weighed by
               its partners' standing), an outlier's disagreement weighed by the majority's standing when
               the majority spans >= 2 networks or holds a reference (else 0, its partners kept as
               overruled), a disagreed group's half-standing against each -> PeerRecord.after (decayed to
               now; witnesses: partner, network, against/overruled/compared); biased/distrusted need >= 3
               witnesses on >= 2 networks
    results.report.latency_matrices: MatrixCell.verified (verification_of, when any row has a verify label)
               -> mark (✓k/n, (single)) / ending (outlier, disagreed, unverifiable) in the terminal,
               Markdown and report.html matrices (node/report/tables.py VERIFY_LEGEND)
    settling._settle_round: agreement_of -> TaskView.agreement on each labelled member (the agreed figure,
               band(class spread) as judged, the reference, the reason, each timed replica's network) ->
               results.verifygroups.verification_groups(tasks): GroupVerification per replica group (an
               unplaced quorum's tasks one group, `unverifiable`), derived once in CampaignReport.of ->
               results.json `verification` (only where a job asked) -> node/report/verifyreport (report.html
               section id=verification, Markdown, the terminal's table after the matrix:
               cli/campaign._matrix) · shapes.campaign `verification` (the same derivation over the live
               tasks) -> dashboard.html renderVerification · report --diff: verifygroups.agreed_changes (A's
               and B's agreed figure per (job, class, unit): beyond or within the wider band, or which side
               was not verified) -> verifyreport.agreed_table, --json
    loop: ReplicasSettled -> CampaignStore.settled(evidence) (peer_records table: the same after(), with
               updated and witnesses JSON; node/submitter/schema.py record_row/record_of) and
               add_errors(pool, the agreeing replicas' process errors: class_errors table, last POOL_KEEP);
               at start know_records(store.peer_records(now): decayed, store.class_errors()); `peers` reads
               the data folder's store (node/cli/records.py): state, why, on whose evidence
    draws: node/submitter/run.start: fresh_key (secrets.token_bytes(32)) -> campaigns.secret (store) ->
               Scheduler(key=) / Scheduler.restore(snapshot, key) -> SettlingState.key ->
               scheduler.verification.draws: DrawKey.draw(Purpose, subject) = blake2b(key=secret)
    outputs._task_rows: results.verifyrows.verify_columns -> Verified, QuorumNetworks (a replicated row's
               agreeing networks: settling.quorum_networks -> TaskView.quorum_networks), QuorumOwners
               (settling.quorum_owners: replicas.voter_name, owner- and 8 hex digits or …peer-id end;
               report.html's provenance too; Agreement.owners -> GroupVerification.owners and each
               ReplicaFigure.owner in the verification section), DeviceClass, Claim on every row (settled
               after the row was stored: laid over it when the files are written);
    report.ReportEntry.complete is False for outlier and disagreed rows (never the compared figure)
    verifyrows.verification_counts -> submit's last line (verification: N verified, N unverifiable, N
               outlier), --json/--events "verification"; plan prints "unverifiable: <shortfall>"; an
               Unverifiable task exits 1 (node/cli/exits.py)

The draw key is the one thing a worker cannot see or choose: never derived from the campaign id, a task id
or a peer id (all in offers), never in the snapshot, an offer, an event or a results file; a campaign stored
before keys were kept gets one on `--resume` (`CampaignStore.keep_secret`). The spot check is decided after
the first replica's result, so offers of checked and unchecked tasks are the same
(`tests/unit/scheduler/state/test_replication_flow.py`; the lab: `tests/labs/e2e/test_spot_checks.py`, a
`join` predicting the old campaign-id draw, tests/kit/replicaliar.py `predict`). A retried replica stays in
its class on a network the group does not hold (`quorum.replica_pool`), and may go to a peer that holds
another group's task of the job (`retry.next_peer` takes only its own group's peers). The band never widens
past 50 % (`agreement.CEILING`), so a 2x cheat never agrees with an honest replica however loaded the
machines are. Settling runs in the machine, before its finished check, so a campaign never ends with a third
replica still owed. A record holds against Sybils because evidence is weighed by who gave it
(`verification/evidence.py`: a new partner a quarter, a distrusted one nothing, a majority on one network
nothing) and a record turns only on three partners over two networks (`reputation.WITNESSES_MIN`,
`NETWORKS_MIN`); a `disagreed` group counts half the others' standing against each member; records decay
with a 30-day half-life (`PeerRecord.decayed`). What this cannot prove and what it costs:
docs/guide/verification.md. Pinned by `tests/unit/scheduler/state/test_replication_flow.py` (the machine)
and `tests/labs/e2e/test_replication.py` (real workers, tests/kit/replicaliar.py); every strategy of the
submit labs again under `serve`, one campaign each posted to its API, in
`tests/labs/e2e/test_verification_under_serve.py` (slow); the network rule without the lab switch across
three routed /24s in namespaces (tests/kit/routed.py), under `submit` and `serve`, in
`tests/labs/faults/test_network_rule.py`. A reference device (`verify.reference`, the submitter's own) is
trusted, not counted: it is never `taken` by a group, never barred by its spread or its record, and a group
with its result is judged against it alone (`verification/references.py`), so a majority of one owner's keys
cannot outvote it; `plan --json` gives each replicated job's `references` (class, reference, why none
joins). Pinned by `tests/unit/scheduler/state/test_references.py` and
`tests/labs/e2e/test_reference_device.py` (two halving `join` liars and one honest reference). A reference
named and missing is never replaced in silence (issue 50, scope 4): one not found, relayed or refused
holds the classes it could be of (`replication.reference_gap`: its own, or every class without a reference
present for one never found), whose groups are not placed (`Unverifiable`, the shortfall naming it and
`verify: {reference_fallback: allow}`); one whose task ended without a result leaves its group
`unverifiable` (`settling._reference_missing`: figures kept, none standing, nothing said of anyone's
record, exit 1). With `reference_fallback: allow` such a group is settled by the majority, each row's detail
saying "the reference <id> did not report (<why>): settled by the majority"; a tie-break it then needs goes
back to the reference (`quorum.more_peer` takes it first). Pinned by
`tests/labs/e2e/test_missing_reference.py` (R stopped: exit 1 and the line). Each offset against a
reference carries the standard error the class's pool gives one comparison (`agreement.comparison_error`,
the band's K-th part) as `Settlement.error` and `Evidence.error`; the record keeps those offsets apart
(`verification/offsets.py`, `PeerRecord.referenced`, the store's `peer_records.referenced`) and judges
them by that error alone, never the peer's own scatter, from 4 comparisons (a reference halves the
comparisons each stranger gets); a stranger is spot-checked only once
they clear too. Pinned by `tests/unit/scheduler/verification/test_reference_offsets.py`.
"""

from __future__ import annotations

from scheduler.verification import challenge
from scheduler.verification.agreement import (
    POOL_KEEP,
    Outcome,
    Replica,
    Settlement,
    core_spread,
    judged_band,
    pair_error,
    pool_error,
    pooled_spread,
    process_error,
    replica_of,
    settle,
    spread_of,
)
from scheduler.verification.bounds import OVERRUN, placed_profile
from scheduler.verification.claims import claim_problems
from scheduler.verification.classes import DeviceClass, device_class
from scheduler.verification.draws import SECRET_BYTES, DrawKey, Purpose
from scheduler.verification.evidence import weigh
from scheduler.verification.figures import Refusal, check_figures
from scheduler.verification.networks import network_of
from scheduler.verification.offsets import ReferenceOffsets
from scheduler.verification.peakcheck import peak_parts
from scheduler.verification.peers import Advertised
from scheduler.verification.references import judge, reference_peers, vouched
from scheduler.verification.replicas import Candidate, by_class, checkable, pick_replicas, voter_name
from scheduler.verification.reputation import Evidence, PeerRecord, Witness, distrusted, should_check
from scheduler.verification.sendcheck import LATE_SLACK_S, check_sends, draws_seed
from scheduler.verification.servercount import (
    Claimed,
    CountRead,
    ServerCount,
    claimed,
    count_problems,
    count_rise,
    parse_counters,
    slack_for,
    within_count,
)
from scheduler.verification.serverfloor import (
    FLOOR_SHARE,
    ServerFloor,
    floor_problems,
    lower_floor,
    server_floor,
)

__all__ = [
    "FLOOR_SHARE",
    "LATE_SLACK_S",
    "OVERRUN",
    "POOL_KEEP",
    "SECRET_BYTES",
    "Advertised",
    "Candidate",
    "Claimed",
    "CountRead",
    "DeviceClass",
    "DrawKey",
    "Evidence",
    "Outcome",
    "PeerRecord",
    "Purpose",
    "ReferenceOffsets",
    "Refusal",
    "Replica",
    "ServerCount",
    "ServerFloor",
    "Settlement",
    "Witness",
    "by_class",
    "challenge",
    "check_figures",
    "check_sends",
    "checkable",
    "claim_problems",
    "claimed",
    "core_spread",
    "count_problems",
    "count_rise",
    "device_class",
    "distrusted",
    "draws_seed",
    "floor_problems",
    "judge",
    "judged_band",
    "lower_floor",
    "network_of",
    "pair_error",
    "parse_counters",
    "peak_parts",
    "pick_replicas",
    "placed_profile",
    "pool_error",
    "pooled_spread",
    "process_error",
    "reference_peers",
    "replica_of",
    "server_floor",
    "settle",
    "should_check",
    "slack_for",
    "spread_of",
    "voter_name",
    "vouched",
    "weigh",
    "within_count",
]
