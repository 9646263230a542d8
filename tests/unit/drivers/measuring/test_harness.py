"""The harness with real spawned children: statistics, progress, failures, timeout, cancel, memory limit."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Final

import pytest
from kit.extras import silero

from drivers import TaskFailed, measure
from drivers.files.models import packaged_model, sha256_file, write_allocator, write_convnet, write_embedding
from drivers.measuring.harness import _exit_failure
from drivers.runtimes.onnx import OnnxDriver
from protocol import ComputeUnit, FailureReason, ModelFormat, Phase, Stage, TaskSpec

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)

CPU = ComputeUnit.CPU_ONNX
ROOT: Final = Path(__file__).resolve().parents[4]


def _spec(**changes: object) -> TaskSpec:
    base: dict[str, object] = {"compute_unit": CPU, "runs": 12, "warmups": 2, "load_runs": 2, "threads": 1}
    return TaskSpec.model_validate(base | changes)


def _fails(path: Path, spec: TaskSpec, **kwargs: object) -> TaskFailed:
    with pytest.raises(TaskFailed) as info:
        measure(path, spec, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_two_processes_on_a_local_model(tmp_path: Path) -> None:
    model = write_convnet(tmp_path / "c.onnx")
    seen: list[tuple[Phase, int, int]] = []
    m = measure(model, _spec(processes=2), on_progress=lambda p, d, t: seen.append((p, d, t)))
    assert m.inference_ms.n == 24
    assert len(m.samples_ms) == 24
    assert len(m.process_medians_ms) == 2
    assert sorted(m.process_medians_ms)[0] <= m.inference_ms.median <= sorted(m.process_medians_ms)[1]
    assert m.inference_ms.min <= m.inference_ms.p90 <= m.inference_ms.p99 <= m.inference_ms.max
    assert m.load_ms.n == 4
    assert m.load_first_ms > 0
    assert m.first_inference_ms > 0
    assert m.warmups_used == 2
    assert m.providers == ("CPUExecutionProvider",)
    assert m.node_share == {"CPUExecutionProvider": 1.0}
    assert not m.fallback
    assert m.peak_load_ram_mb > 0
    assert m.peak_inference_ram_mb > 0
    assert m.cpu_time_s > 0
    assert m.conditions.model_sha256 == sha256_file(model)
    assert m.conditions.intra_op_threads == 1
    # the runtime that ran and the harness's own (issue 49, scope 5), not every runtime installed
    assert set(m.conditions.runtime_versions) == {"onnxruntime", "python", "numpy"}
    assert {p for p, _, _ in seen} == {Phase.LOADING, Phase.WARMUP, Phase.MEASURING}
    assert all(0 <= d < t for _, d, t in seen)
    assert max(d for p, d, _ in seen if p == Phase.MEASURING) >= 12  # the second process reported too


def test_silero_needs_and_takes_input_overrides() -> None:
    model = silero()
    failure = _fails(model, _spec(load_runs=1))
    assert failure.reason == FailureReason.INPUT
    spec = _spec(
        load_runs=1, input_shapes={"input": (1, 512), "state": (2, 1, 128)}, input_values={"sr": 16000}
    )
    m = measure(model, spec)
    assert m.inference_ms.n == 12
    assert m.inference_ms.median > 0
    fills = {i.name: (i.label(), i.fill, i.defaulted_dims) for i in m.inputs}  # what was really fed
    assert fills["input"] == ("input:float32[1,512]", "seeded_normal", ())
    assert fills["sr"][1] == "constant"
    assert not m.inputs_defaulted


def test_integer_inputs_are_synthesised_as_zeros(tmp_path: Path) -> None:
    m = measure(write_embedding(tmp_path / "e.onnx"), _spec(load_runs=1, runs=5))
    assert m.inference_ms.n == 5
    assert {i.dtype: i.fill for i in m.inputs}["int64"] == "zeros"


def test_warm_up_until_stable_uses_at_least_the_minimum(tmp_path: Path) -> None:
    m = measure(write_convnet(tmp_path / "c.onnx"), _spec(load_runs=1, warmups=3, warmup_until_stable=True))
    assert 11 <= m.warmups_used <= 200  # the rule needs 2k + 1 = 11 runs before it can stop


def test_vgg19_light_load_peak_is_above_800_mb() -> None:
    m = measure(packaged_model("light_vgg19"), _spec(load_runs=1, runs=1, warmups=0))
    assert m.peak_load_ram_mb > 800


def test_gpu_onnx_here_is_unit_unavailable_never_a_cpu_timing(tmp_path: Path) -> None:
    status = OnnxDriver(ComputeUnit.GPU_ONNX).probe()
    spec = _spec(compute_unit=ComputeUnit.GPU_ONNX, load_runs=1)
    if status.usable:
        assert measure(write_convnet(tmp_path / "c.onnx"), spec).providers[0] == status.provider
        return
    failure = _fails(write_convnet(tmp_path / "c.onnx"), spec)
    assert failure.reason == FailureReason.UNIT_UNAVAILABLE
    assert failure.detail.startswith("c.onnx: load failed: unit unavailable: ")


def test_a_pickle_is_refused_by_the_child_before_any_runtime_opens_it(tmp_path: Path) -> None:
    model = tmp_path / "m.pt"
    model.write_bytes(pickle.dumps({"w": 1}))
    failure = _fails(model, _spec(compute_unit=ComputeUnit.CPU_TORCH), allow_code_models=True)
    assert (failure.reason, failure.stage) == (FailureReason.FORMAT, Stage.INSPECT)
    assert failure.detail.startswith("m.pt: inspect failed: a pickle stream")


def test_unbounded_allocation_is_stopped_by_the_memory_limit_and_the_parent_carries_on(
    tmp_path: Path,
) -> None:
    failure = _fails(write_allocator(tmp_path / "big.onnx", mb=4096), _spec(load_runs=1, memory_limit_mb=256))
    assert failure.reason == FailureReason.OUT_OF_MEMORY
    m = measure(
        write_allocator(tmp_path / "small.onnx", mb=16), _spec(load_runs=1, runs=3, memory_limit_mb=256)
    )
    assert m.peak_inference_ram_mb > 16


def test_a_child_that_outlives_the_timeout_is_killed(tmp_path: Path) -> None:
    failure = _fails(write_convnet(tmp_path / "c.onnx"), _spec(load_runs=1, runs=100_000, timeout_s=2.0))
    assert failure.reason == FailureReason.TIMEOUT
    # the stage the child had told when it was killed (inspect only on a machine too loaded to load in 2 s)
    assert failure.stage in (Stage.INSPECT, Stage.LOAD, Stage.RUN)


def test_cancel_kills_the_child_mid_measurement(tmp_path: Path) -> None:
    cancel = threading.Event()

    def progress(phase: Phase, done: int, total: int) -> None:
        if phase == Phase.MEASURING:
            cancel.set()

    spec = _spec(load_runs=1, runs=100_000, timeout_s=120.0)
    failure = _fails(write_convnet(tmp_path / "c.onnx"), spec, on_progress=progress, cancel=cancel)
    assert failure.reason == FailureReason.CANCELLED


@pytest.mark.parametrize(
    ("code", "limit", "reason"),
    [
        (-9, None, FailureReason.OUT_OF_MEMORY),
        (-11, None, FailureReason.CRASHED),
        (-6, 512, FailureReason.OUT_OF_MEMORY),
        (-6, None, FailureReason.CRASHED),
        (3, None, FailureReason.CRASHED),
    ],
)
def test_a_child_that_dies_without_a_result_becomes_a_failure(
    code: int, limit: int | None, reason: FailureReason
) -> None:
    assert _exit_failure(code, limit).reason == reason


def test_a_suffixless_cached_model_runs_when_the_format_is_given(tmp_path: Path) -> None:
    cached = tmp_path / "blob"
    cached.write_bytes(write_convnet(tmp_path / "c.onnx").read_bytes())
    assert _fails(cached, _spec(load_runs=1)).reason == FailureReason.FORMAT
    m = measure(cached, _spec(load_runs=1, runs=3), fmt=ModelFormat.ONNX)
    assert m.inference_ms.n == 3


NO_NUMPY_PARENT = """
import json, sys
from pathlib import Path
from drivers import TaskFailed, measure
from protocol import ComputeUnit, TaskSpec
spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=3, warmups=1, load_runs=1)
try:
    measure(Path(sys.argv[1]), spec, model_sha256="0" * 64)
except TaskFailed as exc:
    print(json.dumps([exc.reason.value, exc.stage and exc.stage.value, exc.detail]))
print(json.dumps("numpy" in sys.modules))
"""


def test_a_measuring_child_that_cannot_start_is_reported_as_not_started(tmp_path: Path) -> None:
    """A child whose side cannot be imported (here numpy, shadowed on the worker's own path, which the
    child inherits) never measured: an internal failure that says it did not start, not a crash."""
    shadow = tmp_path / "shadow" / "numpy"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('numpy shadowed by the test')\n")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"never read")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", NO_NUMPY_PARENT, str(model)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    failure, parent_loaded_numpy = (json.loads(line) for line in done.stdout.splitlines())
    assert not parent_loaded_numpy  # the parent never imports the child's side
    reason, stage, detail = failure
    assert (reason, stage) == (FailureReason.INTERNAL.value, Stage.INSPECT.value)
    assert detail.startswith("m.onnx: inspect failed: the child did not start: ImportError")
    assert "numpy shadowed by the test" in detail
