"""Issue 38, scope 3: one owner's devices are one vote, and a copied owner statement is refused.

Real processes on 127.0.0.1 (the campaign says `same_host: allow`, the lab switch, which relaxes the
network rule and never the owner rule): a gate, three honest `join` workers, two of them started with
one owner key (`join --owner-key`, minted by `sark-node owner new`), and a fourth worker
(tests/kit/ownerforger.py: the real `join`, patched in memory) whose advert carries the first owned
device's statement copied byte for byte (Ed25519 signatures are deterministic, so the statement
signed here for that device's peer id is the one it advertises). `peers` names each owner and says why
the copy is refused; `plan` rejects the forger with `owner_refused` and counts the class's owners;
`submit` pairs devices of different owners only, its rows name the owners, and every renderer takes
the rows: results.csv/json, the terminal and report.html as `submit` wrote them, Markdown and the
`report --diff` rows and table rendered here (the functions `report` calls; its two commands
cost 20-50 s of start-up on this loaded machine).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

from kit import zygote
from kit.campaignlab import MODEL, PACE_MS, ROOT, CampaignLab, Swarm, submitter_id, write_campaign
from kit.procs import SARK
from rich.console import Console

from node.ownerkey import owner_id_of, read_owner_key
from node.report.tables import diff_table, render_markdown
from protocol import short_owner, sign_owner
from scheduler.results import CampaignReport, diff_entries, entries_of

FORGER = ROOT / "tests" / "kit" / "ownerforger.py"
GOLDEN = ROOT / "tests" / "golden" / "tensor" / "results.json"


def _start(root: Path) -> tuple[Swarm, dict[str, str], str]:
    """The lab: workers a and b of one owner, c its own, and the forger with a's statement."""
    lab = CampaignLab(root, record_ttl=30.0, pace_ms=PACE_MS)
    key = root / "owner.key"
    minted = zygote.run([*SARK, "owner", "new", str(key)], capture_output=True, text=True, timeout=60)
    assert minted.returncode == 0, minted.stderr
    owner = minted.stdout.strip()
    assert owner == owner_id_of(key)  # what `sark-node owner id` prints
    a_id = submitter_id(root / "a")  # a's identity, made before it starts: the forger copies its statement
    copied = sign_owner(read_owner_key(key), a_id)
    forger = [sys.executable, str(FORGER), copied.public_key.hex(), copied.signature.hex()]
    submitter_dir = root / "submitter"
    me = submitter_id(submitter_dir)
    gate = lab.gate().ready["addrs"][0]
    owned = ["--owner-key", str(key)]
    started = {
        "a": lab.real_worker("a", [gate], me, wait=False, extra=owned),
        "b": lab.real_worker("b", [gate], me, wait=False, extra=owned),
        "c": lab.real_worker("c", [gate], me, wait=False),
        "forger": lab.real_worker("forger", [gate], me, wait=False, program=forger),
    }
    ids = {n: p.wait_event("ready", 120)["peer_id"] for n, p in started.items()}
    assert ids["a"] == a_id
    return Swarm(lab, gate, {ids[n]: p for n, p in started.items()}, submitter_dir, root), ids, owner


def test_one_owners_devices_are_one_vote_and_a_copied_statement_is_refused(tmp_path: Path) -> None:
    swarm, ids, owner = _start(tmp_path)
    try:
        _check(swarm, ids, owner)
    finally:
        swarm.lab.close()


def _check(swarm: Swarm, ids: dict[str, str], owner: str) -> None:
    listed = swarm.run("peers", "--json", "--timeout", "3")
    assert listed.returncode == 0, listed.stderr[-3000:]
    peers = {p["peer_id"]: p for p in json.loads(listed.stdout)["peers"]}
    assert {n: peers[ids[n]]["owner"] for n in ids} == {"a": owner, "b": owner, "c": "", "forger": ""}
    refused = peers[ids["forger"]]["owner_refused"]
    assert refused.startswith("owner statement refused")
    assert owner in refused  # names whose statement it copied

    path = write_campaign(swarm.root / "c.yaml", {
        "name": "owners",
        "model": {"path": MODEL.name},
        "verify": {"replicas": 2, "same_host": "allow"},
        "max_inflight": 1,  # one measurement at a time: the workers share this machine's cores
        "jobs": [{"compute_unit": "CPU (ONNX)", "devices": "all", "num_inference_runs": 30,
                  "warmup_runs": 2, "load_runs": 1, "processes": 3, "threads": 1}],
    })  # fmt: skip
    planned = swarm.run("plan", str(path), "--json", "--wait-peers", "4")
    assert planned.returncode == 0, planned.stderr[-3000:]
    (job,) = json.loads(planned.stdout)["jobs"]
    (rejected,) = job["rejected"]
    assert rejected["peer_id"] == ids["forger"]
    assert rejected["codes"] == ["owner_refused"]
    assert job["owners"] == {ids["a"]: owner, ids["b"]: owner}
    (voters,) = job["class_owners"].values()
    assert voters == sorted([short_owner(owner), f"…{ids['c'][-8:]}"])  # three devices, two votes
    assert len(job["chosen"]) == 2  # one quorum: the owner's second device pairs with nobody left
    assert ids["c"] in job["chosen"]

    out = swarm.root / "out"
    done = swarm.run("submit", str(path), "--wait-peers", "4", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "owner_refused" in done.stderr  # the submitter's warning names the forger's refusal
    assert done.stdout.strip().splitlines()[-1].startswith("verification: 2 verified")
    (folder,) = out.iterdir()
    with open(folder / "results.csv", newline="") as f:
        rows = {r["WorkerPeerId"]: r for r in csv.DictReader(f)}
    assert ids["forger"] not in rows
    assert len(rows) == 2
    assert ids["c"] in rows
    named = ";".join(sorted([short_owner(owner), f"…{ids['c'][-8:]}"]))
    for row in rows.values():
        assert row["Verified"] == "replicated 2/2 (same host)", row["Verified"]
        assert row["QuorumOwners"] == named
        assert row["QuorumNetworks"] == "loopback"
    document = CampaignReport.from_json((folder / "results.json").read_text())
    assert [t.row["QuorumOwners"] for t in document.results] == [named, named]
    page = (folder / "report.html").read_text()
    assert "quorum owners" in page
    assert short_owner(owner) in page

    markdown = render_markdown(document)  # what `report --format md` prints, rendered here
    assert "replicated" in markdown
    assert f"loopback, {short_owner(owner)}" in markdown.split("## Verification")[1]  # its replicas' line
    golden = CampaignReport.from_json(GOLDEN.read_text())
    for pair in ((golden, document), (document, golden)):  # `report --diff`'s rows and table
        rows_diffed = diff_entries(entries_of(pair[0]), entries_of(pair[1]))
        assert rows_diffed
        terminal = Console(file=io.StringIO(), width=100)
        terminal.print(diff_table(rows_diffed, "A -> B"))
        assert terminal.file.getvalue()  # type: ignore[attr-defined]
