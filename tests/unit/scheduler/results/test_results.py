"""Result rows: exact column order, units, failure rows, CSV round trip, results.json with samples."""

from __future__ import annotations

import csv
import io
import json

import pytest
from kit.scheduler_harness import CAMPAIGN_YAML, MODEL, SHA, profile

from protocol import AsyncRun, ComputeUnit, InputFed, Measurement, ResultBody, RunConditions, Stats
from scheduler import (
    CSV_COLUMNS,
    CampaignReport,
    Status,
    TaskResult,
    TaskState,
    TaskView,
    failure_row,
    parse_campaign,
    result_row,
    to_csv,
)

# The seeds' columns in the seeds' order, the later reference ones, the extended ones, generation's, energy's.
SEED = (
    "Status,JobId,FileName,FileSize,ComputeUnits,DeviceName,Soc,Ram,DeviceOs,LoadMsMedian,LoadMsAverage,"
    "LoadMsStdDev,PeakLoadRamUsage,InferenceMsMedian,InferenceMsAverage,InferenceMsStdDev,PeakInferenceRamUsage"
)
REFERENCE = "CreatedUtc,DeviceYear,DiscreteGpu,VRam,DeviceOsVersion,LoadMsFirst,InferenceMsFirst"
EXTENDED = (
    "InferenceMsMin,InferenceMsMax,InferenceMsP90,InferenceMsP95,InferenceMsP99,InferenceCv,InferenceOutliers,"
    "ProcessMedians,ProcessSpreadPct,Unstable,UnstableReasons,WarmupsUsed,CpuCoresUsed,BackgroundCores,GpuUtilPct,"
    "GpuMemMb,Providers,Fallback,OutputMaxDiff,SpeedupVsCpu,ModelSha256,RuntimeVersions,RuntimeSettings,ThroughputPerS,AsyncRequests,WorkerPeerId,SignatureStatus,Verified,QuorumNetworks,QuorumOwners,DeviceClass,Claim,InputShapes,InputsDefaulted,"
    "Trimmed,FailureReason,FailureStage,Detail"
)
GENERATION = (
    "TtftMsMedian,TtftMsP90,TpotMsMedian,TpotMsP90,ItlMsP99,E2eMsMedian,PrefillTokPerS,DecodeTokPerS,"
    "RuntimePpTokPerS,RuntimeTgTokPerS,OutputTokensMean,Rouge1,Rouge2,RougeL"
)
SERVICE = (
    "Concurrency,RequestRate,TtftMsP99,TpotMsP99,RequestPerS,OutputTokPerS,Goodput,Requests,RequestsSent,Errors,ErrorShare,"
    "ErrorsByKind,TokensCounted,RttMs,TlsMs"
)
POLICY = "TokenSource,TokensPerChunkMean,UsageVsCountedTokens,TtfoMsMedian,ReasoningTokensMean,DatasetSeed"
CLIENT = "ScheduleLagMsP50,Unsent,ClientSaturatedReason"
SESSIONS = (
    "TtftMsByTurn,Sessions,SessionsCompleted,SessionTurnsMean,SessionDurationSMedian,"
    "SessionPromptTokensMean,SessionOutputTokensMean"
)
CAPACITY = (
    "CapacityRow,CapacityBy,CapacityKnee,CapacityFirstFail,CapacityGoodputPct,CapacityFinished,"
    "LevelPassed,LevelEndedEarly"
)
ENERGY = "EnergyJoulesPerInference,EnergyJoulesPerToken,AvgPowerW,IdlePowerW,EnergyMethod,EnergyNote"
FLEET = "FleetSize,RequestRateAchieved,ScheduleLagMsP99,ClientCpuMaxPct,ClientSaturated,FleetLost"
SUSTAIN = "Throttled,ThrottleCauses,ThrottleDetail,WindowMediansMs,TelemetryPeriodMs,TelemetryPoints"
COST = "PricePerHour,PriceSource,CostPer1kInferences,CostPerMTokens,InferencesPerJoule,TokensPerJoule"
PEAKS = (
    "PeakPrecision,PeakGops,PeakGbs,PeakCv,PeakSize,PeakSweep,PeakLibrary,PeakKernel,PeakMethod,PeakCpuMhz"
)
EXPECTED_COLUMNS = [
    name
    for group in (
        SEED,
        REFERENCE,
        EXTENDED,
        GENERATION,
        SERVICE,
        POLICY,
        CLIENT,
        SESSIONS,
        CAPACITY,
        ENERGY,
        FLEET,
        SUSTAIN,
        COST,
        PEAKS,
    )
    for name in group.split(",")
]


