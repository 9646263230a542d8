"""The campaign language: a campaign file parsed into `Campaign` and its `Job`s, every block checked.

Pure, like the rest of `scheduler`. Each problem is collected at the path the user wrote
(`problems`), so one pass reports them all as a `scheduler.errors.CampaignError`. This package
depends on nothing else of `scheduler` but `scheduler.errors`: the state machine, verification
and the results room read its values.

Modules:
    problems   collecting a campaign file's problems in one pass, at the paths the user wrote; CampaignFiles
    document   the file's text as data: JSON, or YAML with alias expansion bounded before construction
    sources    the campaign's models (model, models, model_url) as ModelSource values
    campaign   parse_campaign: YAML or the seeds' JSON body -> Campaign, Job
    requirements  a job's require: block -> Requirements
    verify     a campaign's or job's verify: block (replicas, spot_check, unverified, same_host)
    prices     a campaign's prices: block (per hour, per peer or device class) -> PriceRule
    ranking    a campaign's rank: block (what the fronts are ranked by) -> Rank
    generate   a job's generate: block and quality: -> GenerateSpec; campaign_files (prompts, input data)
    inputdata  a job's input_data: (.npy per input or one .npz) checked, digested, pinned into the spec
    fleet      a job's fleet: field (N workers driving one model server), is_fleet
    capacity   a generate block's capacity: search (SLO, goodput, concurrency or rate range, levels)
    sustain    a job's fields that change its built spec: input_data: and sustain: (sustained runs)
    endpoints  a job's endpoint: block (gray- or black-box model server), its load levels, its pseudo-model
    peaks      a job's peaks: block (the unit's peak per precision and memory access), one job per figure
    prompts    prompts from JSONL bytes (bad lines by number) or builtin:summaries; take/cycle; digest
    datablock  a generate block's tokenizer: and dataset: fields -> the pinned tokenizer and its prompts
    dataset    random prompts of exact token lengths from a seed (splitmix64), ShareGPT conversations
    summaries  the built-in summaries set, written for this project
    needs      needs_of: a job's runtime, unit, OS, RAM and GPU memory (from the model size), transfer
    blocks     what every block of the file's schema shares: Block, fields bound as their values are
    genschema  the generate, endpoint and fleet blocks of a job, as models of the file's shape
    schema     the campaign file's shape as models: campaign_schema, the JSON Schema editors read
    reference  campaign_reference: that schema as the Markdown reference, docs/campaign.md
"""

from __future__ import annotations

from scheduler.language.campaign import Campaign, Job, parse_campaign
from scheduler.language.dataset import Draws, sharegpt_prompts
from scheduler.language.document import DocumentError, load_document
from scheduler.language.endpoints import endpoint_ref, endpoint_unit, is_endpoint_key
from scheduler.language.fleet import is_fleet
from scheduler.language.generate import campaign_files
from scheduler.language.needs import Needs, campaign_needs, endpoint_models, needs_of
from scheduler.language.peaks import is_peak_model, peak_unit_kind
from scheduler.language.prices import PriceRule
from scheduler.language.problems import CampaignFiles
from scheduler.language.prompts import builtin_prompts, parse_jsonl, take
from scheduler.language.ranking import Rank
from scheduler.language.reference import campaign_reference
from scheduler.language.requirements import Requirements
from scheduler.language.schema import campaign_schema
from scheduler.language.sources import ModelSource
from scheduler.language.verify import Verify

__all__ = [
    "Campaign",
    "CampaignFiles",
    "DocumentError",
    "Draws",
    "Job",
    "ModelSource",
    "Needs",
    "PriceRule",
    "Rank",
    "Requirements",
    "Verify",
    "builtin_prompts",
    "campaign_files",
    "campaign_needs",
    "campaign_reference",
    "campaign_schema",
    "endpoint_models",
    "endpoint_ref",
    "endpoint_unit",
    "is_endpoint_key",
    "is_fleet",
    "is_peak_model",
    "load_document",
    "needs_of",
    "parse_campaign",
    "parse_jsonl",
    "peak_unit_kind",
    "sharegpt_prompts",
    "take",
]
