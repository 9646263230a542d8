"""The readings no raw part re-derives, bounded where the submitter checks a result
(`scheduler.verification.bounds`).

Each honest measurement is built as a worker builds one (raw parts, then `protocol.derive`); each lie
is derived again the same way, so the old consistency check passes and only the bound can refuse it.
A value just inside its bound passes, one just outside is refused `invalid` with the field path, the
worker's value and the bound named.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import scheduler as sch
from protocol import (
    Calibration,
    ComputeUnit,
    DeviceProfile,
    Endpoint,
    EnergyReading,
    FailureReason,
    GenerateSpec,
    GpuInfo,
    Measurement,
    Prompt,
    RequestRecord,
    RunConditions,
    TaskSpec,
    Telemetry,
    TelemetryPoint,
    UnitStatus,
    derive,
)
from protocol.genstats import summarize_generation
from protocol.stats import NO_SAMPLES
from scheduler import CampaignError, Refusal, check_figures, parse_campaign
from scheduler.language.capacity import rate_levels

CPU_TASK = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, runs=5, load_runs=1, processes=1, timeout_s=60.0)
GPU_TASK = CPU_TASK.with_(compute_unit=ComputeUnit.GPU_ONNX)
CPU_ONLY = DeviceProfile(
    device_name="box",
    soc="x86",
    cores_physical=4,
    cores_logical=8,
    ram_mb=16_384,
    os="Linux",
    os_version="6.1",
    units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True),),
    fingerprint="f",
)
WITH_GPU = CPU_ONLY.with_(
    gpus=(GpuInfo(name="H100", vram_mb=80_000, source="nvml"),),
    units=(*CPU_ONLY.units, UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=True)),
)
CORES = 8 * 1.25 + 1  # the profile's logical cores with the slack for timing
TIMEOUT_MS = 60_000 * 1.05


def _point(t_ms: float, gpu: bool) -> TelemetryPoint:
    readings: dict[str, Any] = {"gpu_temp_c": 60.0, "gpu_sm_mhz": 1980.0, "gpu_power_w": 150.0} if gpu else {}
    return TelemetryPoint(t_ms=t_ms, cpu_mhz=(2400.0,), temp_c=55.0, busy_cores=1.2, own_cores=1.0,
                          cpu_share=0.9, **readings)  # fmt: skip


def honest(gpu: bool = False) -> Measurement:
    """A one-process run with telemetry and an energy reading, as the worker derives it."""
    if gpu:  # the board at 150 W over the window, 60 W idle
        reading = EnergyReading(method="nvml-energy-counter", joules=300.0, window_s=2.0, idle_joules=180.0,
                                idle_s=3.0)  # fmt: skip
    else:  # the packages at 10 W, 3 W idle
        reading = EnergyReading(method="rapl-package", joules=20.0, window_s=2.0, idle_joules=9.0, idle_s=3.0)
    raw = Measurement(
        compute_unit=ComputeUnit.GPU_ONNX if gpu else ComputeUnit.CPU_ONNX,
        load_ms=NO_SAMPLES,
        load_first_ms=0.0,
        first_inference_ms=0.0,
        warmups_used=1,
        inference_ms=NO_SAMPLES,
        samples_ms=(10.0, 11.0, 10.5, 12.0, 10.2),
        process_runs=(5,),
        load_samples_ms=(100.0,),
        first_inferences_ms=(20.0,),
        peak_load_ram_mb=50.0,
        peak_inference_ram_mb=60.0,
        cpu_cores_used=1.0,
        cpu_time_s=0.1,
        gpu_util_pct=40.0 if gpu else None,
        gpu_mem_mb=900.0 if gpu else None,
        node_share={"CPUExecutionProvider": 1.0},
        conditions=RunConditions(background_cores=0.2),
        telemetry=Telemetry(
            period_ms=100.0, points=tuple(_point(t, gpu) for t in (100.0, 200.0, 300.0, 400.0))
        ),
        energy_readings=(reading,),
    )
    return derive(raw, GPU_TASK if gpu else CPU_TASK)


def _points(m: Measurement, **fields: Any) -> Measurement:
    assert m.telemetry is not None
    first, *rest = m.telemetry.points
    return m.with_(telemetry=m.telemetry.with_(points=(first.with_(**fields), *rest)))


def _reading(m: Measurement, **fields: Any) -> Measurement:
    return m.with_(energy_readings=(m.energy_readings[0].with_(**fields),))


Lie = Callable[[Measurement, float], Measurement]
BOUNDS: list[tuple[str, bool, Lie, float, float, str]] = [
    # (case, on the GPU device, the lie, a value just inside, one just outside, the bound as named)
    ("GPU power", True, lambda m, v: _points(m.with_(energy_readings=()), gpu_power_w=v), 10_000.0, 10_000.5,
     "outside 0 to 10000 W"),
    ("negative GPU power", True, lambda m, v: _points(m, gpu_power_w=v), 0.0, -1.0, "outside 0 to 10000 W"),
    ("hot CPU", False, lambda m, v: _points(m, temp_c=v), 150.0, 150.5, "outside -40 to 150 C"),
    ("cold CPU", False, lambda m, v: _points(m, temp_c=v), -40.0, -300.0, "outside -40 to 150 C"),
    ("hot GPU", True, lambda m, v: _points(m, gpu_temp_c=v), 150.0, 1e308, "outside -40 to 150 C"),
    ("CPU clock", False, lambda m, v: _points(m, cpu_mhz=(v,)), 10_000.0, 10_000.1, "outside 0 to 10000 MHz"),
    ("negative clock", False, lambda m, v: _points(m, cpu_mhz=(v,)), 0.0, -1e308, "outside 0 to 10000 MHz"),
    ("GPU clock", True, lambda m, v: _points(m, gpu_sm_mhz=v), 10_000.0, 1e308, "outside 0 to 10000 MHz"),
    ("busy cores", False, lambda m, v: _points(m, busy_cores=v), CORES, CORES + 0.5,
     f"outside 0 to {CORES:g} cores"),
    ("own cores", False, lambda m, v: _points(m, own_cores=v), CORES, 1e308, f"outside 0 to {CORES:g} cores"),
    ("telemetry after the timeout", False, lambda m, v: _points(m, t_ms=v), TIMEOUT_MS, TIMEOUT_MS + 1,
     f"outside 0 to {TIMEOUT_MS:g} ms"),
    ("cores used", False, lambda m, v: m.with_(cpu_cores_used=v), CORES, CORES + 0.5, "cores"),
    ("background load", False, lambda m, v: m.with_(conditions=RunConditions(background_cores=v)), CORES,
     -2.0, f"outside 0 to {CORES:g} cores"),
    ("CPU time", False, lambda m, v: m.with_(cpu_time_s=v), CORES * 63.0, CORES * 63.0 + 1, "every core"),
    ("peak RAM", False, lambda m, v: m.with_(peak_inference_ram_mb=v), 16_384 * 1.1, 16_384 * 1.1 + 1,
     "the profile's RAM of 16384 MiB x 1.1"),
    ("peak RAM of 1e308 MiB", False, lambda m, v: m.with_(peak_load_ram_mb=v), 0.0, 1e308,
     "RAM of 16384 MiB"),
    ("GPU memory", True, lambda m, v: m.with_(gpu_mem_mb=v), 88_000.0, 88_001.0,
     "the profile's GPU memory of 80000 MiB x 1.1"),
    ("GPU use", True, lambda m, v: m.with_(gpu_util_pct=v), 100.0, 100.5, "outside 0 to 100 %"),
    ("a provider's share", False, lambda m, v: m.with_(node_share={"CPUExecutionProvider": v}), 1.0, 1.01,
     "outside 0 to 1 (a share)"),
    ("window joules", False, lambda m, v: _reading(m, joules=v), 20_000.0, 20_001.0, "10000 W x 2.0 s"),
    ("1e300 J", False, lambda m, v: _reading(m, joules=v), 20.0, 1e300, "10000 W x 2.0 s"),
    ("idle joules", False, lambda m, v: _reading(m, joules=20_000.0, idle_joules=v), 30_000.0, 30_001.0,
     "10000 W x 3.0 s"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("gpu", "lie", "inside", "outside", "bound"), [c[1:] for c in BOUNDS], ids=[c[0] for c in BOUNDS]
)
def test_a_reading_just_inside_passes_and_just_outside_is_refused(
    gpu: bool, lie: Lie, inside: float, outside: float, bound: str
) -> None:
    spec, profile = (GPU_TASK, WITH_GPU) if gpu else (CPU_TASK, CPU_ONLY)
    within = derive(lie(honest(gpu), inside), spec)
    assert check_figures(within, spec, profile) == within
    refusal = check_figures(derive(lie(honest(gpu), outside), spec), spec, profile)
    assert isinstance(refusal, Refusal), refusal
    assert refusal.reason == FailureReason.INVALID
    assert f"the worker says {outside!r}" in refusal.detail
    assert bound in refusal.detail


def test_every_honest_kind_passes_with_its_profile() -> None:
    assert check_figures(honest(), CPU_TASK, CPU_ONLY) == honest()
    assert check_figures(honest(gpu=True), GPU_TASK, WITH_GPU) == honest(gpu=True)


def test_the_refusal_names_the_field_path() -> None:
    refusal = check_figures(derive(_points(honest(), temp_c=-300.0), CPU_TASK), CPU_TASK, CPU_ONLY)
    assert isinstance(refusal, Refusal)
    assert refusal.detail == "telemetry.points[0].temp_c: the worker says -300.0 C, outside -40 to 150 C"


def test_without_a_profile_physics_still_bounds_memory() -> None:
    refusal = check_figures(derive(honest().with_(peak_inference_ram_mb=1e308), CPU_TASK), CPU_TASK)
    assert isinstance(refusal, Refusal)
    assert "peak_inference_ram_mb: the worker says 1e+308 MiB, outside 0 to 6.71089e+07 MiB" in refusal.detail


def test_gpu_telemetry_from_a_device_with_no_gpu_is_refused() -> None:
    lie = derive(_points(honest(), gpu_power_w=300.0), CPU_TASK)
    refusal = check_figures(lie, CPU_TASK, CPU_ONLY)
    assert isinstance(refusal, Refusal)
    assert (
        "telemetry.points[0].gpu_power_w: the worker says 300.0, from a device whose profile lists no GPU"
        in (refusal.detail)
    )


@pytest.mark.parametrize(
    ("watts", "refused"),
    [
        (150.0, False),
        (76.0, False),
        (299.0, False),
        (74.0, True),
        (301.0, True),
        (1e-9, True),
        (140.0, False),
    ],
)
def test_energy_against_the_same_results_power_telemetry(watts: float, refused: bool) -> None:
    """The points say 150 W: the readings' average may be within a factor 2 of it, or 25 W."""
    lie = derive(_reading(honest(gpu=True), joules=watts * 2.0, idle_joules=3e-9), GPU_TASK)
    checked = check_figures(lie, GPU_TASK, WITH_GPU)
    if not refused:
        assert checked == lie
        return
    assert isinstance(checked, Refusal)
    assert checked.reason == FailureReason.INVALID
    assert checked.detail.startswith(f"energy.avg_power_w: the worker's readings say {watts!r} W over 2.0 s")
    assert "gpu_power_w averages 150.0 W over 4 points; allowed within a factor 2 or 25 W" in checked.detail


