"""Representative campaigns built from fixed values, for the results golden files (tests/golden/).

Each campaign is a real `Scheduler` played to its end by the harness's `Node` (no swarm), and a
store's `ResultRecord` per completed task: the worker's body signed with a fixed key (Ed25519 is
deterministic) and the measurement kept as the submitter derived it (the golden measurements are
taken as derived). The write path
(`node.submitter.outputs.write_outputs`) turns them into results.csv and results.json, byte for byte
the same on every run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import scheduler as sch
from kit.scheduler_harness import KEY, SHA, Node, cpu_fleet, peer, profile
from node.submitter.outputs import pack_envelope, pack_measurement
from node.submitter.store import ResultRecord
from protocol import (
    DOMAIN_RESULT,
    CapacityLevel,
    CapacityResult,
    ComputeUnit,
    InputFed,
    Measurement,
    ModelRef,
    RequestRecord,
    ResultBody,
    RunConditions,
    Stats,
    TaskSpec,
    Telemetry,
    TelemetryPoint,
    derive,
)
from protocol.capacity import derive_capacity, level_spec, saturation
from protocol.energy import EnergyFigures
from protocol.genstats import summarize_generation
from protocol.records import seal
from protocol.stats import NO_SAMPLES

CREATED = "2026-11-22T03:30:00Z"
WORKER_KEY = bytes(range(32))


@dataclass(frozen=True)
class Golden:
    """What `write_outputs` takes for one campaign."""

    campaign_id: str
    campaign: sch.Campaign
    scheduler: sch.Scheduler
    results: tuple[ResultRecord, ...]


def _stats(median: float) -> Stats:
    return Stats(
        n=3,
        min=median - 1,
        max=median + 2,
        mean=median + 0.5,
        median=median,
        stddev=0.25,
        p90=median + 1.5,
        p95=median + 1.75,
        p99=median + 1.95,
        cv=0.0123,
        outliers=1,
    )


def _tensor_measurement(unit: ComputeUnit) -> Measurement:
    return Measurement(
        compute_unit=unit,
        load_ms=_stats(40.0),
        load_first_ms=95.5,
        first_inference_ms=30.25,
        warmups_used=10,
        inference_ms=_stats(12.5),
        samples_ms=(12.0, 12.5, 13.0),
        process_medians_ms=(12.4, 12.6),
        process_spread_pct=1.6,
        peak_load_ram_mb=300.25,
        peak_inference_ram_mb=410.0,
        cpu_cores_used=1.234,
        providers=("CPUExecutionProvider",),
        unstable=True,
        unstable_reasons=("thermal", "background load"),
        conditions=RunConditions(background_cores=0.5, runtime_versions={"onnxruntime": "1.20.1"}),
        inputs=(InputFed(name="input", dtype="float32", shape=(1, 3, 224, 224), fill="seeded_normal"),),
        energy=EnergyFigures(
            joules_per_inference=0.0123456789,
            avg_power_w=31.234567,
            idle_power_w=8.5,
            method="rapl",
            note="CPU packages",
        ),
    )


def _record(at: float, ttft: float, *, planned: float | None = None, counted: bool = False) -> RequestRecord:
    return RequestRecord(
        prompt_id="p",
        prompt_tokens=3,
        output_tokens=3,
        ttft_ms=ttft,
        e2e_ms=ttft + 10,
        token_times_ms=(ttft, ttft + 5, ttft + 10),
        started_s=at,
        planned_s=planned,
        tokens_counted=counted,
        token_source="usage",
    )


def _generate_measurement(spec: TaskSpec, records: list[RequestRecord]) -> Measurement:
    assert spec.generate is not None
    stats = summarize_generation(records, 2.0, spec.generate)
    return Measurement(
        compute_unit=spec.compute_unit,
        load_ms=NO_SAMPLES,
        load_first_ms=0.0,
        first_inference_ms=0.0,
        warmups_used=0,
        inference_ms=NO_SAMPLES,
        peak_load_ram_mb=0.0,
        peak_inference_ram_mb=0.0,
        cpu_cores_used=0.0,
        generation=stats,
    )


OWNER_PRICES: dict[str, float] = {"12D3-cpu1": 2.0}
"""What an owner asks per hour, as the worker's signed device says (`join --price-per-hour`)."""


def _stored(campaign_id: str, task: sch.TaskView, measurement: Measurement) -> ResultRecord:
    assert task.peer_id is not None
    device = profile(task.device_name, units=[ComputeUnit.CPU_ONNX], ram_gb=16, soc="x86 CPU")
    device = device.with_(price_per_hour=OWNER_PRICES.get(task.peer_id))
    body = ResultBody(
        campaign_id=campaign_id,
        task_id=task.task_id,
        lease_id=task.lease_id or "",
        worker=task.peer_id,
        submitter="12D3-me",
        model_sha256=task.model.sha256,
        device=device.with_(device_year=2023),
        measurement=measurement,
        finished_at=1000.0,
    )
    return ResultRecord(
        task_id=task.task_id,
        lease_id=task.lease_id or "",
        peer_id=task.peer_id,
        status="Complete",
        envelope=pack_envelope(seal(body, DOMAIN_RESULT, WORKER_KEY)),
        samples=measurement.samples_ms,
        derived=pack_measurement(measurement),
        received=CREATED,
    )


