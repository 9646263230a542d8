"""Domain values shared by every role: device profiles, models, task specs and measurements."""

from __future__ import annotations

import enum
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from protocol.base import SHA256_PATTERN, Stats, Value
from protocol.capacity import CapacityResult
from protocol.energy import EnergyFigures, EnergyReading
from protocol.generation import GenerateSpec, GenerationStats
from protocol.stats import NO_SAMPLES, median, split
from protocol.telemetry import Sustained, SustainSpec, Telemetry
from protocol.text import control_characters
from protocol.units import ComputeUnit


def _printable(text: str) -> str:
    """A profile's name or fact as given, or ValueError naming the control characters in it."""
    found = control_characters(text)
    if found:
        raise ValueError(f"control characters are not allowed ({', '.join(dict.fromkeys(found))})")
    return text


ProfileFact = Annotated[str, Field(max_length=256), AfterValidator(_printable)]
"""A short printable string a device states about itself (name, SoC, OS, versions, GPU): checked at the
edge, on the worker that advertises it and on every peer that reads it. Free text (a probe's reason, a
failure detail) is not a ProfileFact: it is neutralised where it is shown (`protocol.text`)."""
ProfileName = Annotated[str, Field(max_length=128), AfterValidator(_printable)]
"""A device's or a runtime's name: a ProfileFact of at most 128 characters."""


MAX_ADVERT_ADDRS: Final = 16
"""Direct addresses an advert may list (a worker announces its best-ranked ones): more is invalid."""
MAX_ADVERT_CIRCUITS: Final = 8
"""Relay circuit addresses an advert may list (one per gate the worker reserved on): more is invalid."""
AddrText = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_printable)]
"""One multiaddr in an advert, as text."""
AdvertAddrs = Annotated[tuple[AddrText, ...], Field(max_length=MAX_ADVERT_ADDRS)]
"""An advert's direct addresses: a peer's claim, bounded at the edge (a dialer still dials a few)."""
AdvertCircuits = Annotated[tuple[AddrText, ...], Field(max_length=MAX_ADVERT_CIRCUITS)]
"""An advert's relay circuit addresses, bounded at the edge."""


class UnitStatus(Value):
    """Whether a compute unit really ran a probe model here, and if not, why."""

    unit: ComputeUnit
    usable: bool
    reason: str = ""
    provider: ProfileName | None = None


class EndpointStatus(Value):
    """A model server the device's owner declared, as its probe found it: no URL, no secret.

    Attributes:
        name: the owner's name for the server (`--endpoint NAME=URL`).
        model: a model id the server lists (`GET /v1/models`); "" when the listing failed.
        usable: a short streamed completion of this model succeeded.
        reason: why not, when not usable.
    """

    name: Annotated[ProfileName, Field(min_length=1, max_length=64)]
    model: ProfileFact = ""
    usable: bool
    reason: str = Field(default="", max_length=500)


class GpuInfo(Value):
    """A discrete GPU as the driver (or a fallback tool) reports it."""

    name: ProfileFact
    vram_mb: int = Field(ge=0)
    driver: ProfileName = ""
    source: Literal["nvml", "torch", "nvidia-smi"]


PeakPrecision = Literal["fp32", "tf32", "fp16", "bf16", "int8", "fp8", "read", "write", "copy"]
"""A peak's precision (a matmul's element type) or, for memory, its access (read, write, copy)."""
MATMUL_PRECISIONS: Final = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
BANDWIDTHS: Final = ("read", "write", "copy")
MAX_PEAKS: Final = 160
"""The figures a calibration may carry: the CPU's 7 and 9 for each of up to 16 GPUs."""


