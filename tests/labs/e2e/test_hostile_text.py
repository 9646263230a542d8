"""Issue 23's acceptance for untrusted text: a real worker whose profile carries a spreadsheet formula,
rich markup and a rich emoji code (printable: they pass the edge check and reach every output for
real) and a unit reason with terminal escapes (free text), and a campaign whose model name carries
escapes (it comes back inside the worker's failure detail).

Every output is read as bytes from real processes: results.csv has no formula cell and no control
character; `plan`, `submit`, `status`, `peers` and `report --format md` print no ESC or BEL byte and
show the markup and the emoji code literally.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.campaignlab import MODEL, CampaignLab, Swarm, submitter_id, write_campaign
from kit.procs import SARK

FORMULA = '=HYPERLINK("http://evil","x")'
MARKUP = "[bold red]pwn[/bold red]"
ESCAPES = "\x1b[2J\x1b]8;;http://evil\x07click\x1b]8;;\x07\x9b31m"
EMOJI = ":skull:"  # rich would print U+1F480 for it
DEVICE = f"{FORMULA} {MARKUP} {EMOJI}"
INPUT = f"in{ESCAPES}{MARKUP}"
CONTROLS = frozenset(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]) - {"\n"}
WIDE = {**os.environ, "COLUMNS": "400"}  # rich wraps at 80 columns without a terminal: keep cells whole
SMALL_JOB = {"num_inference_runs": 10, "warmup_runs": 1, "load_runs": 1, "processes": 1}


def _hostile_profile(path: Path) -> Path:
    """This machine's real profile with a formula and markup in its names and escapes in a reason."""
    import drivers
    from protocol import UnitStatus

    profile = drivers.detect_profile(calibrate=False)
    units = tuple(
        u if u.usable else UnitStatus(unit=u.unit, usable=False, reason=f"{ESCAPES} {MARKUP} {u.reason}")
        for u in profile.units
    )
    hostile = profile.with_(device_name=DEVICE, soc=f"@SUM(1+1) {MARKUP}", os_version="+cmd|' /C calc'!A0")
    path.write_text(hostile.with_(units=units).model_dump_json())
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    root = tmp_path_factory.mktemp("hostile")
    lab = CampaignLab(root, record_ttl=30.0)
    try:
        submitter_dir = root / "submitter"
        gate = lab.gate().ready["addrs"][0]
        profile = _hostile_profile(root / "profile.json")
        worker = lab.real_worker("w0", [gate], submitter_id(submitter_dir), extra=["--profile", str(profile)])
        yield Swarm(lab, gate, {worker.ready["peer_id"]: worker}, submitter_dir, root)
    finally:
        lab.close()


def _run(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return zygote.run(args, capture_output=True, timeout=240, env=WIDE)


def _inert(done: subprocess.CompletedProcess[bytes]) -> str:
    """Its output as text, after checking it carries no ESC, BEL, C1 or other control byte."""
    out = (done.stdout + done.stderr).decode()
    assert not set(out) & CONTROLS, out
    assert "\U0001f480" not in out, out
    return out


def _campaign(tmp_path: Path) -> Path:
    """Three jobs: the example model, the same model whose input is named with escapes and markup (the
    worker reports the inputs it fed: the name comes back in InputShapes), and a GPU job no unit runs."""
    import onnx

    model = onnx.load(str(MODEL))
    for node in model.graph.node:
        node.input[:] = [INPUT if name == "input" else name for name in node.input]
    model.graph.input[0].name = INPUT
    onnx.save(model, str(tmp_path / "evil.onnx"))
    return write_campaign(tmp_path / "campaign.yaml", {
        "name": f"hostile {MARKUP}",
        "models": [{"path": MODEL.name, "name": "good"}, {"path": "evil.onnx", "name": "evil"}],
        "jobs": [{"compute_unit": "CPU (ONNX)", "model": "good", **SMALL_JOB},
                 {"compute_unit": "CPU (ONNX)", "model": "evil", **SMALL_JOB},
                 {"compute_unit": "GPU (ONNX)", "model": "good", **SMALL_JOB}],
    })  # fmt: skip


def test_every_output_shows_hostile_text_and_obeys_none_of_it(hostile: Swarm, tmp_path: Path) -> None:
    campaign = _campaign(tmp_path)

    local = write_campaign(tmp_path / "plan.yaml", {"model": {"path": MODEL.name},
                                                    "jobs": [{"compute_unit": "GPU (ONNX)"}]})  # fmt: skip
    plan = _inert(_run(hostile.submit_args("plan", str(local), "--wait-peers", "1")))
    assert f"{MARKUP} {EMOJI}" in plan  # the device name, shown
    assert "\\x1b[2J" in plan  # the GPU unit's reason, escapes made visible

    done = _run(
        hostile.submit_args("submit", str(campaign), "--wait-peers", "1", "--out", str(tmp_path / "out"))
    )
    assert done.returncode == 0, done.stderr  # two tasks done, the GPU one unschedulable
    submit = _inert(done)
    assert f"{MARKUP} {EMOJI}" in submit  # latency matrix and failure lines show the markup
    assert "in\\x1b[2J" in submit  # "inputs defaulted: <the inputs fed>", escapes visible
    assert "\\x1b]8;;http://evil\\x07click" in submit  # the GPU unit's reason, in the unschedulable lines
    campaign_id = next(line.split()[1] for line in submit.splitlines() if line.startswith("campaign "))

    out = tmp_path / "out" / campaign_id
    _check_csv(out / "results.csv")
    document: dict[str, Any] = json.loads((out / "results.json").read_text())  # faithful: the raw strings
    assert DEVICE in {r["row"]["DeviceName"] for r in document["results"]}
    assert "\x1b" not in (out / "results.json").read_text()  # json.dumps writes \u001b

    store = ["--data-dir", str(hostile.submitter_dir)]
    listing = _inert(_run([*SARK, "status", *store]))
    assert f"hostile {MARKUP}" in listing
    status = _inert(_run([*SARK, "status", campaign_id, *store]))
    assert f"{MARKUP} {EMOJI}" in status
    peers = _inert(_run([*SARK, "peers", "--gate", hostile.gate, "--data-dir", str(tmp_path / "peers")]))
    assert f"{MARKUP} {EMOJI}" in peers
    markdown = _inert(_run([*SARK, "report", campaign_id, "--format", "md", *store]))
    assert "\\[bold red\\]pwn\\[/bold red\\]" in markdown  # Markdown shows it, renders nothing
    assert "=HYPERLINK(" in markdown
    results = _run([*SARK, "results", campaign_id, *store])
    _inert(results)
    assert results.stdout.decode() == (out / "results.csv").read_text()


def _check_csv(path: Path) -> None:
    text = path.read_text()
    assert not set(text) & CONTROLS
    rows = list(csv.DictReader(text.splitlines()))
    assert len(rows) == 3
    for row in rows:
        for name, cell in row.items():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), (name, cell)
            assert not cell.startswith("-") or float(cell) < 0, (name, cell)
    done = next(r for r in rows if r["Status"] == "Complete")
    assert (done["DeviceName"], done["Soc"]) == (f"'{DEVICE}", f"'@SUM(1+1) {MARKUP}")
    assert any("\\x1b[2J" in r["Detail"] for r in rows if r["Status"] == "Unschedulable")
    assert any(r["InputShapes"].startswith("in\\x1b[2J") for r in rows)
