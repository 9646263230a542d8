"""Pure scheduler of sark-node: the campaign language and the scheduling of a campaign (campaign file
-> tasks -> needs; placement; the state machine), and the results room (`scheduler.results`: rows,
files and the one column registry). Running a campaign (the swarm, the store, the files on disk) is
`node.submitter`'s.

No trio, libp2p, sockets, files, clock, randomness or logging: time comes in as `now`, deadlines go
out as data (`Scheduler.next_deadline`), outcomes are values with reasons.

Modules:
    errors     SchedulerError, CampaignError (with FieldProblems), UnresolvedModelError
    problems   collecting a campaign file's problems in one pass, at the paths the user wrote; CampaignFiles
    document   the file's text as data: JSON, or YAML with alias expansion bounded before construction
    sources    the campaign's models (model, models, model_url) as ModelSource values
    campaign   parse_campaign: YAML or the seeds' JSON body -> Campaign, Job
    requirements  a job's require: block -> Requirements
    verify     a campaign's or job's verify: block (replicas, spot_check, unverified, same_host)
    generate   a job's generate: block and quality: -> GenerateSpec; campaign_files (prompts, input data)
    inputdata  a job's input_data: (.npy per input or one .npz) checked, digested, pinned into the spec
    capacity   a generate block's capacity: search (SLO, goodput, concurrency or rate range, levels)
    sustain    a job's fields that change its built spec: input_data: and sustain: (sustained runs)
    endpoints  a job's endpoint: block (gray- or black-box model server), its load levels, its pseudo-model
    prompts    prompts from JSONL bytes (bad lines by number) or builtin:summaries; take/cycle; digest
    datablock  a generate block's tokenizer: and dataset: fields -> the pinned tokenizer and its prompts
    dataset    random prompts of exact token lengths from a seed (splitmix64), ShareGPT conversations
    summaries  the built-in summaries set, written for this project
    needs      needs_of: a job's runtime, unit, OS, RAM and GPU memory (from the model size), transfer
    placement  PeerView, feasible (Verdict with reasons), rank (Ranked with Score), explain (Plan)
    tasks      TaskState, TaskView, Status, SchedulerSnapshot, task ids and fan-out
    retry      which failures end a task, which peer a retry goes to, backoff
    events     events in (PeersDiscovered, OfferCommitted, ...) and commands out (SendOffer, ...)
    machine    Scheduler: one per campaign, handle(event, now) -> commands
    figures    check_figures: a result's figures derived again from its raw parts, or a Refusal
    bounds     out_of_bounds: readings without raw parts held to physics, the worker's profile, the task
    results    the results room (a package): the column registry, result rows, results.csv and .json
    report     a campaign report as data: entries, the device x unit matrix
    diff       two campaigns compared: tasks paired by worker, then device; each change tested
    significance  the Mann-Whitney U test the diffs use
    llmview    LLM_FIGURES: TTFT, TPOT, ITL, decode tok/s, ROUGE-L, each with its formula (the LLM views)
    fleet      fleet load: fleet: N parsed, the seeded schedule and its deal, clock offsets, lag, saturation
    sendcheck  check_sends: a load client's records against the schedule the submitter gave it (a fleet
               member's deal, a lone open loop's seed), or a Refusal
    leases     when a lease ends whatever its heartbeats say: dispatch + transfer allowance + timeout
    classes    device classes: the profile parts two peers share exactly when their timings should agree
    replicas   pick_replicas: N peers of one class, distinct in identity and in host
    agreement  when replicas agree (a band from their pooled spread), settle: replicated k/n, disagreed
    reputation a peer's record of agreements; adaptive spot checks (p rises for peers that disagreed)
    claims     a peer's advertised calibration against physics and its class: claim_unverified
    replication  a replicated job's placement: groups of verify.replicas, one class each
    settling   a replica group's verdict in the machine: labels, or one more replica
"""

from __future__ import annotations

