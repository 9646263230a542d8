"""Issue 51: multi-turn sessions end to end, in every view.

`sark-node submit` on the embedded swarm (one real worker) runs a black-box job whose dataset is a
ShareGPT file read with `turns: all`, against a loopback server that logs every request; and a
gray-box worker (its owner declared that server with `join --endpoint`) on a gate swarm. From the
server's log: turn k's request holds turns 1..k-1, each followed by the answer this server gave, then
turn k. The per-turn figures (TTFT by turn index) and the per-session figures (sessions completed,
turns, duration, tokens) are in results.csv, results.json (with every turn's raw record), the
terminal, report.html and the dashboard (its own render functions, in headless Chromium).
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.campaignlab import CampaignLab, submitter_id
from kit.procs import SARK
from kit.sse_server import Reply, scheduled, serve_sse

from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from node.http.shapes import dashboard_figures
from protocol import FORMULAS, Measurement

__all__ = ["page"]  # the fixture, re-used from test_http_dashboard
DASHBOARD = Path(__file__).parents[3] / "node" / "assets" / "dashboard.html"
TURNS = 3
CHATS = [
    {
        "id": f"chat{i}",
        "conversations": [
            turn
            for k in range(1, TURNS + 1)
            for turn in (
                {"from": "human", "value": f"chat{i} question {k}"},
                {"from": "gpt", "value": f"the dataset's answer {k}, never sent"},
            )
        ],
    }
    for i in range(3)
]


class Server:
    """Answers each request with a serial number only the server knows, and a first token that comes
    later the longer the conversation is not (turn 1 slower: a prefix cache's effect, scripted)."""

    def __init__(self) -> None:
        self.serial = itertools.count(1)
        self.lock = threading.Lock()
        self.answers: set[str] = set()

    def __call__(self, body: dict[str, object], attempt: int) -> Reply:
        if not body:  # GET /v1/models: a gray-box worker's probe
            listing = {"object": "list", "data": [{"id": "chat"}]}
            return Reply(200, (("content-type", "application/json"),), ((0.0, json.dumps(listing).encode()),))
        messages = body["messages"]
        assert isinstance(messages, list)
        turn = sum(1 for m in messages if m["role"] == "user")
        with self.lock:
            text = f"server answer {next(self.serial)}"
            self.answers.add(text)
        first_s = 0.08 if turn == 1 else 0.02
        return scheduled([text[:7], text[7:]], first_s=first_s, every_s=0.005, usage=(10 * turn, 3))


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("sessions")
    (tmp / "chats.json").write_text(json.dumps(CHATS))
    script = Server()
    with serve_sse(script) as server:
        job = {
            "endpoint": {"url": server.url, "model": "chat"},
            "generate": {
                "dataset": {"sharegpt": "chats.json", "turns": "all"},
                "max_new_tokens": 8,
                "concurrency": 2,
                "think_time_s": 0.05,
            },
        }
        (tmp / "sessions.yaml").write_text(json.dumps({"name": "sessions", "jobs": [job]}))
        args = [*SARK, "submit", str(tmp / "sessions.yaml"), "--workers", "1", "--wait-peers", "1"]
        args += ["--out", str(tmp / "out"), "--data-dir", str(tmp / "data")]
        args += ["--allow-http", "--allow-network", "127.0.0.0/8"]
        env = {**os.environ, "SARK_CALIBRATE": "false", "COLUMNS": "200"}
        done = zygote.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp)
        seen = [s for s in server.seen if s.path.endswith("/chat/completions")]
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp / "out"
    return {
        "seen": seen,
        "answers": script.answers,
        "terminal": done.stdout + done.stderr,
        "csv": next(out.rglob("results.csv")),
        "json": json.loads(next(out.rglob("results.json")).read_text()),
        "html": next(out.rglob("report.html")).read_text(),
    }


def test_turn_k_carries_turns_1_to_k_minus_1_with_the_servers_own_answers(submitted: dict[str, Any]) -> None:
    assert len(submitted["seen"]) == 3 * TURNS  # every turn of every conversation, once
    _check_turns(submitted["seen"], submitted["answers"])


def _check_turns(seen: list[Any], answers: set[str]) -> None:
    """Each session request of the server's log: the conversation's questions 1..k in order, each
    earlier one followed by an answer this server gave; every turn of every conversation seen."""
    turns_seen: dict[str, set[int]] = {}
    for request in seen:
        said = [(m["role"], m["content"]) for m in request.body["messages"]]
        chat = said[0][1].split()[0]
        k = (len(said) + 1) // 2
        assert [c for r, c in said if r == "user"] == [f"{chat} question {j}" for j in range(1, k + 1)]
        assert [r for r, _ in said] == ["user", "assistant"] * (k - 1) + ["user"]
        assert all(c in answers for r, c in said if r == "assistant")  # this server's, never the dataset's
        turns_seen.setdefault(chat, set()).add(k)
    assert turns_seen == {f"chat{i}": {1, 2, 3} for i in range(3)}


