"""results.csv and results.json of representative campaigns, byte for byte (tests/golden/).

A change of a byte must be on purpose: regenerate with `SARK_GOLDEN_WRITE=1` and name the change
in the commit message. The campaigns are built from fixed values (`golden_campaigns`) and written by
the real write path, `node.submitter.outputs.write_outputs`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kit.golden_campaigns import CAMPAIGNS, CREATED

from node.submitter.outputs import write_outputs

GOLDEN = Path(__file__).resolve().parents[3] / "golden"
FILES = ("results.csv", "results.json")


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
def test_results_files_are_byte_identical_to_the_golden_ones(name: str, tmp_path: Path) -> None:
    golden = CAMPAIGNS[name]()
    paths = write_outputs(
        tmp_path, golden.campaign_id, golden.campaign, golden.scheduler, golden.results, CREATED
    )
    for file in FILES:
        written = (tmp_path / file).read_bytes()
        pinned = GOLDEN / name / file
        if os.environ.get("SARK_GOLDEN_WRITE") == "1":
            pinned.parent.mkdir(parents=True, exist_ok=True)
            pinned.write_bytes(written)
        assert written == pinned.read_bytes(), f"{name}/{file} changed: regenerate on purpose, say why"
    assert set(paths) >= {"csv", "json"}


def test_the_golden_campaigns_cover_every_kind_of_row() -> None:
    statuses = set()
    units = set()
    for build in CAMPAIGNS.values():
        golden = build()
        statuses |= {t.status.value for t in golden.scheduler.tasks() if t.status is not None}
        units |= {t.unit.value for t in golden.scheduler.tasks()}
    assert {"Complete", "Failed", "Unschedulable"} <= statuses
    assert (GOLDEN / "fleet" / "results.csv").read_text().count("Endpoint (fleet)") == 1
    assert "level" in (GOLDEN / "capacity" / "results.csv").read_text()
