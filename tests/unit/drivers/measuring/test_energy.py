"""Energy around the measured phase: RAPL through a powercap tree a real writer process advances (with
wrap-around) during a real measured run, no counter on this machine (empty figures, the cause named),
and NVML's documented calls (energy counter in mJ, power in mW sampled and integrated)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest
from kit.powercap import (
    COUNTED_W,
    DRAM_RANGE_UJ,
    DRAM_W,
    PACKAGE_RANGE_UJ,
    PACKAGE_W,
    advancing_powercap,
    counter_slack_j,
    zone,
)

from drivers import measure
from drivers.files.models import write_convnet
from drivers.measuring.counters import RaplSource, rapl_zones, timed_read
from drivers.measuring.energy import EnergyMeter, nvml_offer, offer_for, rapl_offer
from drivers.measuring.offers import MACHINE, machine_telemetry, unit_offers
from protocol import (
    ComputeUnit,
    DeviceProfile,
    Endpoint,
    EndpointStatus,
    EnergyReading,
    GenerateSpec,
    Prompt,
    TaskSpec,
)
from protocol.energy import NVML_LEAST_WINDOW_S, energy_figures
from protocol.generation import RequestRecord
from scheduler.results import CSV_COLUMNS, ENERGY_COLUMNS, energy_columns
from scheduler.verification import Refusal, check_figures

CPU = ComputeUnit.CPU_ONNX


@pytest.fixture
def powercap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A powercap tree (package 0 with core and dram subzones, a psys zone) advanced by a writer process."""
    with advancing_powercap(tmp_path / "powercap") as root:
        monkeypatch.setenv("SARK_POWERCAP_ROOT", str(root))
        yield root


def test_rapl_zones_are_packages_and_their_dram(powercap: Path) -> None:
    zones = rapl_zones(powercap)
    assert [z.name for z in zones] == ["package-0", "package-0/dram"]
    assert [z.range_uj for z in zones] == [PACKAGE_RANGE_UJ, DRAM_RANGE_UJ]
    offer = rapl_offer()
    assert offer.source is not None
    assert offer.method == "rapl-package+dram"
    assert "not the GPU or the rest of the machine" in offer.note


def test_rapl_joules_of_a_real_measured_run_through_wrap_arounds(tmp_path: Path, powercap: Path) -> None:
    model = write_convnet(tmp_path / "c.onnx")
    spec = TaskSpec(
        compute_unit=CPU, runs=20, warmups=2, load_runs=1, threads=1,
        ci_target_pct=1e-6, max_runs=200_000, max_duration_s=4.0,  # times out at 4 s: the rule never holds
    )  # fmt: skip
    m = measure(model, spec)
    (reading,) = m.energy_readings
    watts = PACKAGE_W + DRAM_W
    slack = counter_slack_j(powercap, watts)  # the writer's lateness, never a share of the window
    assert reading.method == "rapl-package+dram"
    assert reading.joules is not None
    assert reading.idle_joules is not None
    assert reading.window_s >= 3.9
    assert watts * reading.window_s > PACKAGE_RANGE_UJ / 1e6
    assert reading.joules == pytest.approx(watts * reading.window_s, abs=slack)
    assert reading.idle_joules == pytest.approx(watts * reading.idle_s, abs=slack)
    figures = m.energy
    assert figures is not None
    assert figures.avg_power_w is not None
    assert figures.idle_power_w is not None
    assert figures.avg_power_w == pytest.approx(watts, abs=slack / reading.window_s)
    assert figures.idle_power_w == pytest.approx(watts, abs=slack / reading.idle_s)
    runs = sum(m.process_runs)
    net = reading.joules - figures.idle_power_w * reading.window_s  # the writer's power never changed
    assert figures.joules_per_inference == pytest.approx(net / runs)
    assert abs(net) <= slack * (1 + reading.window_s / reading.idle_s)
    row = energy_columns(figures)
    assert row["EnergyMethod"] == "rapl-package+dram"
    assert float(row["AvgPowerW"]) == pytest.approx(figures.avg_power_w, rel=1e-4)  # five digits
    assert check_figures(m, spec) == m  # the submitter derives the same figures from the readings
    doctored = m.with_(energy=figures.with_(joules_per_inference=1.0))
    refused = check_figures(doctored, spec)
    assert isinstance(refused, Refusal)
    assert "energy.joules_per_inference" in refused.detail


def test_a_reading_is_timed_by_its_tightest_bracket() -> None:
    ticks = iter([0.0, 0.050, 1.0, 1.0002])  # a reader descheduled 50 ms in its first try, not its second
    values = iter(["stalled", "tight"])
    assert timed_read(lambda: next(values), clock=lambda: next(ticks)) == ("tight", 1.0001)
    ticks = iter([0.0, 0.004, 1.0, 1.003, 2.0, 2.005])
    values = iter("abc")
    assert timed_read(lambda: next(values), clock=lambda: next(ticks), tries=3) == ("b", 1.0015)  # tightest


