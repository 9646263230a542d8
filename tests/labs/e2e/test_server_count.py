"""Issue 50: a closed loop padded with plausible records is refused by the server's own count.

The server is llama.cpp's own (xllamacpp's in-process `llama-server`, `endpoint_metrics` on, Gemma 3
270M from its wheels), on loopback, answering one request at a time. The worker is a real `join`
(tests/kit/loadliar.py `pad`): it runs its closed loop of `SLOTS` slots for `DURATION_S` as an honest
client does, then replaces its records with copies of its quickest real one, back to back in each slot
up to the run's end plus the slack, to the slot bound: every record is a real one's figures (above the
server's floor, never more in flight than the slots, within the slot bound), so the floor and the
schedule pass them. By design the padding is several times what the server answered, however loaded
the machine: the server serves the slots one after another, so the quickest record is about one
request's service time while the slot bound counts every slot as served alone (4 slots x 4 s over
that time, against the 3 s over it the server could answer).

The liar runs twice on one swarm, one after the other (the two runs never share the server):

- the campaign names the server's metrics (`endpoint.metrics_url`): the submitter reads
  `llamacpp:tokens_predicted_total` itself before the job and when the result arrives, and the row is
  Failed `invalid` naming the summed output tokens, the counter and its rise;
- the same campaign without it: the row is Complete, and claims more generated tokens than the server
  counted over the run (read here, from the test's own socket): the count rule is what refuses it.

And an honest fleet of two real workers on a counted server: each member is held with the one accepted
before it, both pass, and the merged row counts no more tokens than the server generated; the bundle
keeps what the submitter saw of the server with each member, and `verify` holds them to it again.
That fleet's submitter SIGKILLed as its members run and resumed: the resume reclaims both members and
holds each to the floor and the read before the job that the first run kept (`FloorBook.restore`).
"""

from __future__ import annotations

import csv
import json
import queue
import re
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kit.campaignlab import ROOT, CampaignLab, Swarm, submitter_id
from kit.extras import gemma3, module
from kit.procs import Proc

from node.report.bundles import verify_folder
from node.submitter.store import CampaignStore

pytestmark = pytest.mark.exclusive
"""The floor compares timings measured here at different moments (the submitter's probes of the server,
the members' records during the load): another lab's load at the probe refused an honest member
before the floor became the least of the job's probes (`scheduler.verification.serverfloor`), and a
load beside both probes and not beside the members' run would still turn it."""

LOADLIAR = ROOT / "tests" / "kit" / "loadliar.py"
DURATION_S, SLOTS, TOKENS = 3.0, 4, 4
COUNTER = "llamacpp:tokens_predicted_total"
PROMPT, PROMPT_CACHED = "llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total"
PROMPTS = ("Say OK.", "Say yes.", "Name a colour.", "Say hello.")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _llama_server() -> Iterator[str]:
    """llama.cpp's server with its metrics on, on a free loopback port: its root URL."""
    xllamacpp = module("xllamacpp")
    params = xllamacpp.CommonParams()
    params.model.path = str(gemma3())
    params.n_ctx, params.n_parallel, params.n_threads_http = 4096, 1, 2 * SLOTS  # one request at a time
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1  # two spin on a busy 2-core box
    params.endpoint_metrics = True
    params.hostnames, params.port = ["127.0.0.1"], _free_port()
    server = xllamacpp.Server(params)
    try:
        yield str(server.listening_address)
    finally:
        del server  # its destructor stops the server's loop


def _predicted(root: str) -> float:
    page = urllib.request.urlopen(f"{root}/metrics", timeout=5).read().decode()
    [value] = re.findall(rf"^{re.escape(COUNTER)} (\S+)$", page, re.MULTILINE)
    return float(value)


def _events(submitter: Proc, timeout: float) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    while "outcome" not in kinds:
        try:
            event = submitter.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no outcome within {timeout} s\n{submitter.log_excerpt()}") from None
        kinds.setdefault(str(event.get("event")), []).append(event)
    return kinds


Run = tuple[int, dict[str, list[dict[str, Any]]], list[dict[str, str]]]


def _campaign(swarm: Swarm, root: str, name: str, peers: list[str], *, metrics: bool) -> Path:
    endpoint = {"url": f"{root}/v1", "model": "gemma"}
    if metrics:
        endpoint["metrics_url"] = f"{root}/metrics"
    prompts = swarm.submitter_dir.parent / "short.jsonl"  # short answers: many requests in the run
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    load = {"prompts": prompts.name, "max_new_tokens": TOKENS, "ignore_eos": True, "concurrency": SLOTS}
    job: dict[str, Any] = {"endpoint": endpoint, "generate": load | {"duration_s": DURATION_S}}
    job["require"] = {"peers": peers}
    if len(peers) > 1:
        job["fleet"] = len(peers)
    path = swarm.submitter_dir.parent / f"{name}.json"
    path.write_text(json.dumps({"name": name, "jobs": [job]}))
    return path


