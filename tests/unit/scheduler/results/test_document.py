"""`CampaignReport` is results.json's schema: written byte for byte, read once, and a bad file is a
reasoned error naming the file and the field.

The golden files are read back into a report and written again, unchanged; a report read from its
own file equals the one the store built (the value every medium renders is the same either way).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kit.golden_campaigns import CAMPAIGNS, CREATED

from node.submitter.outputs import campaign_report
from scheduler.results import CampaignReport, ResultsFileError, entries_of
from unit.scheduler.results.test_golden import GOLDEN

LLM_RESULTS = Path(__file__).resolve().parents[3] / "golden" / "reports" / "llm_results.json"


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
def test_a_golden_results_json_read_and_written_again_is_byte_identical(name: str) -> None:
    pinned = (GOLDEN / name / "results.json").read_text()
    assert CampaignReport.from_json(pinned).to_json() == pinned


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
def test_the_report_read_from_its_file_is_the_one_the_store_built(name: str) -> None:
    golden = CAMPAIGNS[name]()
    built = campaign_report(golden.scheduler, golden.results, CREATED, golden.campaign_id, golden.campaign)
    read = CampaignReport.from_json(built.to_json())
    assert read == built
    assert any(task.signed is not None for task in read.results)
    assert entries_of(read) == entries_of(built)


def test_an_old_results_json_without_signed_parts_opens_with_its_tasks_and_no_figures() -> None:
    document = json.loads((GOLDEN / "tensor" / "results.json").read_text())
    for result in document["results"]:
        del result["signed"]  # written before results.json carried the signed parts
    del document["formulas"]
    report = CampaignReport.from_json(json.dumps(document))
    entries = entries_of(report)
    assert [e.task_id for e in entries] == [t.row["JobId"] for t in report.results]
    assert entries
    assert all(e.median_ms is None and not e.complete for e in entries)


def test_an_older_llm_results_json_still_opens_with_its_figures() -> None:
    report = CampaignReport.from_json(LLM_RESULTS.read_bytes(), source=str(LLM_RESULTS))
    assert any(e.generation is not None for e in entries_of(report))


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("not json at all", ""),
        ("[1, 2]", ""),
        ('{"campaign_id": "c-1"}', "campaign"),
        ('{"campaign_id": 7, "campaign": {"name": "x", "jobs": []}}', "campaign_id"),
    ],
)
def test_a_bad_results_json_is_an_error_naming_the_file_and_the_field(text: str, path: str) -> None:
    with pytest.raises(ResultsFileError) as caught:
        CampaignReport.from_json(text, source="/tmp/x/results.json")
    assert caught.value.source == "/tmp/x/results.json"
    assert caught.value.detail.startswith("/tmp/x/results.json: ")
    assert path in {p.path for p in caught.value.problems}


def test_a_signed_part_that_does_not_fit_names_its_field() -> None:
    document = json.loads((GOLDEN / "tensor" / "results.json").read_text())
    first = next(r for r in document["results"] if r["signed"])
    first["signed"]["measurement"]["inference_ms"] = "fast"
    with pytest.raises(ResultsFileError) as caught:
        CampaignReport.from_json(json.dumps(document))
    paths = [p.path for p in caught.value.problems]
    assert any(p.startswith("results.") and "signed.measurement.inference_ms" in p for p in paths), paths
