"""Campaign files: the design's YAML, the seeds' JSON bodies verbatim, and every malformed case by field."""

from __future__ import annotations

import pytest
from kit.scheduler_harness import CAMPAIGN_YAML, SHA

from protocol import ComputeUnit, ModelFormat
from scheduler import CampaignError, FieldProblem, Requirements, parse_campaign

# The seeds' `POST /api/campaigns` bodies (seeds/001, "First Campaign" and "Multi-Device Distribution").
SEED_BODY = """{
    "model_url": "https://github.com/onnx/models/raw/refs/heads/main/validated/vision/object_detection_segmentation/tiny-yolov2/model/tinyyolov2-7.onnx",
    "jobs": [
      {
        "compute_unit": "CPU (ONNX)",
        "num_inference_runs": 10
      }
    ]
  }"""
SEED_MULTI = """{
    "model_url": "...",
    "jobs": [
      { "compute_unit": "CPU (ONNX)" },
      { "compute_unit": "CPU (ONNX)" },
      { "compute_unit": "GPU (CoreML)" },
      { "compute_unit": "GPU (CoreML)" }
    ]
  }"""


def problems_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(text)
    return [(p.path, p.problem) for p in caught.value.problems]


def test_the_design_yaml_parses_into_jobs_with_their_specs() -> None:
    campaign = parse_campaign(CAMPAIGN_YAML)
    assert (campaign.name, campaign.priority, campaign.processes) == ("mobilenet-fleet", 50, 3)
    (model,) = campaign.models
    assert (model.key, model.name, model.url, model.path) == (
        "mobilenet",
        "mobilenet.onnx",
        "https://example.org/mobilenet.onnx",
        None,
    )
    assert (model.sha256, model.format) == (SHA, ModelFormat.ONNX)
    cpu, gpu = campaign.jobs
    assert (cpu.index, cpu.model_key, cpu.devices) == (0, "mobilenet", "all")
    assert cpu.spec.compute_unit == ComputeUnit.CPU_ONNX
    assert (cpu.spec.runs, cpu.spec.warmups, cpu.spec.load_runs, cpu.spec.processes) == (100, 10, 3, 3)
    assert cpu.spec.input_shapes == {"input": (1, 3, 224, 224)}
    assert (cpu.spec.timeout_s, cpu.spec.strict_placement) == (600.0, True)
    assert cpu.require == Requirements(min_ram_gb=4.0, os=("Linux", "Darwin"))
    assert (gpu.index, gpu.spec.compute_unit, gpu.spec.runs, gpu.devices) == (
        1,
        ComputeUnit.GPU_ONNX,
        100,
        "all",
    )
    assert gpu.require == Requirements()


def test_the_seed_json_body_is_accepted_as_it_is() -> None:
    campaign = parse_campaign(SEED_BODY, source="request body")
    (model,) = campaign.models
    assert model.name == "tinyyolov2-7.onnx"
    assert model.url is not None
    assert model.url.endswith("/tinyyolov2-7.onnx")
    assert (model.sha256, model.key, campaign.name) == (None, "tinyyolov2-7", "tinyyolov2-7")
    (job,) = campaign.jobs
    assert (job.spec.compute_unit, job.spec.runs, job.devices) == (ComputeUnit.CPU_ONNX, 10, "all")
    assert (campaign.priority, job.spec.processes) == (50, 3)


def test_the_seed_body_with_a_placeholder_url_names_the_url() -> None:
    assert problems_of(SEED_MULTI) == [("model_url", "expected an http(s) URL with a host, got '...'")]
    body = SEED_MULTI.replace('"..."', '"http://127.0.0.1:8000/m.onnx"')
    units = [j.spec.compute_unit for j in parse_campaign(body).jobs]
    assert units == [
        ComputeUnit.CPU_ONNX,
        ComputeUnit.CPU_ONNX,
        ComputeUnit.GPU_COREML,
        ComputeUnit.GPU_COREML,
    ]


def test_the_acceptance_case_names_each_bad_field_in_one_pass() -> None:
    text = """
name: bad
priority: high
model: {url: "https://example.org/m.onnx", sha256: "xyz"}
jobs:
  - {compute_unit: "TPU (ONNX)", num_inference_runs: -5}
"""
    with pytest.raises(CampaignError) as caught:
        parse_campaign(text, source="bad.yaml")
    paths = [p.path for p in caught.value.problems]
    assert paths == ["priority", "model.sha256", "jobs[0].compute_unit", "jobs[0].num_inference_runs"]
    message = str(caught.value)
    assert message.splitlines()[0] == "bad.yaml: 4 problems"
    assert (
        "  jobs[0].compute_unit: unknown compute unit 'TPU (ONNX)'; valid: CPU (ONNX), GPU (ONNX)" in message
    )
    assert all(f"  {p}" in message.splitlines() for p in caught.value.problems)


GOOD_MODEL = "model: {url: 'https://example.org/m.onnx'}\n"
ONE_JOB = "jobs: [{compute_unit: CPU (ONNX)}]\n"

