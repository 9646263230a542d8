"""`sark-node info` and `sark-node bench`: this device only, no network."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from node.cli.options import ConfigOpt, DataDirOpt, EndpointOpt, build_config, declared_endpoints

if TYPE_CHECKING:
    from rich.console import Console

    from protocol import (
        ComputeUnit,
        DeviceProfile,
        FailureReason,
        Measurement,
        Peak,
        Stats,
        TaskSpec,
        UnitStatus,
    )

STAT_FIELDS: Final = (
    "n",
    "min",
    "max",
    "mean",
    "median",
    "stddev",
    "p90",
    "p95",
    "p99",
    "cv",
    "mad",
    "iqr",
    "outliers",
)


def _fail(message: str, code: int) -> typer.Exit:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def parse_unit(text: str) -> ComputeUnit:
    """A compute unit from its display name ("CPU (ONNX)") or enum name ("cpu_onnx"), any case."""
    from protocol import ComputeUnit

    for unit in ComputeUnit:
        if text.strip().lower() in (unit.value.lower(), unit.name.lower()):
            return unit
    raise ValueError(f"unknown compute unit {text!r}; known: {', '.join(u.value for u in ComputeUnit)}")


def parse_overrides(items: list[str], kind: str) -> dict[str, str]:
    """NAME=VALUE pairs from repeated options."""
    pairs: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--{kind} expects NAME=VALUE, got {item!r}")
        pairs[name] = value
    return pairs


def info(
    json_out: Annotated[bool, typer.Option("--json", help="Print the DeviceProfile as JSON.")] = False,
    data_dir: DataDirOpt = None,
    config_file: ConfigOpt = None,
    calibrate: Annotated[
        bool, typer.Option(help="Measure (or reuse) the CPU and memory calibration.")
    ] = True,
    recalibrate: Annotated[
        bool, typer.Option("--recalibrate", help="Measure the calibration again (on a quiet machine).")
    ] = False,
    endpoint: EndpointOpt = None,
    bench: Annotated[
        bool,
        typer.Option(
            "--bench",
            help="Measure this device's peaks (matmul per precision, memory read/write/copy) in one "
            "measuring child, and keep them with the calibration.",
        ),
    ] = False,
    peak: Annotated[
        list[str] | None,
        typer.Option(
            "--peak",
            help="With --bench: measure only this figure (fp32, tf32, fp16, bf16, int8, fp8, read, "
            "write, copy); repeat for several.",
        ),
    ] = None,
) -> None:
    """Show this device's profile, every compute unit (with the reason for each unusable one) and the
    models its declared servers (`--endpoint NAME=URL`, or the config file's) serve."""
    from drivers import detect_profile, probe_generation
    from drivers.endpoint.servers import probe_servers
    from node.cli.console import console as out_console

    _check_peaks(bench, peak or [])
    config = build_config(config_file, data_dir=data_dir, endpoints=declared_endpoints(endpoint))
    profile = detect_profile(
        config.data.calibration, calibrate=calibrate or recalibrate or bench, recalibrate=recalibrate or bench
    )  # --bench: the calibration re-taken beside the peaks (claims.peak_problems holds them to it)
    if bench:
        profile = _benched(profile, config.data.calibration, tuple(peak or ()), quiet=json_out)
    if config.endpoints:
        profile = profile.with_(endpoints=probe_servers(config.endpoints))
    if json_out:
        typer.echo(profile.model_dump_json())
        return
    console = out_console()
    _print_profile(console, profile)
    _print_units(console, "Generative units (transformers, llama.cpp)", probe_generation())
    _print_offers(console)
    if bench:
        _print_peaks(console, profile)


def _check_peaks(bench: bool, asked: list[str]) -> None:
    """`--peak` only with `--bench`, and only figures there are (exit 2 otherwise)."""
    from protocol.values import BANDWIDTHS, MATMUL_PRECISIONS

    known = (*MATMUL_PRECISIONS, *BANDWIDTHS)
    if asked and not bench:
        raise _fail("--peak needs --bench", 2)
    unknown = [a for a in asked if a not in known]
    if unknown:
        raise _fail(f"unknown --peak {', '.join(unknown)}; known: {', '.join(known)}", 2)


def _benched(profile: DeviceProfile, cache_dir: Path, only: tuple[str, ...], *, quiet: bool) -> DeviceProfile:
    """The profile with its peaks measured now (one measuring child) and kept for its calibration
    (`only`: those figures, the others kept from before)."""
    import trio

    from drivers.errors import ProbeFailed
    from drivers.measuring import peaks
    from protocol.values import BANDWIDTHS, MATMUL_PRECISIONS

    cal = profile.calibration
    assert cal is not None  # --bench calibrates
    progress = _peak_line if not quiet else None
    try:
        found = trio.run(lambda: peaks.measure_apart(only=only, on_peak=progress))
    except ProbeFailed as exc:
        raise _fail(exc.detail, 1) from None
    retaken = {(p.unit, p.precision) for p in found}
    kept = [p for p in peaks.cached(cache_dir, cal.key) if (p.unit, p.precision) not in retaken]
    order = (*MATMUL_PRECISIONS, *BANDWIDTHS)
    found = tuple(sorted((*found, *kept), key=lambda p: (p.unit != "CPU", p.unit, order.index(p.precision))))
    peaks.store(cache_dir, cal.key, found)
    return profile.with_(calibration=cal.with_(peaks=found))


def _peak_line(peak: Peak) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"measured {peak.unit} {peak.precision}", highlight=False)


