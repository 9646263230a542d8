"""The campaign file: parse YAML or JSON text, validate every field, and return frozen values.

Accepted shapes:

- the design's YAML: ``name``, ``priority`` (0..100), ``processes``, ``model`` ({url | path, sha256?,
  format?, key?, name?}) or ``models`` (a list of those), and ``jobs``;
- the seeds' REST body as it is: ``{"model_url": ..., "jobs": [{"compute_unit": ..., ...}]}``.

A job without ``model:`` runs on every model; ``sweep: {field: [values]}`` makes one job per combination
(the product, in the order written). Job indexes count the expanded jobs in file order: stable task ids.

Every problem is collected in one pass and raised together as a `CampaignError`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Final, Literal

from pydantic import ValidationError

from protocol import ComputeUnit, Endpoint, TaskSpec, Value
from scheduler.errors import CampaignError
from scheduler.language.document import DocumentError, load_document
from scheduler.language.endpoints import (
    LOAD_FIELDS,
    endpoint_key,
    load_label,
    only_endpoint_jobs,
    parse_endpoint,
)
from scheduler.language.fleet import fleet_devices
from scheduler.language.generate import generate_specs
from scheduler.language.peaks import parse_peaks, peak_key
from scheduler.language.prices import PriceRule, parse_prices
from scheduler.language.problems import Problems, check_keys, describe, dig
from scheduler.language.ranking import Rank, parse_rank
from scheduler.language.requirements import Requirements, parse_requirements
from scheduler.language.sources import ModelSource, parse_models
from scheduler.language.sustain import extend_spec
from scheduler.language.verify import Verify, black_box_verify, verify_field, verify_of


class Job(Value):
    """One expanded job: a model, a task spec, how many devices, and requirements.

    Attributes:
        index: position among the campaign's expanded jobs; part of every task id.
        model_key: which `ModelSource` it measures.
        spec: how to benchmark.
        devices: "all" feasible peers (one task each), "any" one peer, or exactly n distinct peers.
        require: requirements on the device.
        label: where it came from, for people: ``jobs[0]`` plus model and sweep values.
    """

    index: int
    model_key: str
    spec: TaskSpec
    devices: Literal["all", "any"] | int = "all"
    require: Requirements = Requirements()
    label: str = ""
    verify: Verify | None = None  # None: the campaign's (`scheduler.language.verify`)


class Campaign(Value):
    """A validated campaign: what to measure, on which units, how often, with what priority."""

    name: str
    priority: int = 50
    processes: int = 3
    max_inflight: int = 0
    models: tuple[ModelSource, ...]
    jobs: tuple[Job, ...]
    verify: Verify = Verify()
    prices: tuple[PriceRule, ...] = ()  # `scheduler.language.prices`: per peer or device class
    rank: Rank | None = None  # `scheduler.language.ranking`: what the fronts are ranked by

    def verify_of(self, job: Job) -> Verify:
        """The `verify:` block that applies to a job: its own, else the campaign's."""
        return verify_of(self.verify, job.verify)

    def model(self, key: str) -> ModelSource:
        """The model with this key (KeyError if none)."""
        for source in self.models:
            if source.key == key:
                return source
        raise KeyError(key)


DEFAULT_PROCESSES: Final = 3
DEFAULT_PRIORITY: Final = 50
MAX_SWEEP: Final = 10_000  # jobs one sweep may expand to (the product of its value lists)
_TOP_FIELDS: Final = (
    "name",
    "priority",
    "processes",
    "max_inflight",
    "model",
    "models",
    "model_url",
    "jobs",
    "verify",
    "prices",
    "rank",
)
_SPEC_FIELDS: Final[dict[str, str]] = {
    "num_inference_runs": "runs",
    "warmup_runs": "warmups",
    "warmup_until_stable": "warmup_until_stable",
    "load_runs": "load_runs",
    "processes": "processes",
    "timeout_s": "timeout_s",
    "input_shapes": "input_shapes",
    "input_values": "input_values",
    "strict_placement": "strict_placement",
    "precision": "precision",
    "dynamic_shapes": "dynamic_shapes",
    "performance_hint": "performance_hint",
    "placement_share": "placement_share",
    "threads": "threads",
    "memory_limit_mb": "memory_limit_mb",
    "ci_target_pct": "ci_target_pct",
    "max_runs": "max_runs",
    "max_duration_s": "max_duration_s",
}
_JOB_FIELDS: Final = (
    "compute_unit",
    *_SPEC_FIELDS,
    "devices",
    "require",
    "model",
    "sweep",
    "generate",
    "quality",
    "input_data",
    "endpoint",
    "fleet",
    "sustain",
    "verify",
    "peaks",
)
_UNIT_NAMES: Final = frozenset(u.value for u in ComputeUnit)
_VALID_UNITS: Final = ", ".join(u.value for u in ComputeUnit)


