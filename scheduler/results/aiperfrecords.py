"""A campaign's per-request records as JSONL in AIPerf's record layout (`report --format aiperf`).

One line per request of every measured generate task, in the order the tasks and their requests
stand in results.json, shaped as AIPerf 0.13's `MetricRecordInfo` (what `aiperf profile` writes to
profile_export.jsonl and `aiperf plot` reads back): `metadata` (session_num, x_request_id,
x_correlation_id, conversation_id, turn_index, request_start_ns, request_end_ns, worker_id,
record_processor_id, benchmark_phase), `metrics` (each `{"value", "unit"}` under AIPerf's tag, in
its display unit), and `error` (`{"code", "type", "message"}`) for a failed request. Every value is
a record's own field or AIPerf's formula over it:

    request_latency                 e2e_ms
    time_to_first_token             ttft_ms
    time_to_first_output_token      ttfo_ms (a reasoning model's first answer token), else ttft_ms
    time_to_second_token            the second token's time less the first's
    inter_token_latency             (e2e_ms - ttft_ms) / (output_tokens - 1)
    output_token_throughput_per_user  1000 / inter_token_latency
    inter_chunk_latency             the gaps between consecutive token times
    input_sequence_length           prompt_tokens
    output_sequence_length          output_tokens
    usage_completion_tokens         the server's usage chunk, where it sent one
    error_isl                       prompt_tokens of a failed request

The times are the records' own: request_start_ns and request_end_ns count from the run's start
(sark-node keeps no wall clock in a record), x_request_id is `<task id>/<index>`, worker_id the
worker's peer id. Pure: the report in, text out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Final

from protocol import RequestRecord
from protocol.genstats import gaps_ms, tpot_ms
from scheduler.results.document import CampaignReport

PROCESSOR: Final = "sark-node"
"""AIPerf's record_processor_id: which program made the record."""


def aiperf_lines(report: CampaignReport) -> Iterator[str]:
    """Each request of the campaign's measured generate tasks as one JSON line (no newline)."""
    session = 0
    for task in report.results:
        measured = task.measurement
        signed = task.signed
        if measured is None or signed is None or measured.generation is None:
            continue
        task_id = task.row.get("JobId", "")
        for index, record in enumerate(measured.generation.records):
            line = aiperf_record(
                record, session_num=session, task_id=task_id, index=index, worker=signed.worker
            )
            yield json.dumps(line, separators=(",", ":"), allow_nan=False)
            session += 1


def aiperf_record(
    record: RequestRecord, *, session_num: int, task_id: str, index: int, worker: str
) -> dict[str, object]:
    """One record as AIPerf's `MetricRecordInfo`."""
    start_ns = round(record.started_s * 1e9)
    metadata = {
        "session_num": session_num,
        "x_request_id": f"{task_id}/{index}",
        "x_correlation_id": task_id if record.session is None else f"{task_id}/session-{record.session}",
        "conversation_id": record.prompt_id,
        "turn_index": 0 if record.turn is None else record.turn - 1,
        "request_start_ns": start_ns,
        "request_end_ns": start_ns + round(record.e2e_ms * 1e6),
        "worker_id": worker,
        "record_processor_id": PROCESSOR,
        "benchmark_phase": "profiling",
    }
    if record.error is not None:
        error = {
            "code": record.http_status,
            "type": record.error,
            "message": record.error_detail or record.error,
        }
        metrics = {"error_isl": _value(record.prompt_tokens, "tokens")}
        return {"metadata": metadata, "metrics": metrics, "error": error}
    return {"metadata": metadata, "metrics": _metrics(record), "error": None}


def _metrics(record: RequestRecord) -> dict[str, dict[str, object]]:
    metrics = {
        "request_latency": _value(record.e2e_ms, "ms"),
        "input_sequence_length": _value(record.prompt_tokens, "tokens"),
        "output_sequence_length": _value(record.output_tokens, "tokens"),
    }
    if record.ttft_ms is not None:
        metrics["time_to_first_token"] = _value(record.ttft_ms, "ms")
        first_answer = record.ttft_ms if record.ttfo_ms is None else record.ttfo_ms
        metrics["time_to_first_output_token"] = _value(first_answer, "ms")
    times = record.token_times_ms
    if len(times) >= 2:
        metrics["time_to_second_token"] = _value(times[1] - times[0], "ms")
        metrics["inter_chunk_latency"] = {"value": gaps_ms(record), "unit": "ms"}
    itl = tpot_ms(record)
    if itl is not None:
        metrics["inter_token_latency"] = _value(itl, "ms")
        if itl > 0:
            metrics["output_token_throughput_per_user"] = _value(1000 / itl, "tokens/sec/user")
    if record.usage_tokens is not None:
        metrics["usage_completion_tokens"] = _value(record.usage_tokens, "tokens")
    return metrics


def _value(value: float, unit: str) -> dict[str, object]:
    return {"value": value, "unit": unit}