@pytest.mark.parametrize(
    ("method", "spec", "profile", "said"),
    [
        ("nvml-energy-counter", CPU_TASK, CPU_ONLY, "from a device whose profile lists no GPU"),
        ("nvml-power-sampled@100ms", CPU_TASK, WITH_GPU,
         "for a task on CPU (ONNX) (NVML reads a GPU unit only)"),
        ("nvml-energy-counter", GPU_TASK, WITH_GPU.with_(units=CPU_ONLY.units),
         "from a device whose profile has no usable GPU (ONNX)"),
        ("rapl-package", GPU_TASK, WITH_GPU, "for a task on GPU (ONNX) (a GPU unit reads NVML)"),
        ("rapl-package+dram", CPU_TASK, CPU_ONLY.with_(os="Darwin"),
         "from a device on 'Darwin' (RAPL is read on Linux only)"),
        ("powermetrics", CPU_TASK, CPU_ONLY, "not a method the node reads (nvml-..., rapl-...)"),
    ],
)  # fmt: skip
def test_the_energy_method_against_the_profile_and_the_unit(
    method: str, spec: TaskSpec, profile: DeviceProfile, said: str
) -> None:
    lie = derive(_reading(honest(), method=method), spec)
    refusal = check_figures(lie, spec, profile)
    assert isinstance(refusal, Refusal)
    assert refusal.detail == f"energy_readings[0].method: the worker says {method!r}, {said}"