def parse_campaign(
    text: str, *, source: str = "campaign.yaml", files: Mapping[str, bytes] | None = None
) -> Campaign:
    """Parse and validate a campaign file (YAML, or JSON such as the seeds' REST body).

    Args:
        text: the file's text.
        source: where it came from, named in the error message.
        files: the bytes of the prompts files that generate jobs name (see `campaign_files`), by name.

    Returns:
        The validated campaign.

    Raises:
        CampaignError: with every problem found, each naming its field path.
    """
    problems = Problems()
    data = _load(text, problems)
    if data is None:
        raise CampaignError(problems.items, source=source)
    check_keys(data, "", _TOP_FIELDS, problems)
    name = _name(data, problems)
    priority = _bounded_int(data, "priority", DEFAULT_PRIORITY, (0, 100), problems)
    processes = _bounded_int(data, "processes", DEFAULT_PROCESSES, (1, 20), problems)
    max_inflight = _bounded_int(data, "max_inflight", 0, (0, 100_000), problems)
    models = [] if only_endpoint_jobs(data) else parse_models(data, problems)
    verify = verify_field(data, "verify", problems) or Verify()
    jobs = _jobs(data, [m.key for m in models], processes, verify, files or {}, problems)
    prices = parse_prices(data, problems)
    rank = parse_rank(data, problems)
    if rank is not None and rank.by == "goodput" and not any(_has_slo(job) for job in jobs):
        problems.add("rank.by", "goodput needs a generate job with an slo: (its requests counted against it)")
    if problems.items:
        raise CampaignError(problems.items, source=source)
    if not name:
        name = models[0].key if models else "campaign"
    return Campaign(
        name=name,
        priority=priority,
        processes=processes,
        max_inflight=max_inflight,
        models=tuple(models),
        jobs=tuple(jobs),
        verify=verify,
        prices=prices,
        rank=rank,
    )


def _has_slo(job: Job) -> bool:
    generate = job.spec.generate
    return generate is not None and any(v is not None for v in generate.slo.model_dump().values())


def _load(text: str, problems: Problems) -> Mapping[str, object] | None:
    try:
        data = load_document(text)
    except DocumentError as exc:
        problems.add("", exc.detail)
        return None
    if not isinstance(data, dict):
        problems.add("", f"expected a mapping with model and jobs, got {describe(data)}")
        return None
    return data


def _name(data: Mapping[str, object], problems: Problems) -> str:
    name = data.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        problems.add("name", f"expected a text of at most 200 characters, got {describe(name)}")
        return ""
    return name


def _bounded_int(
    data: Mapping[str, object], field: str, default: int, bounds: tuple[int, int], problems: Problems
) -> int:
    value = data.get(field, default)
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.add(field, f"expected a whole number from {low} to {high}, got {describe(value)}")
        return default
    return value


def _jobs(
    data: Mapping[str, object],
    model_keys: Sequence[str],
    processes: int,
    campaign_verify: Verify,
    files: Mapping[str, bytes],
    problems: Problems,
) -> list[Job]:
    """The expanded jobs, under the campaign's `processes` and `verify:` block."""
    raw = data.get("jobs")
    if not isinstance(raw, list) or not raw:
        problems.add("jobs", f"expected a non-empty list of jobs, got {describe(raw)}")
        return []
    jobs: list[Job] = []
    for i, entry in enumerate(raw):
        path = f"jobs[{i}]"
        if not isinstance(entry, dict):
            problems.add(path, f"expected a mapping with compute_unit, got {describe(entry)}")
            continue
        check_keys(entry, path, _JOB_FIELDS, problems)
        for fields, paths, label in _variants(path, entry, problems):
            if "peaks" in fields:
                jobs.extend(_peak_jobs(len(jobs), fields, paths, label, problems))
                continue
            given = "endpoint" in fields
            endpoint = parse_endpoint(fields["endpoint"], paths["endpoint"], problems) if given else None
            keys: list[object] = [fields["model"]] if "model" in fields else [*model_keys] or [None]
            for key in [endpoint_key(endpoint)] if endpoint else keys:
                job = _job(len(jobs), fields, paths, key, model_keys, processes, problems)
                if job is not None and endpoint is not None and endpoint.url is not None:
                    black_box_verify(campaign_verify, job.verify, path, problems)
                spec = extend_spec(job.spec, fields, paths, files, problems) if job is not None else None
                job = job.with_(spec=spec) if job is not None and spec is not None else None
                specs = generate_specs(job.spec if job else None, fields, path, files, problems)
                if job is not None:
                    suffix = f" model={key}" if len(model_keys) > 1 and not endpoint else ""
                    jobs.extend(_levels(job.with_(label=label + suffix), specs, endpoint, len(jobs)))
    return jobs


