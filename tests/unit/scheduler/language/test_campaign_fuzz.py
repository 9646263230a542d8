"""Any campaign text either parses or raises `CampaignError`: never another exception."""

from __future__ import annotations

import contextlib
import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Campaign, CampaignError, parse_campaign

FIELDS = [
    "name", "priority", "processes", "model", "models", "model_url", "jobs", "url", "path", "sha256",
    "format", "key", "compute_unit", "num_inference_runs", "warmup_runs", "load_runs", "devices", "require",
    "min_ram_gb", "os", "peers", "input_shapes", "timeout_s", "sweep", "threads", "strict_placement",
    "CPU (ONNX)", "all",
]  # fmt: skip
WORDS = [*FIELDS, "https://x.org/m.onnx", "a.onnx", "m.pkl", "ab" * 32, "any", "GPU (ONNX)"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.integers(0, 3)), inner, max_size=5),
    ),
    max_leaves=25,
)
documents = st.dictionaries(st.sampled_from(FIELDS), values, max_size=7)
jobs = st.lists(st.dictionaries(st.sampled_from(FIELDS), values, max_size=6), min_size=1, max_size=3)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def attempt(document: object, as_yaml: bool) -> Campaign | CampaignError:
    text = yaml.safe_dump(document) if as_yaml else json.dumps(document, allow_nan=True)
    try:
        return parse_campaign(text)
    except CampaignError as exc:
        return exc


@FUZZ
@given(documents, st.booleans())
def test_arbitrary_documents_parse_or_raise_campaign_error(
    document: dict[str, object], as_yaml: bool
) -> None:
    outcome = attempt(document, as_yaml)
    if isinstance(outcome, CampaignError):
        assert outcome.problems
        assert all(p.problem for p in outcome.problems)
    else:
        assert outcome.jobs
        assert outcome.models


@FUZZ
@given(jobs, st.booleans())
def test_arbitrary_jobs_under_a_good_model_are_blamed_on_the_jobs(
    job_list: list[object], as_yaml: bool
) -> None:
    outcome = attempt({"model": {"url": "https://x.org/m.onnx"}, "jobs": job_list}, as_yaml)
    if isinstance(outcome, CampaignError):
        assert all(p.path.startswith("jobs[") for p in outcome.problems), outcome.problems
    else:
        assert all(job.spec.runs >= 1 for job in outcome.jobs)


@FUZZ
@given(st.text(max_size=60))
def test_arbitrary_text_parses_or_raises_campaign_error(text: str) -> None:
    with contextlib.suppress(CampaignError):
        parse_campaign(text)
