"""Issue 52: a replicated campaign's results folder checked offline by someone else.

The campaign (tests/kit/bundlelab.py: the embedded swarm's two workers, `verify: {replicas: 2,
same_host: allow}`, two replicated ONNX jobs, a capacity search and a fleet of both workers against
loopback stubs) runs once for the module. `sark-node verify` then runs as a child under another
HOME with no gate, no network setting and no data folder of the campaign's, in a network namespace of
its own where this machine allows one (root: `unshare -n`): exit 0. Copies of the
folder are tampered with, each as a stranger (no key: the seal breaks) or as the submitter (its key,
sealed again): each exits 1 with a red line naming the file, the row and the field. A folder that
holds no bundle exits 2 naming the file and the stage. An open-loop endpoint job's bundle keeps the
seed its offer gave: verify checks the records the worker signed against it, and a seed changed or
dropped by the submitter is refused on that row. The fast tier tampers with a committed bundle
of this campaign in 46 more ways, 18 of them on the fleet's merged row and the search's levels
(tests/unit/scheduler/results/test_proof.py).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.bundlelab import KEY_FILE, dump, keep_key, load, reseal, run_campaign
from kit.procs import SARK, user_env
from kit.sse_server import scheduled, serve_sse

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_campaign(tmp_path_factory.mktemp("campaign"), calibrate=False)  # no challenge: quicker


OFFLINE = ["unshare", "-n"] if os.geteuid() == 0 and shutil.which("unshare") else []
"""A network namespace of its own (no interface up, not even loopback) where this machine allows it."""


def _verify(folder: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in user_env(home).items() if not k.endswith(("_proxy", "_PROXY"))}
    argv = [*OFFLINE, *SARK, "verify", str(folder)]
    return zygote.run(argv, cwd=home.parent, env=env, capture_output=True, text=True, timeout=60)


def test_the_bundle_is_verified_under_another_home(folder: Path, tmp_path: Path) -> None:
    copy = tmp_path / "received"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(KEY_FILE))
    done = _verify(copy, tmp_path / "stranger")
    assert done.returncode == 0, done.stdout + done.stderr
    said = r"7 signed result\(s\) derived again, [1-9]\d* merged or level row\(s\) from them; 2 verification"
    assert re.search(said, done.stdout), done.stdout
    assert "verified: every signature, figure and group holds" in done.stdout
    assert not (tmp_path / "stranger" / ".local" / "share" / "sark-node").exists()  # no node state made
    if OFFLINE:  # and no network at all: the same check in a namespace without one
        probe = [
            *OFFLINE,
            sys.executable,
            "-c",
            "import socket; socket.create_connection(('1.1.1.1', 53), 1)",
        ]
        assert zygote.run(probe, capture_output=True, timeout=30).returncode != 0


def _row_figure(bundle: Doc, results: Doc) -> None:
    results["results"][1]["row"]["InferenceMsMedian"] = "0.500"


def _sample(bundle: Doc, results: Doc) -> None:
    results["results"][0]["samples_ms"][0] *= 0.5


def _signature(bundle: Doc, results: Doc) -> None:
    part = bundle["body"]["rows"][2]["result"]
    raw = bytearray(base64.b64decode(part["signature"]))
    raw[0] ^= 1
    part["signature"] = base64.b64encode(bytes(raw)).decode()


def _band(bundle: Doc, results: Doc) -> None:
    bundle["body"]["groups"][1]["band"] = 0.5
    results["verification"][1]["band"] = 0.5


def _dropped(bundle: Doc, results: Doc) -> None:
    del bundle["body"]["rows"][3]


def _merged(bundle: Doc, results: Doc) -> None:
    """The fleet's merged row (last) made quicker: no signed result of its own, derived again."""
    results["results"][-1]["row"]["InferenceMsP99"] = "1.000"


def _level(bundle: Doc, results: Doc) -> None:
    """A capacity level's verdict turned: derived again from the search its worker signed."""
    row = next(t["row"] for t in results["results"] if t["row"]["LevelPassed"] == "False")
    row["LevelPassed"] = "True"