def stats(median: float) -> Stats:
    return Stats(
        n=3,
        min=median - 1,
        max=median + 2,
        mean=median + 0.5,
        median=median,
        stddev=0.25,
        p90=median + 1.5,
        p95=median + 1.75,
        p99=median + 1.95,
        cv=0.0123,
        outliers=1,
    )


def task(state: TaskState = TaskState.DONE, peer_id: str | None = "12D3-gpu") -> TaskView:
    return TaskView(
        task_id="campaign-7-job-0-0",
        job_index=0,
        unit=ComputeUnit.GPU_ONNX,
        model=MODEL,
        state=state,
        peer_id=peer_id,
        device_name="gpu box" if peer_id else "",
        lease_id="lease-1",
    )


def body() -> ResultBody:
    measurement = Measurement(
        compute_unit=ComputeUnit.GPU_ONNX,
        load_ms=stats(40.0),
        load_first_ms=95.5,
        first_inference_ms=30.25,
        warmups_used=10,
        inference_ms=stats(12.5),
        samples_ms=(12.0, 12.5, 13.0),
        process_medians_ms=(12.4, 12.6),
        process_spread_pct=1.6,
        peak_load_ram_mb=300.25,
        peak_inference_ram_mb=410.0,
        cpu_cores_used=1.234,
        gpu_util_pct=87.5,
        gpu_mem_mb=1024.0,
        providers=("CUDAExecutionProvider",),
        unstable=True,
        unstable_reasons=("thermal", "background load"),
        conditions=RunConditions(
            background_cores=0.5, runtime_versions={"onnxruntime": "1.20.1", "python": "3.11"}
        ),
        inputs=(
            InputFed(name="bytes", dtype="int32", shape=(1, 2048), fill="zeros", defaulted_dims=(0,)),
            InputFed(name="mask", dtype="bool", shape=(1, 2048), fill="false"),
        ),
    )
    device = profile("gpu box", units=[ComputeUnit.GPU_ONNX], ram_gb=16, gpu_vram_mb=8192, soc="Ryzen 9")
    device = device.with_(device_year=2023)
    return ResultBody(
        campaign_id="campaign-7",
        task_id="campaign-7-job-0-0",
        lease_id="lease-1",
        worker="12D3-gpu",
        submitter="12D3-me",
        model_sha256=SHA,
        device=device,
        measurement=measurement,
        finished_at=1000.0,
    )


def test_a_throughput_run_is_the_rows_throughput_the_median_over_processes() -> None:
    runs = (
        AsyncRun(requests=2, inferences=100, wall_ms=500.0),
        AsyncRun(requests=2, inferences=90, wall_ms=500.0),
    )
    b = body()
    row = result_row(task(), b.with_(measurement=b.measurement.with_(async_runs=runs)), "verified", "x")
    assert (row["ThroughputPerS"], row["AsyncRequests"]) == ("190.0", "2")  # 200/s and 180/s
    assert result_row(task(), b, "verified", "x")["ThroughputPerS"] == ""


def test_columns_are_the_seed_columns_then_reference_then_extended_in_this_exact_order() -> None:
    assert list(CSV_COLUMNS) == EXPECTED_COLUMNS
    assert to_csv([]).splitlines() == [",".join(EXPECTED_COLUMNS)]


