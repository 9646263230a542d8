"""OpenVINO: the probe (a real run on each device, or the reason), placement from the executed graph,
and a measurement through the one harness (spawned child, warm-up, statistics, meters, fingerprints)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drivers import measure
from drivers.files.models import write_convnet
from drivers.measuring.outputs import output_fingerprint
from drivers.runtimes.driver import LoadOptions
from drivers.runtimes.onnx import OnnxDriver
from drivers.runtimes.openvino import OpenvinoDriver, executed_share, runtime_nodes
from protocol import ComputeUnit, TaskSpec

CPU = ComputeUnit.CPU_OPENVINO


def test_the_cpu_probe_really_runs_and_names_the_device() -> None:
    status = OpenvinoDriver(CPU).probe()
    assert status.usable, status.reason
    assert status.provider is not None
    assert status.provider.startswith("CPU: ")


@pytest.mark.parametrize("unit", [ComputeUnit.GPU_OPENVINO, ComputeUnit.NPU_OPENVINO])
def test_an_accelerator_is_usable_only_where_openvino_lists_and_runs_it(unit: ComputeUnit) -> None:
    import openvino

    status = OpenvinoDriver(unit).probe()
    device = unit.value.split(" ")[0]
    if device not in openvino.Core().available_devices:  # this machine: no Intel GPU or NPU
        assert not status.usable
        assert f"no {device} device" in status.reason
        assert "lists CPU" in status.reason
    else:
        assert status.usable == (status.provider is not None)


@pytest.mark.parametrize(
    ("nodes", "share"),
    [
        ([("Input", ""), ("Convolution", ""), ("Subgraph", ""), ("Output", "")], {"CPU": 1.0}),
        (
            [("Input", "GPU"), ("Convolution", "GPU"), ("TopK", "CPU"), ("Result", "CPU")],
            {"CPU": 0.5, "GPU": 0.5},
        ),
        ([("Input", ""), ("Output", "")], {}),
    ],
)
def test_the_share_counts_executed_nodes_per_device(
    nodes: list[tuple[str, str]], share: dict[str, float]
) -> None:
    assert executed_share(nodes, "CPU") == share


def test_a_cpu_model_is_placed_on_the_cpu_and_agrees_with_onnxruntime(tmp_path: Path) -> None:
    model = write_convnet(tmp_path / "c.onnx")
    loaded = OpenvinoDriver(CPU).load(model, LoadOptions(threads=1))
    placement = loaded.placement()
    assert (placement.providers, placement.node_share, placement.asked) == (("CPU",), {"CPU": 1.0}, "CPU")
    assert not placement.fell_back(1.0)
    assert any(layer == "Convolution" for layer, _ in runtime_nodes(loaded.compiled))
    assert loaded.settings().intra_op_threads == 1
    sig = loaded.inputs()[0]
    assert (sig.name, sig.dtype, sig.shape) == ("x", "float32", (1, 3, 64, 64))  # compiled for the fed shape
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    ours = loaded.runner({"x": x})()
    theirs = OnnxDriver(ComputeUnit.CPU_ONNX).load(model, LoadOptions(threads=1)).runner({"x": x})()
    assert np.allclose(ours.to_tuple()[0], theirs[0], rtol=1e-3, atol=1e-4)  # type: ignore[attr-defined,index]
    assert output_fingerprint(ours).startswith("sha256:")


def test_a_measurement_on_openvino_goes_through_the_one_harness(tmp_path: Path) -> None:
    model = write_convnet(tmp_path / "c.onnx")
    spec = TaskSpec(compute_unit=CPU, runs=12, warmups=2, load_runs=2, threads=1)
    m = measure(model, spec)
    assert (m.inference_ms.n, m.load_ms.n, m.warmups_used) == (12, 2, 2)
    assert (m.providers, m.node_share, m.fallback) == (("CPU",), {"CPU": 1.0}, False)
    assert m.conditions.intra_op_threads == 1
    assert set(m.conditions.runtime_versions) == {"openvino", "python", "numpy"}  # not onnxruntime's
    assert len(m.output_fingerprints) == 1
    assert m.output_fingerprints[0].startswith("sha256:")
    assert m.peak_inference_ram_mb > 0
    assert m.cpu_time_s > 0
    assert m.inputs[0].name == "x"


def test_dynamic_inputs_are_compiled_for_the_shapes_fed_unless_the_job_keeps_them(tmp_path: Path) -> None:
    """The convnet's batch is dynamic: compiled for the batch the job feeds (the documented default, or
    its input_shapes), as benchmark_app runs it; `dynamic_shapes` keeps it dynamic, and the row says which."""
    model = write_convnet(tmp_path / "c.onnx")
    driver = OpenvinoDriver(CPU)
    fed = driver.load(model, LoadOptions(threads=1))
    assert fed.inputs()[0].shape == (1, 3, 64, 64)
    assert fed.settings().runtime["shapes"] == "reshaped to the fed shapes"
    four = driver.load(model, LoadOptions(threads=1, input_shapes={"x": (4, 3, 64, 64)}))
    assert four.inputs()[0].shape == (4, 3, 64, 64)
    kept = driver.load(model, LoadOptions(threads=1, dynamic_shapes=True))
    assert kept.inputs()[0].shape == (None, 3, 64, 64)
    assert kept.settings().runtime["shapes"] == "dynamic"
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    same = fed.runner({"x": x})(), kept.runner({"x": x})()
    assert np.allclose(same[0].to_tuple()[0], same[1].to_tuple()[0], rtol=1e-4, atol=1e-5)  # type: ignore[attr-defined]


def test_the_precision_is_the_jobs_choice_and_recorded_as_openvino_reports_it(tmp_path: Path) -> None:
    import openvino

    model = write_convnet(tmp_path / "c.onnx")
    default = OpenvinoDriver(CPU).load(model, LoadOptions(threads=1)).settings().runtime
    assert default["precision"] == "f32"  # the model's own, as ONNX Runtime runs it
    assert default["hint"] == "LATENCY"
    assert int(default["streams"]) >= 1
    assert int(default["optimal_requests"]) >= 1
    asked = OpenvinoDriver(CPU).load(model, LoadOptions(threads=1, precision="bf16")).settings().runtime
    # What the convolutions really run in, read apart from the driver in the compiled model's execution
    # graph: OPTIMIZATION_CAPABILITIES is no guide (OpenVINO 2026.4 lists no BF16 on an AVX-512 Xeon
    # without avx512_bf16, yet runs the convolutions in bf16 there).
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(model), "CPU", {"INFERENCE_PRECISION_HINT": "bf16"})
    ran = {
        op.get_rt_info()["runtimePrecision"].astype(str)
        for op in compiled.get_runtime_model().get_ordered_ops()
        if op.get_rt_info()["layerType"].astype(str) == "Convolution"
    }
    assert ran in ({"bf16"}, {"f32"}), ran
    assert asked["precision"] == ran.pop(), asked  # what OpenVINO says it runs


def test_a_jobs_precision_travels_to_the_row(tmp_path: Path) -> None:
    model = write_convnet(tmp_path / "c.onnx")
    spec = TaskSpec(compute_unit=CPU, runs=3, warmups=1, load_runs=1, threads=1, precision="f32")
    settings = measure(model, spec).conditions.runtime_settings
    assert settings["precision"] == "f32"
    assert settings["shapes"] == "reshaped to the fed shapes"


def test_the_hint_is_the_jobs_and_the_throughput_run_keeps_the_compiled_models_requests_in_flight(
    tmp_path: Path,
) -> None:
    """The hint reaches the compiled model (as it reports it); the throughput run sizes its queue by
    the model's own OPTIMAL_NUMBER_OF_INFER_REQUESTS and runs at least the runs asked, and a few per
    request, every one of them counted (the queue's callbacks count completions)."""
    model = write_convnet(tmp_path / "c.onnx")
    loaded = OpenvinoDriver(CPU).load(model, LoadOptions(performance_hint="throughput"))
    settings = loaded.settings().runtime
    assert settings["hint"] == "THROUGHPUT"
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    run = loaded.throughput({"x": x}, 3)
    assert run.requests == int(settings["optimal_requests"]) >= 1
    assert run.inferences == max(3, 4 * run.requests)
    assert run.wall_ms > 0
    latency = OpenvinoDriver(CPU).load(model, LoadOptions(threads=1)).settings().runtime
    assert (latency["hint"], latency["streams"], latency["optimal_requests"]) == ("LATENCY", "1", "1")


def test_a_jobs_hint_and_its_throughput_travel_to_the_row(tmp_path: Path) -> None:
    from scheduler.results import CSV_COLUMNS

    model = write_convnet(tmp_path / "c.onnx")
    spec = TaskSpec(
        compute_unit=CPU, runs=6, warmups=1, load_runs=1, processes=2, performance_hint="throughput"
    )
    m = measure(model, spec)
    assert m.conditions.runtime_settings["hint"] == "THROUGHPUT"
    assert len(m.async_runs) == 2  # one per process, after its timed runs
    assert all(run.inferences >= 6 for run in m.async_runs)
    assert (m.throughput_per_s or 0.0) > 0
    assert {"ThroughputPerS", "AsyncRequests"} <= set(CSV_COLUMNS)


@pytest.mark.parametrize(
    ("samples", "count"),
    [([1.0] * 300, 300), ([2000.0] * 300, 5), ([20000.0] * 3, 1)],
    ids=["as-many-as-timed", "what-10-s-holds", "at-least-one"],
)
def test_a_throughput_run_is_as_long_as_the_timed_runs_at_most_ten_seconds(
    samples: list[float], count: int
) -> None:
    """A long job's throughput run stays within its timeout: 300 runs of 2 s would be 600 s more."""
    from drivers.measuring.child import throughput_count

    assert throughput_count(samples) == count