def test_a_reader_descheduled_between_counter_and_clock_keeps_window_and_joules_together(
    powercap: Path,
) -> None:
    """A reading late to its clock by 50 ms (as a busy machine or another thread holding the GIL makes
    it) is taken again: the window still spans the joules, 0.33 J over 0.3 s had it not been."""

    class Stalling(RaplSource):
        stalls = 1

        def read(self) -> list[int]:
            now = super().read()
            if self.stalls:
                self.stalls -= 1
                time.sleep(0.05)
            return now

    source = Stalling(rapl_zones(powercap))
    source.start()
    time.sleep(0.3)
    joules, window_s = source.stop()
    assert source.stalls == 0
    assert joules == pytest.approx(COUNTED_W * window_s, abs=counter_slack_j(powercap, COUNTED_W))


def test_no_counter_here_gives_empty_figures_and_names_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SARK_POWERCAP_ROOT", str(tmp_path / "none"))  # as on this VM: no powercap tree
    model = write_convnet(tmp_path / "c.onnx")
    m = measure(model, TaskSpec(compute_unit=CPU, runs=5, warmups=1, load_runs=1, threads=1))
    (reading,) = m.energy_readings
    assert reading.joules is None
    assert reading.idle_joules is None
    assert set(ENERGY_COLUMNS) <= set(CSV_COLUMNS)
    row = energy_columns(m.energy)
    for column in ("EnergyJoulesPerInference", "EnergyJoulesPerToken", "AvgPowerW", "IdlePowerW"):
        assert row[column] == ""
    assert row["EnergyMethod"] == ""
    assert "no RAPL package zone" in row["EnergyNote"]
    assert "no estimate" in row["EnergyNote"]


SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv to drop to nobody")
def test_counters_only_root_may_read_are_named() -> None:
    assert SETPRIV is not None
    # a folder an unprivileged user may enter: in /tmp, not the run's TMPDIR (root's alone, tests/conftest.py)
    root = Path(tempfile.mkdtemp(prefix="sark-powercap-", dir="/tmp"))
    try:
        root.chmod(0o755)
        zone(root, "intel-rapl:0", "package-0", PACKAGE_RANGE_UJ)
        (root / "intel-rapl:0" / "energy_uj").chmod(0o400)  # as since Linux 5.10
        probe = "from drivers.measuring.energy import rapl_offer; print(rapl_offer().note)"
        env = os.environ | {"SARK_POWERCAP_ROOT": str(root), "PYTHONPATH": str(Path.cwd())}
        nobody = [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"]
        done = subprocess.run(
            [*nobody, sys.executable, "-c", probe],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "readable by root only" in done.stdout
    finally:
        shutil.rmtree(root)


def test_macos_says_why_there_is_no_energy() -> None:
    offer = offer_for(CPU, platform="darwin")
    assert offer.source is None
    assert "powermetrics needs root" in offer.note


class FakeNvml:
    """NVML's documented calls (nvidia-ml-py): energy in mJ since the driver loaded, power in mW."""

    NVMLError = pynvml.NVMLError

    def __init__(self, *, counter: bool = True, init_error: int | None = None) -> None:
        self.counter, self.init_error, self.mj, self.calls = counter, init_error, 1_000_000, 0

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        return ("gpu", index)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        if not self.counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # before Volta
        self.mj += 1500  # 1.5 J between two reads
        return self.mj

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        self.calls += 1
        return 250_000  # 250 W


def test_nvml_gives_no_joules_over_a_phase_shorter_than_its_counter_reads_truly() -> None:
    """Issue 54: on an H200 the counter read 57.7 W over a 0.22 s phase against 120 W of power points;
    a phase under `NVML_LEAST_WINDOW_S` gets no joules and says why (its idle reading is kept apart)."""
    for offer in (nvml_offer(FakeNvml()), nvml_offer(FakeNvml(counter=False))):
        meter = EnergyMeter(offer, idle_s=0.0)
        with meter.measuring():
            threading.Event().wait(0.2)
        reading = meter.reading()
        assert reading.joules is None, offer.method
        assert reading.note.startswith("the measured phase lasted 0.2"), reading.note
        assert f"under the 1 s {offer.method} needs" in reading.note


def test_nvml_energy_counter_in_millijoules() -> None:
    offer = nvml_offer(FakeNvml())
    assert offer.method == "nvml-energy-counter"
    assert "GPU board" in offer.note
    assert offer.source is not None
    assert offer.source.least_window_s == NVML_LEAST_WINDOW_S
    offer.source.least_window_s = 0.0  # the counter's arithmetic, apart from the window rule above
    meter = EnergyMeter(offer, idle_s=0.05)
    meter.idle()
    with meter.measuring():
        pass
    reading = meter.reading()
    assert reading.joules == pytest.approx(1.5)
    assert reading.idle_joules == pytest.approx(1.5)


def test_nvml_power_sampled_where_the_counter_is_missing() -> None:
    nvml = FakeNvml(counter=False)
    offer = nvml_offer(nvml)
    assert offer.method == "nvml-power-sampled@100ms"
    assert "no energy counter" in offer.note
    assert offer.source is not None
    offer.source.least_window_s = 0.0  # the integral's arithmetic, apart from the window rule above
    meter = EnergyMeter(offer, idle_s=0.0)
    with meter.measuring():  # the measured phase at 250 W, until the thread has read power four times
        began = time.monotonic()
        while nvml.calls < 4 and time.monotonic() - began < 60:
            threading.Event().wait(0.01)
    reading = meter.reading()
    assert nvml.calls >= 4  # sampled on the thread, not only at the ends (however late it ran)
    assert reading.joules == pytest.approx(250.0 * reading.window_s, rel=1e-3)


def test_no_nvml_is_a_note_never_an_exception() -> None:
    offer = nvml_offer(FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    assert offer.source is None
    assert "no NVML" in offer.note
    real = nvml_offer()  # this machine: the real nvidia-ml-py, no driver
    assert real.source is not None or "NVML" in real.note


def test_figures_per_token_over_the_same_requests() -> None:
    readings = [EnergyReading(method="m", note="n", joules=10.0, window_s=2.0, idle_joules=3.0, idle_s=3.0)]
    records = [
        RequestRecord(prompt_id=str(i), prompt_tokens=4, output_tokens=8, e2e_ms=10.0) for i in range(2)
    ]
    figures = energy_figures(readings, (2,), records)
    assert figures is not None
    assert figures.joules_per_token == pytest.approx((10.0 - 1.0 * 2.0) / 16)
    assert figures.joules_per_inference is None
    assert (figures.avg_power_w, figures.idle_power_w) == (5.0, 1.0)
    none = energy_figures([EnergyReading(note="why")], (2,), None)
    assert none is not None
    assert none.avg_power_w is None
    assert none.note == "why"


def test_info_offers_say_why_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SARK_POWERCAP_ROOT", str(tmp_path / "none"))
    machine, gpu_part = machine_telemetry()
    offers = {o.unit: o for o in unit_offers(gpu_part)}
    assert set(offers) == set(ComputeUnit)
    assert offers[CPU].energy.startswith("none: no RAPL package zone")
    assert machine.startswith("cpu clock: ")  # the sampler's own account of itself
    assert offers[CPU].telemetry == MACHINE
    assert "Core ML runs there only" in offers[ComputeUnit.NE_COREML].energy
    gpu = offers[ComputeUnit.GPU_ONNX]
    assert gpu.energy.startswith(("nvml-", "none: no NVML", "none: NVML"))
    assert gpu.telemetry == f"{MACHINE}; {gpu_part}"
    assert gpu_part.startswith("gpu: ")


async def test_endpoint_energy_only_for_a_server_declared_on_this_device(powercap: Path) -> None:
    import trio
    from kit.sse_server import scheduled, serve_sse

    from node.transfer.urls import UrlPolicy
    from node.worker.targets import LiveProfile, Targets

    fields = {"device_name": "d", "soc": "s", "cores_physical": 1, "cores_logical": 1, "ram_mb": 1}
    base = DeviceProfile.model_validate(fields | {"os": "Linux", "os_version": "6", "fingerprint": "f"})
    live = LiveProfile(base.with_(endpoints=(EndpointStatus(name="local", model="tiny", usable=True),)))
    policy = UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8", "::1/128"))
    gray, black = Endpoint(model="tiny"), None
    with serve_sse(lambda body, attempt: scheduled(["a", "b", "c"], usage=(3, 3))) as server:
        black = Endpoint(model="tiny", url=server.url)
        targets = Targets(policy, {"local": server.url}, live, {"local": CPU})
        readings, figures = {}, {}
        for name, endpoint in (("gray", gray), ("black", black)):
            generate = GenerateSpec(
                prompts=(Prompt(id="p", text="hi"),), prompts_sha256="0" * 64, endpoint=endpoint
            )
            spec = TaskSpec(compute_unit=CPU, generate=generate, timeout_s=60)
            with trio.fail_after(40):
                m = await targets.measure(spec, endpoint, trio.CancelScope())
            (readings[name],) = m.energy_readings
            figures[name] = m.energy
            assert check_figures(m, spec) == m
    assert readings["gray"].method == "rapl-package+dram"
    assert readings["gray"].note.startswith("gray-box endpoint on this device (CPU (ONNX))")
    assert readings["gray"].joules is not None
    assert readings["gray"].idle_joules is not None
    gray_figures = figures["gray"]
    assert gray_figures is not None
    assert gray_figures.joules_per_token is not None  # over the 3 output tokens the usage chunk counted
    assert readings["black"].joules is None
    assert "the energy is the server's" in readings["black"].note
