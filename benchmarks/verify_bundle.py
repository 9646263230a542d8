"""`sark-node verify` of a 1,000-row campaign, and the bundle's bytes per row.

The rows are the golden bundle's real results (tests/golden/bundle/: a replicated campaign of the
repository's tiny ONNX model on two embedded workers), each signed again for a task of its own by
one of two lab worker keys, in groups of two replicas as the golden groups were settled, and the
whole sealed by the golden submitter's key: every row a real measurement with its raw parts, so the
verify below derives every figure again, checks 1,000 Ed25519 signatures and recomputes 500 groups.
It must hold (exit 1 otherwise). Side by side in one run: reading the same results.json as a report
(`CampaignReport.from_json`, what `report` and the board pay to read it) is the baseline; the ratio
is verify over it. Writes benchmarks/out/verify_bundle.json.

    .venv/bin/python benchmarks/verify_bundle.py [--rows 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOLDEN = ROOT / "tests" / "golden" / "bundle"
OUT = ROOT / "benchmarks" / "out" / "verify_bundle.json"
WORKER_SEEDS = (bytes([7]) * 32, bytes([9]) * 32)


def _signed(part: dict[str, Any], task_id: str, seed: bytes) -> tuple[dict[str, Any], str]:
    """A golden row's signed result, signed again for `task_id` by the worker of `seed`."""
    from protocol import DOMAIN_RESULT, ResultBody, open_envelope, seal
    from scheduler.results.bundle import SignedPart

    body = open_envelope(SignedPart.model_validate(part).envelope(), DOMAIN_RESULT, ResultBody, now=0.0)
    sealed = seal(body.with_(task_id=task_id, worker=_peer(seed)), DOMAIN_RESULT, seed)
    return SignedPart.of(sealed).model_dump(mode="json"), sealed.peer_id


def _peer(seed: bytes) -> str:
    from protocol import peer_id_from_public_key, public_key_of

    return peer_id_from_public_key(public_key_of(seed))


def build(folder: Path, rows: int) -> None:
    """A bundle of `rows` rows (results.json and bundle.json) in `folder`."""
    from node.submitter.outputs import Sealer, bundle_text
    from scheduler.results.bundle import BundleBody

    bundle = json.loads((GOLDEN / "bundle.json").read_text())
    results = json.loads((GOLDEN / "results.json").read_text())
    entries = {t["row"]["JobId"]: t for t in results["results"]}
    signed = {r["task_id"]: r for r in bundle["body"]["rows"]}
    shown = {g["group"]: g for g in results["verification"]}
    old_peers = [p["peer_id"] for p in bundle["body"]["peers"]]
    new_peers = {old: _peer(seed) for old, seed in zip(old_peers, WORKER_SEEDS, strict=True)}
    seeds = dict(zip(old_peers, WORKER_SEEDS, strict=True))
    body = bundle["body"]
    out_rows, out_entries, out_groups, out_shown = [], [], [], []
    counts = [0, 0]
    for g in range(rows // 2):
        group = bundle["body"]["groups"][g % len(bundle["body"]["groups"])]
        job = group["job_index"]
        ids = {}
        for old in group["tasks"]:
            ids[old] = f"{body['campaign_id']}-job-{job}-{counts[job]}"
            counts[job] += 1
        for old, new in ids.items():
            worker = signed[old]["result"]["peer_id"]
            part, _ = _signed(signed[old]["result"], new, seeds[worker])
            out_rows.append({"task_id": new, "job_index": job, "result": part})
            entry = copy.deepcopy(entries[old])
            entry["row"]["JobId"], entry["row"]["WorkerPeerId"] = new, new_peers[worker]
            entry["signed"]["worker"] = new_peers[worker]
            out_entries.append(entry)
        first = ids[group["tasks"][0]]
        agreed = sorted(new_peers[p] for p in group["agreed"])
        out_groups.append({**group, "group": first, "tasks": [ids[t] for t in group["tasks"]], "agreed": agreed})
        said = copy.deepcopy(shown[group["group"]])
        said["group"] = first
        for replica in said["replicas"]:
            replica["task_id"], replica["peer"] = ids[replica["task_id"]], new_peers[replica["peer"]]
        out_shown.append(said)
    peers = [{**p, "peer_id": new_peers[p["peer_id"]]} for p in body["peers"]]
    results = {**results, "results": out_entries, "verification": out_shown}
    results_text = json.dumps(results, indent=1)
    new_body = BundleBody.model_validate({**body, "rows": out_rows, "groups": out_groups, "peers": peers})
    (folder / "results.json").write_text(results_text)
    key = (GOLDEN / "submitter.key").read_bytes()
    (folder / "bundle.json").write_text(bundle_text(results_text, Sealer(new_body, key)))


def _best(rounds: int, run: Any) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000, help="rows of the bundle (even)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best counts")
    args = parser.parse_args()
    from node.report.bundles import verify_folder
    from scheduler.results import CampaignReport

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        build(folder, args.rows)
        proof = verify_folder(folder)
        if not proof.holds:
            sys.exit(f"the built bundle does not hold: {proof.problems[:3]}")
        verify_s = _best(args.rounds, lambda: verify_folder(folder))
        text = (folder / "results.json").read_bytes()
        read_s = _best(args.rounds, lambda: CampaignReport.from_json(text))
        sizes = {name: (folder / name).stat().st_size for name in ("bundle.json", "results.json")}
    figures = {
        "rows": proof.rows,
        "groups": proof.groups,
        "verify_s": round(verify_s, 3),
        "read_report_s": round(read_s, 3),
        "ratio": round(verify_s / read_s, 2),
        "bundle_bytes_per_row": sizes["bundle.json"] // proof.rows,
        "results_bytes_per_row": sizes["results.json"] // proof.rows,
    }
    print("| rows | groups | verify s | read results.json s | ratio | bundle B/row | results.json B/row |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(" | ".join(["", *(str(v) for v in figures.values()), ""]).strip())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