def test_a_result_row_fills_every_column_in_the_documented_units() -> None:
    row = result_row(task(), body(), "verified", "2026-11-22T03:30:00Z")
    assert list(row) == EXPECTED_COLUMNS
    assert {k: row[k] for k in EXPECTED_COLUMNS[:17]} == {
        "Status": "Complete",
        "JobId": "campaign-7-job-0-0",
        "FileName": "mobilenet.onnx",
        "FileSize": "14.000",
        "ComputeUnits": "GPU (ONNX)",
        "DeviceName": "gpu box",
        "Soc": "Ryzen 9",
        "Ram": "16",
        "DeviceOs": "Linux",
        "LoadMsMedian": "40.000",
        "LoadMsAverage": "40.500",
        "LoadMsStdDev": "0.250",
        "PeakLoadRamUsage": "300.2",
        "InferenceMsMedian": "12.500",
        "InferenceMsAverage": "13.000",
        "InferenceMsStdDev": "0.250",
        "PeakInferenceRamUsage": "410.0",
    }
    assert (row["CreatedUtc"], row["DeviceYear"], row["DiscreteGpu"], row["VRam"]) == (
        "2026-11-22T03:30:00Z",
        "2023",
        "RTX",
        "8",
    )
    assert (row["LoadMsFirst"], row["InferenceMsFirst"], row["InferenceMsP99"]) == (
        "95.500",
        "30.250",
        "14.450",
    )
    assert (row["InferenceCv"], row["InferenceOutliers"], row["ProcessMedians"]) == (
        "0.0123",
        "1",
        "12.400;12.600",
    )
    assert (row["Unstable"], row["UnstableReasons"], row["Fallback"]) == (
        "True",
        "thermal;background load",
        "False",
    )
    assert (row["GpuUtilPct"], row["GpuMemMb"], row["Providers"]) == (
        "87.5",
        "1024.0",
        "CUDAExecutionProvider",
    )
    assert row["RuntimeVersions"] == "onnxruntime=1.20.1;python=3.11"
    assert (row["ModelSha256"], row["WorkerPeerId"], row["SignatureStatus"]) == (SHA, "12D3-gpu", "verified")
    assert (row["FailureReason"], row["Detail"]) == ("", "")
    assert (row["InputShapes"], row["InputsDefaulted"]) == ("bytes:int32[1,2048];mask:bool[1,2048]", "True")


@pytest.mark.parametrize("status", [Status.FAILED, Status.CANCELLED, Status.UNSCHEDULABLE])
def test_a_failure_row_carries_the_task_the_reason_and_empty_measurements(status: Status) -> None:
    row = failure_row(task(peer_id=None), status, "no_feasible_peer", "GPU (ONNX) unavailable", "t")
    assert list(row) == EXPECTED_COLUMNS
    assert (row["Status"], row["JobId"], row["ComputeUnits"], row["FileName"]) == (
        status.value,
        "campaign-7-job-0-0",
        "GPU (ONNX)",
        "mobilenet.onnx",
    )
    assert (row["FailureReason"], row["Detail"], row["InferenceMsMedian"], row["Ram"]) == (
        "no_feasible_peer",
        "GPU (ONNX) unavailable",
        "",
        "",
    )


def test_csv_round_trips_awkward_text() -> None:
    rows = [
        result_row(task(), body(), "verified", "t"),
        failure_row(task(), Status.FAILED, "crashed", 'exit -9, "killed"\nsecond line', "t"),
    ]
    parsed = list(csv.DictReader(io.StringIO(to_csv(rows))))
    # quotes and commas round trip; a newline comes back as a visible escape (the CSV seam, protocol.text)
    assert parsed == [rows[0], {**rows[1], "Detail": 'exit -9, "killed"\\x0asecond line'}]


def test_csv_cells_that_look_like_formulas_are_prefixed_and_numbers_are_not() -> None:
    row = failure_row(task(), Status.FAILED, "crashed", '=HYPERLINK("http://evil","x")', "t")
    parsed = next(csv.DictReader(io.StringIO(to_csv([row | {"LoadMsMedian": "-1.5", "Soc": "@x"}]))))
    assert (parsed["Detail"], parsed["LoadMsMedian"], parsed["Soc"]) == ("'" + row["Detail"], "-1.5", "'@x")


def test_results_json_keeps_the_raw_samples() -> None:
    campaign = parse_campaign(CAMPAIGN_YAML)
    row = result_row(task(), body(), "verified", "t")
    measured = TaskResult(task(), "t", body(), body().measurement.samples_ms)
    loaded = json.loads(CampaignReport.of("campaign-7", campaign, [(row, measured)]).to_json())
    assert loaded["campaign_id"] == "campaign-7"
    assert loaded["columns"] == EXPECTED_COLUMNS
    assert loaded["campaign"]["jobs"][0]["spec"]["compute_unit"] == "CPU (ONNX)"
    [entry] = loaded["results"]
    assert (entry["row"], entry["samples_ms"]) == (row, [12.0, 12.5, 13.0])
    assert entry["signed"]["worker"] == body().worker
    assert "samples_ms" not in entry["signed"]["measurement"]  # kept once, beside it


