"""Endpoint jobs in campaigns: gray- and black-box targets, a job per load level, placement by model id."""

from __future__ import annotations

from pathlib import Path

import pytest

import scheduler as sch
from protocol import DeviceProfile, EndpointStatus

GRAY = """
name: served
jobs:
  - endpoint: {model: smollm2}
    generate: {prompts: builtin:summaries, num_prompts: 3, max_new_tokens: 8, concurrency: [1, 4, 8]}
"""
BLACK = """
name: hosted
jobs:
  - endpoint: {url: "https://api.example.com/v1", model: some-model, api_key_env: EXAMPLE_API_KEY}
    devices: all
    generate:
      prompts: builtin:summaries
      request_rate: 2.5
      duration_s: 30
      slo: {ttft_ms: 500, tpot_ms: 50}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(sch.CampaignError) as info:
        sch.parse_campaign(text)
    return [f"{p.path}: {p.problem}" for p in info.value.problems]


def _profile(*served: EndpointStatus) -> DeviceProfile:
    return DeviceProfile(
        device_name="box",
        soc="x",
        cores_physical=2,
        cores_logical=2,
        ram_mb=4096,
        os="Linux",
        os_version="6",
        fingerprint="f",
        endpoints=served,
    )


def test_a_gray_box_job_needs_no_models_and_expands_one_job_per_concurrency_level() -> None:
    campaign = sch.parse_campaign(GRAY)
    assert campaign.models == ()
    levels = [job.spec.generate.concurrency for job in campaign.jobs if job.spec.generate]
    assert levels == [1, 4, 8]
    assert [job.index for job in campaign.jobs] == [0, 1, 2]
    assert campaign.jobs[2].label == "jobs[0] concurrency=8"
    endpoint = campaign.jobs[0].spec.generate.endpoint if campaign.jobs[0].spec.generate else None
    assert endpoint is not None
    assert (endpoint.url, endpoint.model) == (None, "smollm2")
    models = sch.endpoint_models(campaign)
    ref = models[campaign.jobs[0].model_key]
    assert (ref.name, ref.size) == ("smollm2", 0)
    assert sch.endpoint_unit(ref) == "Endpoint (gray-box)"
    needs = sch.campaign_needs(campaign, {})
    assert needs[0].endpoint == endpoint


def test_a_black_box_job_names_the_key_variable_never_a_key() -> None:
    campaign = sch.parse_campaign(BLACK)
    (job,) = campaign.jobs
    assert job.spec.generate is not None
    endpoint = job.spec.generate.endpoint
    assert endpoint is not None
    assert (endpoint.url, endpoint.api_key_env, endpoint.api_key) == (
        "https://api.example.com/v1",
        "EXAMPLE_API_KEY",
        None,
    )
    assert job.spec.generate.request_rate == 2.5
    assert job.spec.generate.duration_s == 30
    assert job.spec.generate.slo.ttft_ms == 500


def test_a_black_box_endpoint_names_the_servers_metrics() -> None:
    """Issue 50: the submitter reads the server's counters itself (`node.submitter.floors`)."""
    text = BLACK.replace("api_key_env: EXAMPLE_API_KEY}", "api_key_env: K, metrics_url: http://s:9/metrics}")
    generate = sch.parse_campaign(text).jobs[0].spec.generate
    assert generate is not None
    assert generate.endpoint is not None
    assert generate.endpoint.metrics_url == "http://s:9/metrics"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("model: smollm2", "url: smollm2"), "jobs[0].endpoint.model"),
        (("{model: smollm2}", "{model: smollm2, key: x}"), "jobs[0].endpoint.key"),
        (("{model: smollm2}", "{model: smollm2, api_key_env: K}"), "jobs[0].endpoint.api_key_env"),
        (("{model: smollm2}", "{model: smollm2, url: ftp://x}"), "jobs[0].endpoint.url"),
        (("{model: smollm2}", "{model: smollm2, metrics_url: http://s/m}"), "jobs[0].endpoint.metrics_url"),
        (
            ("{model: smollm2}", "{model: smollm2, url: http://s/v1, metrics_url: /metrics}"),
            "jobs[0].endpoint.metrics_url",
        ),
        (("[1, 4, 8]", "[1, 0]"), "jobs[0].generate.concurrency"),
        (("concurrency: [1, 4, 8]", "concurrency: 2, request_rate: 1"), "jobs[0].generate.request_rate"),
        (("    generate:", "    compute_unit: CPU (ONNX)\n    generate:"), "jobs[0].endpoint"),
        (("\n    generate: {prompts:", "\n    x: {prompts:"), "jobs[0].endpoint"),
    ],
)
def test_a_bad_endpoint_field_is_named(change: tuple[str, str], field: str) -> None:
    text = GRAY.replace(*change)
    assert any(p.startswith(f"{field}:") for p in _problems(text)), _problems(text)