def _print_peaks(console: Console, profile: DeviceProfile) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Peaks (measured now; each figure names its library, kernel and sizes)")
    for column in ("unit", "precision", "peak", "library", "kernel", "sizes", "cv", "load, clock"):
        table.add_column(column)
    for p in profile.calibration.peaks if profile.calibration is not None else ():
        figure = f"{p.per_s:.1f} {p.figure}" if p.available else f"[red]unavailable[/red]: {escape(p.reason)}"
        clock = f", {p.cpu_mhz:.0f} MHz" if p.cpu_mhz else ""
        load = f"{p.background_cores:.1f} cores{clock}" if p.available else ""
        cv = f"{p.cv:.2f}" if p.available else ""
        texts = (escape(p.library), escape(p.kernel), escape(p.sizes))
        table.add_row(escape(p.unit), p.precision, figure, *texts, cv, load)
    console.print(table)


def _print_profile(console: Console, profile: DeviceProfile) -> None:
    from rich.markup import escape
    from rich.table import Table

    facts = Table(title="Device", show_header=False)
    facts.add_column(style="bold")
    facts.add_column()
    gpus = (
        ", ".join(f"{g.name} ({g.vram_mb} MB, {g.source})" for g in profile.gpus)
        or f"none: {profile.gpu_reason}"
    )
    for key, value in (
        ("device", profile.device_name),
        ("cpu", profile.soc),
        ("cores", f"{profile.cores_physical} physical, {profile.cores_logical} logical"),
        ("ram", f"{profile.ram_mb} MB"),
        ("os", f"{profile.os} {profile.os_version} ({profile.arch})"),
        ("gpus", gpus),
        ("runtimes", ", ".join(f"{k} {v}" for k, v in profile.runtimes.items())),
        ("fingerprint", profile.fingerprint),
    ):
        facts.add_row(key, escape(value))
    if profile.calibration is not None:
        facts.add_row("calibration", profile.calibration.summary())
    console.print(facts)
    _print_units(console, "Compute units", profile.units)
    if profile.endpoints:
        served = Table(title="Declared model servers")
        for column in ("name", "model", "usable", "reason"):
            served.add_column(column)
        for e in profile.endpoints:
            mark = "[green]yes[/green]" if e.usable else "[red]no[/red]"
            served.add_row(escape(e.name), escape(e.model), mark, escape(e.reason))
        console.print(served)