@dataclass(frozen=True)
class Played:
    """A campaign played to its end by the harness."""

    campaign_id: str
    campaign: sch.Campaign
    node: Node

    def spec(self, task: sch.TaskView) -> TaskSpec:
        """The spec of a task's job."""
        return self.campaign.jobs[task.job_index].spec


def _played(campaign_id: str, text: str, scripts: dict[str, list[str]], peers: int) -> Played:
    campaign = sch.parse_campaign(text)
    node = Node(sch.Scheduler(campaign_id, campaign, {m.key: _model() for m in campaign.models}, key=KEY))
    fleet = cpu_fleet(peers)
    node.scripts = {fleet[int(k)].peer_id: v for k, v in scripts.items()}
    node.discover(fleet)
    node.run()
    return Played(campaign_id, campaign, node)


def _model() -> ModelRef:
    return ModelRef(
        name="mobilenet.onnx", size=14 * 1024 * 1024, sha256=SHA, sources=("https://example.org/m.onnx",)
    )


def _golden(played: Played, measure: Callable[[sch.TaskView], Measurement]) -> Golden:
    scheduler = played.node.scheduler
    done = [t for t in scheduler.tasks() if t.status == sch.Status.COMPLETE]
    results = tuple(_stored(played.campaign_id, t, measure(t)) for t in done)
    return Golden(played.campaign_id, played.campaign, scheduler, results)


TENSOR = f"""\
name: tensor
model: {{url: https://example.org/mobilenet.onnx, sha256: {SHA}}}
jobs:
  - compute_unit: CPU (ONNX)
    num_inference_runs: 100
    devices: all
  - compute_unit: GPU (ONNX)
    num_inference_runs: 100
prices:
  - {{peer: 12D3-cpu0, per_hour: 0.5}}
"""


def tensor() -> Golden:
    """Three CPU peers: two complete (one priced by the campaign, one by its owner), one fails twice (a
    Failed row); the GPU job is Unschedulable."""
    played = _played("tensor-1", TENSOR, {"2": ["fail:crashed", "fail:crashed", "fail:crashed"]}, 3)
    return _golden(played, lambda t: _tensor_measurement(t.unit))


GENERATE = """\
name: serve
jobs:
  - endpoint: {url: "http://127.0.0.1:8000/v1", model: m}
    generate: {prompts: builtin:summaries, max_new_tokens: 4, request_rate: [5, 10], duration_s: 2}
prices:
  - {peer: 12D3-cpu0, per_hour: 3}
rank: {by: throughput, at: p90, ttft_ms: 100}
"""


def generate() -> Golden:
    """An endpoint at two request rates, tokens counted by the client at the second."""
    played = _played("serve-1", GENERATE, {}, 1)

    def measure(task: sch.TaskView) -> Measurement:
        spec = played.spec(task)
        counted = spec.generate is not None and spec.generate.request_rate == 10
        records = [_record(i * 0.1, 20.0 + i, counted=counted) for i in range(10)]
        return _generate_measurement(spec, records)

    return _golden(played, measure)


CAPACITY = """\
name: knee
jobs:
  - endpoint: {url: "http://127.0.0.1:8000/v1", model: m}
    generate:
      prompts: builtin:summaries
      max_new_tokens: 4
      capacity: {slo: {ttft_ms: 150, tpot_ms: 50}, goodput_pct: 90, max_concurrency: 256, level_s: 2}
"""


def capacity() -> Golden:
    """A capacity search: four levels, the third ended early as over-saturated; knee 3."""
    played = _played("knee-1", CAPACITY, {}, 1)

    def measure(task: sch.TaskView) -> Measurement:
        spec = played.spec(task)
        generate = spec.generate
        assert generate is not None
        levels = []
        for level, ttft in ((1.0, 20.0), (2.0, 20.0), (4.0, 200.0), (3.0, 20.0)):
            records = [_record(i * 0.01, ttft + (60.0 * i if ttft > 150 else 0.0)) for i in range(12)]
            stats = summarize_generation(records, 1.0, level_spec(generate, level))
            end = saturation(records, generate) if ttft > 150 else None
            levels.append(CapacityLevel(level=level, generation=stats, ended_early=end, passed=False))
        raw = CapacityResult(
            by="concurrency", goodput_pct=90, levels=tuple(levels), knee=None, first_fail=None, finished=False
        )
        found = derive_capacity(raw, generate)
        m = _generate_measurement(spec, []).with_(generation=found.levels[3].generation, capacity=found)
        return derive(m, spec)

    return _golden(played, measure)