_NOT_WITH_PEAKS: Final = ("model", "generate", "quality", "input_data", "endpoint", "fleet", "sustain")


def _peak_jobs(
    first: int, fields: Mapping[str, object], paths: Mapping[str, str], label: str, problems: Problems
) -> list[Job]:
    """A peaks job's figures, one job each (`scheduler.language.peaks`), indexed from `first`."""
    before = len(problems.items)
    for name in (n for n in _NOT_WITH_PEAKS if n in fields):
        problems.add(paths[name], "a peaks job measures its unit, not a model: leave it out")
    if fields.get("processes", 1) != 1:
        problems.add(paths["processes"], "a peaks task is one measuring child: leave processes out or set 1")
    raw_unit = fields.get("compute_unit")
    unit = ComputeUnit(raw_unit) if isinstance(raw_unit, str) and raw_unit in _UNIT_NAMES else None
    figures = parse_peaks(fields["peaks"], paths["peaks"], unit, problems)
    job = _job(first, fields, paths, "peaks", (), 1, problems)
    if job is None or unit is None or len(problems.items) > before:
        return []
    return [
        job.with_(
            index=first + k,
            model_key=peak_key(unit, figure),
            spec=job.spec.with_(peaks=figure),
            label=f"{label} peaks={figure.precision}",
        )
        for k, figure in enumerate(figures)
    ]


def _levels(job: Job, specs: Sequence[TaskSpec], endpoint: Endpoint | None, first: int) -> list[Job]:
    """One job per load level (a generate block's concurrency or request-rate list), indexed in order."""
    levels: list[Job] = []
    for spec in specs:
        generate = spec.generate
        label = job.label
        if generate is not None:
            label += load_label(generate) if len(specs) > 1 else ""
            spec = spec.with_(generate=generate.with_(endpoint=endpoint)) if endpoint else spec
        devices = fleet_devices(spec.generate, job.devices)
        levels.append(job.with_(index=first + len(levels), spec=spec, label=label, devices=devices))
    return levels


Variant = tuple[dict[str, object], dict[str, str], str]


def _variants(path: str, entry: Mapping[str, object], problems: Problems) -> list[Variant]:
    """Expand ``sweep: {field: [values]}`` into one field set per combination."""
    base = {k: v for k, v in entry.items() if k != "sweep"}
    paths = {k: f"{path}.{k}" for k in _JOB_FIELDS}
    sweep = entry.get("sweep")
    if sweep is None:
        return [(base, paths, path)]
    if not isinstance(sweep, dict) or not sweep:
        problems.add(f"{path}.sweep", f"expected a mapping of field: [values], got {describe(sweep)}")
        return [(base, paths, path)]
    axes: list[list[tuple[str, int, object]]] = []
    for field, values in sweep.items():
        if field not in _JOB_FIELDS or field == "sweep":
            problems.add(f"{path}.sweep.{field}", "unknown field: only job fields can be swept")
        elif not isinstance(values, list) or not values:
            problems.add(
                f"{path}.sweep.{field}", f"expected a non-empty list of values, got {describe(values)}"
            )
        else:
            axes.append([(str(field), k, v) for k, v in enumerate(values)])
    combinations = math.prod(len(axis) for axis in axes)
    if combinations > MAX_SWEEP:
        problems.add(f"{path}.sweep", f"expands to {combinations} jobs, at most {MAX_SWEEP}")
        return [(base, paths, path)]
    variants: list[Variant] = []
    for combo in itertools.product(*axes):
        fields = dict(base) | {field: value for field, _, value in combo}
        swept = {field: f"{path}.sweep.{field}[{k}]" for field, k, _ in combo}
        label = " ".join([path, *(f"{field}={_short(value)}" for field, _, value in combo)])
        variants.append((fields, paths | swept, label))
    return variants