def _print_units(console: Console, title: str, statuses: tuple[UnitStatus, ...]) -> None:
    from rich.markup import escape
    from rich.table import Table

    units = Table(title=title)
    for column in ("unit", "usable", "provider", "reason"):
        units.add_column(column)
    for status in statuses:
        mark = "[green]yes[/green]" if status.usable else "[red]no[/red]"
        units.add_row(status.unit.value, mark, status.provider or "", escape(status.reason))
    console.print(units)


def _print_offers(console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from drivers.measuring.offers import machine_telemetry, unit_offers

    machine, gpu = machine_telemetry()
    table = Table(title="Energy and telemetry")
    for column in ("unit", "energy", "telemetry"):
        table.add_column(column)
    for offer in unit_offers(gpu):
        table.add_row(offer.unit.value, escape(offer.energy), escape(offer.telemetry))
    console.print(table)
    console.print(f"the machine's readings, in every run: {escape(machine)}")


def bench(
    model: Annotated[Path, typer.Argument(help="The model file.")],
    unit: Annotated[str, typer.Option("--unit", help='Compute unit, e.g. "CPU (ONNX)".')],
    runs: Annotated[int, typer.Option(min=1, help="Timed runs per process.")] = 100,
    warmups: Annotated[int, typer.Option(min=0, help="Warm-up runs (a minimum with --until-stable).")] = 5,
    load_runs: Annotated[int, typer.Option(min=1, help="Timed loads per process.")] = 3,
    processes: Annotated[int, typer.Option(min=1, help="Fresh child processes.")] = 3,
    until_stable: Annotated[bool, typer.Option(help="Warm up until the rolling median settles.")] = False,
    threads: Annotated[int | None, typer.Option(min=1, help="Intra-op threads.")] = None,
    timeout: Annotated[float, typer.Option(help="Overall timeout in seconds.")] = 600.0,
    memory_limit_mb: Annotated[int | None, typer.Option(help="Memory the model may add, in MB.")] = None,
    input_shape: Annotated[list[str] | None, typer.Option(help="NAME=1x3x224x224, repeatable.")] = None,
    input_value: Annotated[
        list[str] | None, typer.Option(help="NAME=16000: fill an input, repeatable.")
    ] = None,
    allow_code_models: Annotated[bool, typer.Option(help="Allow torch programs (they run code).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the Measurement as JSON.")] = False,
) -> None:
    """Benchmark one model on one compute unit of this device and print all statistics."""
    from pydantic import ValidationError

    from node.cli.console import console as out_console
    from protocol import TaskSpec, field_problems

    if not model.exists():
        raise _fail(f"no such model file: {model}", 2)
    try:
        spec = TaskSpec(
            compute_unit=parse_unit(unit),
            runs=runs,
            warmups=warmups,
            warmup_until_stable=until_stable,
            load_runs=load_runs,
            processes=processes,
            timeout_s=timeout,
            threads=threads,
            memory_limit_mb=memory_limit_mb,
            input_shapes={
                k: tuple(int(d) for d in v.split("x"))
                for k, v in parse_overrides(input_shape or [], "input-shape").items()
            },
            input_values={k: float(v) for k, v in parse_overrides(input_value or [], "input-value").items()},
        )
    except ValidationError as exc:
        raise _fail(f"invalid task: {'; '.join(field_problems(exc))}", 2) from None
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    from drivers import TaskFailed, detect_format

    try:
        detect_format(model)  # the name only: a suffix we cannot run is bad input
    except TaskFailed as exc:
        raise _fail(f"{model.name}: {exc.detail}", 2) from None
    result = _run(model, spec, allow_code_models, quiet=json_out)
    if json_out:
        typer.echo(result.model_dump_json())
    else:
        _print_measurement(out_console(), model, result)


def _run(model: Path, spec: TaskSpec, allow_code_models: bool, *, quiet: bool) -> Measurement:
    from rich.console import Console

    from drivers import TaskFailed, measure
    from protocol import Phase

    console = Console(stderr=True)
    with console.status("starting", spinner="dots") as status:

        def progress(phase: Phase, done: int, total: int) -> None:
            if not quiet:
                status.update(f"{phase.value} {done}/{total}")

        try:
            return measure(model, spec, allow_code_models=allow_code_models, on_progress=progress)
        except TaskFailed as exc:
            raise _fail(str(exc), _exit_code(exc.reason)) from None
        except OSError as exc:  # the file went away or cannot be read while hashing it
            raise _fail(f"{model.name}: cannot read the model: {exc.strerror or exc}", 1) from None


def _exit_code(reason: FailureReason) -> int:
    """2 when the command line asked for something this device lacks; 1 for whatever the model's bytes
    caused (inspect, load, input, run): a runtime failure."""
    from protocol import FailureReason

    return 2 if reason == FailureReason.UNIT_UNAVAILABLE else 1


def _cell(s: Stats, name: str) -> str:
    value = getattr(s, name)
    return str(value) if name in ("n", "outliers") else f"{value:.4g}"


def _energy_text(m: Measurement) -> str:
    from rich.markup import escape

    e = m.energy
    if e is None or e.avg_power_w is None:
        return "-" if e is None else escape(f"none: {e.note}")
    idle = "not measured" if e.idle_power_w is None else f"{e.idle_power_w:.3g} W"
    per = "-" if e.joules_per_inference is None else f"{e.joules_per_inference:.4g} J/inference above idle"
    return escape(f"{per}; {e.avg_power_w:.3g} W average, idle {idle} ({e.method}: {e.note})")


def _print_measurement(console: Console, model: Path, m: Measurement) -> None:
    from rich.table import Table

    table = Table(title=f"{model.name} on {m.compute_unit.value}")
    table.add_column("statistic")
    table.add_column("load (ms)", justify="right")
    table.add_column("inference (ms)", justify="right")
    for name in STAT_FIELDS:
        table.add_row(
            name + (" (ratio)" if name == "cv" else ""), _cell(m.load_ms, name), _cell(m.inference_ms, name)
        )
    console.print(table)
    facts = Table(show_header=False)
    facts.add_column(style="bold")
    facts.add_column()
    c = m.conditions
    for key, value in (
        ("first load", f"{m.load_first_ms:.3f} ms"),
        ("first inference", f"{m.first_inference_ms:.3f} ms"),
        ("warm-ups", str(m.warmups_used)),
        ("throughput", f"{1000.0 / m.inference_ms.mean:.1f} /s" if m.inference_ms.mean > 0 else "-"),
        ("peak RAM", f"load {m.peak_load_ram_mb:.1f} MB, inference {m.peak_inference_ram_mb:.1f} MB"),
        (
            "CPU",
            f"{m.cpu_cores_used:.2f} cores, {m.cpu_time_s:.3f} s; background {c.background_cores:.2f} cores",
        ),
        ("GPU", "-" if m.gpu_util_pct is None else f"{m.gpu_util_pct:.0f}% util, {m.gpu_mem_mb or 0:.0f} MB"),
        (
            "providers",
            ", ".join(f"{p} {m.node_share.get(p, 0):.0%}" if m.node_share else p for p in m.providers),
        ),
        ("fallback", "yes" if m.fallback else "no"),
        (
            "process medians",
            ", ".join(f"{v:.4g}" for v in m.process_medians_ms) + f" ms (spread {m.process_spread_pct:.1f}%)",
        ),
        ("stable", "[red]no[/red]: " + "; ".join(m.unstable_reasons) if m.unstable else "[green]yes[/green]"),
        ("threads", f"intra {c.intra_op_threads}, inter {c.inter_op_threads}, spinning {c.spinning}"),
        ("conditions", ", ".join(x for x in (c.thermal, c.power) if x) or "-"),
        ("energy", _energy_text(m)),
        ("versions", ", ".join(f"{k} {v}" for k, v in c.runtime_versions.items())),
        ("model sha256", c.model_sha256),
    ):
        facts.add_row(key, value)
    console.print(facts)


def register(app: typer.Typer) -> None:
    """Add `info` and `bench` to the CLI."""
    app.command("info")(info)
    app.command("bench")(bench)


__all__ = ["register"]
