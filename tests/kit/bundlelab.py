"""A replicated fleet campaign's results folder (results.json, bundle.json), and tamperings of it.

`run_campaign` runs the cheapest replicated campaign there is: the embedded swarm's two workers
(`submit --workers 2`), `verify: {replicas: 2, same_host: allow}` (the lab switch: one machine),
two jobs of the repository's tiny ONNX model, then two jobs against loopback stub servers
(`kit.sse_server`), each a single result: a capacity search over concurrency 1..4 against a server
whose first token comes 250 ms later past 2 requests in flight (`kit.knee`: levels 1, 2, 4, 3, about
3 s), and a fleet of the two workers at 10 req/s for 1 s (one merged row from both members' signed
records). Two tasks measure at a time (a fleet's members start together). Its folder is the
bundle the labs verify (tests/labs/e2e/test_bundle_verify.py) and, copied with the submitter's key,
the golden bundle the fast tier tampers with (tests/golden/bundle/, made by `python -m kit.bundlelab
DIR`; tests/unit/scheduler/results/test_proof.py).

`reseal` is the cheater who holds the submitter's key: it changes the body and seals it again, so
that the checks that do not rest on the seal are what refuse it.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from kit import zygote
from kit.knee import KneeStub
from kit.procs import SARK, user_env
from kit.sse_server import scheduled, serve_sse
from node.p2p.identity import peer_id_of_seed

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "bundle"
MODEL = ROOT / "examples" / "models" / "tiny-convnet.onnx"
CAMPAIGN = """\
name: bundle-lab
max_inflight: 2         # a fleet's two members start together; replicas may then measure side by side
verify:
  replicas: 2
  same_host: allow
  unverified: allow     # a loaded lab machine can fail its own speed challenge: placed, and the claim shown
model:
  path: models/tiny-convnet.onnx
jobs:
  - compute_unit: CPU (ONNX)
    num_inference_runs: 12
    warmup_runs: 2
    threads: 1
    processes: 1  # the two replicas measure side by side: one child each, started together (a second
  - compute_unit: CPU (ONNX)  # process would start while the other replica measures, and read it)
    num_inference_runs: 8
    warmup_runs: 2
    threads: 1
    processes: 1
  - endpoint: {{url: "{knee}", model: knee}}
    devices: any
    generate:
      prompts: builtin:summaries
      max_new_tokens: 4
      capacity:
        {{slo: {{ttft_ms: 250}}, goodput_pct: 90, max_concurrency: 4, level_s: 0.6, level_requests: 12}}
    verify: {{replicas: 1, unverified: allow}}
  - endpoint: {{url: "{stub}", model: scripted}}
    generate: {{prompts: builtin:summaries, max_new_tokens: 2, request_rate: 10, duration_s: 1.0}}
    fleet: {{workers: 2, seed: 52}}
    verify: {{replicas: 1, unverified: allow}}
"""
LOOPBACK = ("--allow-http", "--allow-network", "127.0.0.0/8")
"""The stub servers are plain http on loopback: `submit` refuses both unless told."""
KEY_FILE = "submitter.key"
"""The submitter's identity seed, kept beside the golden bundle (a lab key: it signs nothing else)."""