def _short(value: object) -> str:
    return json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value


def _job(
    index: int,
    fields: Mapping[str, object],
    paths: Mapping[str, str],
    model_key: object,
    model_keys: Sequence[str],
    processes: int,
    problems: Problems,
) -> Job | None:
    before = len(problems.items)
    endpoint = "endpoint" in fields
    unit = _unit(fields, paths["compute_unit"], problems) if not endpoint else None
    devices = _devices(fields.get("devices", "all"), paths["devices"], problems)
    require = parse_requirements(fields.get("require", {}), paths["require"], problems)
    if endpoint and ("compute_unit" in fields or "model" in fields or "generate" not in fields):
        problems.add(paths["endpoint"], "an endpoint job takes a generate: block, no compute_unit or model")
    generate = fields.get("generate")
    loads = [k for k in LOAD_FIELDS[:3] if isinstance(generate, dict) and k in generate]
    for load in loads if not endpoint else []:
        problems.add(f"{paths['generate']}.{load}", "load levels apply to endpoint jobs only")
    if not endpoint and model_keys and (not isinstance(model_key, str) or model_key not in model_keys):
        known = ", ".join(model_keys)
        problems.add(paths["model"], f"no model with key {describe(model_key)}; the campaign has: {known}")
    spec = _spec(fields, paths, unit, processes, problems)
    verify = verify_field(fields, paths["verify"], problems)
    if len(problems.items) > before or spec is None or require is None or devices is None:
        return None
    return Job(
        index=index, model_key=str(model_key), spec=spec, devices=devices, require=require, verify=verify
    )


def _unit(fields: Mapping[str, object], path: str, problems: Problems) -> ComputeUnit | None:
    if "compute_unit" not in fields:
        problems.add(path, f"required; one of: {_VALID_UNITS}")
        return None
    raw = fields["compute_unit"]
    if isinstance(raw, str) and raw in _UNIT_NAMES:
        return ComputeUnit(raw)
    what = "unknown compute unit" if isinstance(raw, str) else "expected a compute unit's name, got"
    problems.add(path, f"{what} {describe(raw)}; valid: {_VALID_UNITS}")
    return None


def _devices(raw: object, path: str, problems: Problems) -> Literal["all", "any"] | int | None:
    if raw == "all":
        return "all"
    if raw == "any":
        return "any"
    if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= 10_000:
        return raw
    problems.add(path, f"expected all, any or a whole number from 1, got {describe(raw)}")
    return None


def _spec(
    fields: Mapping[str, object],
    paths: Mapping[str, str],
    unit: ComputeUnit | None,
    processes: int,
    problems: Problems,
) -> TaskSpec | None:
    """Build the `TaskSpec` in strict mode; its bounds are the single source of truth."""
    mapped: dict[str, object] = {"compute_unit": unit or ComputeUnit.CPU_ONNX, "processes": processes}
    back: dict[str, str] = {}
    for field, spec_field in _SPEC_FIELDS.items():
        if field in fields:
            value = fields[field]
            if spec_field == "input_shapes" and isinstance(value, dict):
                value = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
            mapped[spec_field] = value
            back[spec_field] = paths[field]
    try:
        spec = TaskSpec.model_validate(mapped, strict=True)
    except ValidationError as exc:
        for error in exc.errors():
            head, *rest = error["loc"]
            path = back.get(str(head), str(head))
            problems.add(path + dig(rest), _spec_problem(error["type"], error["msg"], error.get("input")))
        return None
    bad = [(name, k, d) for name, shape in spec.input_shapes.items() for k, d in enumerate(shape) if d < 1]
    for name, k, dim in bad:
        problems.add(f"{back['input_shapes']}.{name}[{k}]", f"a dimension must be at least 1, got {dim}")
    return None if bad else spec


def _spec_problem(kind: str, message: str, value: object) -> str:
    if kind == "tuple_type":
        return f"expected a list of whole numbers (a shape), got {describe(value)}"
    if kind.endswith("_type"):
        return f"{message.replace('Input should be', 'expected')}, got {describe(value)}"
    return f"{message.replace('Input should be', 'must be')}, got {describe(value)}"