def test_a_gray_box_worker_replays_the_sessions_on_its_owners_server(tmp_path: Path) -> None:
    """Gray-box: the worker's owner declared the server (`join --endpoint`); the campaign names only
    the model; the sessions reach that server turn by turn as they reach a black-box URL."""
    (tmp_path / "chats.json").write_text(json.dumps(CHATS))
    script = Server()
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        with serve_sse(script) as server:
            me = submitter_id(tmp_path / "submitter")
            gate = lab.gate().ready["addrs"][0]
            extra = ["--endpoint", f"local={server.url}", "--device-name", "w0"]
            worker = lab.real_worker("w0", [gate], me, wait=False, extra=extra)
            assert worker.wait_event("ready", 120)["endpoints"][0]["usable"]
            generate = {"dataset": {"sharegpt": "chats.json", "turns": "all"}, "max_new_tokens": 8,
                        "concurrency": 2, "think_time_s": 0.05}  # fmt: skip
            job = {"endpoint": {"model": "chat"}, "generate": generate}
            (tmp_path / "gray.yaml").write_text(json.dumps({"name": "gray", "jobs": [job]}))
            args = ["submit", str(tmp_path / "gray.yaml"), "--json", "--wait-peers", "1"]
            args += [
                "--out",
                str(tmp_path / "out"),
                "--gate",
                gate,
                "--data-dir",
                str(tmp_path / "submitter"),
            ]
            done = zygote.run([*SARK, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
            seen = [s for s in server.seen if s.path.endswith("/chat/completions")]
    finally:
        lab.close()
    assert done.returncode == 0, done.stderr[-3000:]
    sessions = [s for s in seen if str(s.body["messages"][0]["content"]).startswith("chat")]
    assert len(sessions) == 3 * TURNS  # the worker's own probe aside
    _check_turns(sessions, script.answers)
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        [row] = list(csv.DictReader(f))
    assert row["ComputeUnits"] == "Endpoint (gray-box)"
    assert (row["Sessions"], row["SessionsCompleted"]) == ("3", "3")


def test_per_turn_and_per_session_figures_in_results_csv_and_json(submitted: dict[str, Any]) -> None:
    with submitted["csv"].open(newline="") as f:
        [row] = list(csv.DictReader(f))
    assert row["Status"] == "Complete", row
    assert (row["Sessions"], row["SessionsCompleted"], row["SessionTurnsMean"]) == ("3", "3", "3.00")
    assert row["Requests"] == "9"
    by_turn = dict(part.split(":") for part in row["TtftMsByTurn"].split())
    assert list(by_turn) == ["1", "2", "3"]
    assert float(by_turn["1"]) > float(by_turn["2"])  # the scripted server's slower first turn shows
    assert float(row["SessionDurationSMedian"]) >= 2 * 0.05
    assert float(row["SessionPromptTokensMean"]) == 60.0  # 10 + 20 + 30, the usage's prompt tokens
    document = submitted["json"]
    [task] = [r for r in document["results"] if r["row"]["Status"] == "Complete"]
    records = task["signed"]["measurement"]["generation"]["records"]
    assert sorted((r["session"], r["turn"]) for r in records) == [(s, k) for s in range(3) for k in (1, 2, 3)]
    assert document["formulas"]["TtftMsByTurn"] == FORMULAS["ttft_ms_by_turn"]
    print({k: row[k] for k in ("TtftMsByTurn", "Sessions", "SessionDurationSMedian", "TtftMsMedian")})


def test_the_terminal_and_report_html_show_them(submitted: dict[str, Any]) -> None:
    terminal = submitted["terminal"]
    assert "TTFT ms by turn" in terminal
    assert "3/3" in terminal  # sessions completed / started
    html = submitted["html"]
    assert 'id="generation-sessions"' in html
    assert "TTFT ms turn 3" in html


DRAW = """
((doc) => {
  const tasks = doc.results.map(r => ({task_id: r.row.JobId, compute_unit: r.row.ComputeUnits,
    device_name: r.row.DeviceName, state: r.row.Status === "Complete" ? "done" : "unschedulable"}));
  for (const r of doc.results) if (r.row.Status === "Complete") rows.set(r.row.JobId, r.figures);
  renderGeneration({campaign_id: doc.campaign_id, tasks});
  const table = document.getElementById("generation-sessions");
  return JSON.stringify(Object.fromEntries([...table.querySelectorAll("td[data-figure]")]
    .map(td => [td.dataset.figure, td.textContent])));
})
"""


@pytest.mark.chromium
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
async def test_the_dashboard_draws_ttft_by_turn_and_the_sessions(
    page: Cdp, submitted: dict[str, Any]
) -> None:
    document = submitted["json"]
    for r in document["results"]:
        signed = r.get("signed")
        measurement = Measurement.model_validate(signed["measurement"]) if signed else None
        r["figures"] = dashboard_figures(measurement) if measurement is not None else None
    document = json.loads(json.dumps(document))
    await page.open(DASHBOARD.as_uri(), 30)
    drawn = json.loads(await page.evaluate(f"({DRAW})({json.dumps(document)})"))
    [row] = [r["row"] for r in document["results"] if r["row"]["Status"] == "Complete"]
    assert drawn["Sessions"] == "3/3"
    assert drawn["TtftMsByTurn"] == row["TtftMsByTurn"]
    assert drawn["SessionTurnsMean"] == "3.00"