def run_campaign(root: Path, *, calibrate: bool = True, timeout_s: float = 300.0) -> Path:
    """Run the campaign in `root` (a fresh HOME under it) and return its results folder; the
    submitter's key is copied into it as `KEY_FILE`. Without `calibrate` the workers claim no speed,
    so no challenge is run (a quicker lab; the golden bundle keeps the challenges' evidence)."""
    (root / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(MODEL, root / "models" / MODEL.name)
    home = root / "home"
    knee, fleet = KneeStub(knee=2, fast_s=0.03), scheduled(["ok", "!"], first_s=0.02, usage=(3, 2))
    with serve_sse(knee) as knee_server, serve_sse(lambda body, attempt: fleet) as stub:
        (root / "campaign.yaml").write_text(CAMPAIGN.format(knee=knee_server.url, stub=stub.url))
        done = zygote.run(
            [*SARK, "submit", "campaign.yaml", "--workers", "2", "--out", "out", *LOOPBACK],
            cwd=root,
            env=user_env(home) | ({} if calibrate else {"SARK_CALIBRATE": "false"}),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    found = list((root / "out").glob("*/bundle.json"))
    assert found, f"no bundle (exit {done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}"
    folder = found[0].parent
    keep_key(folder, home)
    return folder


def keep_key(folder: Path, where: Path) -> None:
    """Copy the submitter's identity seed (found under `where`) into the results folder as `KEY_FILE`."""
    submitter = json.loads((folder / "bundle.json").read_text())["body"]["submitter"]
    (key,) = (k for k in where.rglob("identity.key") if peer_id_of_seed(k.read_bytes()) == submitter)
    shutil.copy(key, folder / KEY_FILE)


def load(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """bundle.json and results.json of a folder, as JSON."""
    return json.loads((folder / "bundle.json").read_text()), json.loads((folder / "results.json").read_text())


def dump(folder: Path, bundle: dict[str, Any] | None = None, results: dict[str, Any] | None = None) -> None:
    """Write a changed bundle.json or results.json back (results.json as `submit` writes it)."""
    if bundle is not None:
        (folder / "bundle.json").write_text(json.dumps(bundle, separators=(",", ":")) + "\n")
    if results is not None:
        (folder / "results.json").write_text(json.dumps(results, indent=1))


def reseal(folder: Path, key: bytes) -> None:
    """Seal the folder's body and results.json again with `key`, as a cheating submitter would."""
    from node.submitter.outputs import Sealer, bundle_text
    from scheduler.results.bundle import BundleBody

    bundle, _ = load(folder)
    body = BundleBody.model_validate(bundle["body"])
    text = bundle_text((folder / "results.json").read_text(), Sealer(body, key))
    (folder / "bundle.json").write_text(text)


WORKER_SEEDS = (bytes([7]) * 32, bytes([9]) * 32)


def _signed(part: dict[str, Any], task_id: str, seed: bytes, campaign_id: str) -> tuple[dict[str, Any], str]:
    """A golden row's signed result, signed again for `task_id` of `campaign_id` by the worker of `seed`."""
    from protocol import DOMAIN_RESULT, ResultBody, open_envelope, seal
    from scheduler.results.bundle import SignedPart

    body = open_envelope(SignedPart.model_validate(part).envelope(), DOMAIN_RESULT, ResultBody, now=0.0)
    sealed = seal(
        body.with_(task_id=task_id, campaign_id=campaign_id, worker=_peer(seed)), DOMAIN_RESULT, seed
    )
    return SignedPart.of(sealed).model_dump(mode="json"), sealed.peer_id


def _peer(seed: bytes) -> str:
    from protocol import peer_id_from_public_key, public_key_of

    return peer_id_from_public_key(public_key_of(seed))


def grown(folder: Path, rows: int, campaign_id: str | None = None) -> None:
    """A bundle of `rows` rows (results.json and bundle.json) in `folder`, made of the golden one's
    results signed again by lab worker keys for tasks of their own (of `campaign_id`, if given), in
    groups of two as the golden groups were settled, sealed by the golden submitter's key."""
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
    if campaign_id is not None:
        body["campaign_id"] = results["campaign_id"] = campaign_id
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
            part, _ = _signed(signed[old]["result"], new, seeds[worker], body["campaign_id"])
            out_rows.append({"task_id": new, "job_index": job, "result": part})
            entry = copy.deepcopy(entries[old])
            entry["row"]["JobId"], entry["row"]["WorkerPeerId"] = new, new_peers[worker]
            entry["signed"]["worker"] = new_peers[worker]
            out_entries.append(entry)
        first = ids[group["tasks"][0]]
        agreed = sorted(new_peers[p] for p in group["agreed"])
        out_groups.append(
            {**group, "group": first, "tasks": [ids[t] for t in group["tasks"]], "agreed": agreed}
        )
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


def main() -> None:
    """`python -m kit.bundlelab DIR`: run the campaign and keep its results.json, bundle.json and
    the submitter's key in DIR (tests/golden/bundle/)."""
    import tempfile

    out = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as scratch:
        folder = run_campaign(Path(scratch))
        out.mkdir(parents=True, exist_ok=True)
        for name in ("results.json", "bundle.json", KEY_FILE):
            shutil.copy(folder / name, out / name)
    print(out)


if __name__ == "__main__":
    main()