def _ended(submitter: Proc) -> Run:
    events = _events(submitter, 120)
    code = submitter.popen.wait(timeout=60)
    with open(events["outcome"][0]["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    return code, events, rows


def _run(swarm: Swarm, root: str, name: str, peers: list[str], *, metrics: bool) -> Run:
    path = _campaign(swarm, root, name, peers, metrics=metrics)
    out = str(path.parent / name)
    waited = str(len(swarm.workers))
    return _ended(swarm.start_submit("submit", str(path), "--wait-peers", waited, "--out", out))


Roles = dict[str, list[str] | None]


def _swarm(lab: CampaignLab, tmp_path: Path, roles: Roles) -> tuple[Swarm, dict[str, str]]:
    """Real `join` workers by role (a program, or None for `sark-node` itself), ready, and their ids."""
    gate = lab.gate().ready["addrs"][0]
    submitter_dir = tmp_path / "submitter"
    me = submitter_id(submitter_dir)
    procs = {role: lab.real_worker(role, [gate], me, wait=False, program=p) for role, p in roles.items()}
    for proc in procs.values():
        proc.ready = proc.wait_event("ready", 90)
    peers = {role: p.ready["peer_id"] for role, p in procs.items()}
    return Swarm(lab, gate, {p.ready["peer_id"]: p for p in procs.values()}, submitter_dir, tmp_path), peers


def test_a_padded_closed_loop_is_refused_by_the_servers_count_and_passes_without_it(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        with _llama_server() as root:
            swarm, peers = _swarm(lab, tmp_path, {"pad": [sys.executable, str(LOADLIAR), "pad"]})
            liar = [peers["pad"]]
            code, events, [refused] = _run(swarm, root, "counted", liar, metrics=True)
            before = _predicted(root)
            passed_code, passed_events, [passed] = _run(swarm, root, "uncounted", liar, metrics=False)
            rise = _predicted(root) - before
    finally:
        lab.close()

    assert code == 1, json.dumps([refused, events.get("server_count"), events.get("server_floor")])
    assert (refused["Status"], refused["FailureReason"]) == ("Failed", "invalid"), refused["Detail"]
    found = re.search(
        r"generation\.records\[\]\.(output|prompt)_tokens \(summed\): (\d+), more than the server counted: "
        r"(llamacpp:\S+(?: \+ llamacpp:\S+)?) rose by (\d+) between this submitter's reads of "
        r"http://127\.0\.0\.1:\d+/metrics \(plus a slack of (\d+) for requests the server had not "
        r"counted yet\)",
        refused["Detail"],
    )
    assert found, refused["Detail"]
    field, counter = found[1], found[3]
    claimed, counted, slack = int(found[2]), int(found[4]), int(found[5])
    assert (counter, slack) == (
        (COUNTER, SLOTS * TOKENS) if field == "output" else (f"{PROMPT} + {PROMPT_CACHED}", 0)
    )
    assert claimed > counted + slack
    [after] = [e for e in events["server_count"] if e["read"] == "after"]
    assert after["rises"]["generation_tokens" if field == "output" else "prompt_tokens"] == counted
    assert events["server_floor"][0]["floor_ms"] is not None  # the floor held: only the count refused it

    assert passed_code == 0
    assert passed["Status"] == "Complete"  # without the count, the padded records stand
    assert "server_count" not in passed_events
    tokens = int(passed["Requests"]) * float(passed["OutputTokensMean"])
    assert tokens > rise + SLOTS * TOKENS, (tokens, rise)  # more than the server generated, probes included


def test_an_honest_fleet_on_a_counted_server_passes_each_member_held_with_the_other(tmp_path: Path) -> None:
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        with _llama_server() as root:
            swarm, peers = _swarm(lab, tmp_path, {"honest-a": None, "honest-b": None})
            before = _predicted(root)
            code, events, rows = _run(swarm, root, "fleet", list(peers.values()), metrics=True)
            rise = _predicted(root) - before
    finally:
        lab.close()
    assert code == 0, [r["Detail"] for r in rows]
    [merged] = [r for r in rows if r["ComputeUnits"] == "Endpoint (fleet)"]
    members = [r for r in rows if r["ComputeUnits"] != "Endpoint (fleet)"]
    assert [r["Status"] for r in members] == ["Complete", "Complete"]
    assert merged["Status"] == "Complete"
    assert len([e for e in events["server_count"] if e["read"] == "after"]) == 2  # read again for each
    assert int(merged["Requests"]) * TOKENS <= rise  # no more than the server generated
    # what the submitter saw of the server travels with each member's signed result, and a reader
    # holds the records to it offline: the second member with the first's claims counted before it
    folder = Path(events["outcome"][0]["files"]["csv"]).parent
    bundle = json.loads((folder / "bundle.json").read_text())
    witnessed = [row["server"] for row in bundle["body"]["rows"] if row.get("server")]
    assert len(witnessed) == 2, witnessed
    assert all(w["rises"]["generation_tokens"] > 0 and w["floor_ms"] for w in witnessed), witnessed
    assert sorted(w["before"]["generation_tokens"] for w in witnessed)[0] == 0
    assert sorted(w["before"]["generation_tokens"] for w in witnessed)[1] > 0
    proof = verify_folder(folder)
    assert proof.holds, proof.problems
    # the job's floor and its counters' read before it are kept for a resume (`FloorBook.restore`)
    [state] = CampaignStore(swarm.submitter_dir / "campaigns.sqlite").floorbooks(folder.name).values()
    kept = json.loads(state)
    assert kept["floor"][0] > 0, kept
    assert kept["before"]["generation_tokens"][1] == COUNTER, kept
    assert kept["accepted"][0] == int(merged["Requests"]), kept  # both members' successful requests


def _kept_book(swarm: Swarm, timeout: float) -> tuple[str, str]:
    """The campaign's id and its job's kept server state, once the running submitter stored them: read
    from its store, polled (the submitter says `server_floor` just before it writes, so no event of
    its follows the write)."""
    path = swarm.submitter_dir / "campaigns.sqlite"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            store = CampaignStore(path)
            for record in store.campaigns():
                if kept := store.floorbooks(record.campaign_id):
                    return record.campaign_id, kept[0]
        time.sleep(0.1)
    raise AssertionError(f"no server state kept within {timeout} s")


def test_a_killed_fleet_submitter_resumes_with_the_floor_and_count_its_job_kept(tmp_path: Path) -> None:
    """The honest fleet's submitter is SIGKILLed once it kept its job's probe and the members run;
    `submit --resume` probes the server no more: each member it reclaims is held to the floor and the
    read before the job that the first run kept, and the merged row still counts no more than the
    server generated since then."""
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        with _llama_server() as root:
            swarm, peers = _swarm(lab, tmp_path, {"honest-a": None, "honest-b": None})
            before = _predicted(root)
            path = _campaign(swarm, root, "fleet", list(peers.values()), metrics=True)
            out = str(path.parent / "fleet")
            first = swarm.start_submit("submit", str(path), "--wait-peers", "2", "--out", out)
            campaign_id, kept = _kept_book(swarm, 120)
            for worker in swarm.workers.values():
                worker.wait_event("run", 120)  # an endpoint task runs its load: no model, no "measuring"
            lab.kill(first)  # SIGKILL: the members' results are still on their workers
            code, events, rows = _ended(swarm.start_submit("submit", "--resume", campaign_id, "--out", out))
            rise = _predicted(root) - before
    finally:
        lab.close()
    assert code == 0, [r["Detail"] for r in rows]
    # not probed before the reclaimed loads (they may be running now): at most again, for a record
    # under the kept floor, at a result's arrival
    assert all(e["read"] == "again" for e in events.get("server_floor", [])), events["server_floor"]
    reads = [e["read"] for e in events.get("server_count", [])]
    assert reads == ["after", "after"]  # each member's, and no "before": the kept one is the job's
    [merged] = [r for r in rows if r["ComputeUnits"] == "Endpoint (fleet)"]
    members = [r for r in rows if r["ComputeUnits"] != "Endpoint (fleet)"]
    assert [r["Status"] for r in members] == ["Complete", "Complete"]
    assert merged["Status"] == "Complete"
    assert int(merged["Requests"]) * TOKENS <= rise  # the kept read is the job's start, not the resume's
    folder = Path(events["outcome"][0]["files"]["csv"]).parent
    bundle = json.loads((folder / "bundle.json").read_text())
    floor = json.loads(kept)["floor"][0]
    witnessed = [row["server"] for row in bundle["body"]["rows"] if row.get("server")]
    assert [w["floor_ms"] for w in witnessed] == [floor, floor], witnessed  # the first run's floor
    proof = verify_folder(folder)
    assert proof.holds, proof.problems