# (tamper, sealed again with the submitter's key, what the refusal names)
TAMPERINGS: list[tuple[Callable[[Doc, Doc], None], bool, str]] = [
    (_row_figure, False, "results[1] (task {1}) row.InferenceMsMedian"),
    (_sample, True, "results[0] (task {0}) samples_ms"),
    (_signature, True, "rows[2] (task {2}) result: the worker's signature does not hold"),
    (_band, True, "groups[1]"),
    (_dropped, True, "results[3] (task {3}): no signed result in the bundle"),
    (_merged, True, "-fleet) row.InferenceMsP99"),
    (_level, True, "row.LevelPassed"),
]


@pytest.mark.parametrize(("tamper", "resealed", "named"), TAMPERINGS, ids=[t[0].__name__ for t in TAMPERINGS])
def test_a_tampered_copy_exits_1_naming_the_place(
    folder: Path, tmp_path: Path, tamper: Callable[[Doc, Doc], None], resealed: bool, named: str
) -> None:
    copy = tmp_path / "received"
    shutil.copytree(folder, copy)
    bundle, results = load(copy)
    tasks = [t["row"]["JobId"] for t in results["results"]]
    tamper(bundle, results)
    dump(copy, bundle, results)
    if resealed:
        reseal(copy, (copy / KEY_FILE).read_bytes())
    done = _verify(copy, tmp_path / "stranger")
    assert done.returncode == 1, done.stdout + done.stderr
    assert named.format(*tasks) in done.stderr, done.stderr


def test_a_folder_without_a_bundle_exits_2_naming_the_file(folder: Path, tmp_path: Path) -> None:
    copy = tmp_path / "received"
    shutil.copytree(folder, copy)
    (copy / "bundle.json").unlink()
    done = _verify(copy, tmp_path / "stranger")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not a bundle: bundle.json: reading the file" in done.stderr
    (copy / "bundle.json").write_text(json.dumps({"format": "sark-bundle/1", "body": {}, "seal": {}}))
    done = _verify(copy, tmp_path / "stranger")
    assert done.returncode == 2, done.stderr
    assert "bundle.json: reading the bundle" in done.stderr, done.stderr


def _open_loop(root: Path) -> Path:
    """An open-loop endpoint job (20 req/s for 1 s on one embedded worker) against a loopback stub:
    its offer carried the seed of its planned sends; the folder, with the submitter's key."""
    reply = scheduled(["ok"], usage=(3, 1))
    generate = {"prompts": "builtin:summaries", "max_new_tokens": 1, "request_rate": 20.0, "duration_s": 1.0}
    with serve_sse(lambda body, attempt: reply) as server:
        job = {"endpoint": {"url": server.url, "model": "scripted"}, "generate": generate}
        (root / "open.yaml").write_text(json.dumps({"name": "open-loop", "jobs": [job]}))
        args = [*SARK, "submit", "open.yaml", "--json", "--workers", "1", "--wait-peers", "1", "--out", "out"]
        args += ["--data-dir", "data", "--allow-http", "--allow-network", "127.0.0.0/8"]
        env = {**os.environ, "SARK_CALIBRATE": "false"}
        done = zygote.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert done.returncode == 0, (done.stderr[-3000:], done.stdout[-3000:])
    (folder,) = {p.parent for p in (root / "out").glob("*/bundle.json")}
    keep_key(folder, root / "data")
    return folder


def test_an_open_loops_records_are_checked_against_the_seed_it_was_offered(tmp_path: Path) -> None:
    folder = _open_loop(tmp_path)
    done = _verify(folder, tmp_path / "stranger")
    assert done.returncode == 0, done.stdout + done.stderr
    bundle, _ = load(folder)
    (row,) = bundle["body"]["rows"]
    assert row["schedule"]["arrival_seed"] is not None
    assert row["offered"] is None  # the schedule alone: the job's spec is the campaign's
    for schedule, said in (
        ({**row["schedule"], "arrival_seed": 12345}, "invalid"),
        (None, "this open loop's seed"),
    ):
        copy = tmp_path / f"copy-{said[:4]}"
        shutil.copytree(folder, copy)
        changed, _ = load(copy)
        changed["body"]["rows"][0]["schedule"] = schedule
        dump(copy, changed)
        reseal(copy, (copy / KEY_FILE).read_bytes())
        done = _verify(copy, tmp_path / "stranger")
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"rows[0] (task {row['task_id']}) result.measurement:" in done.stderr, done.stderr
        assert said in done.stderr, done.stderr
