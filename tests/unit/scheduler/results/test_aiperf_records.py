"""Issue 52, scope 4: per-request records out, as JSONL in AIPerf's record layout.

Two readers check the export of the golden generate campaign (tests/golden/generate/results.json):

- AIPerf's own: `kit.toolfiles` wrote this export (`report --format aiperf`) to
  tests/golden/imports/aiperf/sark_export.jsonl and read it back with AIPerf 0.13's loader of
  profile_export.jsonl, in AIPerf's venv (`aiperf.plot.core.data_loader.DataLoader._load_jsonl`: each
  line `MetricRecordInfo.model_validate_json`); readback.json keeps what it read. The export made now
  must be those very bytes, so AIPerf's verdict holds for this code.
- `AiperfRecord` here: AIPerf's `MetricRecordInfo` layout as pydantic (the fields AIPerf requires, its
  metric value shape, its error shape), which must read AIPerf's own profile_export.jsonl (written by
  `aiperf profile` against the loopback server) as well as ours; every tag we write that AIPerf's own
  file has carries AIPerf's unit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

from protocol.genstats import tpot_ms
from scheduler.results import CampaignReport
from scheduler.results.aiperfrecords import aiperf_lines

ROOT = Path(__file__).resolve().parents[4]
AIPERF = ROOT / "tests" / "golden" / "imports" / "aiperf"
CAMPAIGN = ROOT / "tests" / "golden" / "generate" / "results.json"


class AiperfMetadata(BaseModel):
    """AIPerf's `MetricRecordMetadata`: the fields it requires, and the optional ones we write."""

    session_num: int
    x_request_id: str | None = None
    x_correlation_id: str | None = None
    conversation_id: str | None = None
    turn_index: int | None = None
    request_start_ns: int
    request_end_ns: int
    worker_id: str
    record_processor_id: str
    benchmark_phase: Literal["warmup", "profiling"]


class AiperfValue(BaseModel):
    """AIPerf's `MetricValue`: a value in the display unit, and the unit."""

    model_config = ConfigDict(extra="forbid")
    value: int | float | list[int] | list[float] | str
    unit: str


class AiperfError(BaseModel):
    """AIPerf's `ErrorDetails`: code, type, message."""

    code: int | None = None
    type: str | None = None
    message: str


class AiperfRecord(BaseModel):
    """AIPerf's `MetricRecordInfo`, one line of profile_export.jsonl."""

    metadata: AiperfMetadata
    metrics: dict[str, AiperfValue]
    error: AiperfError | None = None


@pytest.fixture(scope="module")
def exported() -> list[str]:
    return list(aiperf_lines(CampaignReport.from_json(CAMPAIGN.read_bytes(), source=str(CAMPAIGN))))


def test_the_export_is_the_one_aiperfs_own_reader_read(exported: list[str]) -> None:
    assert "".join(f"{line}\n" for line in exported) == (AIPERF / "sark_export.jsonl").read_text()
    readback = json.loads((AIPERF / "readback.json").read_text())
    assert readback["reader"] == "aiperf.plot.core.data_loader.DataLoader._load_jsonl"
    read = readback["read"]["sark_export.jsonl"]
    assert read["rows"] == len(exported) == 20
    ours = sum(AiperfRecord.model_validate_json(line).metrics["request_latency"].value for line in exported)  # type: ignore[misc]
    assert read["request_latency_sum_ms"] == pytest.approx(ours)
    # AIPerf's reader read its own file the same way: the verdict is no reader that takes anything
    assert read["columns"]
    assert readback["read"]["profile_export.jsonl"]["rows"] == 8


def test_a_reader_of_aiperfs_layout_reads_aiperfs_own_records_and_ours(exported: list[str]) -> None:
    theirs = [
        AiperfRecord.model_validate_json(line)
        for line in (AIPERF / "profile_export.jsonl").read_text().splitlines()
    ]
    ours = [AiperfRecord.model_validate_json(line) for line in exported]
    assert len(theirs) == 8
    assert all(r.metadata.benchmark_phase == "profiling" for r in theirs + ours)
    units = {tag: v.unit for r in theirs for tag, v in r.metrics.items()}
    shared = {tag for r in ours for tag in r.metrics} & set(units)
    assert {
        "request_latency",
        "time_to_first_token",
        "inter_token_latency",
        "output_sequence_length",
    } <= shared
    for record in ours:
        for tag in shared & set(record.metrics):
            assert record.metrics[tag].unit == units[tag], tag
        assert record.metadata.request_end_ns >= record.metadata.request_start_ns


def test_each_line_is_its_records_own_fields_and_aiperfs_formulas(exported: list[str]) -> None:
    report = CampaignReport.from_json(CAMPAIGN.read_bytes(), source=str(CAMPAIGN))
    records = [
        (task.row["JobId"], i, r)
        for task in report.results
        if task.measurement is not None and task.measurement.generation is not None
        for i, r in enumerate(task.measurement.generation.records)
    ]
    assert len(records) == len(exported)
    for (task_id, index, record), line in zip(records, exported, strict=True):
        found = AiperfRecord.model_validate_json(line)
        assert found.metadata.x_request_id == f"{task_id}/{index}"
        assert found.metadata.conversation_id == record.prompt_id
        metrics = {tag: v.value for tag, v in found.metrics.items()}
        assert metrics["request_latency"] == record.e2e_ms
        assert metrics["output_sequence_length"] == record.output_tokens
        assert metrics["input_sequence_length"] == record.prompt_tokens
        assert metrics.get("time_to_first_token") == record.ttft_ms
        assert metrics.get("inter_token_latency") == tpot_ms(record)
        assert found.metadata.request_end_ns - found.metadata.request_start_ns == round(record.e2e_ms * 1e6)
        assert found.error is None


def test_a_failed_request_is_aiperfs_error_record() -> None:
    report = CampaignReport.from_json(CAMPAIGN.read_bytes(), source=str(CAMPAIGN))
    from scheduler.results.aiperfrecords import aiperf_record

    task = next(
        t for t in report.results if t.measurement is not None and t.measurement.generation is not None
    )
    assert task.measurement is not None
    assert task.measurement.generation is not None
    good = task.measurement.generation.records[0]
    failed = good.model_copy(update={"error": "http_status", "http_status": 503, "error_detail": "busy"})
    line = json.dumps(aiperf_record(failed, session_num=0, task_id="t", index=0, worker="w"))
    record = AiperfRecord.model_validate_json(line)
    assert record.error is not None
    assert (record.error.code, record.error.type, record.error.message) == (
        503,
        "http_status",
        "busy",
    )
    assert set(record.metrics) == {"error_isl"}