class Peak(Value):
    """One unit's measured peak for one precision or memory access, with how it was measured.

    A matmul's figure is in G operations per second (2 n^3 per n x n product: GFLOPS, GOPS for int8),
    memory's in GB/s (bytes the kernel reads plus the bytes it writes). A precision the unit or the
    installed libraries cannot do is a Peak too: `available` False, `per_s` 0, `reason` says why.
    """

    unit: ProfileName  # "CPU", or "cuda:<i> <GPU name>"
    precision: PeakPrecision
    per_s: float = Field(default=0.0, ge=0)  # GFLOPS / GOPS, or GB/s
    available: bool = True
    reason: ProfileFact = ""  # why it is unavailable
    method: ProfileFact = ""  # how the figure was taken (the sweep, the statistic)
    library: ProfileFact = ""  # the library and its version
    kernel: ProfileFact = ""  # the call that was timed
    sizes: ProfileFact = ""  # the sizes swept, and the one the figure is from
    cv: float = Field(default=0.0, ge=0)  # the timed repeats' coefficient of variation at that size
    background_cores: float = Field(default=0.0, ge=0)  # cores other processes kept busy meanwhile
    cpu_mhz: float = Field(default=0.0, ge=0)  # the mean CPU clock over the sweep (telemetry), 0: unread
    temp_c: float | None = None  # the hottest sensor over the sweep; None where there is none
    cpu_share: float | None = Field(default=None, ge=0, le=1)  # the child's mean share of the CPU it wanted

    @property
    def figure(self) -> str:
        """The figure's unit: GB/s for memory, GOPS for int8, GFLOPS otherwise."""
        if self.precision in BANDWIDTHS:
            return "GB/s"
        return "GOPS" if self.precision == "int8" else "GFLOPS"


PEAK_MIN_REPEATS: Final = 5
"""The fewest timed calls a peak's figure is taken from (`drivers.measuring.peakchild`)."""
GPU_PEAK_BATCH: Final = 8
"""Products (or memory passes) one timed GPU call runs before it synchronizes
(`drivers.measuring.gpupeaks`)."""
MAX_PEAK_TIMES: Final = 100_000


class PeakSpec(Value):
    """A peaks task (`peaks:` in a campaign job): one figure of the job's unit measured, as `info --bench`
    measures it (`drivers.measuring.peakchild`), its raw timings returned (`PeakRun`).

    Attributes:
        precision: the matmul precision or memory access measured.
        largest: the sweep's largest size (a matmul's n, memory's MiB); None: the plateau's search decides.
    """

    precision: PeakPrecision
    largest: int | None = Field(default=None, ge=1, le=1 << 20)


class PeakRun(Value):
    """A peaks task's raw parts, from which the submitter derives the figure again (`protocol.aggregate`).

    Attributes:
        peak: the figure as the worker took it (its `per_s` and `cv` derived from the parts below).
        size: the size the figure is from: a matmul's n, or memory's array bytes.
        batch: the products or passes one timed call ran (1 on a CPU, `GPU_PEAK_BATCH` on a GPU).
        threads: the thread count the size was timed at (None: the library's own).
        times_s: every timed call at that size, in order, in seconds.
        warmups: the calls made before timing (until the rolling median settled).
    """

    peak: Peak
    size: int = Field(ge=1, le=1 << 40)
    batch: int = Field(default=1, ge=1, le=1024)
    threads: int | None = Field(default=None, ge=1, le=1024)
    times_s: tuple[float, ...] = Field(default=(), max_length=MAX_PEAK_TIMES)
    warmups: int = Field(default=0, ge=0)