def test_an_ended_task_keeps_the_time_it_ended_whenever_its_row_is_rebuilt() -> None:
    ended = TaskView.model_validate(
        {**task(TaskState.UNSCHEDULABLE, None).model_dump(), "ended_at": 1_700_000_000}
    )
    assert failure_row(ended, Status.UNSCHEDULABLE, "no_feasible_peer", "", "later")["CreatedUtc"] == (
        "2023-11-14T22:13:20Z"
    )
    live = task(TaskState.LEASED)
    assert failure_row(live, Status.FAILED, "", "still leased", "now")["CreatedUtc"] == "now"


def test_a_generate_result_fills_the_generation_columns() -> None:
    from protocol import GenerateSpec, Prompt, RequestRecord, RuntimeRates
    from protocol.genstats import summarize_generation

    spec = GenerateSpec(
        prompts=(Prompt(id="a", text="x", reference="the cat sat"),), prompts_sha256=SHA, quality=("rouge",)
    )
    record = RequestRecord(
        prompt_id="a",
        prompt_tokens=20,
        output_tokens=3,
        ttft_ms=200.0,
        e2e_ms=300.0,
        token_times_ms=(200.0, 250.0, 300.0),
        output_text="the cat sat",
    )
    generated = body()
    # llama.cpp's own timers beside the harness's: 20 prompt tokens in 100 ms, 2 decoded in 40 ms
    timers = RuntimeRates(
        source="llama_perf_context", prompt_tokens=20, prompt_ms=100.0, eval_tokens=2, eval_ms=40.0
    )
    stats = summarize_generation([record], 0.3, spec).with_(runtime_rates=timers)
    measurement = generated.measurement.with_(generation=stats)
    row = result_row(task(), generated.with_(measurement=measurement), "verified", "")
    assert {k: row[k] for k in GENERATION.split(",")} == {
        "TtftMsMedian": "200.000",
        "TtftMsP90": "200.000",
        "TpotMsMedian": "50.000",
        "TpotMsP90": "50.000",
        "ItlMsP99": "50.000",
        "E2eMsMedian": "300.000",
        "PrefillTokPerS": "100.00",
        "DecodeTokPerS": "20.00",
        "RuntimePpTokPerS": "200.00",
        "RuntimeTgTokPerS": "50.00",
        "OutputTokensMean": "3.00",
        "Rouge1": "1.0000",
        "Rouge2": "1.0000",
        "RougeL": "1.0000",
    }
    assert (row["Concurrency"], row["Requests"], row["Errors"], row["RttMs"]) == ("1", "1", "0", "")
    assert all(result_row(task(), body(), "verified", "")[k] == "" for k in GENERATION.split(","))


def test_decimals_follow_the_spread_and_survive_a_spread_that_underflows() -> None:
    """A median known to 100 ms shows no decimals, one known to a microsecond three; a spread of a few
    subnormals (a lying worker's) underflows to a zero error: three decimals, never a domain error."""
    from protocol import Stats
    from scheduler.results import decimals_for

    def stats(stddev: float) -> Stats:
        return Stats(n=100, min=1.0, max=1.0, mean=1.0, median=1.0, stddev=stddev, p90=1.0, p95=1.0,
                     p99=1.0, cv=0.0)  # fmt: skip

    assert decimals_for(stats(800.0)) == 0
    assert decimals_for(stats(0.005)) == 3
    assert decimals_for(stats(5e-324)) == 3
    assert decimals_for(stats(1e308)) == 0


def test_a_figure_without_a_spread_shows_three_significant_digits_and_no_percentiles() -> None:
    """Issue 49, scope 5: one request of 29,513.725 ms is "29514", never three decimals, and its tail
    is its count alone (its p90, p99 and max are itself)."""
    from node.report.matrix import tail_text
    from protocol import Stats
    from scheduler.results import MatrixCell, decimals_for, shown

    def one(value: float) -> Stats:
        return Stats(n=1, min=value, max=value, mean=value, median=value, stddev=0.0, p90=value, p95=value,
                     p99=value, cv=0.0)  # fmt: skip

    assert [shown(v, decimals_for(one(v))) for v in (29513.725, 1.4823, 0.31247, 0.0)] == [
        "29514", "1.48", "0.312", "0.000"
    ]  # fmt: skip
    cell = MatrixCell(median_ms=29513.725, stats=one(29513.725))
    assert tail_text(cell) == "n 1"
