"""Issue 23: a result at the wire's sample limit (`MAX_SAMPLES`, 262,144 timed runs) completes end to end.

A real gate, a real worker and `sark-node submit` on loopback; the model is a one-node ONNX graph
(Identity on one float, about 0.04 ms an inference here) so that 4 processes x 65,536 runs take
seconds, not the tens of minutes the example convnet would. The signed result (about 2.3 MiB of
samples) is sealed by the worker, travels in one frame, is verified by the submitter, and every
sample reaches results.json, with nothing declared cut.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from kit.campaignlab import Swarm, start_swarm
from onnx import helper

from protocol import MAX_SAMPLES


def _identity_model(path: Path) -> Path:
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [value("x", onnx.TensorProto.FLOAT, [1])],
        [value("y", onnx.TensorProto.FLOAT, [1])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.fixture
def swarm1(tmp_path: Path) -> Iterator[Swarm]:
    swarm = start_swarm(tmp_path, 1)
    try:
        yield swarm
    finally:
        swarm.lab.close()


def test_a_result_at_the_sample_limit_completes_end_to_end(swarm1: Swarm, tmp_path: Path) -> None:
    model = _identity_model(tmp_path / "identity.onnx")
    processes = 4
    job = {
        "compute_unit": "CPU (ONNX)",
        "num_inference_runs": MAX_SAMPLES // processes,
        "processes": processes,
        "warmup_runs": 1,
        "load_runs": 1,
    }
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(json.dumps({"name": "big-result", "model": {"path": model.name}, "jobs": [job]}))
    out = tmp_path / "out"
    done = swarm1.run("submit", str(campaign), "--json", "--wait-peers", "1", "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert [t["state"] for t in outcome["tasks"]] == ["done"]

    with open(outcome["files"]["csv"], newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["Status"] == "Complete", row
    assert row["Trimmed"] == ""  # nothing was cut to fit
    results = json.loads(Path(outcome["files"]["json"]).read_text())
    print(f"\nresults.json: {Path(outcome['files']['json']).stat().st_size} bytes")
    samples = [len(v) for v in _find(results, "samples_ms")]
    assert samples == [MAX_SAMPLES], samples


def _find(tree: object, key: str) -> list[list[float]]:
    """Every list stored under `key` anywhere in a JSON tree."""
    if isinstance(tree, dict):
        found = [tree[key]] if isinstance(tree.get(key), list) else []
        return found + [x for v in tree.values() for x in _find(v, key)]
    if isinstance(tree, list):
        return [x for v in tree for x in _find(v, key)]
    return []