from scheduler.bounds import placed_profile
from scheduler.campaign import Campaign, Job, parse_campaign
from scheduler.endpoints import endpoint_ref, endpoint_unit, is_endpoint_key
from scheduler.errors import CampaignError, FieldProblem, SchedulerError, UnresolvedModelError
from scheduler.events import (
    DEFAULT_LEASE_TTL_S,
    CancelRequested,
    Command,
    Event,
    FinishCampaign,
    LeaseLapsed,
    LeaseReleased,
    MarkUnschedulable,
    OfferCommitted,
    OfferDeclined,
    OfferLost,
    PeersDiscovered,
    ProgressReported,
    RecordOutcome,
    ReplicasSettled,
    ResultAccepted,
    ResultRejected,
    SendAck,
    SendCancel,
    SendDispatch,
    SendOffer,
    SendReclaim,
    SubmitterStopped,
    TaskFailedRemotely,
    Tick,
)
from scheduler.figures import Refusal, check_figures
from scheduler.fleet import FLEET_UNIT, ClockRound, clock_offset, deal, is_fleet
from scheduler.generate import campaign_files
from scheduler.machine import Scheduler
from scheduler.needs import Needs, campaign_needs, endpoint_models, needs_of
from scheduler.placement import (
    JobPlan,
    Misfit,
    PeerView,
    Plan,
    Ranked,
    Reason,
    Rejection,
    Score,
    Verdict,
    device_kind,
    endpoint_problem,
    explain,
    feasible,
    rank,
    unit_problem,
)
from scheduler.problems import CampaignFiles
from scheduler.requirements import Requirements
from scheduler.results import (
    COLUMNS,
    CSV_COLUMNS,
    FLEET_COLUMNS,
    SEED_COLUMNS,
    Column,
    Member,
    Section,
    TaskResult,
    ended,
    failure_row,
    fleet_rows,
    level_rows,
    measured,
    merged_stats,
    result_row,
    results_document,
    row_of,
    seed_figures,
    shown_figures,
    to_csv,
)
from scheduler.retry import FINAL_FAILURES
from scheduler.sendcheck import check_sends, draws_seed
from scheduler.sources import ModelSource
from scheduler.tasks import (
    Attempt,
    Cause,
    Lapse,
    SchedulerSnapshot,
    Status,
    TaskProgress,
    TaskState,
    TaskView,
    task_id_of,
)
from scheduler.verify import Verify

__all__ = [
    "COLUMNS",
    "CSV_COLUMNS",
    "DEFAULT_LEASE_TTL_S",
    "FINAL_FAILURES",
    "FLEET_COLUMNS",
    "FLEET_UNIT",
    "SEED_COLUMNS",
    "Attempt",
    "Campaign",
    "CampaignError",
    "CampaignFiles",
    "CancelRequested",
    "Cause",
    "ClockRound",
    "Column",
    "Command",
    "Event",
    "FieldProblem",
    "FinishCampaign",
    "Job",
    "JobPlan",
    "Lapse",
    "LeaseLapsed",
    "LeaseReleased",
    "MarkUnschedulable",
    "Member",
    "Misfit",
    "ModelSource",
    "Needs",
    "OfferCommitted",
    "OfferDeclined",
    "OfferLost",
    "PeerView",
    "PeersDiscovered",
    "Plan",
    "ProgressReported",
    "Ranked",
    "Reason",
    "RecordOutcome",
    "Refusal",
    "Rejection",
    "ReplicasSettled",
    "Requirements",
    "ResultAccepted",
    "ResultRejected",
    "Scheduler",
    "SchedulerError",
    "SchedulerSnapshot",
    "Score",
    "Section",
    "SendAck",
    "SendCancel",
    "SendDispatch",
    "SendOffer",
    "SendReclaim",
    "Status",
    "SubmitterStopped",
    "TaskFailedRemotely",
    "TaskProgress",
    "TaskResult",
    "TaskState",
    "TaskView",
    "Tick",
    "UnresolvedModelError",
    "Verdict",
    "Verify",
    "campaign_files",
    "campaign_needs",
    "check_figures",
    "check_sends",
    "clock_offset",
    "deal",
    "device_kind",
    "draws_seed",
    "ended",
    "endpoint_models",
    "endpoint_problem",
    "endpoint_ref",
    "endpoint_unit",
    "explain",
    "failure_row",
    "feasible",
    "fleet_rows",
    "is_endpoint_key",
    "is_fleet",
    "level_rows",
    "measured",
    "merged_stats",
    "needs_of",
    "parse_campaign",
    "placed_profile",
    "rank",
    "result_row",
    "results_document",
    "row_of",
    "seed_figures",
    "shown_figures",
    "task_id_of",
    "to_csv",
    "unit_problem",
]
