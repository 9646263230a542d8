"""Every CSV the HTTP API serves is inert: no formula cell, no control character (issue 23).

The real path: a gate, and a `join` worker whose `--device-name` is a spreadsheet formula (printable,
so legal at the edge) and whose GPU unit's reason carries terminal escapes (free text, which the seams
neutralise); `serve --gate` submits the seeds' campaign to it. Its Complete row carries the device
name, its Unschedulable row the reason in its detail. Both CSV routes are read back as served.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Final

import httpx
from kit.campaignlab import CampaignLab, submitter_id
from kit.data import make_profile

from labs.views.test_http_api import ModelServer, model_server, run_campaign, seeds_body, start_serve
from protocol import ComputeUnit, UnitStatus

__all__ = ["model_server"]  # the fixture, re-used from test_http_api

FORMULA: Final = '=HYPERLINK("http://evil","x")'
ESCAPES: Final = "\x1b[2J\x1b]8;;http://evil\x07click\x1b]8;;\x07\x9b31m"
FORMULA_START: Final = ("=", "+", "-", "@", "\t", "\r")
CONTROLS: Final = frozenset(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)])


def _hostile_profile(path: Path) -> Path:
    """A CPU (ONNX) worker whose GPU unit's reason carries terminal escapes."""
    gpu = UnitStatus(unit=ComputeUnit.GPU_ONNX, usable=False, reason=f"{ESCAPES} no GPU")
    profile = make_profile()
    path.write_text(profile.with_(units=(profile.units[0], gpu)).model_dump_json())
    return path


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _inert_rows(text: str) -> list[dict[str, str]]:
    """The CSV's rows, after checking that no cell is a formula or holds a control character."""
    assert not set(text) & CONTROLS - {"\r", "\n"}  # the line ends are the CSV's own
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    for row in rows:
        for name, cell in row.items():
            assert not set(cell) & CONTROLS, (name, cell)
            assert not cell.startswith(FORMULA_START) or _is_number(cell), (name, cell)
    return rows


def test_served_csv_has_no_formula_and_no_control(tmp_path: Path, model_server: ModelServer) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        serve_dir = tmp_path / "serve"
        gate = lab.gate().ready["addrs"][0]
        hostile = ["--device-name", FORMULA, "--profile", str(_hostile_profile(tmp_path / "profile.json"))]
        lab.real_worker("w0", [gate], submitter_id(serve_dir), extra=hostile)
        served = start_serve(serve_dir, "--gate", gate)
        try:
            served.wait_event("peers", 60, count=1)
            cid = run_campaign(served, seeds_body(model_server.model_url))["campaign_id"]
            results = httpx.get(f"{served.api}/campaigns/{cid}/results")
            files = httpx.get(f"{served.api}/results/files").json()["files"]
            [name] = [f["filename"] for f in files if f["filename"].startswith(f"{cid}_")]
            download = httpx.get(f"{served.api}/results/download/{name}")
        finally:
            served.stop()
    finally:
        lab.close()

    for served_csv in (results, download):
        assert served_csv.status_code == 200
        done, unschedulable = _inert_rows(served_csv.text)
        assert (done["Status"], done["DeviceName"]) == ("Complete", f"'{FORMULA}")  # shown, inert
        assert unschedulable["Status"] == "Unschedulable"
        assert "\\x1b[2J\\x1b]8;;http://evil\\x07click" in unschedulable["Detail"]