def test_slo_fields_are_checked_by_name() -> None:
    text = BLACK.replace("tpot_ms: 50", "tpot: 50")
    assert any(p.startswith("jobs[0].generate.slo.tpot:") for p in _problems(text))


def test_verify_on_a_black_box_job_is_refused_before_anything_runs() -> None:
    """One server every worker reaches is not replicated: a black-box job under `verify:` ended
    `single` and `submit` exited 0, verification asked and not obtained. Now the file is refused, the
    field named (the campaign's block or the job's own) and the way out with it; a gray-box job, each
    worker's own server, is replicated as a model's job is."""
    campaign_wide = BLACK.replace("name: hosted", "name: hosted\nverify: {replicas: 2}")
    (problem,) = _problems(campaign_wide)
    assert problem.startswith("verify: applies to jobs[0], whose black-box endpoint (url:) is one server")
    assert problem.endswith("give jobs[0] its own verify: {replicas: 1}")
    spot = BLACK.replace("    devices: all", "    devices: all\n    verify: {spot_check: 0.5}")
    (problem,) = _problems(spot)
    assert problem.startswith("jobs[0].verify: a black-box endpoint (url:) is one server")
    own = campaign_wide.replace("    devices: all", "    devices: all\n    verify: {replicas: 1}")
    assert sch.parse_campaign(own).verify_of(sch.parse_campaign(own).jobs[0]).replicas == 1
    gray = GRAY.replace("name: served", "name: served\nverify: {replicas: 2}")
    assert sch.parse_campaign(gray).verify.replicas == 2


def test_load_levels_on_a_white_box_job_are_refused() -> None:
    text = """
model: {path: ./smol.gguf}
jobs:
  - compute_unit: CPU (PyTorch)
    generate: {prompts: builtin:summaries, concurrency: 4}
"""
    assert any(p.startswith("jobs[0].generate.concurrency:") for p in _problems(text))


def test_gray_box_placement_matches_the_declared_model_id() -> None:
    campaign = sch.parse_campaign(GRAY)
    (needs, *_) = sch.campaign_needs(campaign, {})
    serving = sch.PeerView("a", _profile(EndpointStatus(name="local", model="smollm2", usable=True)))
    broken = sch.PeerView("b", _profile(EndpointStatus(name="local", model="smollm2", usable=False)))
    other = sch.PeerView("c", _profile(EndpointStatus(name="local", model="other", usable=True)))
    assert sch.feasible(needs, serving).ok
    assert sch.feasible(needs, broken).codes == (sch.Misfit.NO_ENDPOINT,)
    assert sch.feasible(needs, other).codes == (sch.Misfit.NO_ENDPOINT,)


def test_black_box_placement_takes_any_worker_whatever_its_units() -> None:
    (needs,) = sch.campaign_needs(sch.parse_campaign(BLACK), {})
    assert sch.feasible(needs, sch.PeerView("a", _profile())).ok


def test_the_example_campaign_parses() -> None:
    text = (Path(__file__).resolve().parents[4] / "examples" / "llm-endpoint.yaml").read_text()
    campaign = sch.parse_campaign(text)
    assert [job.label for job in campaign.jobs] == [
        "jobs[0] concurrency=1",
        "jobs[0] concurrency=4",
        "jobs[0] concurrency=8",
        "jobs[1]",
    ]