class Calibration(Value):
    """Short device calibration: what the hardware does on standard kernels, and its measured peaks
    (`sark-node info --bench`, cached beside it; empty until measured)."""

    cpu_gflops: float = Field(ge=0)
    mem_bandwidth_gbs: float = Field(ge=0)
    gpu_tflops: dict[ProfileName, float] = Field(default_factory=dict, max_length=16)
    seconds: float = Field(ge=0)
    key: ProfileFact = ""
    taken_at: float = Field(default=0.0, ge=0)  # seconds since the epoch; 0: unknown (an old cache entry)
    background_cores: float = Field(default=0.0, ge=0)  # cores other processes kept busy while it ran
    quiet: bool = False  # True only when the machine was quiet: a loaded figure is marked and re-taken later
    peaks: tuple[Peak, ...] = Field(default=(), max_length=MAX_PEAKS)

    @property
    def cpu_claim(self) -> float:
        """The CPU's fp32 matmul claim a challenge tests: the larger of `cpu_gflops` and the CPU's
        fp32 peak (one kernel, two sizes: a peak above the calibration is challenged at its own word)."""
        fp32 = self.peak("CPU", "fp32")
        return max(self.cpu_gflops, fp32.per_s if fp32 is not None else 0.0)

    def peak(self, unit: str, precision: str) -> Peak | None:
        """The available peak of `unit` at `precision`, if measured."""
        found = [p for p in self.peaks if p.unit == unit and p.precision == precision and p.available]
        return found[0] if found else None

    def summary(self) -> str:
        """The figures for people, marked when they were taken under load."""
        text = f"{self.cpu_gflops:.1f} GFLOPS fp32 matmul, {self.mem_bandwidth_gbs:.1f} GB/s copy"
        return text if self.quiet else f"{text} (under load: {self.background_cores:.1f} cores busy)"


class DeviceProfile(Value):
    """What a device is and what it can truthfully run."""

    device_name: ProfileName
    soc: ProfileFact
    cores_physical: int = Field(ge=0)
    cores_logical: int = Field(ge=0)
    ram_mb: int = Field(ge=0)
    os: ProfileName
    os_version: ProfileFact
    arch: ProfileName = ""
    device_year: int | None = None
    gpus: tuple[GpuInfo, ...] = ()
    gpu_reason: str = ""
    runtimes: dict[ProfileName, ProfileName] = Field(default_factory=dict, max_length=64)
    units: tuple[UnitStatus, ...] = ()
    endpoints: tuple[EndpointStatus, ...] = ()  # declared model servers (gray-box), as probed
    fingerprint: ProfileFact
    calibration: Calibration | None = None
    # what the owner asks per hour of this device (`join --price-per-hour`), in the campaign's currency;
    # a peer's word with no authority: any float arrives, and the submitter bounds it where it prices
    # a row (`scheduler.results.prices`), so a lie is refused there with its reason
    price_per_hour: float | None = None

    def usable_units(self) -> tuple[ComputeUnit, ...]:
        """The units whose probe really ran."""
        return tuple(s.unit for s in self.units if s.usable)

    def unit_status(self, unit: ComputeUnit) -> UnitStatus | None:
        """The probe outcome for one unit, or None if it was never probed."""
        return next((s for s in self.units if s.unit == unit), None)

    def vram_mb(self) -> int:
        """The largest GPU memory on this device (0 without a GPU)."""
        return max((g.vram_mb for g in self.gpus), default=0)


MAX_PRICE_PER_HOUR: Final = 10_000.0
"""The most an hour of one device may be priced at (a campaign's price or an owner's): ten times the
dearest cloud machine of 2026, so that no real price is refused and no absurd one is shown."""


class ModelFormat(enum.StrEnum):
    """Model file formats a worker may be asked to load."""

    ONNX = "onnx"
    TORCH_EXPORT = "torch-export"
    TORCHSCRIPT = "torchscript"
    COREML = "coreml"
    GGUF = "gguf"  # a generative model in one file (llama.cpp's format; no code runs on load)
    SAFETENSORS = "safetensors"  # a folder in Hugging Face layout: config, tokenizer, safetensors shards
    TFLITE = "tflite"  # a LiteRT flatbuffer (no code runs on load)
    PTE = "pte"  # an ExecuTorch program flatbuffer (no code runs on load: its operators are the runtime's)


class ModelRef(Value):
    """A model pinned by content: all devices measure the same bytes."""

    name: str = Field(min_length=1, max_length=255)
    size: int = Field(ge=0)
    sha256: str = Field(pattern=SHA256_PATTERN)
    format: ModelFormat = ModelFormat.ONNX
    sources: tuple[str, ...] = ()


STOP_RUNS_FACTOR: Final = 10
"""The stopping rule's default cap on timed runs per process: this many times the minimum `runs`."""

