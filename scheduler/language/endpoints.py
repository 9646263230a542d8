"""Endpoint jobs: a job's ``endpoint:`` block and its load levels, and the pseudo-model it measures.

Gray-box: ``endpoint: {model: ID}`` runs only on workers whose owner declared a server listing ID.
Black-box: ``endpoint: {url: https://..., model: ID, api_key_env: NAME}``; the campaign names the
submitter's environment variable, never the key; ``metrics_url:`` names the server's Prometheus
metrics, which the submitter reads itself to hold the load's count to the server's
(`scheduler.verification.servercount`). Load: ``generate.concurrency`` (a level or a list:
closed loop, one job per level) or ``generate.request_rate`` (Poisson arrivals, one job per rate),
``generate.duration_s`` to cycle the prompts for that long, and ``generate.slo`` for goodput; or
``generate.capacity`` to search the highest load that meets the SLO (`scheduler.language.capacity`).

An endpoint job moves no model bytes: its `ModelRef` is a name and a digest of the target (never
the key), size 0, so placement, results and reports treat it like any model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Final

from protocol import Endpoint, GenerateSpec, ModelFormat, ModelRef
from scheduler.language.capacity import SLO_FIELDS, capacity_fields
from scheduler.language.problems import Problems, check_keys, describe

ENDPOINT_FIELDS: Final = ("model", "url", "api_key_env", "metrics_url")
LOAD_FIELDS: Final = ("concurrency", "request_rate", "duration_s", "slo", "capacity")
MAX_LEVELS: Final = 64
_ENV_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_KEY_PREFIX: Final = "endpoint:"
_GRAY: Final = "endpoint:gray-box"  # the pseudo-model's one source: never fetched, it names the kind
_BLACK: Final = "endpoint:black-box"


def parse_endpoint(raw: object, where: str, problems: Problems) -> Endpoint | None:
    """The job's `Endpoint`, or None with its problems recorded at ``jobs[0].endpoint.<field>``."""
    if not isinstance(raw, dict):
        problems.add(where, f"expected a mapping ({', '.join(ENDPOINT_FIELDS)}), got {describe(raw)}")
        return None
    before = len(problems.items)
    check_keys(raw, where, ENDPOINT_FIELDS, problems)
    model, url, env = raw.get("model"), raw.get("url"), raw.get("api_key_env")
    if not isinstance(model, str) or not 0 < len(model) <= 256:
        problems.add(f"{where}.model", f"required: the model id the server lists, got {describe(model)}")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        problems.add(f"{where}.url", f"expected an http(s) URL of the server, got {describe(url)}")
    if env is not None and (not isinstance(env, str) or not _ENV_RE.match(env)):
        problems.add(f"{where}.api_key_env", f"expected an environment variable's name, got {describe(env)}")
    elif env is not None and url is None:
        problems.add(f"{where}.api_key_env", "a key goes with a url: a declared server needs none")
    metrics = raw.get("metrics_url")
    if metrics is not None and (
        not isinstance(metrics, str) or not metrics.startswith(("http://", "https://"))
    ):
        got = describe(metrics)
        problems.add(f"{where}.metrics_url", f"expected an http(s) URL of the server's metrics, got {got}")
    elif metrics is not None and url is None:
        own = "metrics go with a url: each worker's declared server is its own"
        problems.add(f"{where}.metrics_url", own)
    if len(problems.items) > before:
        return None
    return Endpoint(model=str(model), url=url, api_key_env=env, metrics_url=metrics)


def load_levels(raw: Mapping[str, object], where: str, problems: Problems) -> list[dict[str, object]]:
    """The generate block's load fields, one mapping per level (concurrency or request rate); a
    capacity search (`scheduler.language.capacity`) is one mapping: it runs its levels itself."""
    searched = capacity_fields(raw, where, problems)
    if searched is not None:
        return [searched]
    slo = raw.get("slo")
    if isinstance(slo, dict):
        check_keys(slo, f"{where}.slo", SLO_FIELDS, problems)
    fixed = {k: raw[k] for k in ("duration_s", "slo") if k in raw}
    concurrency, rate = raw.get("concurrency"), raw.get("request_rate")
    if concurrency is not None and rate is not None:
        problems.add(f"{where}.request_rate", "give concurrency levels or request rates, not both")
        return []
    field, value = ("request_rate", rate) if rate is not None else ("concurrency", concurrency)
    if value is None:
        return [fixed]
    values = value if isinstance(value, list) else [value]
    if not values or len(values) > MAX_LEVELS:
        problems.add(f"{where}.{field}", f"expected 1 to {MAX_LEVELS} levels, got {describe(value)}")
        return []
    return [fixed | {field: v} for v in dict.fromkeys(values)]


def load_label(spec: GenerateSpec) -> str:
    """The load level of one expanded job, for its label: `` concurrency=4`` or `` request_rate=2``,
    after a length sweep's point (`` input_tokens=128 output_tokens=32``)."""
    point = "".join(
        f" {name}={value}"
        for name, value in (
            ("input_tokens", spec.sweep_input_tokens),
            ("output_tokens", spec.sweep_output_tokens),
        )
        if value is not None
    )
    if spec.request_rate is not None:
        return f"{point} request_rate={spec.request_rate:g}"
    return f"{point} concurrency={spec.concurrency}"


def only_endpoint_jobs(data: Mapping[str, object]) -> bool:
    """A campaign with no model field whose jobs are all endpoint or peaks jobs (`scheduler.language.peaks`):
    it needs no ``models:``."""
    jobs = data.get("jobs")
    if any(k in data for k in ("model", "models", "model_url")) or not isinstance(jobs, list) or not jobs:
        return False
    return all(isinstance(job, dict) and ("endpoint" in job or "peaks" in job) for job in jobs)


def endpoint_key(endpoint: Endpoint) -> str:
    """The model key of an endpoint job: its target, never its key."""
    return f"{_KEY_PREFIX}{endpoint.url or 'declared'}#{endpoint.model}"


def endpoint_ref(spec: GenerateSpec) -> ModelRef:
    """The pseudo-model of an endpoint job: the model id, size 0, a digest of the target."""
    assert spec.endpoint is not None
    digest = hashlib.sha256(b"sark/endpoint/v1\n" + endpoint_key(spec.endpoint).encode()).hexdigest()
    kind = _BLACK if spec.endpoint.url else _GRAY
    return ModelRef(
        name=spec.endpoint.model[:255], size=0, sha256=digest, format=ModelFormat.ONNX, sources=(kind,)
    )


def endpoint_unit(model: ModelRef) -> str | None:
    """What a result row says in place of a compute unit for an endpoint task (None for a model)."""
    kinds = {_GRAY: "Endpoint (gray-box)", _BLACK: "Endpoint (black-box)"}
    return kinds.get(model.sources[0]) if model.size == 0 and len(model.sources) == 1 else None


def is_endpoint_key(key: str) -> bool:
    """Whether a job's model key names an endpoint rather than a campaign model."""
    return key.startswith(_KEY_PREFIX)


__all__ = [
    "ENDPOINT_FIELDS",
    "LOAD_FIELDS",
    "endpoint_key",
    "endpoint_ref",
    "endpoint_unit",
    "is_endpoint_key",
    "load_label",
    "load_levels",
    "only_endpoint_jobs",
    "parse_endpoint",
]