def test_the_methods_each_device_reads_pass() -> None:
    for method in ("rapl-package", "rapl-package+dram", ""):
        m = derive(_reading(honest(), method=method), CPU_TASK)
        assert check_figures(m, CPU_TASK, CPU_ONLY) == m
    m = derive(_reading(honest(gpu=True), method="nvml-power-sampled@100ms"), GPU_TASK)
    assert check_figures(m, GPU_TASK, WITH_GPU) == m


def test_net_energy_below_idle_beyond_the_tolerance_is_refused() -> None:
    """3 W idle over a 2 s window: the window may hold no less than half of 6 J."""
    at_floor = derive(_reading(honest(), joules=3.0), CPU_TASK)
    assert at_floor.energy is not None
    assert at_floor.energy.joules_per_inference == pytest.approx(-0.6)
    assert check_figures(at_floor, CPU_TASK, CPU_ONLY) == at_floor
    refusal = check_figures(derive(_reading(honest(), joules=2.99), CPU_TASK), CPU_TASK, CPU_ONLY)
    assert isinstance(refusal, Refusal)
    assert refusal.detail == (
        "energy_readings[0].joules: the worker says 2.99 J over 2.0 s, below 0.5 x its idle power (3.0 W) "
        "x the window = 3.0 J"
    )


