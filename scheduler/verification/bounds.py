"""The readings of a signed result that no raw part re-derives, held to what physics and the device allow.

`scheduler.verification.figures` derives every figure it can from the raw parts a worker sends. What
remains is read off the device once (a power, a temperature, a clock, a peak of memory, a CPU time)
and can only be bounded: by physics, by the device's own profile, by the task's timeout (the submitter's clock
bounds every window: a task ends by its deadline), and by the same result's other readings. Each
problem names the field path, the worker's value and the bound it broke; `check_figures` refuses the
result as `invalid` with the first one.

The profile is the one the submitter placed the task by: the worker's signed advert, confirmed by a
live `/sark/profile` answer during discovery (`scheduler.PeerView.profile`), which the submitter
checked its units against before it offered the task. The result's own `device` is signed by the same
key but is read only when the scheduler no longer knows the peer: a worker cannot raise its RAM or
invent a GPU in the result alone to pass these bounds.

Bounds, generous but physical, and why:

- Power (`TelemetryPoint.gpu_power_w`, and every energy reading's joules / seconds): 0 to
  `MAX_POWER_W` = 10 kW. An energy source covers one GPU board (NVML) or a machine's CPU packages
  and DRAM (RAPL): the largest boards draw about 1.2 kW, a two-socket server's packages and DRAM
  about 1.5 kW; 10 kW is several times any single device.
- Energy (`EnergyReading.joules`, `idle_joules`): 0 to `MAX_POWER_W` x its own seconds (`window_s`,
  `idle_s`); the seconds are bounded by the timeout (`scheduler.verification.figures`), and a tensor
  task's window, which wraps its process's timed loop on the same clock, by the runs it timed from below.
- Temperatures (`temp_c`, `gpu_temp_c`): -40 to 150 C (`protocol.telemetry.MIN_TEMP_C`,
  `MAX_TEMP_C`). Silicon is specified from -40 C (industrial parts) and shuts down before 125 C
  junction; 150 C is the absolute maximum rating of a junction. The sampler skips a sensor outside
  the range (a broken or missing one reads -273 or 255 C), so an honest worker never sends one.
- Clocks (`cpu_mhz`, `gpu_sm_mhz`): 0 to 10 GHz. No shipped CPU or GPU core runs past 6.2 GHz; 0 is
  kept because a virtual machine may report an unknown current clock as 0 (`psutil.cpu_freq`).
- Cores busy (`busy_cores`, `own_cores`, `cpu_cores_used`, `conditions.background_cores`): 0 to the
  profile's logical cores x 1.25 + 1 (`MAX_CORES` when the profile says 0). CPU time and wall time
  are read at slightly different instants, so one period may show a little more than every core.
- CPU time (`cpu_time_s`): that many cores for the task's whole timeout (x `OVERRUN`).
- Client CPU (`generation.client_cpu_pct`): 100 % per core allowed above.
- Shares (`node_share[*]`, `cpu_share`): 0 to 1; `gpu_util_pct`: 0 to 100; `gpu_reasons`: an NVML
  bit mask, below 2**64.
- Memory (`peak_load_ram_mb`, `peak_inference_ram_mb`): a resident high-water mark in MiB, at most
  the profile's RAM x 1.1 (the 10 % covers a profile rounding its RAM down and the MB / MiB
  difference); `gpu_mem_mb` at most the largest GPU's memory x 1.1. `MAX_MEMORY_MB` (64 TiB) where
  the profile does not say.
- Times without raw parts (`generation.rtt_ms`, `tls_ms`, `client_overhead_ms`, each request's
  `token_times_ms`, `mark_ms`, telemetry `t_ms` and `period_ms`): within the task's timeout.
- Token counts of each request (`output_tokens`, `usage_tokens`, `counted_tokens`,
  `reasoning_tokens`): at most 16 x the most the task asked for (`max_new_tokens`, or a prompt's own
  `output_tokens`) + 16. A server stops at `max_tokens` by its own count; a pinned tokenizer counting
  the same text with another vocabulary, or one token per stream chunk, differs from it by far less
  than 16 x. `prompt_tokens`: at most 4 x the longest prompt's characters (a byte-level tokenizer
  emits at most one token per UTF-8 byte, at most 4 a character) + 4,096 for a chat template.
- GPU telemetry (`gpu_temp_c`, `gpu_sm_mhz`, `gpu_power_w`) only from a device whose profile lists a
  GPU: the sampler reads NVML, which the profile's probe reads first.

Checked against what the submitter knows:

- The result's `device` (shown in its row): its hardware (`HARDWARE`: fingerprint, OS, architecture,
  cores, RAM, GPUs) must be the profile's it was placed by; its calibration within physics (CPU
  1e6 GFLOPS, memory 1e5 GB/s, a GPU 1e5 TFLOPS: each about fifty times the fastest part shipped;
  at most a day of calibrating; background cores as above).

- The energy method against the profile and the task's unit (`drivers.measuring.energy.offer_for`): an NVML
  method needs a GPU in the profile, and for a model task a GPU unit that the profile says is usable
  and that the task ran on; a RAPL method needs Linux and, for a model task, a CPU unit; any other
  non-empty method is not one the node reads.
- Energy against the same result's power telemetry: where the readings are NVML's and the telemetry
  has at least `MIN_POWER_POINTS` GPU power points, the readings' average power (joules / seconds)
  must be within a factor `POWER_RATIO` = 2 of the points' mean, or within `POWER_SLACK_W` = 25 W of
  it. NVML's power reading is itself an average over up to a second on many boards, and the points
  are spot reads of it, so over a short phase the points lag a ramp the energy counter does not;
  a factor of 2 covers a phase as short as one averaging period and still refuses 1e-9 W against
  300 W. A phase shorter than that period (`protocol.energy.NVML_LEAST_WINDOW_S` = 1 s) gets no NVML
  joules from an honest worker (its counter read half the board's energy over 0.22 s on an H200),
  so NVML joules over one are refused.
- Net energy below idle: each reading's window energy must be at least (1 - `NET_TOLERANCE`) = 0.5
  of its idle power (idle joules / idle seconds, read over `drivers.measuring.energy.IDLE_S` = 3 s just before
  the phase on the same meter) x its window. The meters' resolution is no noise at this scale: RAPL
  counts 2**-16 J (15 uJ), NVML's counter 1 mJ, against 3 s of an idle of tens of watts (1e-6 and
  1e-5 of it). Measured through `drivers.measuring.energy` itself, on the lab's constant 6.5 W powercap tree
  (tests/kit/powercap.py, a writer stepping every 10 ms, read every 0.5 s, on this shared 2-core
  machine): six readings of a 3 s idle then a 0.2 to 2 s window gave window / idle power from 0.991
  to 1.036, so the pipeline (polling, step timing) moves a reading by under 4 %.
  What does move an honest idle is the device itself: RAPL covers the whole package, so a
  background process that stops as the phase starts, or clocks that settle, lower the window's power
  under the idle's. Half the idle power is a swing no honest phase makes (the phase runs work on the
  very unit measured) and refuses what the issue saw: -33,333 J per inference from idle joules
  larger than the window's. A window shorter than `METER_PERIOD_S` is not held to it: a counter that
  updates less often than the window lasts can honestly read 0 J over it (a gray-box endpoint run of
  5 ms read 0 J on the lab's tree; NVML's counter updates about every 100 ms, the RAPL reader polls
  every `drivers.measuring.counters.RAPL_POLL_S` = 0.5 s).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from protocol import DeviceProfile, EnergyReading, GenerateSpec, GenerationStats, Measurement, TaskSpec
from protocol.aggregate import is_endpoint
from protocol.energy import NVML_LEAST_WINDOW_S
from protocol.telemetry import MAX_TEMP_C, MIN_TEMP_C, Telemetry
from protocol.units import GPU_UNITS
from scheduler.verification.peers import Advertised

MAX_POWER_W: Final = 10_000.0
MAX_CLOCK_MHZ: Final = 10_000.0
MAX_CORES: Final = 4096  # cores of a device whose profile does not say
CORE_SLACK: Final = 1.25
MEMORY_SLACK: Final = 1.1
MAX_MEMORY_MB: Final = float(1 << 26)  # 64 TiB in MiB
MAX_GPU_REASONS: Final = (1 << 64) - 1
POWER_RATIO: Final = 2.0
POWER_SLACK_W: Final = 25.0
MIN_POWER_POINTS: Final = 3
NET_TOLERANCE: Final = 0.5
METER_PERIOD_S: Final = 0.5  # the longest update or read period of a meter the node reads
WINDOW_SLACK_S: Final = 1e-3
TOKEN_FACTOR: Final = 16
BYTES_PER_CHAR: Final = 4
TEMPLATE_TOKENS: Final = 4096
MAX_CPU_GFLOPS: Final = 1e6
MAX_BANDWIDTH_GBS: Final = 1e5
MAX_GPU_TFLOPS: Final = 1e5
MAX_CALIBRATION_S: Final = 86_400.0
HARDWARE: Final = ("fingerprint", "os", "arch", "cores_physical", "cores_logical", "ram_mb", "gpus")
"""What a device is, as its result states it: the same as the profile it was placed by."""
_REPR: Final = 80
OVERRUN: Final = 1.05  # as `scheduler.verification.figures.OVERRUN`: a deadline takes a moment to act


def out_of_bounds(
    m: Measurement, spec: TaskSpec, profile: DeviceProfile | None, device: DeviceProfile | None = None
) -> Iterator[str]:
    """Every reading of `m` (and of the result's `device`) outside its bound, as `path: the worker
    says V, bound`.

    Args:
        m: a measurement whose numbers are finite and whose counts fit the task
            (`scheduler.verification.figures`).
        spec: the task's spec as the campaign gave it.
        profile: the worker's profile as the submitter placed the task by; None: physics only.
        device: the profile the result itself states, shown in its row: its hardware must be the
            placed profile's, its calibration within physics; None: not checked.
    """
    limit_ms = spec.timeout_s * 1000.0 * OVERRUN
    if device is not None:
        yield from _device(device, profile)
    yield from _readings(m, spec, profile, limit_ms)
    if m.telemetry is not None:
        yield from _telemetry(m.telemetry, profile, limit_ms)
    yield from _energy(m, spec, profile)
    stats = [("generation", m.generation)] if m.generation is not None else []
    levels = m.capacity.levels if m.capacity is not None else ()
    stats += [(f"capacity.levels[{i}].generation", level.generation) for i, level in enumerate(levels)]
    for where, generation in stats:
        yield from _generation(where, generation, _cores(profile), limit_ms)
        if spec.generate is not None:
            yield from _tokens(where, generation, spec.generate)


def placed_profile(peers: Iterable[Advertised], peer_id: str) -> DeviceProfile | None:
    """The profile the submitter placed by for `peer_id` (its verified advert), or None if unknown."""
    return next((p.profile for p in peers if p.peer_id == peer_id), None)


def _device(device: DeviceProfile, profile: DeviceProfile | None) -> Iterator[str]:
    """The result's device against the profile placed by, and its calibration within physics."""
    for name in HARDWARE if profile is not None else ():
        said, placed = getattr(device, name), getattr(profile, name)
        if said != placed:
            yield f"device.{name}: the worker says {_short(said)}, its placed profile says {_short(placed)}"
            return
    cal = device.calibration
    if cal is None:
        return
    numbers = [("cpu_gflops", cal.cpu_gflops, MAX_CPU_GFLOPS, "GFLOPS"),
               ("mem_bandwidth_gbs", cal.mem_bandwidth_gbs, MAX_BANDWIDTH_GBS, "GB/s"),
               ("seconds", cal.seconds, MAX_CALIBRATION_S, "s"),
               ("background_cores", cal.background_cores, _cores(device), "cores")]  # fmt: skip
    numbers += [(f"gpu_tflops[{k}]", v, MAX_GPU_TFLOPS, "TFLOPS") for k, v in cal.gpu_tflops.items()]
    for name, value, high, unit in numbers:  # NaN and infinity fall outside too
        yield from _within(f"device.calibration.{name}", value, 0.0, high, unit)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _REPR else f"{text[: _REPR - 3]}..."


def _within(path: str, value: float | None, low: float, high: float, unit: str) -> Iterator[str]:
    """`path: the worker says V unit, outside low to high unit (why)` when `value` is out of bounds;
    `unit` may end with why the bound is what it is, in parentheses, named after the bound only."""
    if value is not None and not low <= value <= high:
        said = f"{value!r} {'' if unit.startswith('(') else unit.split(' (')[0]}".rstrip()
        yield f"{path}: the worker says {said}, outside {low:g} to {high:g} {unit}"


def _cores(profile: DeviceProfile | None) -> float:
    """The most cores a reading of this device may show busy."""
    cores = profile.cores_logical if profile is not None and profile.cores_logical > 0 else MAX_CORES
    return cores * CORE_SLACK + 1


def _memory(advertised: int, what: str) -> tuple[float, str]:
    """(bound in MiB, its unit text) of a memory reading against the advertised size."""
    if advertised <= 0:
        return MAX_MEMORY_MB, "MiB"
    return advertised * MEMORY_SLACK, f"MiB (the profile's {what} of {advertised} MiB x {MEMORY_SLACK:g})"


def _readings(
    m: Measurement, spec: TaskSpec, profile: DeviceProfile | None, limit_ms: float
) -> Iterator[str]:
    """The single readings of the measurement: cores, CPU time, GPU use and memory, shares, marks."""
    cores = _cores(profile)
    yield from _within("cpu_cores_used", m.cpu_cores_used, 0.0, cores, "cores")
    yield from _within("conditions.background_cores", m.conditions.background_cores, 0.0, cores, "cores")
    cpu_s = cores * limit_ms / 1000.0
    yield from _within("cpu_time_s", m.cpu_time_s, 0.0, cpu_s, "s (every core for the timeout)")
    yield from _within("gpu_util_pct", m.gpu_util_pct, 0.0, 100.0, "%")
    ram, ram_unit = _memory(profile.ram_mb if profile is not None else 0, "RAM")
    yield from _within("peak_load_ram_mb", m.peak_load_ram_mb, 0.0, ram, ram_unit)
    yield from _within("peak_inference_ram_mb", m.peak_inference_ram_mb, 0.0, ram, ram_unit)
    vram, vram_unit = _memory(profile.vram_mb() if profile is not None else 0, "GPU memory")
    yield from _within("gpu_mem_mb", m.gpu_mem_mb, 0.0, vram, vram_unit)
    for name, share in m.node_share.items():
        yield from _within(f"node_share[{name}]", share, 0.0, 1.0, "(a share)")
    for i, t in enumerate(m.mark_ms):
        yield from _within(f"mark_ms[{i}]", t, 0.0, limit_ms, f"ms (the timeout of {spec.timeout_s:g} s)")


def _telemetry(telemetry: Telemetry, profile: DeviceProfile | None, limit_ms: float) -> Iterator[str]:
    """Every telemetry point's readings within physics, the device's cores, and the task's time."""
    yield from _within("telemetry.period_ms", telemetry.period_ms, 0.0, limit_ms, "ms (the timeout)")
    cores = _cores(profile)
    no_gpu = profile is not None and not profile.gpus
    for i, p in enumerate(telemetry.points):
        where = f"telemetry.points[{i}]"
        yield from _within(f"{where}.t_ms", p.t_ms, 0.0, limit_ms, "ms (the timeout)")
        for j, mhz in enumerate(p.cpu_mhz):
            yield from _within(f"{where}.cpu_mhz[{j}]", mhz, 0.0, MAX_CLOCK_MHZ, "MHz")
        yield from _within(f"{where}.temp_c", p.temp_c, MIN_TEMP_C, MAX_TEMP_C, "C")
        yield from _within(f"{where}.busy_cores", p.busy_cores, 0.0, cores, "cores")
        yield from _within(f"{where}.own_cores", p.own_cores, 0.0, cores, "cores")
        yield from _within(f"{where}.cpu_share", p.cpu_share, 0.0, 1.0, "(a share)")
        gpu = {"gpu_temp_c": p.gpu_temp_c, "gpu_sm_mhz": p.gpu_sm_mhz, "gpu_power_w": p.gpu_power_w}
        said = next(((name, v) for name, v in gpu.items() if v is not None), None)
        if no_gpu and said is not None:
            yield f"{where}.{said[0]}: the worker says {said[1]!r}, from a device whose profile lists no GPU"
        yield from _within(f"{where}.gpu_temp_c", p.gpu_temp_c, MIN_TEMP_C, MAX_TEMP_C, "C")
        yield from _within(f"{where}.gpu_sm_mhz", p.gpu_sm_mhz, 0.0, MAX_CLOCK_MHZ, "MHz")
        yield from _within(f"{where}.gpu_power_w", p.gpu_power_w, 0.0, MAX_POWER_W, "W")
        if p.gpu_reasons > MAX_GPU_REASONS:
            yield f"{where}.gpu_reasons: the worker says {p.gpu_reasons!r}, not a 64-bit NVML mask"


def _energy(m: Measurement, spec: TaskSpec, profile: DeviceProfile | None) -> Iterator[str]:
    """Each reading's joules within power x seconds, its method one this device and unit can read,
    its window not far below its idle, and its power as the same result's telemetry shows it."""
    for i, r in enumerate(m.energy_readings):
        where = f"energy_readings[{i}]"
        bound = f"J ({MAX_POWER_W:g} W x {{0!r}} s)"
        yield from _within(
            f"{where}.joules", r.joules, 0.0, MAX_POWER_W * r.window_s, bound.format(r.window_s)
        )
        idle_bound = bound.format(r.idle_s)
        yield from _within(f"{where}.idle_joules", r.idle_joules, 0.0, MAX_POWER_W * r.idle_s, idle_bound)
        yield from _method(where, r, spec, profile)
        yield from _below_idle(where, r)
    yield from _covers_runs(m)
    yield from _against_telemetry(m.energy_readings, m.telemetry)


def _covers_runs(m: Measurement) -> Iterator[str]:
    """A tensor task's energy window wraps its process's timed loop: it cannot be shorter than the
    runs it timed (both are read on the same monotonic clock; `WINDOW_SLACK_S` for rounding)."""
    if m.generation is not None:
        return
    start = 0
    for i, (r, runs) in enumerate(zip(m.energy_readings, m.process_runs, strict=False)):
        timed_s = math.fsum(m.samples_ms[start : start + runs]) / 1000.0
        start += runs
        if r.joules is not None and r.window_s < timed_s - WINDOW_SLACK_S:
            yield (
                f"energy_readings[{i}].window_s: the worker says {r.window_s!r} s, shorter than the "
                f"{runs} timed runs it covers ({timed_s!r} s)"
            )


def _method(where: str, r: EnergyReading, spec: TaskSpec, profile: DeviceProfile | None) -> Iterator[str]:
    """Whether the reading's method is one this device reads for this task
    (`drivers.measuring.energy.offer_for`)."""
    if not r.method:
        return
    said = f"{where}.method: the worker says {r.method!r}"
    model_task = not is_endpoint(spec)
    if r.method.startswith("nvml-"):
        if profile is not None and not profile.gpus:
            yield f"{said}, from a device whose profile lists no GPU"
        elif model_task and spec.compute_unit not in GPU_UNITS:
            yield f"{said}, for a task on {spec.compute_unit.value} (NVML reads a GPU unit only)"
        elif model_task and profile is not None and spec.compute_unit not in profile.usable_units():
            yield f"{said}, from a device whose profile has no usable {spec.compute_unit.value}"
    elif r.method.startswith("rapl-"):
        if profile is not None and profile.os != "Linux":
            yield f"{said}, from a device on {profile.os!r} (RAPL is read on Linux only)"
        elif model_task and spec.compute_unit in GPU_UNITS:
            yield f"{said}, for a task on {spec.compute_unit.value} (a GPU unit reads NVML)"
    else:
        yield f"{said}, not a method the node reads (nvml-..., rapl-...)"


def _below_idle(where: str, r: EnergyReading) -> Iterator[str]:
    """The window's energy against its idle power x the window, less the tolerance."""
    if r.joules is None or r.idle_joules is None or r.idle_s <= 0 or r.window_s < METER_PERIOD_S:
        return
    idle_w = r.idle_joules / r.idle_s
    floor = (1.0 - NET_TOLERANCE) * idle_w * r.window_s
    if r.joules < floor:
        yield (
            f"{where}.joules: the worker says {r.joules!r} J over {r.window_s!r} s, below "
            f"{1 - NET_TOLERANCE:g} x its idle power ({idle_w!r} W) x the window = {floor!r} J"
        )


def _against_telemetry(readings: Sequence[EnergyReading], telemetry: Telemetry | None) -> Iterator[str]:
    """The NVML readings' average power against the mean of the same result's GPU power points."""
    nvml = [r for r in readings if r.method.startswith("nvml-") and r.joules is not None]
    for r in nvml:
        if r.window_s < NVML_LEAST_WINDOW_S:
            yield (
                f"energy: the worker reports {r.joules!r} J from {r.method} over {r.window_s!r} s; NVML is "
                f"read over at least {NVML_LEAST_WINDOW_S:g} s (protocol.energy.NVML_LEAST_WINDOW_S)"
            )
            return
    window = math.fsum(r.window_s for r in nvml)
    points = [p.gpu_power_w for p in (telemetry.points if telemetry else ()) if p.gpu_power_w is not None]
    if not nvml or window <= 0 or len(points) < MIN_POWER_POINTS:
        return
    energy_w = math.fsum(r.joules or 0.0 for r in nvml) / window
    telemetry_w = math.fsum(points) / len(points)
    near = abs(energy_w - telemetry_w) <= POWER_SLACK_W
    if not near and not telemetry_w / POWER_RATIO <= energy_w <= telemetry_w * POWER_RATIO:
        yield (
            f"energy.avg_power_w: the worker's readings say {energy_w!r} W over {window!r} s, its "
            f"telemetry's gpu_power_w averages {telemetry_w!r} W over {len(points)} points; allowed "
            f"within a factor {POWER_RATIO:g} or {POWER_SLACK_W:g} W"
        )


def _generation(where: str, stats: GenerationStats, cores: float, limit_ms: float) -> Iterator[str]:
    """A generate run's readings without raw parts, and each request's token times, within the timeout."""
    timeout = "ms (the timeout)"
    yield from _within(f"{where}.rtt_ms", stats.rtt_ms, 0.0, limit_ms, timeout)
    yield from _within(f"{where}.tls_ms", stats.tls_ms, 0.0, limit_ms, timeout)
    yield from _within(f"{where}.client_overhead_ms", stats.client_overhead_ms, 0.0, limit_ms, timeout)
    yield from _within(f"{where}.client_cpu_pct", stats.client_cpu_pct, 0.0, 100.0 * cores, "% (every core)")
    for i, r in enumerate(stats.records):
        late = next((t for t in r.token_times_ms if t > limit_ms), None)
        yield from _within(f"{where}.records[{i}].token_times_ms", late, 0.0, limit_ms, timeout)


def _tokens(where: str, stats: GenerationStats, generate: GenerateSpec) -> Iterator[str]:
    """Each request's token counts within what the task asked for (`TOKEN_FACTOR`, `TEMPLATE_TOKENS`)."""
    asked = max([generate.max_new_tokens, *(p.output_tokens or 0 for p in generate.prompts)])
    most_out = TOKEN_FACTOR * asked + TOKEN_FACTOR
    longest = max(len(p.text) + sum(len(t.content) for t in p.messages) for p in generate.prompts)
    most_in = BYTES_PER_CHAR * longest + TEMPLATE_TOKENS
    out_bound = f"tokens ({TOKEN_FACTOR} x the {asked} asked + {TOKEN_FACTOR})"
    in_bound = f"tokens ({BYTES_PER_CHAR} x the longest prompt's {longest} characters + {TEMPLATE_TOKENS})"
    for i, r in enumerate(stats.records):
        at = f"{where}.records[{i}]"
        counts = {"output_tokens": r.output_tokens, "usage_tokens": r.usage_tokens,
                  "counted_tokens": r.counted_tokens, "reasoning_tokens": r.reasoning_tokens}  # fmt: skip
        for name, count in counts.items():
            yield from _within(f"{at}.{name}", count, 0, most_out, out_bound)
        yield from _within(f"{at}.prompt_tokens", r.prompt_tokens, 0, most_in, in_bound)


__all__ = ["MAX_POWER_W", "NET_TOLERANCE", "POWER_RATIO", "out_of_bounds", "placed_profile"]
