"""Issue 53: peaks as a campaign job kind. A `peaks:` block expands into one job per figure (the
unit's matmul precisions, then its memory accesses), each on a size-0 pseudo-model that needs no
pinning, one process, and no model field; what cannot be a peaks job is named at its path."""

from __future__ import annotations

from pathlib import Path

import pytest

import scheduler as sch
from protocol import ComputeUnit, DeviceProfile, UnitStatus
from scheduler.language import is_peak_model
from scheduler.language.needs import endpoint_models
from scheduler.language.peaks import UNIT_PRECISIONS, peak_ref

ROOT = Path(__file__).resolve().parents[4]
CPU = """
name: peaks
processes: 3
jobs:
  - compute_unit: CPU (ONNX)
    peaks: {precisions: [fp32, int8], memory: [copy], largest_n: 512}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(sch.CampaignError) as info:
        sch.parse_campaign(text)
    return [f"{p.path}: {p.problem}" for p in info.value.problems]


def _job(block: str, unit: str = "CPU (ONNX)", extra: str = "") -> str:
    return f"jobs:\n  - compute_unit: {unit}\n    peaks: {block}\n{extra}"


def test_a_peaks_job_is_one_job_per_figure_on_a_pseudo_model_with_one_process() -> None:
    campaign = sch.parse_campaign(CPU)
    assert campaign.models == ()
    specs = [job.spec.peaks for job in campaign.jobs]
    assert [(s.precision, s.largest) for s in specs if s] == [("fp32", 512), ("int8", 512), ("copy", None)]
    assert [job.index for job in campaign.jobs] == [0, 1, 2]
    assert [job.label for job in campaign.jobs] == [f"jobs[0] peaks={p}" for p in ("fp32", "int8", "copy")]
    assert {job.spec.processes for job in campaign.jobs} == {1}  # the campaign's 3 is a model's
    models = endpoint_models(campaign)
    ref = models[campaign.jobs[0].model_key]
    assert (ref.name, ref.size) == ("peaks fp32 (CPU)", 0)
    assert is_peak_model(ref)
    assert ref != models[campaign.jobs[1].model_key]
    needs = sch.campaign_needs(campaign, {})
    assert [n.unit for n in needs] == [ComputeUnit.CPU_ONNX] * 3
    assert {n.model_size for n in needs} == {0}


def test_a_block_without_lists_asks_every_figure_of_its_unit() -> None:
    cpu = sch.parse_campaign(_job("{}"))
    assert [j.spec.peaks.precision for j in cpu.jobs if j.spec.peaks] == [
        *UNIT_PRECISIONS["cpu"], "read", "write", "copy",
    ]  # fmt: skip
    gpu = sch.parse_campaign(_job("{memory: false}", unit="GPU (PyTorch)"))
    assert [j.spec.peaks.precision for j in gpu.jobs if j.spec.peaks] == list(UNIT_PRECISIONS["gpu"])
    assert gpu.jobs[0].model_key == "peaks:gpu:fp32"
    assert peak_ref(gpu.jobs[0].model_key).name == "peaks fp32 (GPU)"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            _job("{precisions: [tf32]}"),
            "jobs[0].peaks.precisions: unknown 'tf32'; valid: fp32, bf16, int8, fp16",
        ),
        (_job("{memory: [swap]}"), "jobs[0].peaks.memory: unknown 'swap'; valid: read, write, copy"),
        (_job("{precisions: [], memory: false}"), "jobs[0].peaks: no figure asked"),
        (_job("{largest_n: 0}"), "jobs[0].peaks.largest_n: expected a whole number from 1"),
        (_job("{sizes: 3}"), "jobs[0].peaks.sizes: unknown field"),
        (_job("fp32"), "jobs[0].peaks: expected a mapping"),
        (_job("{}", unit="NPU (OpenVINO)"), "jobs[0].peaks: NPU (OpenVINO) has no peaks kernel"),
        (_job("{}", extra="    processes: 3\n"), "jobs[0].processes: a peaks task is one measuring child"),
        (_job("{}", extra="    model: m\n"), "jobs[0].model: a peaks job measures its unit, not a model"),
    ],
    ids=[
        "gpu precision on a cpu",
        "access",
        "nothing",
        "largest",
        "unknown",
        "not a block",
        "unit",
        "processes",
        "model",
    ],
)
def test_what_cannot_be_a_peaks_job_is_named_at_its_path(text: str, named: str) -> None:
    problems = _problems(text)
    assert any(p.startswith(named) for p in problems), problems


def test_peaks_beside_a_model_job_keep_the_models_jobs_as_they_were() -> None:
    text = (
        "model: {path: m.onnx}\njobs:\n  - compute_unit: CPU (ONNX)\n"
        "  - compute_unit: CPU (ONNX)\n    peaks: {memory: false, precisions: fp32}\n"
    )
    campaign = sch.parse_campaign(text)
    assert [(j.model_key, j.spec.peaks is not None) for j in campaign.jobs] == [
        ("m", False),
        ("peaks:cpu:fp32", True),
    ]


def test_placement_asks_the_unit_as_for_a_model() -> None:
    (needs,) = sch.campaign_needs(sch.parse_campaign(_job("{memory: false, precisions: fp32}")), {})
    usable = UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider")
    profile = DeviceProfile(
        device_name="box", soc="x", cores_physical=2, cores_logical=2, ram_mb=4096, os="Linux",
        os_version="6", fingerprint="f", units=(usable,),
    )  # fmt: skip
    assert sch.feasible(needs, sch.PeerView("a", profile)).ok
    assert not sch.feasible(needs, sch.PeerView("b", profile.with_(units=()))).ok


def test_the_example_campaign_parses_to_every_figure_it_names() -> None:
    campaign = sch.parse_campaign((ROOT / "examples" / "peaks.yaml").read_text())
    figures = [j.spec.peaks.precision for j in campaign.jobs if j.spec.peaks]
    assert figures == ["fp32", "bf16", "int8", "read", "write", "copy"]
    assert all(j.spec.peaks and j.spec.peaks.largest is None for j in campaign.jobs)  # to the plateau