def test_a_window_shorter_than_a_meter_period_is_not_held_to_its_idle() -> None:
    """A counter that updates less often than the window lasts can honestly read 0 J over it."""
    quick = derive(_reading(honest(), window_s=0.06, joules=0.0), CPU_TASK)
    assert check_figures(quick, CPU_TASK, CPU_ONLY) == quick


def test_idle_joules_larger_than_the_windows_are_refused() -> None:
    """The issue's -33,333 J per inference: idle energy many times the window's."""
    lie = derive(_reading(honest(), joules=1.0, idle_joules=250_000.0, idle_s=25.0), CPU_TASK)
    assert lie.energy is not None
    assert lie.energy.joules_per_inference is not None
    assert lie.energy.joules_per_inference < -3000
    refusal = check_figures(lie, CPU_TASK, CPU_ONLY)
    assert isinstance(refusal, Refusal)
    assert refusal.detail.startswith(
        "energy_readings[0].joules: the worker says 1.0 J over 2.0 s, below 0.5 x"
    )


@pytest.mark.parametrize(
    ("device", "said"),
    [
        (CPU_ONLY.with_(ram_mb=1 << 60),
         "device.ram_mb: the worker says 1152921504606846976, its placed profile says 16384"),
        (WITH_GPU, "device.gpus: the worker says (GpuInfo(name='H100'"),
        (CPU_ONLY.with_(cores_logical=4096),
         "device.cores_logical: the worker says 4096, its placed profile says 8"),
        (CPU_ONLY.with_(calibration=Calibration(cpu_gflops=1e308, mem_bandwidth_gbs=10.0, seconds=1.0)),
         "device.calibration.cpu_gflops: the worker says 1e+308 GFLOPS, outside 0 to 1e+06 GFLOPS"),
        (CPU_ONLY.with_(calibration=Calibration(cpu_gflops=50.0, mem_bandwidth_gbs=math.inf, seconds=1.0)),
         "device.calibration.mem_bandwidth_gbs: the worker says inf GB/s, outside 0 to 100000 GB/s"),
    ],
)  # fmt: skip
def test_the_results_device_is_the_placed_profile_with_a_physical_calibration(
    device: DeviceProfile, said: str
) -> None:
    ok = CPU_ONLY.with_(calibration=Calibration(cpu_gflops=50.0, mem_bandwidth_gbs=10.0, seconds=1.0))
    assert check_figures(honest(), CPU_TASK, CPU_ONLY, ok) == honest()  # a calibration taken again
    refusal = check_figures(honest(), CPU_TASK, CPU_ONLY, device)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    assert refusal.detail.startswith(said)