MALFORMED = [
    ("wrong type", "priority: high\n" + GOOD_MODEL + ONE_JOB, "priority", "whole number from 0 to 100"),
    ("priority too high", "priority: 101\n" + GOOD_MODEL + ONE_JOB, "priority", "got int 101"),
    ("processes zero", "processes: 0\n" + GOOD_MODEL + ONE_JOB, "processes", "from 1 to 20"),
    ("name not text", "name: [a]\n" + GOOD_MODEL + ONE_JOB, "name", "expected a text"),
    ("unknown top field", "modle: x\n" + GOOD_MODEL + ONE_JOB, "modle", "did you mean model?"),
    ("no model", ONE_JOB, "model", "required"),
    (
        "model and model_url",
        GOOD_MODEL + "model_url: https://x.org/a.onnx\n" + ONE_JOB,
        "model_url",
        "only one",
    ),
    ("url and path", "model: {url: 'https://x.org/a.onnx', path: a.onnx}\n" + ONE_JOB, "model", "not both"),
    ("neither url nor path", "model: {sha256: " + SHA + "}\n" + ONE_JOB, "model", "required: url or path"),
    ("ftp url", "model: {url: 'ftp://x.org/a.onnx'}\n" + ONE_JOB, "model.url", "http(s) URL"),
    (
        "short sha256",
        "model: {url: 'https://x.org/a.onnx', sha256: abc}\n" + ONE_JOB,
        "model.sha256",
        "(3 char",
    ),
    (
        "sha256 not hex",
        "model: {path: a.onnx, sha256: " + "g" * 64 + "}\n" + ONE_JOB,
        "model.sha256",
        "64 hex",
    ),
    ("bad format", "model: {path: a.bin, format: pickle}\n" + ONE_JOB, "model.format", "onnx, torch-export"),
    ("pickle refused", "model: {path: ./model.pkl}\n" + ONE_JOB, "model", "looks like a pickle"),
    ("bad key", "model: {path: a.onnx, key: 'a b'}\n" + ONE_JOB, "model.key", "letters, digits"),
    ("unknown model field", "model: {path: a.onnx, size: 3}\n" + ONE_JOB, "model.size", "unknown field"),
    ("models empty", "models: []\n" + ONE_JOB, "models", "non-empty list"),
    (
        "duplicate model keys",
        "models: [{path: a/m.onnx}, {path: b/m.onnx}]\n" + ONE_JOB,
        "models[1].key",
        "also the key of models[0]",
    ),
    ("no jobs", GOOD_MODEL, "jobs", "non-empty list of jobs"),
    ("job not a mapping", GOOD_MODEL + "jobs: [CPU]\n", "jobs[0]", "expected a mapping"),
    ("unit missing", GOOD_MODEL + "jobs: [{num_inference_runs: 3}]\n", "jobs[0].compute_unit", "required"),
    (
        "unit unknown",
        GOOD_MODEL + "jobs: [{compute_unit: TPU}]\n",
        "jobs[0].compute_unit",
        "valid: CPU (ONNX)",
    ),
    ("unit not text", GOOD_MODEL + "jobs: [{compute_unit: 3}]\n", "jobs[0].compute_unit", "got int 3"),
    (
        "negative runs",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), num_inference_runs: -1}]\n",
        "jobs[0].num_inference_runs",
        "greater than or equal to 1",
    ),
    (
        "runs as text",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), num_inference_runs: '10'}]\n",
        "jobs[0].num_inference_runs",
        "valid integer",
    ),
    (
        "runs as a boolean",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), num_inference_runs: yes}]\n",
        "jobs[0].num_inference_runs",
        "valid integer, got bool True",
    ),
    (
        "negative warmups",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), warmup_runs: -2}]\n",
        "jobs[0].warmup_runs",
        "greater than or equal to 0",
    ),
    (
        "zero timeout",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), timeout_s: 0}]\n",
        "jobs[0].timeout_s",
        "greater than 0",
    ),
    (
        "shape with text",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), input_shapes: {x: [1, a]}}]\n",
        "jobs[0].input_shapes.x[1]",
        "valid integer",
    ),
    (
        "shape with a negative dimension",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), input_shapes: {x: [1, -1]}}]\n",
        "jobs[0].input_shapes.x[1]",
        "at least 1",
    ),
    (
        "devices zero",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), devices: 0}]\n",
        "jobs[0].devices",
        "all, any",
    ),
    (
        "devices word",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), devices: most}]\n",
        "jobs[0].devices",
        "most",
    ),
    (
        "require negative ram",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), require: {min_ram_gb: -4}}]\n",
        "jobs[0].require.min_ram_gb",
        "non-negative",
    ),
    (
        "require os not names",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), require: {os: 5}}]\n",
        "jobs[0].require.os",
        "a name or a list",
    ),
    (
        "require unknown field",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), require: {gpu: yes}}]\n",
        "jobs[0].require.gpu",
        "unknown field",
    ),
    (
        "unknown job field",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), num_inference_run: 5}]\n",
        "jobs[0].num_inference_run",
        "did you mean num_inference_runs?",
    ),
    (
        "unknown model key",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), model: other}]\n",
        "jobs[0].model",
        "the campaign has: m",
    ),
    (
        "bad sweep value",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), sweep: {threads: [1, 0]}}]\n",
        "jobs[0].sweep.threads[1]",
        "greater than or equal to 1",
    ),
    (
        "sweep of an unknown field",
        GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), sweep: {colour: [1]}}]\n",
        "jobs[0].sweep.colour",
        "unknown field",
    ),
    ("not a mapping", "- a\n- b\n", "", "expected a mapping"),
    ("not YAML", "jobs: [unclosed\n", "", "not valid YAML: line"),
    ("not JSON", '{"jobs": [}', "", "not valid JSON: line 1"),
]


