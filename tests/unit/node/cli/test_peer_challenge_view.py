"""What `peers --challenge` shows of each peer's challenged units: the table and the JSON rows."""

from __future__ import annotations

import pytest

from node.cli.peerchallenge import as_json, attach, print_table, verdict
from scheduler.verification.challenge import Measured

PEER = "12D3KooWExamplePeerIdThatEndsInXy7Qp2"
LATE = "challenge on GPU (PyTorch) cuda:0: n=16384 x 349 steps, no commitment within 1.38 s"
MEASURED = (
    Measured("CPU", 40.0, 35.5, ""),
    Measured("GPU (PyTorch) cuda:0", 20e3, 2.18e3, LATE, under=True),
    Measured(
        "GPU (PyTorch) cuda:1 [red]x[/red]", 5e3, 0.0, "challenge on ...: not answered: busy", answered=False
    ),
)


def test_each_unit_is_a_row_with_claimed_measured_and_the_verdict(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: the table at its natural width
    print_table({PEER: MEASURED}, whole_ids=False)
    lines = capsys.readouterr().out.splitlines()
    cpu, gpu, busy = (next(line for line in lines if m.unit.split(" [")[0] in line) for m in MEASURED)
    assert "…Xy7Qp2" in cpu
    for line, shown in (
        (cpu, ("40 GFLOPS", "35.5 GFLOPS", "borne out")),
        (gpu, ("20 TFLOPS", "under 2.18 TFLOPS", "refused")),
        (busy, ("[red]x[/red]", "5 TFLOPS", "not answered")),  # a peer's text as written, not markup
    ):
        assert all(s in line for s in shown), (line, shown)
    assert any("no commitment" in line for line in lines)  # the reason under the verdict


def test_the_json_rows_carry_the_figures_and_the_verdict() -> None:
    rows = as_json(MEASURED)
    assert [r["verdict"] for r in rows] == ["borne out", "refused", "not answered"]
    assert [verdict(m) for m in MEASURED] == ["borne out", "refused", "not answered"]
    assert rows[1] == {
        "unit": "GPU (PyTorch) cuda:0",
        "claimed_gflops": 20000.0,
        "measured_gflops": 2180.0,
        "measured_is_bound": True,
        "verdict": "refused",
        "reason": MEASURED[1].problem,
    }


def test_rows_carry_a_challenge_only_when_it_was_asked(capsys: pytest.CaptureFixture[str]) -> None:
    rows: list[dict[str, object]] = [{"peer_id": PEER}, {"peer_id": "other"}]
    attach(rows, None)
    print_table(None, whole_ids=True)
    assert rows == [{"peer_id": PEER}, {"peer_id": "other"}]  # `peers` without --challenge: as before
    assert capsys.readouterr().out == ""
    attach(rows, {PEER: MEASURED})
    assert [len(r["challenge"]) for r in rows] == [3, 0]  # type: ignore[arg-type]
