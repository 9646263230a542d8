"""The four campaigns report.html is looked at with (tests/labs/views/test_report_screens.py) and
that the report's own tests read: a tensor, an LLM, a model-server (endpoint) and a verified campaign,
each built by the real scheduler (the golden campaigns) or read from a real run's results.json; and the
roofline's (`roofline_report`): the tensor campaign's rows on the packaged ONNX models, with peaks."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

import scheduler as sch
from drivers.files.models import packaged_model
from drivers.measuring.costchild import count_costs
from kit.golden_campaigns import CAMPAIGNS, CREATED
from node.report.roofline import Costs
from node.submitter.outputs import campaign_report
from protocol import Calibration, Peak
from scheduler.results import CampaignReport

LLM_RESULTS: Final = Path(__file__).resolve().parents[1] / "golden" / "reports" / "llm_results.json"
"""`sark-node submit examples/llm.yaml`, as run."""


def _verified() -> CampaignReport:
    """A replicated campaign played by the scheduler: four peers on four networks, one halving liar
    settled as the outlier of a third replica, the others `replicated 2/2` and `2/3`."""
    return _verified_played()[1]


def _verified_played() -> tuple[sch.Scheduler, CampaignReport]:
    """`_verified`'s campaign (the golden `verified`): the scheduler that played it, and its report."""
    golden = CAMPAIGNS["verified"]()
    return golden.scheduler, campaign_report(
        golden.scheduler, golden.results, CREATED, golden.campaign_id, golden.campaign
    )


def _golden(name: str) -> Callable[[], CampaignReport]:
    def build() -> CampaignReport:
        golden = CAMPAIGNS[name]()
        return campaign_report(golden.scheduler, golden.results, CREATED, golden.campaign_id, golden.campaign)

    return build


REPORTS: Final[dict[str, Callable[[], CampaignReport]]] = {
    "tensor": _golden("tensor"),  # priced by the campaign and by an owner, a failure, an unschedulable unit
    "llm": lambda: CampaignReport.from_json(LLM_RESULTS.read_text()),  # examples/llm.yaml, for real
    "endpoint": _golden("generate"),  # a model server at two request rates, priced
    "verified": _verified,
}


ROOF_MODELS: Final = (
    "light_resnet50", "light_squeezenet", "light_shufflenet", "light_inception_v1", "silero_vad"
)  # fmt: skip
"""The packaged models the roofline is drawn for (`roofline_report`): ONNX wheels' files, counted for real."""


def roof_peaks(unit: str = "CPU") -> tuple[Peak, ...]:
    """A unit's measured peaks as `sark-node info --bench` states them (a workstation's figures, of the
    order the golden rows' 12.5 ms per inference needs to stay under its roof)."""
    said = {"fp32": 1200.0, "bf16": 2400.0, "int8": 4800.0, "read": 60.0, "write": 30.0, "copy": 40.0}
    return tuple(Peak(unit=unit, precision=p, per_s=v, method="sweep") for p, v in said.items())  # type: ignore[arg-type]


def roofline_report(
    peaks: tuple[Peak, ...] | None = None,
) -> tuple[CampaignReport, Costs]:
    """The golden tensor campaign with its measured rows run again on each of `ROOF_MODELS` (the row's
    model named and pinned as that file), their devices' profiles carrying `peaks` (default: `roof_peaks`),
    and each model's cost counted in the cost child; cpu1's profile keeps no peaks (a worker that ran
    no `info --bench`)."""
    base = REPORTS["tensor"]()
    paths = {name: packaged_model(name) for name in ROOF_MODELS}
    shas = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in paths.items()}
    costs = Costs.of(count_costs({shas[name]: path for name, path in paths.items()}))
    tasks = []
    for task in base.results:
        if task.signed is None:
            tasks.append(task)
            continue
        device = task.signed.device
        if device.device_name != "cpu1":
            said = peaks if peaks is not None else roof_peaks()
            cal = Calibration(cpu_gflops=1100.0, mem_bandwidth_gbs=40.0, seconds=2.0, quiet=True, peaks=said)
            device = device.model_copy(update={"calibration": cal})
        for k, name in enumerate(ROOF_MODELS):
            row = {**task.row, "JobId": f"{task.row['JobId']}-{k}", "FileName": f"{name}.onnx",
                   "ModelSha256": shas[name]}  # fmt: skip
            signed = task.signed.model_copy(update={"device": device})
            tasks.append(task.model_copy(update={"row": row, "signed": signed}))
    return base.model_copy(update={"results": tuple(tasks)}), costs
