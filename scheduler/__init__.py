"""Pure scheduler of sark-node: campaign file -> tasks -> needs; placement; the state machine; result rows.

No trio, libp2p, sockets, files, clock, randomness or logging: time comes in as `now`, deadlines go
out as data (`Scheduler.next_deadline`), outcomes are values with reasons.

Modules:
    errors     SchedulerError, CampaignError (with FieldProblems), UnresolvedModelError
    problems   collecting a campaign file's problems in one pass, at the paths the user wrote
    document   the file's text as data: JSON, or YAML with alias expansion bounded before construction
    sources    the campaign's models (model, models, model_url) as ModelSource values
    campaign   parse_campaign: YAML or the seeds' JSON body -> Campaign, Job, Requirements
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
    results    CSV_COLUMNS, result_row, failure_row, to_csv, results_document
    report     a campaign report as data: entries, the device x unit matrix
    diff       two campaigns compared: tasks paired by worker, then device; each change tested
    significance  the Mann-Whitney U test the diffs use
    llmview    LLM_FIGURES: TTFT, TPOT, ITL, decode tok/s, ROUGE-L, each with its formula (the LLM views)
    genrows    GENERATION_COLUMNS: a generate task's columns (TTFT, TPOT, ITL, throughput, ROUGE)
    caprows    CAPACITY_COLUMNS: a capacity search's Capacity row (the knee) and one row per level
    energyrows ENERGY_COLUMNS: energy per inference and per token, power, method, note
    fleet      fleet load: fleet: N parsed, the seeded schedule and its deal, clock offsets, fleet columns
    fleetrows  a fleet job's member rows and its merged row, from every member's raw records
    sustainrows  SUSTAIN_COLUMNS: Throttled with its causes, window medians, the telemetry kept
"""

from __future__ import annotations

from scheduler.campaign import Campaign, Job, Requirements, parse_campaign
from scheduler.caprows import level_rows
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
from scheduler.fleet import FLEET_COLUMNS, FLEET_UNIT, ClockRound, clock_offset, deal, is_fleet
from scheduler.fleetrows import Member, fleet_rows
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
from scheduler.results import CSV_COLUMNS, SEED_COLUMNS, failure_row, result_row, results_document, to_csv
from scheduler.retry import FINAL_FAILURES
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

__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_LEASE_TTL_S",
    "FINAL_FAILURES",
    "FLEET_COLUMNS",
    "FLEET_UNIT",
    "SEED_COLUMNS",
    "Attempt",
    "Campaign",
    "CampaignError",
    "CancelRequested",
    "Cause",
    "ClockRound",
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
    "Requirements",
    "ResultAccepted",
    "ResultRejected",
    "Scheduler",
    "SchedulerError",
    "SchedulerSnapshot",
    "Score",
    "SendAck",
    "SendCancel",
    "SendDispatch",
    "SendOffer",
    "SendReclaim",
    "Status",
    "SubmitterStopped",
    "TaskFailedRemotely",
    "TaskProgress",
    "TaskState",
    "TaskView",
    "Tick",
    "UnresolvedModelError",
    "Verdict",
    "campaign_files",
    "campaign_needs",
    "check_figures",
    "clock_offset",
    "deal",
    "device_kind",
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
    "needs_of",
    "parse_campaign",
    "rank",
    "result_row",
    "results_document",
    "task_id_of",
    "to_csv",
    "unit_problem",
]
