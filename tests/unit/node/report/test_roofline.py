"""report.html's roofline (issue 53, item 2): the arithmetic of a row's point and its unit's roof, the
labels' spread, and the section as the page holds it, from the packaged models counted in the cost child."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations, pairwise
from pathlib import Path

import pytest
from kit.reports import ROOF_MODELS, roof_peaks, roofline_report
from matplotlib.text import Text

from node.report.roofline import (
    Costs,
    Point,
    peak_unit,
    point_of,
    roof_of,
    roofline_figure,
    roofline_parts,
    spread,
)
from node.submitter.outputs import write_files
from protocol import Peak, for_html
from scheduler.results import CampaignReport, entries_of

pytestmark = pytest.mark.heavy  # many CPU-seconds: handed out first (tests/conftest.py)


@dataclass(frozen=True)
class Cost:
    flops: float
    bytes: float
    uncounted: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()


Counted = tuple[CampaignReport, Costs]


@dataclass(frozen=True)
class Written:
    """The counted report written as `submit` writes it, once without its costs and once with them."""

    plain: dict[str, Path]
    roofed: dict[str, Path]


@pytest.fixture(scope="module")
def counted() -> Counted:
    return roofline_report()


@pytest.fixture(scope="module")
def written(counted: Counted, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """Both pages drawn once for the module: each draws every figure of five models (about 5 s)."""
    report, costs = counted
    folder = tmp_path_factory.mktemp("roofline")
    return Written(write_files(folder / "a", report), write_files(folder / "b", report, costs=costs))


def test_a_roof_is_its_best_bandwidth_and_a_ceiling_per_precision() -> None:
    peaks = (*roof_peaks(), Peak(unit="CPU", precision="fp16", available=False, reason="no AVX512_FP16"))
    roof = roof_of(peaks, "CPU")
    assert roof is not None
    assert (roof.bandwidth, roof.access) == (60.0, "read")  # read 60 > copy 40 > write 30
    assert dict(roof.ceilings) == {"fp32": 1200.0, "bf16": 2400.0, "int8": 4800.0}  # fp16 unavailable: none
    assert roof.attainable(1.0) == 60.0  # below the ridge (1200 / 60 = 20 FLOP/B): memory-bound
    assert roof.attainable(10.0) == 600.0
    assert roof.attainable(100.0) == 1200.0  # above it: the fp32 ceiling
    assert roof.attainable(100.0, "int8") == 4800.0  # int8's ridge is at 80 FLOP/B
    assert roof.attainable(50.0, "int8") == 3000.0
    assert roof.attainable(10.0, "fp8") is None
    assert roof_of(peaks, "cuda:0 H100") is None  # no figure for that unit
    assert roof_of([p for p in peaks if p.precision not in ("read", "write", "copy")], "CPU") is None


def test_a_point_is_the_count_over_the_median(counted: Counted) -> None:
    report, _ = counted
    entry = next(e for e in entries_of(report) if e.complete and e.device == "cpu0")
    assert entry.median_ms == 12.5
    point = point_of(entry, Cost(flops=5e9, bytes=2e8), "m")
    assert point is not None
    assert point.intensity == pytest.approx(25.0)
    assert point.gflops == pytest.approx(5e9 / 0.0125 / 1e9)  # 400 GFLOP/s
    assert point.gbs == pytest.approx(2e8 / 0.0125 / 1e9)  # 16 GB/s
    assert point.roof is not None
    assert point.roof.unit == "CPU"
    assert point_of(entry, Cost(flops=0.0, bytes=1e6), "m") is None  # nothing counted: no place on log axes
    assert peak_unit("CPU (OpenVINO)", entry.device_profile) == "CPU"
    assert peak_unit("NPU (OpenVINO)", entry.device_profile) is None
    assert peak_unit("GPU (ONNX)", entry.device_profile) is None  # no CUDA figure in this profile


@pytest.mark.parametrize(
    "positions",
    [[0.5, 0.5, 0.5, 0.5], [0.1, 0.12, 0.9, 0.11], [0.99, 0.98, 0.97, 1.0, 0.96], [0.3], []],
)
def test_labels_are_spread_in_order_apart_and_inside(positions: list[float]) -> None:
    gap = 0.05
    placed = spread(positions, gap)
    assert len(placed) == len(positions)
    order = sorted(range(len(positions)), key=lambda i: positions[i])
    ys = [placed[i] for i in order]
    assert ys == sorted(ys)  # the labels keep their points' order
    assert all(b - a >= gap - 1e-12 for a, b in pairwise(ys))
    assert all(-1e-12 <= y <= 1 + 1e-12 for y in ys)


def test_a_label_with_room_stays_beside_its_point() -> None:
    assert spread([0.3, 0.1, 0.7], 0.05) == [0.3, 0.1, 0.7]
    assert spread([1.4, -0.2], 0.05) == [1.0, 0.0]  # off the axes: brought inside


@pytest.mark.parametrize("count", [5, 24])
def test_the_drawn_labels_do_not_overlap(count: int) -> None:
    cpu, gpu = roof_of(roof_peaks(), "CPU"), roof_of(roof_peaks("cuda:0 H200"), "cuda:0 H200")
    # points of nearly one speed and intensity, on two units' roofs: their names would sit on one another
    points = [
        Point(f"model {i} · {'CPU' if i % 2 else 'GPU'} (ONNX)", 20.0 + i * 0.1, 30.0 + i * 0.05, 1.5,
              cpu if i % 2 else gpu)
        for i in range(count)
    ]  # fmt: skip
    figure = roofline_figure(points)
    figure.draw_without_rendering()
    axes = figure.axes[0]
    boxes = [Text.get_window_extent(t) for t in axes.texts]  # the words, not their lines
    assert len(boxes) == count
    overlapping = [(a, b) for a, b in combinations(range(count), 2) if boxes[a].overlaps(boxes[b])]
    assert overlapping == []
    assert len(axes.get_legend().get_texts()) == 2 * (1 + 3)  # each roof: its slope and three ceilings


def test_the_section_holds_a_roofline_per_device_and_says_where_there_is_none(
    counted: Counted, written: Written
) -> None:
    report, _ = counted
    html = written.roofed["html"].read_text()
    section = html[html.index("<h2>Roofline</h2>") :]
    assert '<figure id="roofline-0" class="roofline"><svg' in section  # cpu0: its peaks are in its profile
    assert "No roof drawn for cpu1: no measured peaks" in section  # cpu1's profile has none
    assert "mathdefault" not in section  # the log axes' ticks are plain numbers (mathtext is off)
    assert ">1000<" in section  # a tick, as text
    for name in ROOF_MODELS[:-1]:
        assert section.count(f"{name}.onnx · CPU (ONNX)") >= 2  # a table row on each device
    assert 'silero_vad.onnx · CPU (ONNX)</td><td class="num">no MatMul, Gemm or Conv counted' in section
    # resnet50: 8.18 GFLOP and 189 MB per inference counted (43 FLOP/B: past the 20 FLOP/B ridge), at
    # 12.5 ms 654 GFLOP/s, 54.5 % of cpu0's fp32 roof of 1,200 GFLOPS
    row = re.search(r"light_resnet50\.onnx · CPU \(ONNX\).*?</tr>", section)
    assert row is not None
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(0))
    assert (cells[0], cells[1], cells[4], cells[6], cells[7]) == ("8.178", "189.1", "654.3", "1200", "54.5")
    assert written.plain["html"].read_text().count("<h2>Roofline</h2>") == 0  # no costs (results.json alone)
    assert roofline_parts(entries_of(report), Costs()) == []  # no counted model (an LLM's): no section


def test_a_model_that_could_not_be_counted_says_why(counted: Counted) -> None:
    report, costs = counted
    why = "light_resnet50.onnx: shape inference: ValueError: bad"
    refused = Costs.of({sha: why for sha, _ in costs.by_model})
    html = "".join(roofline_parts(entries_of(report), refused))
    assert "not counted: light_resnet50.onnx: shape inference: ValueError: bad" in html
    assert 'class="roofline"' not in html


def test_results_json_is_the_same_with_or_without_costs(written: Written) -> None:
    assert written.plain["json"].read_bytes() == written.roofed["json"].read_bytes()
    assert "<h2>Roofline</h2>" in written.roofed["html"].read_text()


def test_a_device_whose_claims_were_not_believed_draws_no_roof(counted: Counted) -> None:
    report, costs = counted
    liar = "claim_unverified: peaks[CPU fp32] 3600 GFLOPS above 2x the calibration's 1100 GFLOPS"
    entries = [e.with_(claim=liar) if e.device == "cpu0" else e for e in entries_of(report)]
    html = "".join(roofline_parts(entries, costs))
    assert 'class="roofline"' not in html
    assert for_html(f"No roof drawn for cpu0: its advertised figures were not believed ({liar})") in html
    entry = next(e for e in entries if e.complete and e.device == "cpu0")
    point = point_of(entry, Cost(flops=5e9, bytes=2e8), "m")
    assert point is not None
    assert point.roof is None  # the achieved figures stay: they are the submitter's


def test_a_cuda_row_takes_its_gpu_s_roof_and_the_cpu_row_the_cpu_s(counted: Counted) -> None:
    report, _ = counted
    entry = next(e for e in entries_of(report) if e.complete and e.device == "cpu0")
    assert entry.device_profile is not None
    assert entry.device_profile.calibration is not None
    gpu = roof_peaks("cuda:0 NVIDIA H200")  # the unit name `info --bench` gives a CUDA device's figures
    cal = entry.device_profile.calibration.model_copy(update={"peaks": (*roof_peaks(), *gpu)})
    profile = entry.device_profile.model_copy(update={"calibration": cal})
    for unit in ("GPU (ONNX)", "GPU (PyTorch)", "GPU (llama.cpp)"):
        assert peak_unit(unit, profile) == "cuda:0 NVIDIA H200"
    for unit in ("GPU (OpenVINO)", "GPU (CoreML)", "NPU (LiteRT)"):  # not CUDA: no figure of theirs
        assert peak_unit(unit, profile) is None
    on_gpu = point_of(entry.with_(unit="GPU (ONNX)", device_profile=profile), Cost(flops=5e9, bytes=2e8), "m")
    assert on_gpu is not None
    assert on_gpu.roof is not None
    assert on_gpu.roof.unit == "cuda:0 NVIDIA H200"