@pytest.mark.parametrize(
    ("text", "path", "fragment"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_a_malformed_campaign_names_the_field_and_the_problem(text: str, path: str, fragment: str) -> None:
    problems = problems_of(text)
    assert [p for p, problem in problems if p == path and fragment in problem], problems
    assert len(problems) == 1, problems


def test_several_models_fan_jobs_out_per_model_and_sweeps_per_value() -> None:
    text = """
models:
  - {key: small, path: ./small.onnx}
  - {url: "https://example.org/big%20one.pt2", sha256: "SHA"}
jobs:
  - compute_unit: CPU (ONNX)
    sweep: {threads: [1, 4]}
  - {compute_unit: CPU (PyTorch), model: big-one, devices: 2}
""".replace("SHA", SHA.upper())
    campaign = parse_campaign(text)
    small, big = campaign.models
    assert (small.key, small.path, small.url, small.format) == (
        "small",
        "./small.onnx",
        None,
        ModelFormat.ONNX,
    )
    assert (big.key, big.name, big.sha256, big.format) == (
        "big-one",
        "big one.pt2",
        SHA,
        ModelFormat.TORCH_EXPORT,
    )
    described = [(j.index, j.model_key, j.spec.threads, j.devices, j.label) for j in campaign.jobs]
    assert described == [
        (0, "small", 1, "all", "jobs[0] threads=1 model=small"),
        (1, "big-one", 1, "all", "jobs[0] threads=1 model=big-one"),
        (2, "small", 4, "all", "jobs[0] threads=4 model=small"),
        (3, "big-one", 4, "all", "jobs[0] threads=4 model=big-one"),
        (4, "big-one", None, 2, "jobs[1] model=big-one"),
    ]


def test_input_values_fill_named_inputs() -> None:
    text = GOOD_MODEL + "jobs: [{compute_unit: CPU (ONNX), input_values: {sample_rate: 16000, gain: 0.5}}]\n"
    assert parse_campaign(text).jobs[0].spec.input_values == {"sample_rate": 16000.0, "gain": 0.5}
    assert problems_of(text.replace("0.5", "loud")) == [
        ("jobs[0].input_values.gain", "expected a valid number, got 'loud'")
    ]


def test_placement_share_reaches_the_spec_and_a_tflite_model_is_litert_s_format() -> None:
    text = "model: {path: m.tflite}\njobs: [{compute_unit: CPU (LiteRT), placement_share: 0.8}]\n"
    campaign = parse_campaign(text)
    assert campaign.models[0].format == ModelFormat.TFLITE
    assert (campaign.jobs[0].spec.compute_unit, campaign.jobs[0].spec.placement_share) == (
        ComputeUnit.CPU_LITERT,
        0.8,
    )
    assert parse_campaign(text.replace(", placement_share: 0.8", "")).jobs[0].spec.placement_share == 1.0
    for bad in ("0", "1.5"):
        ((path, _),) = problems_of(text.replace("0.8", bad))
        assert path == "jobs[0].placement_share"


def test_an_explicit_format_wins_over_the_extension() -> None:
    campaign = parse_campaign("model: {path: net.torchscript, format: torchscript}\n" + ONE_JOB)
    assert campaign.models[0].format == ModelFormat.TORCHSCRIPT


def test_field_problem_renders_path_and_problem() -> None:
    assert str(FieldProblem("jobs[1].compute_unit", "required")) == "jobs[1].compute_unit: required"
    assert str(FieldProblem("", "not valid YAML")) == "(file): not valid YAML"


def test_the_performance_hint_is_the_jobs_choice_latency_by_default() -> None:
    text = "model: {path: m.onnx}\njobs: [{compute_unit: CPU (OpenVINO), performance_hint: throughput}]\n"
    assert parse_campaign(text).jobs[0].spec.performance_hint == "throughput"
    default = text.replace(", performance_hint: throughput", "")
    assert parse_campaign(default).jobs[0].spec.performance_hint == "latency"
    ((path, problem),) = problems_of(text.replace("throughput}", "fastest}"))
    assert path == "jobs[0].performance_hint"
    assert "'latency' or 'throughput'" in problem
