"""The measuring children's frame (`drivers.measuring.frame`): every meter has one shape and is entered the
same way, around the runs or the timed loop, with an ExitStack; a meter is one class; a meter whose entry
fails leaves the ones entered before it stopped; the readings land on the process's Measurement."""

from __future__ import annotations

import threading
import time
from types import TracebackType

import pytest

from drivers.errors import TaskFailed
from drivers.measuring import frame, meters, telemetry
from drivers.runtimes.driver import Placement
from protocol import ComputeUnit, FailureReason, Measurement
from protocol.stats import NO_SAMPLES

CPU = ComputeUnit.CPU_ONNX


def _blank() -> Measurement:
    return Measurement(
        compute_unit=CPU,
        load_ms=NO_SAMPLES,
        load_first_ms=0.0,
        first_inference_ms=0.0,
        warmups_used=0,
        inference_ms=NO_SAMPLES,
        peak_load_ram_mb=0.0,
        peak_inference_ram_mb=0.0,
        cpu_cores_used=0.0,
    )


class ThreadCount:
    """A meter written for this test, as a new meter is: one class. It reads how many threads ran
    beside the block's own at its end (the telemetry sampler's among them) and records it."""

    def __init__(self, log: list[str]) -> None:
        self.log, self.threads = log, 0

    def __enter__(self) -> ThreadCount:
        self.log.append("enter threads")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.threads = threading.active_count()
        self.log.append("exit threads")

    def taken(self, part: Measurement) -> Measurement:
        return part.with_(conditions=part.conditions.with_(inter_op_threads=self.threads))


def _burn(seconds: float) -> int:
    end, n = time.process_time() + seconds, 0
    while time.process_time() < end:
        n += 1
    return n


def test_the_meters_read_the_block_they_frame_and_set_their_readings() -> None:
    log: list[str] = []
    sampler, cpu = telemetry.Sampler(period_s=0.05), meters.CpuMeter()
    peak = meters.PeakMemory()
    measured = frame.Frame(runs=(peak, meters.DeviceState()), timed=(sampler, cpu, ThreadCount(log)))
    with measured.around_runs():
        block = bytearray(96 << 20)  # touched below: resident, so the high-water mark sees it
        block[:: 1 << 12] = b"x" * len(block[:: 1 << 12])
        del block
        with measured.around_timed():
            _burn(0.3)
    part = measured.taken(_blank())
    assert part.peak_inference_ram_mb >= 96
    assert 0.2 <= part.cpu_time_s <= 5.0
    assert part.cpu_cores_used > 0
    assert part.telemetry is not None
    assert part.telemetry.points
    assert part.conditions.inter_op_threads is not None
    assert part.conditions.inter_op_threads >= 2  # this thread and the telemetry sampler's
    assert log == ["enter threads", "exit threads"]


def test_a_meter_whose_entry_fails_leaves_the_ones_before_it_stopped() -> None:
    fell_back = Placement(("CPUExecutionProvider",), {"CUDAExecutionProvider": 0.5}, fallback=True)
    placed = meters.Placed(lambda: fell_back, ComputeUnit.GPU_ONNX, strict=True)
    measured = frame.Frame(runs=(telemetry.Sampler(period_s=0.05), placed), timed=())
    ran = False
    with pytest.raises(TaskFailed) as failed, measured.around_runs():
        ran = True
    assert failed.value.reason == FailureReason.FALLBACK
    assert not ran
    assert [t for t in threading.enumerate() if t.name == "telemetry"] == []  # the sampler stopped
    assert placed.placement is None


def test_a_lenient_placement_is_recorded_at_the_end() -> None:
    placement = Placement(("CPUExecutionProvider",), {"CPUExecutionProvider": 1.0})
    placed = meters.Placed(lambda: placement, CPU, strict=True)
    measured = frame.Frame(runs=(placed,), timed=())
    with measured.around_runs():
        pass
    part = measured.taken(_blank())
    assert (part.providers, part.node_share, part.fallback) == (
        ("CPUExecutionProvider",),
        {"CPUExecutionProvider": 1.0},
        False,
    )


class _Pipe:
    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, message: object) -> None:
        self.sent.append(message)


def test_timed_loads_releases_each_load_before_the_next_and_keeps_the_last() -> None:
    """A runtime's `release` (llama.cpp's `LoadedGguf.close`, which must see its server's loop run
    before the server goes) is called on each load before the next one, never on the one returned."""
    events: list[str] = []
    made = iter(range(3))

    def load() -> int:
        n = next(made)
        events.append(f"load {n}")
        return n

    pipe = _Pipe()
    last, times, _ = frame.timed_loads(pipe, load, 3, lambda n: events.append(f"release {n}"))  # type: ignore[arg-type]
    assert (last, len(times)) == (2, 3)
    assert events == ["load 0", "release 0", "load 1", "release 1", "load 2"]