ENDPOINT = TaskSpec(
    compute_unit=ComputeUnit.CPU_ONNX,
    timeout_s=60.0,
    generate=GenerateSpec(
        prompts=(Prompt(id="a", text="Say it."),),  # 7 characters
        prompts_sha256="0" * 64,
        max_new_tokens=8,
        endpoint=Endpoint(model="m", url="http://127.0.0.1:1/v1"),
    ),
)


def served(rtt_ms: float = 0.4, **record: Any) -> Measurement:
    """An endpoint task's one request as the worker derives it, with `record`'s fields changed."""
    assert ENDPOINT.generate is not None
    fields: dict[str, Any] = {"prompt_id": "a", "prompt_tokens": 12, "output_tokens": 4, "ttft_ms": 30.0,
                              "e2e_ms": 61.0, "token_times_ms": (30.0, 41.0, 50.5, 61.0)}  # fmt: skip
    generation = summarize_generation((RequestRecord(**{**fields, **record}),), 0.1, ENDPOINT.generate)
    raw = honest().with_(samples_ms=(), process_runs=(), load_samples_ms=(), first_inferences_ms=(),
                         telemetry=None, energy_readings=(), node_share={})  # fmt: skip
    return derive(raw.with_(generation=generation.with_(rtt_ms=rtt_ms)), ENDPOINT)


ASKED = "tokens (16 x the 8 asked + 16)"
PROMPT = "tokens (4 x the longest prompt's 7 characters + 4096)"


@pytest.mark.parametrize(
    ("field", "inside", "outside", "bound"),
    [
        ("output_tokens", 144, 145, f"outside 0 to 144 {ASKED}"),
        ("usage_tokens", 144, 10**15, f"outside 0 to 144 {ASKED}"),
        ("counted_tokens", 0, 145, f"outside 0 to 144 {ASKED}"),
        ("prompt_tokens", 4124, 4125, f"outside 0 to 4124 {PROMPT}"),
    ],
)
def test_token_counts_within_what_the_task_asked(field: str, inside: int, outside: int, bound: str) -> None:
    within = served(**{field: inside})
    assert check_figures(within, ENDPOINT, CPU_ONLY) == within
    refusal = check_figures(served(**{field: outside}), ENDPOINT, CPU_ONLY)
    assert isinstance(refusal, Refusal)
    assert refusal.detail == f"generation.records[0].{field}: the worker says {outside!r} tokens, {bound}"


def test_a_round_trip_longer_than_the_timeout_is_refused() -> None:
    refusal = check_figures(served(rtt_ms=63_001.0), ENDPOINT, CPU_ONLY)
    assert isinstance(refusal, Refusal)
    assert refusal.detail == (
        "generation.rtt_ms: the worker says 63001.0 ms, outside 0 to 63000 ms (the timeout)"
    )


