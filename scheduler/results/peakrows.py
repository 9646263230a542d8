"""A peaks task's row: one figure of one device (the table the views render: `peakview`).

A peaks job (`scheduler.language.peaks`) is one task per figure on each device, so its row is one
figure of one device: `PeakPrecision`, the figure in `PeakGops` (a matmul's GFLOPS, int8's GOPS) or
`PeakGbs` (a memory access), as the submitter derived it from the timings (`protocol.aggregate.derive_peak`),
its spread (`PeakCv`), the size it is from and its threads (`PeakSize`), the sizes swept, the library,
the call and the method, and the mean CPU clock over the sweep. Its inference and load columns are
empty (it times no model), and the latency views (matrix, plots) leave it out
(`scheduler.results.report.entries_of`).
"""

from __future__ import annotations

from protocol import BANDWIDTHS, Measurement, PeakRun
from scheduler.results.columns import PEAK_COLUMNS, cell

MIB = 1 << 20


def peak_size(run: PeakRun) -> str:
    """The size a figure is from, with its threads: "n=1024, all threads", "256 MiB"."""
    size = f"{run.size // MIB} MiB" if run.peak.precision in BANDWIDTHS else f"n={run.size}"
    if run.peak.precision in BANDWIDTHS:
        return size
    count = run.threads
    threads = "all threads" if count is None else f"{count} thread{'' if count == 1 else 's'}"
    return f"{size}, {threads}"


def peak_columns(m: Measurement) -> dict[str, str]:
    """The peaks columns of one measurement ("" where it is not a peaks task's)."""
    columns = dict.fromkeys(PEAK_COLUMNS, "")
    run = m.peak_run
    if run is None:
        return columns
    peak = run.peak
    memory = peak.precision in BANDWIDTHS
    columns |= {
        "PeakPrecision": peak.precision,
        "PeakGbs" if memory else "PeakGops": cell("PeakGbs" if memory else "PeakGops", peak.per_s),
        "PeakCv": cell("PeakCv", peak.cv),
        "PeakSize": peak_size(run),
        "PeakSweep": peak.sizes,
        "PeakLibrary": peak.library,
        "PeakKernel": peak.kernel,
        "PeakMethod": peak.method,
        "PeakCpuMhz": cell("PeakCpuMhz", peak.cpu_mhz) if peak.cpu_mhz else "",
        "PeakLoadRamUsage": "",  # it loads no model and measures no memory of one
        "PeakInferenceRamUsage": "",
    }
    return columns


__all__ = ["peak_columns", "peak_size"]