FLEET = """\
name: fleet
jobs:
  - endpoint: {url: "http://127.0.0.1:8000/v1", model: m}
    generate: {prompts: builtin:summaries, max_new_tokens: 4, request_rate: 10, duration_s: 2}
    fleet: {workers: 3, seed: 7}
"""


def fleet() -> Golden:
    """A fleet of three: two members measured (one behind its schedule), the third lost (its lease lapsed)."""
    played = _played("fleet-1", FLEET, {"2": ["commit"]}, 3)

    def measure(task: sch.TaskView) -> Measurement:
        spec = played.spec(task)
        late = 0.02 if task.task_id.endswith("-1") else 0.001
        records = [_record(i * 0.3 + late, 15.0 + i, planned=i * 0.3) for i in range(6)]
        return _generate_measurement(spec, records)

    return _golden(played, measure)


SUSTAIN = """\
name: sustain
model: {path: m.onnx}
jobs:
  - compute_unit: CPU (ONNX)
    sustain: {duration_s: 4, window_s: 2}
    timeout_s: 60
"""


def sustained() -> Golden:
    """A sustained run with telemetry: the second window 50 % slower while another process took a core."""
    played = _played("sustain-1", SUSTAIN, {}, 1)

    def measure(task: sch.TaskView) -> Measurement:
        spec = played.spec(task)
        quiet = [
            TelemetryPoint(t_ms=t, cpu_mhz=(2400.0,), busy_cores=1.0, own_cores=1.0, cpu_share=0.9)
            for t in (500.0, 1000.0, 1500.0, 2000.0)
        ]
        loaded = [p.with_(t_ms=p.t_ms + 2000.0, busy_cores=2.0, cpu_share=0.5) for p in quiet]
        raw = Measurement(
            compute_unit=ComputeUnit.CPU_ONNX,
            load_ms=NO_SAMPLES,
            load_first_ms=0.0,
            first_inference_ms=0.0,
            warmups_used=3,
            inference_ms=NO_SAMPLES,
            samples_ms=(10.0,) * 20 + (15.0,) * 13,
            process_runs=(33,),
            load_samples_ms=(100.0, 90.0, 95.0),
            first_inferences_ms=(20.0,),
            peak_load_ram_mb=50.0,
            peak_inference_ram_mb=60.0,
            cpu_cores_used=1.0,
            conditions=RunConditions(background_cores=0.5),
            mark_runs=(0, 20, 33),
            mark_ms=(0.0, 2000.1, 4000.2),
            telemetry=Telemetry(period_ms=500.0, groups=("cpu0-1 (max 2400 MHz)",), points=(*quiet, *loaded)),
        )
        return derive(raw, spec)

    return _golden(played, measure)


VERIFIED = f"""\
name: verified
model: {{url: https://example.org/m.onnx, sha256: {SHA}}}
verify: {{replicas: 2}}
jobs: [{{compute_unit: CPU (ONNX), devices: all}}]
"""
FIGURES = {"12D3-b0": 10.0, "12D3-b1": 10.1, "12D3-b2": 9.9, "12D3-b3": 5.0}
"""Each peer's figure in `verified`: b3 halves its timings."""


def verified() -> Golden:
    """Replicated (issue 38): four peers on four networks; one group agrees 2/2, in the other a halving
    liar is the outlier of a third replica (2/3). Each row's measurement has its peer's figure."""
    campaign = sch.parse_campaign(VERIFIED)
    peers = tuple(dataclasses.replace(peer(f"b{i}"), host=f"10.0.{i + 1}.1") for i in range(4))
    scheduler = sch.Scheduler("verified-1", campaign, {m.key: _model() for m in campaign.models}, key=KEY)
    out, now = scheduler.handle(sch.PeersDiscovered(peers=peers), 0.0), 1.0
    while offers := [c for c in out if isinstance(c, sch.SendOffer)]:
        out = []
        for o in offers:
            out += scheduler.handle(sch.OfferCommitted(o.task_id, o.peer_id, f"L-{o.task_id}"), now)
            figure = FIGURES[o.peer_id]
            out += scheduler.handle(
                sch.ResultAccepted(o.task_id, f"L-{o.task_id}", o.peer_id, figure, 0.01, "x"), now + 1
            )
            now += 2
    done = [t for t in scheduler.tasks() if t.status == sch.Status.COMPLETE]
    results = tuple(_stored("verified-1", t, _figured(t)) for t in done)
    return Golden("verified-1", campaign, scheduler, results)


def _figured(task: sch.TaskView) -> Measurement:
    figure = FIGURES[task.peer_id or ""]
    return _tensor_measurement(task.unit).with_(
        inference_ms=_stats(figure),
        samples_ms=(figure - 0.5, figure, figure + 0.5),
        process_medians_ms=(figure,) * 2,
    )


CAMPAIGNS: dict[str, Callable[[], Golden]] = {
    "tensor": tensor,
    "generate": generate,
    "capacity": capacity,
    "fleet": fleet,
    "sustained": sustained,
    "verified": verified,
}
