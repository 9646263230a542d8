"""Issue 50, scope 6: a gray-box closed loop's count, held by its replicas' paces.

Real processes: a gate, three honest `join` workers and a hostile one (tests/kit/loadliar.py `double`),
each with its owner's server declared (`join --endpoint`): a stub answering each request's first token
in 300 ms. The campaign measures that served model gray-box, a closed loop of 2 slots for 3 s, on every
device, in pairs (`verify: replicas: 2`, `same_host: allow`: every worker is on
127.0.0.1). The liar sends its requests as an honest client does, then signs as many records of half a
microsecond as it has real ones, less one: none is in flight as long as the overlap tolerance, physics
passes them (its round trip on loopback is under 2 ms), the slot bound divides by its own shortest, and
its median is still one of its real records. Its count doubles; judged on the median alone it was
`replicated` beside an honest replica. Its pace (2 slots x 3 s over its records) is half an honest one's:
its row is an outlier naming its count, never a standing figure, and the honest rows are `replicated`.
Before, `verify:` did not replicate an endpoint job at all: a gray-box one's rows said `single` and the
campaign exited 0 with verification asked (`Needs.replicable`: a black-box URL is still not replicated, one
server that every worker reaches, held to the submitter's own probe and the server's count).
The first token's 300 ms keeps what a starved client adds to a request small beside it: the honest paces
agree at load as quiet.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.campaignlab import ROOT, CampaignLab, Swarm, submitter_id, write_campaign
from kit.sse_server import Reply, scheduled, serve_sse

from scheduler.results import CampaignReport, entries_of

LOADLIAR = ROOT / "tests" / "kit" / "loadliar.py"
HONEST = ("h0", "h1", "h2")  # with the liar, four: `devices: all` places every one in a pair
FIRST_S, SLOTS, DURATION_S = 0.3, 2, 3.0


def _script(body: dict[str, object], attempt: int) -> Reply:
    if not body:  # GET /v1/models: each worker's probe at its start
        listing = {"object": "list", "data": [{"id": "served"}]}
        return Reply(200, (("content-type", "application/json"),), ((0.0, json.dumps(listing).encode()),))
    return scheduled(["The", " fox"], first_s=FIRST_S, every_s=0.005, usage=(9, 2))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Swarm, dict[str, str]]]:
    root = tmp_path_factory.mktemp("padded")
    lab = CampaignLab(root, record_ttl=30.0)
    try:
        with serve_sse(_script) as server:
            me = submitter_id(root / "submitter")
            gate = lab.gate().ready["addrs"][0]
            liar = [sys.executable, str(LOADLIAR), "double"]
            started = {
                name: lab.real_worker(
                    name,
                    [gate],
                    me,
                    wait=False,
                    extra=["--endpoint", f"own={server.url}"],
                    program=None if name in HONEST else liar,
                )
                for name in (*HONEST, "double")
            }
            ready = {name: proc.wait_event("ready", 120) for name, proc in started.items()}
            assert all(r["endpoints"][0]["usable"] for r in ready.values()), ready
            ids = {name: r["peer_id"] for name, r in ready.items()}
            yield Swarm(lab, gate, {ids[n]: p for n, p in started.items()}, root / "submitter", root), ids
    finally:
        lab.close()


def test_a_gray_box_loop_padded_under_its_median_is_apart_by_its_pace(
    lab: tuple[Swarm, dict[str, str]],
) -> None:
    swarm, ids = lab
    load = {
        "prompts": "builtin:summaries",
        "max_new_tokens": 2,
        "concurrency": SLOTS,
        "duration_s": DURATION_S,
    }
    job = {
        "endpoint": {"model": "served"},
        "generate": load,
        "devices": "all",
        "require": {"peers": list(ids.values())},
    }
    body = {"name": "padded", "verify": {"replicas": 2, "same_host": "allow"}, "jobs": [job]}
    path = write_campaign(swarm.root / "padded.yaml", body)
    done = swarm.run("submit", str(path), "--json", "--wait-peers", "4", "--out", str(swarm.root / "out"))
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    document = CampaignReport.from_json(Path(outcome["files"]["json"]).read_text())
    standing = {e.task_id for e in entries_of(document) if e.complete}

    (mine,) = [r for r in rows if r["WorkerPeerId"] == ids["double"]]
    honest = [r for r in rows if r["WorkerPeerId"] != ids["double"]]
    requests = [int(r["Requests"]) for r in honest]
    assert int(mine["Requests"]) >= 2 * min(requests) - 3, (mine["Requests"], requests)  # its count doubled
    verdict = mine["Verified"]
    assert verdict.startswith("outlier: "), verdict
    assert ids["double"] in verdict
    assert "ms of its slots' time a request against" in verdict, verdict  # its count, not its figure
    assert mine["JobId"] not in standing  # never the figure in the views that compare devices
    assert [r["Verified"].startswith("replicated") for r in honest] == [True] * len(honest), honest
    assert {r["JobId"] for r in honest} <= standing
    assert outcome["verification"]["verified"] == len(honest)
