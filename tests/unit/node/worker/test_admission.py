"""Admission is a pure function: offer, profile, policy and load in, a decline reason (or None) out."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from node.worker.admission import OfferPolicy, WorkerLoad, admit
from protocol import (
    ComputeUnit,
    DeclineReason,
    DeviceProfile,
    ModelFormat,
    ModelRef,
    OfferBody,
    TaskSpec,
    UnitStatus,
)

PROFILE = DeviceProfile(
    device_name="admission-lab", soc="test-cpu", cores_physical=1, cores_logical=2, ram_mb=1024,
    os="Linux", os_version="6", fingerprint="f" * 16,
    units=(
        UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),
        UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=False, reason="no CUDA device"),
    ),
)  # fmt: skip
URL = ("https://models.example/m.onnx",)


@dataclass(frozen=True)
class Case:
    """One row: what differs from a plain CPU offer of a small ONNX model with a URL to an idle worker."""

    unit: ComputeUnit = ComputeUnit.CPU_ONNX
    size: int = 10
    format: ModelFormat = ModelFormat.ONNX
    sources: tuple[str, ...] = URL
    memory_mb: int | None = None
    policy: OfferPolicy = field(default_factory=OfferPolicy)
    load: WorkerLoad = field(default_factory=lambda: WorkerLoad(has_room=True))

    def offer(self) -> OfferBody:
        model = ModelRef(name="m", size=self.size, sha256="a" * 64, format=self.format, sources=self.sources)
        spec = TaskSpec(compute_unit=self.unit, memory_limit_mb=self.memory_mb)
        return OfferBody(
            campaign_id="c1", task_id="t1", submitter="sub", recipient="me", nonce=b"n" * 16,
            issued_at=0.0, expires_at=60.0, spec=spec, model=model,
        )  # fmt: skip


RELAYED = WorkerLoad(has_room=True, submitter_relayed=True)
CASES: list[tuple[str, Case, DeclineReason | None]] = [
    ("a plain offer is taken", Case(), None),
    ("a unit whose probe failed", Case(unit=ComputeUnit.GPU_ONNX), DeclineReason.UNSUPPORTED_UNIT),
    ("a unit never probed", Case(unit=ComputeUnit.CPU_TORCH), DeclineReason.UNSUPPORTED_UNIT),
    ("a code model, not opted in", Case(format=ModelFormat.TORCHSCRIPT), DeclineReason.FORMAT_NOT_ALLOWED),
    (
        "a code model, opted in",
        Case(
            format=ModelFormat.TORCH_EXPORT,
            unit=ComputeUnit.CPU_ONNX,
            policy=OfferPolicy(allow_code_models=True),
        ),
        None,
    ),
    (
        "a model over the cap",
        Case(size=101, policy=OfferPolicy(max_model_bytes=100)),
        DeclineReason.MODEL_TOO_LARGE,
    ),
    ("a model at the cap", Case(size=100, policy=OfferPolicy(max_model_bytes=100)), None),
    ("more memory than the device has", Case(memory_mb=2048), DeclineReason.NOT_ENOUGH_MEMORY),
    ("exactly the device's memory", Case(memory_mb=1024), None),
    ("a full queue", Case(load=WorkerLoad(has_room=False)), DeclineReason.QUEUE_FULL),
    ("no URL, relayed submitter", Case(sources=(), load=RELAYED), DeclineReason.RELAYED),
    ("a URL, relayed submitter", Case(load=RELAYED), None),
    (
        "no URL, relayed, model cached",
        Case(sources=(), load=WorkerLoad(has_room=True, has_model=True, submitter_relayed=True)),
        None,
    ),
    ("no URL, direct submitter", Case(sources=()), None),
    ("a leaving worker", Case(load=WorkerLoad(has_room=True, leaving=True)), DeclineReason.SHUTTING_DOWN),
    (
        "a leaving worker that could not run it anyway: leaving answers first",
        Case(unit=ComputeUnit.GPU_ONNX, load=WorkerLoad(has_room=False, leaving=True)),
        DeclineReason.SHUTTING_DOWN,
    ),
    (
        "several objections: the first in check order answers",
        Case(unit=ComputeUnit.GPU_ONNX, memory_mb=4096, load=WorkerLoad(has_room=False)),
        DeclineReason.UNSUPPORTED_UNIT,
    ),
]


@pytest.mark.parametrize(("case", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_admission(case: Case, reason: DeclineReason | None) -> None:
    refusal = admit(case.offer(), PROFILE, case.policy, case.load)
    assert (refusal.reason if refusal is not None else None) == reason
    if refusal is not None:
        assert refusal.detail  # every decline says why, for people