def test_an_energy_window_shorter_than_the_runs_it_wraps_is_refused() -> None:
    """The five timed runs take 53.7 ms: a window may not be shorter (1 ms allowed for rounding)."""
    at_least = derive(_reading(honest(), window_s=0.0528, joules=0.5), CPU_TASK)
    assert check_figures(at_least, CPU_TASK, CPU_ONLY) == at_least
    refusal = check_figures(
        derive(_reading(honest(), window_s=0.05, joules=0.5), CPU_TASK), CPU_TASK, CPU_ONLY
    )
    assert isinstance(refusal, Refusal)
    assert refusal.detail.startswith(
        "energy_readings[0].window_s: the worker says 0.05 s, shorter than the 5 timed runs it covers (0.0537"
    )


def test_the_profile_placed_by_is_the_peers_advert() -> None:
    peers = [sch.PeerView(peer_id="a", profile=CPU_ONLY), sch.PeerView(peer_id="b", profile=WITH_GPU)]
    assert sch.placed_profile(peers, "b") == WITH_GPU
    assert sch.placed_profile(peers, "c") is None


CAPACITY = """
jobs:
  - endpoint: {url: "http://127.0.0.1:8000/v1", model: m}
    generate:
      prompts: builtin:summaries
      capacity: {slo: {ttft_ms: 150}, rate: {min: LOW, max: HIGH}}
"""


@pytest.mark.parametrize(("low", "high", "levels"), [("1", "1e18", 65), ("1e-300", "1e300", 1999)])
def test_a_rate_range_needing_more_levels_than_a_result_holds_is_refused(
    low: str, high: str, levels: int
) -> None:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(CAPACITY.replace("LOW", low).replace("HIGH", high))
    (problem,) = caught.value.problems
    assert problem.path == "jobs[0].generate.capacity.rate"
    assert f"needs up to {levels} levels, over the 64 one search result holds" in problem.problem


def test_a_rate_range_of_64_levels_is_accepted() -> None:
    assert rate_levels(1, 2**59, 10) == 64  # 60 doublings, then 4 bisections to 10 %
    (job,) = parse_campaign(CAPACITY.replace("LOW", "1").replace("HIGH", str(2**59))).jobs
    assert job.spec.generate is not None
    assert job.spec.generate.capacity is not None


FLEET = """
jobs:
  - endpoint: {url: "http://127.0.0.1:1", model: m}
    generate: {prompts: builtin:summaries, request_rate: RATE, duration_s: 3}
    fleet: FLEET
"""


@pytest.mark.parametrize(
    ("fleet", "rate", "ok"),
    [
        ("all", 384_000, True),
        ("all", 384_001, False),
        ("all", "1e300", False),
        ("2", 3000, True),
        ("2", 3001, False),
    ],
)
def test_fleet_all_is_checked_per_member_like_fleet_n(fleet: str, rate: object, ok: bool) -> None:
    """0.9 x 5,000 requests a member: `fleet: all` with every member a fleet may have (256)."""
    text = FLEET.replace("RATE", str(rate)).replace("FLEET", fleet)
    if ok:
        assert parse_campaign(text).jobs[0].spec.generate is not None
        return
    with pytest.raises(CampaignError) as caught:
        parse_campaign(text)
    (problem,) = caught.value.problems
    assert problem.path == "jobs[0].generate.request_rate"
    assert "requests, over 5000 a member" in problem.problem


def test_nvml_joules_over_a_phase_shorter_than_nvml_reads_truly_are_refused() -> None:
    """Issue 54: an honest worker gives no NVML joules for a phase under 1 s (its counter read half the
    energy over 0.22 s on an H200), so joules over one are not a reading the node makes; at 1 s the
    reading is held to the power points as before."""
    base = honest(gpu=True)
    short = derive(_reading(base, joules=12.6, window_s=0.22, idle_joules=3e-9), GPU_TASK)
    refusal = check_figures(short, GPU_TASK, WITH_GPU)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == FailureReason.INVALID
    said = (
        "energy: the worker reports 12.6 J from nvml-energy-counter over 0.22 s; "
        "NVML is read over at least 1 s"
    )
    assert refusal.detail.startswith(said), refusal.detail
    enough = derive(_reading(base, joules=150.0, window_s=1.0, idle_joules=3e-9), GPU_TASK)
    assert check_figures(enough, GPU_TASK, WITH_GPU) == enough
