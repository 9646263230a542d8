"""ExecuTorch: the probe, placement read from the lowered program, a forced fallback (an op XNNPACK
does not take; no partitioner at all), and measurements through the one harness, on .pte programs
lowered here from torch modules (`drivers.files.etmodels`, in a child: the export toolchain stays out of
the test process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kit.extras import needs

from drivers import TaskFailed, check_model_file, measure
from drivers.files.ptefile import PteCounts, read_counts
from drivers.runtimes.driver import LoadOptions
from drivers.runtimes.executorch import PROBE_MODEL, ExecutorchDriver
from protocol import ComputeUnit, FailureReason, Measurement, ModelFormat, TaskSpec
from scheduler.results import Outputs, fed_alike, output_diffs

CPU = ComputeUnit.CPU_EXECUTORCH
ROOT = Path(__file__).resolve().parents[3]
LOWERING_S = 900
"""A deadline for each lowering child, not a speed: the module's programs took 50 s to lower beside the
suite quiet (CI, 2026-11-29), 167 s at load 4 alone, and past the 240 s this was and the suite's 300 s
per test beside the suite at load 4 (2026-11-29: 16 errors in a row where its 16 tests ran)."""
pytestmark = [
    needs("torch", "executorch"),  # the runtime, and torch to lower the programs
    pytest.mark.timeout(LOWERING_S + 300),  # a deadline on a loaded machine, not a speed (the lowering's)
]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mlp.pte (all on XNNPACK), cumsum-tail.pte (a cumsum XNNPACK lacks), undelegated.pte, probe.pte,
    and mlp.pt2 (the mlp's torch.export program, for the worker to lower)."""
    out = tmp_path_factory.mktemp("pte")
    for flags, names in (([], ["mlp", "cumsum-tail", "undelegated", "probe"]), (["--exported"], ["mlp"])):
        done = subprocess.run(
            [sys.executable, "-m", "drivers.files.etmodels", *flags, str(out), *names],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=LOWERING_S,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    return out


def _spec(**changes: object) -> TaskSpec:
    base: dict[str, object] = {"compute_unit": CPU, "runs": 12, "warmups": 2, "load_runs": 2, "threads": 1}
    return TaskSpec.model_validate(base | changes)


def test_the_cpu_probe_really_runs_on_xnnpack() -> None:
    status = ExecutorchDriver(CPU).probe()
    assert status.usable, status.reason
    assert status.provider == "XNNPACK (1/1 nodes)"


def test_the_packaged_probe_program_is_what_the_builder_lowers(programs: Path) -> None:
    assert (programs / "probe.pte").read_bytes() == PROBE_MODEL.read_bytes()


def test_the_lowered_programs_are_counted_from_their_bytes(programs: Path) -> None:
    def counts(name: str) -> PteCounts:
        return read_counts((programs / f"{name}.pte").read_bytes())

    assert counts("mlp") == PteCounts(0, {"XnnpackBackend": 3}, {"XnnpackBackend": 1})
    assert counts("cumsum-tail") == PteCounts(1, {"XnnpackBackend": 3}, {"XnnpackBackend": 1})
    undelegated = counts("undelegated")
    assert (undelegated.delegated, undelegated.partitions) == ({}, {})
    assert undelegated.kernels >= 3  # three Linear + ReLU pairs on the portable kernels


def test_a_program_xnnpack_takes_whole_is_placed_on_it(programs: Path) -> None:
    loaded = ExecutorchDriver(CPU).load(programs / "mlp.pte", LoadOptions(threads=1))
    placement = loaded.placement()
    assert (placement.providers, placement.node_share, placement.asked) == (
        ("XNNPACK",),
        {"XNNPACK": 1.0},
        "XNNPACK",
    )
    assert not placement.fell_back(1.0)
    (sig,) = loaded.inputs()
    assert (sig.name, sig.dtype, sig.shape) == ("input_0", "float32", (1, 64))
    out = loaded.runner({"input_0": np.ones((1, 64), dtype=np.float32)})()
    assert isinstance(out, list)
    assert tuple(out[0].shape) == (1, 64)


def test_the_drivers_calls_answer_as_the_runtime_api_does(programs: Path) -> None:
    """The driver calls the bindings `executorch.runtime` wraps: both give the same outputs."""
    script = (
        "import json, sys, torch; from executorch.runtime import Runtime; "
        "m = Runtime.get().load_program(sys.argv[1]).load_method('forward'); "
        "print(json.dumps(m.execute([torch.full((1, 64), 0.5)])[0].flatten().tolist()))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script, str(programs / "mlp.pte")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = ExecutorchDriver(CPU).load(programs / "mlp.pte", LoadOptions(threads=1))
    outs: Any = loaded.runner({"input_0": np.full((1, 64), 0.5, dtype=np.float32)})()
    (out,) = outs
    assert out.flatten().tolist() == pytest.approx(json.loads(done.stdout), rel=1e-6)


def test_an_op_xnnpack_lacks_is_a_fallback_under_all_nodes_and_not_under_a_lower_share(
    programs: Path,
) -> None:
    placement = ExecutorchDriver(CPU).load(programs / "cumsum-tail.pte", LoadOptions(threads=1)).placement()
    assert placement.node_share == pytest.approx({"XNNPACK": 0.75, "portable": 0.25})
    assert placement.fell_back(1.0)
    assert not placement.fell_back(0.7)


def test_a_program_lowered_without_a_partitioner_is_a_fallback_whatever_the_share(programs: Path) -> None:
    placement = ExecutorchDriver(CPU).load(programs / "undelegated.pte", LoadOptions(threads=1)).placement()
    assert (placement.providers, placement.node_share) == (("portable",), {"portable": 1.0})
    assert placement.fell_back(0.0)


def test_a_forced_fallback_fails_a_strict_task_with_the_share(programs: Path) -> None:
    with pytest.raises(TaskFailed) as failed:
        measure(programs / "cumsum-tail.pte", _spec())
    assert failed.value.reason == FailureReason.FALLBACK
    assert "75% of nodes on XNNPACK (least 100%)" in failed.value.detail


def test_a_measurement_on_executorch_goes_through_the_one_harness(programs: Path) -> None:
    m = measure(programs / "mlp.pte", _spec(processes=2))
    assert (m.inference_ms.n, m.load_ms.n, m.warmups_used) == (24, 4, 2)
    assert (m.providers, m.node_share, m.fallback) == (("XNNPACK",), {"XNNPACK": 1.0}, False)
    assert m.conditions.runtime_versions["executorch"] == "1.5.1"
    assert len(set(m.output_fingerprints)) == 1
    assert m.conditions.intra_op_threads == 1
    assert m.peak_inference_ram_mb > 0


@pytest.fixture(scope="module")
def converted(programs: Path) -> Measurement:
    """mlp.pt2 lowered in the measuring child and run on ExecuTorch."""
    return measure(programs / "mlp.pt2", _spec(runs=5), allow_code_models=True)


def test_a_torch_export_program_is_lowered_in_the_child_and_the_conversion_recorded(
    programs: Path, converted: Measurement
) -> None:
    offline = measure(programs / "mlp.pte", _spec(runs=5))
    said = converted.conditions.runtime_versions["conversion"]
    assert said == "torch.export .pt2 to .pte by executorch 1.5.1 (XNNPACK partitioner)"
    assert (converted.providers, converted.node_share) == (("XNNPACK",), {"XNNPACK": 1.0})
    assert converted.output_fingerprints == offline.output_fingerprints  # the same program, lowered here
    assert "conversion" not in offline.conditions.runtime_versions


def test_one_program_on_openvino_and_executorch_is_compared_on_its_outputs(
    programs: Path, converted: Measurement
) -> None:
    """Scope 4: one .pt2 on two runtimes, each converting it in its child; the rows of one model are
    compared as a campaign's are (`fed_alike`, `output_diffs`), though the .pte names its input
    `input_0` where OpenVINO keeps the program's `x`."""
    on_openvino = measure(
        programs / "mlp.pt2", _spec(compute_unit=ComputeUnit.CPU_OPENVINO, runs=5), allow_code_models=True
    )
    said = on_openvino.conditions.runtime_versions["conversion"]
    assert said.startswith("torch.export .pt2 to OpenVINO IR (fp32) by openvino ")
    assert (on_openvino.providers, on_openvino.node_share) == (("CPU",), {"CPU": 1.0})
    assert [i.name for i in on_openvino.inputs] == ["x"]
    assert [i.name for i in converted.inputs] == ["input_0"]
    assert converted.output_fingerprints[0].startswith("sha256:")
    rows = [
        Outputs(task, "mlp.pt2's sha256", unit, fed_alike(m.inputs), m.output_sample)
        for task, unit, m in (("a", "CPU (OpenVINO)", on_openvino), ("b", "CPU (ExecuTorch)", converted))
    ]
    cells = output_diffs(rows)
    assert cells["a"] == "0 (reference)"
    diff, against = cells["b"].split(" vs ")
    assert against == "CPU (OpenVINO)"
    assert float(diff) < 1e-4  # one network in fp32 on two runtimes: rounding apart, not another answer


def test_a_torch_export_program_needs_the_owners_opt_in(programs: Path) -> None:
    with pytest.raises(TaskFailed) as failed:
        measure(programs / "mlp.pt2", _spec())
    assert failed.value.reason == FailureReason.FORMAT


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\x00" * 64, "no ET flatbuffer identifier"),
        (b"\xff\xff\x00\x00ET12" + b"\x00" * 8, "outside the file"),
        (
            b"\x3c\x00\x00\x00ET12eh00"
            + (32).to_bytes(4, "little")
            + (1 << 40).to_bytes(8, "little")
            + bytes(72),
            "extended header points outside",
        ),
    ],
    ids=["no-identifier", "root-outside", "header-outside"],
)
def test_a_file_that_is_not_an_executorch_program_is_refused_before_the_runtime(
    tmp_path: Path, data: bytes, said: str
) -> None:
    path = tmp_path / "bad.pte"
    path.write_bytes(data)
    with pytest.raises(TaskFailed) as failed:
        check_model_file(path, ModelFormat.PTE, allow_code_models=False)
    assert failed.value.reason == FailureReason.FORMAT
    assert said in failed.value.detail


def test_a_program_whose_tables_point_outside_it_is_a_format_failure(programs: Path) -> None:
    data = bytearray((programs / "mlp.pte").read_bytes())
    data[0:4] = (len(data) - 4).to_bytes(4, "little")  # the root table at the very end
    with pytest.raises(TaskFailed) as failed:
        read_counts(bytes(data[:64]))
    assert failed.value.reason == FailureReason.FORMAT