MAX_SAMPLES: Final = 1 << 18
"""The most timed runs one task measures (all its processes together): the wire's array cap
(`protocol.codec`). At 9 msgpack bytes a float, 262,144 samples are 2.25 MiB: a result at the cap
fits one envelope (`messages.MAX_ENVELOPE`, 4 MiB less 64 KiB) and one frame."""

OUTPUT_SAMPLE: Final = 1 << 16
"""The most output values a result keeps for comparing runtimes (`Measurement.output_sample`): 576 KiB
at 9 msgpack bytes a value, which fits one envelope beside `MAX_SAMPLES` timings (2.25 MiB)."""

MAX_INPUT_DATA: Final = 1 << 20
"""Bytes of input data files one job may give in all: they travel inside the signed offer."""


class InputData(Value):
    """Input arrays a campaign gives in a file: an `.npy` for one input, or an `.npz` with arrays by
    input name. Carried in the offer (so the submitter's signature covers it); parsed only in the
    measuring child."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    file: str = Field(min_length=1, max_length=255)
    input: str | None = Field(default=None, max_length=256)  # the input an .npy feeds; None: an .npz
    sha256: str = Field(pattern=SHA256_PATTERN)
    data: bytes = Field(max_length=MAX_INPUT_DATA)


DEFAULT_TIMEOUT_S: Final = 600.0


class TaskSpec(Value):
    """How to benchmark one model on one compute unit."""

    compute_unit: ComputeUnit
    runs: int = Field(default=10, ge=1, le=100_000)
    warmups: int = Field(default=5, ge=0, le=10_000)
    warmup_until_stable: bool = False
    load_runs: int = Field(default=3, ge=1, le=100)
    processes: int = Field(default=1, ge=1, le=20)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=86_400 * 2)
    input_shapes: dict[str, tuple[int, ...]] = Field(default_factory=dict)
    # A constant that fills every element of the named input (e.g. an audio model's sample rate).
    input_values: dict[str, float] = Field(default_factory=dict)
    # Arrays from the campaign's files for some or all inputs (`input_data:` in a campaign).
    input_data: tuple[InputData, ...] = Field(default=(), max_length=64)
    strict_placement: bool = True
    # The precision a runtime that offers the choice computes in (OpenVINO's INFERENCE_PRECISION_HINT):
    # None keeps the driver's default (f32 on OpenVINO's CPU: the model's own, as ONNX Runtime runs it).
    precision: Literal["f32", "bf16", "f16"] | None = None
    # The performance hint a runtime that takes one compiles for (OpenVINO's PERFORMANCE_HINT): latency
    # (one stream, the default) or throughput (as many streams and requests as the device runs best).
    performance_hint: Literal["latency", "throughput"] = "latency"
    # Keep the model's dynamic input dimensions when compiling (OpenVINO); by default a runtime that
    # compiles for shapes compiles for the shapes fed, as its users deploy it.
    dynamic_shapes: bool = False
    # The least share of the model's executed nodes that must run on the asked unit (1.0: all of them);
    # below it the run is a fallback (`drivers.measuring.meters.Placed`): failed when strict, else marked.
    placement_share: float = Field(default=1.0, gt=0, le=1)
    threads: int | None = Field(default=None, ge=1, le=1024)
    memory_limit_mb: int | None = Field(default=None, ge=16)
    # Optional stopping rule: with ci_target_pct set, `runs` is the minimum and each process runs on until
    # the 95% confidence interval of its median is within ci_target_pct percent of the median, or it reached
    # max_runs (default 10 x runs), or its timed runs took max_duration_s (default: a fifth of the timeout).
    ci_target_pct: float | None = Field(default=None, gt=0, le=100)
    max_runs: int | None = Field(default=None, ge=1, le=1_000_000)
    max_duration_s: float | None = Field(default=None, gt=0, le=86_400)
    # A generative workload (LLM or model server) instead of single-shot tensor inference.
    generate: GenerateSpec | None = None
    # A sustained run: one process times runs for sustain.duration_s, reported per window.
    sustain: SustainSpec | None = None
    # A peaks task: one figure of the unit's peaks (`PeakSpec`) instead of a model's inference.
    peaks: PeakSpec | None = None

    def run_cap(self) -> int:
        """The most timed runs one process may take: `runs`, or under the stopping rule `max_runs`
        (default `STOP_RUNS_FACTOR` x runs), and never more than its share of `MAX_SAMPLES` (all the
        processes' samples travel in one result). A sustained run keeps at most `MAX_SAMPLES`."""
        if self.sustain is not None:
            return MAX_SAMPLES
        if self.ci_target_pct is None:
            return self.runs
        most = MAX_SAMPLES // self.processes
        return max(self.runs, min(self.max_runs or STOP_RUNS_FACTOR * self.runs, most))

    @model_validator(mode="before")
    @classmethod
    def _sustain_timeout(cls, data: object) -> object:
        """A sustained run without its own timeout gets its duration plus the default timeout."""
        if isinstance(data, dict) and data.get("sustain") is not None and "timeout_s" not in data:
            sustain = data["sustain"]
            duration = sustain.get("duration_s") if isinstance(sustain, dict) else sustain.duration_s
            if isinstance(duration, int | float) and not isinstance(duration, bool):
                return {**data, "timeout_s": float(duration) + DEFAULT_TIMEOUT_S}
        return data

    @model_validator(mode="after")
    def _samples_fit_the_wire(self) -> TaskSpec:
        if self.runs * self.processes > MAX_SAMPLES:
            raise ValueError(
                f"runs x processes is {self.runs * self.processes}: at most {MAX_SAMPLES} timed runs per task"
            )
        if self.max_runs is not None and self.max_runs * self.processes > MAX_SAMPLES:
            raise ValueError(
                f"max_runs x processes is {self.max_runs * self.processes}: at most {MAX_SAMPLES} per task"
            )
        if self.sustain is not None and (self.processes != 1 or self.generate or self.ci_target_pct):
            raise ValueError("a sustained run is one process of tensor runs, without ci_target_pct")
        if self.peaks is not None and (self.generate or self.sustain or self.processes != 1):
            raise ValueError("a peaks task is one measuring child, without generate or sustain")
        if self.sustain is not None and self.sustain.duration_s >= self.timeout_s:
            raise ValueError(f"sustain.duration_s must be shorter than timeout_s ({self.timeout_s:g} s)")
        return self


class RunConditions(Value):
    """What the device was doing and how the runtime was set while it measured."""

    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    spinning: bool | None = None
    background_cores: float = 0.0
    thermal: str = ""
    power: str = ""
    runtime_versions: dict[str, str] = Field(default_factory=dict)
    # How the runtime compiled and ran the model where it has such settings (OpenVINO: precision,
    # performance hint, streams, the shapes compiled for), as the runtime reported them after compiling.
    runtime_settings: dict[str, str] = Field(default_factory=dict, max_length=16)
    model_sha256: str = ""


class InputFed(Value):
    """One input as it was fed to the model on every run: its shape, type and how it was filled."""

    name: str = Field(max_length=256)
    dtype: str = Field(max_length=32)
    shape: tuple[int, ...]
    fill: Literal["seeded_normal", "zeros", "false", "constant", "file"]
    defaulted_dims: tuple[int, ...] = ()  # dynamic dimensions given the documented default size
    file: str = Field(default="", max_length=255)  # fill "file": the campaign's file, and its digest
    file_sha256: str = Field(default="", max_length=64)

    def label(self) -> str:
        """`name:dtype[d0,d1,...]` (`@file` when a campaign file filled it), the CSV's InputShapes form."""
        shape = f"{self.name}:{self.dtype}[{','.join(str(d) for d in self.shape)}]"
        return f"{shape}@{self.file}" if self.fill == "file" else shape


MAX_ASYNC_REQUESTS: Final = 1024


ASYNC_SLACK: Final = 3.0
"""A throughput run's rate may be at most this x its requests over its process's fastest timed run:
a request in flight with others is no faster than one alone on the same compiled model, save the
sync call's own cost (inputs copied, the caller's hand-off), which the queue does not pay: an honest
one-request queue ran 1.14-1.22 x the fastest sync run on a 35 us OpenVINO model (2026-11-26). Past
it the figure is withheld (`Measurement.async_over`), never the result: the machine's speed moved
between the timed runs and the throughput run after them (on a busy machine, 4.5 x one afternoon),
or the rate is not this model's."""


class AsyncRun(Value):
    """One process's throughput run (OpenVINO): `inferences` run through `requests` infer requests in
    flight at once, as the compiled model's performance hint sizes them
    (`OPTIMAL_NUMBER_OF_INFER_REQUESTS`), over `wall_ms` from the first start to the last completion."""

    requests: int = Field(ge=1, le=MAX_ASYNC_REQUESTS)
    inferences: int = Field(ge=1, le=MAX_SAMPLES * MAX_ASYNC_REQUESTS)
    wall_ms: float = Field(gt=0, allow_inf_nan=False)

    @property
    def per_s(self) -> float:
        """Inferences per second."""
        return self.inferences / self.wall_ms * 1000.0


class Measurement(Value):
    """Everything one task measured: load, first inference, timed runs, memory, CPU, placement."""

    compute_unit: ComputeUnit
    load_ms: Stats
    load_first_ms: float
    first_inference_ms: float
    warmups_used: int = Field(ge=0)
    inference_ms: Stats
    samples_ms: tuple[float, ...] = ()
    # The raw parts the figures are derived from (`protocol.aggregate`), process after process:
    process_runs: tuple[int, ...] = ()  # how many of `samples_ms` each process timed
    load_samples_ms: tuple[float, ...] = ()  # every timed load, `load_runs` per process
    first_inferences_ms: tuple[float, ...] = ()  # each process's first inference
    # Each process's fingerprint of its first inference's outputs (`drivers.measuring.outputs`): replicas of
    # one device class must agree on it (`scheduler.verification.agreement`); empty for generate tasks.
    output_fingerprints: tuple[str, ...] = Field(default=(), max_length=20)
    # The first process's outputs, all arrays flattened: every value up to OUTPUT_SAMPLE, else that many
    # at evenly spaced positions (`drivers.measuring.outputs.output_sample`): rows of one model on several
    # runtimes are compared on them (`scheduler.results.outputdiff`); empty for generate tasks.
    output_sample: tuple[float, ...] = Field(default=(), max_length=OUTPUT_SAMPLE)
    output_values: int = Field(default=0, ge=0)  # how many values the outputs held (the sample's whole)
    process_medians_ms: tuple[float, ...] = ()
    process_spread_pct: float = 0.0
    peak_load_ram_mb: float = Field(ge=0)
    peak_inference_ram_mb: float = Field(ge=0)
    cpu_cores_used: float = Field(ge=0)
    cpu_time_s: float = Field(default=0.0, ge=0)
    gpu_util_pct: float | None = None
    gpu_mem_mb: float | None = None
    providers: tuple[str, ...] = ()
    node_share: dict[str, float] = Field(default_factory=dict)
    fallback: bool = False
    unstable: bool = False
    unstable_reasons: tuple[str, ...] = ()
    conditions: RunConditions = RunConditions()
    inputs: tuple[InputFed, ...] = ()
    # Raw parts of windows over time (`protocol.windows`): the index in `samples_ms` of the first run
    # timed after each mark's time (ms on the task's time axis), and the device's telemetry.
    mark_runs: tuple[int, ...] = ()
    mark_ms: tuple[float, ...] = ()
    telemetry: Telemetry | None = None
    sustained: Sustained | None = None  # derived: a sustained run's windows and throttling verdict
    # Each process's throughput run, where the runtime runs asynchronous requests (OpenVINO): raw parts
    # of `throughput_per_s`, after and apart from the timed runs (`drivers.runtimes.driver.AsyncRunner`).
    async_runs: tuple[AsyncRun, ...] = Field(default=(), max_length=20)
    # What the worker left out so that the signed result fits one envelope, one line per cut
    # (`node.worker.fit`); empty when the result is whole.
    trimmed: tuple[str, ...] = Field(default=(), max_length=8)

    @classmethod
    def nothing_timed(cls, compute_unit: ComputeUnit) -> Measurement:
        """A measurement of `compute_unit` before anything is timed, every figure empty or zero: what a
        measuring child or an endpoint task fills with `with_` (its loads, its conditions, its requests)
        and `protocol.aggregate.derive` completes."""
        return cls(
            compute_unit=compute_unit,
            load_ms=NO_SAMPLES,
            load_first_ms=0.0,
            first_inference_ms=0.0,
            warmups_used=0,
            inference_ms=NO_SAMPLES,
            peak_load_ram_mb=0.0,
            peak_inference_ram_mb=0.0,
            cpu_cores_used=0.0,
        )

    def placement(self) -> str:
        """Where the model ran, in words: each provider or device with its share of the nodes (the
        primary first), led by "fallback: " when the run fell back; "" when nothing was recorded."""
        ran = [f"{p} {self.node_share[p]:.0%}" if p in self.node_share else p for p in self.providers]
        ran += [f"{p} {s:.0%}" for p, s in sorted(self.node_share.items()) if p not in self.providers]
        text = ", ".join(ran)
        return f"fallback: {text or 'elsewhere'}" if self.fallback else text

    @property
    def throughput_per_s(self) -> float | None:
        """Inferences per second with the runtime's own requests in flight: the median of the processes'
        throughput runs (None without one, or withheld: `async_over`)."""
        if not self.async_runs or self.async_over():
            return None
        return median([run.per_s for run in self.async_runs])

    def async_over(self) -> tuple[str, ...]:
        """Why the throughput figure is withheld, one line per run over `ASYNC_SLACK` x its requests
        over its process's fastest timed run (empty: shown, or no throughput runs). `protocol.derive`
        adds them to the stability verdict's reasons; the timed figures, which replicas and references
        check, stand. Runs that do not pair one to a process are refused before this reads them
        (`scheduler.verification.figures`)."""
        if len(self.async_runs) != len(self.process_runs):
            return ()
        reasons = []
        parts = split(self.samples_ms, self.process_runs)
        for i, (run, part) in enumerate(zip(self.async_runs, parts, strict=True)):
            fastest = min(part, default=0.0)
            if fastest > 0 and run.per_s > ASYNC_SLACK * run.requests * 1000.0 / fastest:
                reasons.append(
                    f"throughput run {i} at {run.per_s:.4g}/s with {run.requests} request(s) is over "
                    f"{ASYNC_SLACK:g} x its requests over its process's fastest timed run "
                    f"({fastest:.4g} ms): withheld (the machine's speed moved between them, "
                    "or it is not this model's rate)"
                )
        return tuple(reasons)

    @property
    def inputs_defaulted(self) -> bool:
        """True when a dynamic dimension was given a default size because the task named none."""
        return any(i.defaulted_dims for i in self.inputs)

    generation: GenerationStats | None = None
    # A capacity search (`GenerateSpec.capacity`): every level with its records; `generation` is then
    # the knee level's figures (`protocol.capacity.headline`).
    capacity: CapacityResult | None = None
    # Each process's energy over its measured window (`protocol.energy`), and the figures from them.
    energy_readings: tuple[EnergyReading, ...] = Field(default=(), max_length=20)
    energy: EnergyFigures | None = None
    # A peaks task's figure and its raw timings (`TaskSpec.peaks`); None for every other task.
    peak_run: PeakRun | None = None


class Load(Value):
    """A worker's current load, as it advertises it."""

    running: int = Field(default=0, ge=0)
    queued: int = Field(default=0, ge=0)
    max_queue: int = Field(default=4, ge=0)
    cpu_busy: float = Field(default=0.0, ge=0)
    mem_available_mb: int = Field(default=0, ge=0)
