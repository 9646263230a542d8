"""Issue 49, scope 5: the terminal's end of README's runtimes example, pinned.

tests/golden/reports/runtimes_results.json is a real run of `sark-node submit examples/runtimes.yaml`
(this machine, 2026-11-26): one ONNX model on ONNX Runtime and on OpenVINO, a .tflite on LiteRT, a
.pte on ExecuTorch and a GGUF on llama.cpp. What `submit` prints at its end is rendered from it at
120 columns without colour and compared with tests/golden/reports/runtimes_terminal.txt: the matrix
per model, and where each model ran: the runtime that ran each row (not every runtime installed), its
placement and its output difference against the model's first row on another runtime, each said
once. Rewrite the golden file with `SARK_REGOLD=1` when a view changes on purpose, and read the diff.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from rich.console import Console

from node.cli.campaign import end_tables
from node.cli.report import read_report

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "reports"


def _terminal() -> str:
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None, force_terminal=False)
    console.print(end_tables(read_report(GOLDEN / "runtimes_results.json")))
    return out.getvalue()


def test_the_runtimes_example_terminal_is_the_golden_one() -> None:
    shown = _terminal()
    golden = GOLDEN / "runtimes_terminal.txt"
    if os.environ.get("SARK_REGOLD"):
        golden.write_text(shown)
    assert shown == golden.read_text()


def test_it_names_placement_output_difference_and_the_runtime_that_ran_each_row_once() -> None:
    shown = _terminal()
    assert "where each model ran: runtime, placement, output difference" in shown
    assert shown.count("CPUExecutionProvider") == 1  # ONNX Runtime's placement, in its row alone
    assert "6.91e-06 vs CPU" in shown  # OpenVINO's outputs against ONNX Runtime's
    ran = shown.split("where each model ran", 1)[1]
    assert "onnxruntime=1.32.0" in ran
    assert "openvino=2026.4.1" in ran
    assert ran.count("onnxruntime=") == 1  # the ONNX Runtime row only, not every row
    assert "sent to the server" not in shown  # the GGUF row is white-box: no server
    assert "speed-up 0.09x (0.00-1.15) vs CPU (ONNX)" in shown  # OpenVINO's CPU row against ONNX Runtime's


def test_a_throughput_run_is_named_beside_its_runtime_with_its_hint() -> None:
    """Issue 51: an OpenVINO row's ThroughputPerS, under the hint its RuntimeSettings says, in the
    runtime column (the stored run predates both columns: its row is given them here)."""
    from node.report.tables import runtime_table

    report = read_report(GOLDEN / "runtimes_results.json")
    ran = {"ThroughputPerS": "2356.8", "AsyncRequests": "1", "RuntimeSettings": "hint=LATENCY"}
    tasks = [
        t.with_(row={**t.row, **ran}) if t.row["ComputeUnits"] == "CPU (OpenVINO)" else t
        for t in report.results
    ]
    table = runtime_table(report.with_(results=tuple(tasks)))
    out = io.StringIO()
    Console(file=out, width=400, color_system=None, force_terminal=False).print(table)
    shown = out.getvalue()
    assert "releases/2026/4 · LATENCY: 2356.8/s, 1 request" in shown
    assert shown.count("/s, ") == 1  # the other runtimes ran no throughput run
