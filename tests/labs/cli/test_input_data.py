"""Issue 14 item 1: a campaign gives input data (.npz by input name, .npy per input) as well as shapes.

One real `sark-node submit` on the embedded loopback swarm (a gate and one worker in the process,
real onnxruntime children) with a model built here by onnx.helper (z = x + y, x float32 [N, 4], y
float32 [1, 4]). Four jobs: a good .npz feeds x (y is synthesised), an .npz with x of the wrong type,
one with x of the wrong shape, and a pickled .npy whose unpickling would create a marker file. The
good one completes and results.csv / results.json show the file-filled input; the others fail with
reason `input` at stage `inspect`, their detail naming the file and the input; the pickle is refused
unread. A campaign naming a file that is not there is refused at validation with exit code 2.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pathlib
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from kit import zygote
from kit.procs import SARK
from onnx import TensorProto, helper, save

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
JOB = "  - compute_unit: CPU (ONNX)\n    num_inference_runs: 5\n    warmup_runs: 1\n    load_runs: 1\n"


def _model(path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "add", [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))


class Touch:
    """Unpickling this creates `marker`: proof that a pickle was (or was not) loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def _campaign(folder: Path, *inputs: str) -> Path:
    jobs = "".join(f"{JOB}    input_data: {i}\n" for i in inputs)
    path = folder / "inputs.yaml"
    path.write_text(f"name: inputs\nprocesses: 1\nmodel: {{path: add.onnx}}\njobs:\n{jobs}")
    return path


def _submit(folder: Path, campaign: Path) -> subprocess.CompletedProcess[str]:
    args = ["submit", str(campaign), "--workers", "1", "--wait-peers", "1", "--json"]
    args += ["--data-dir", str(folder / "data"), "--out", str(folder / "out")]
    return zygote.run([*SARK, *args], cwd=folder, capture_output=True, text=True, timeout=240, env=ENV)


def test_a_campaign_feeds_an_npz_and_refuses_wrong_and_pickled_files(tmp_path: Path) -> None:
    _model(tmp_path / "add.onnx")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.savez(tmp_path / "good.npz", x=x)
    np.savez(tmp_path / "wrong-type.npz", x=x.astype(np.int64))
    np.savez(tmp_path / "wrong-shape.npz", x=np.zeros((2, 5), np.float32))
    marker = tmp_path / "unpickled"
    np.save(tmp_path / "pickled.npy", np.array([Touch(marker)], dtype=object), allow_pickle=True)
    campaign = _campaign(tmp_path, "good.npz", "wrong-type.npz", "wrong-shape.npz", "{x: pickled.npy}")

    done = _submit(tmp_path, campaign)

    assert done.returncode == 1, done.stderr[-3000:]  # tasks failed: a runtime failure, not bad input
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    with open(outcome["files"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["Status"] for r in rows) == ["Complete", "Failed", "Failed", "Failed"]
    [good] = [r for r in rows if r["Status"] == "Complete"]
    assert good["InputShapes"] == "x:float32[2,4]@good.npz;y:float32[1,4]"
    files = ("wrong-type.npz", "wrong-shape.npz", "pickled.npy")
    failed = {name: r for r in rows if r["Status"] == "Failed" for name in files if name in r["Detail"]}
    assert sorted(failed) == sorted(files), [r["Detail"] for r in rows]
    for row in failed.values():
        assert (row["FailureReason"], row["FailureStage"]) == ("input", "inspect"), row
        assert row["Detail"].startswith("add.onnx: inspect failed: "), row["Detail"]
    type_detail = "input 'x' from 'wrong-type.npz': type int64, the model wants float32"
    assert type_detail in failed["wrong-type.npz"]["Detail"]
    shape_detail = "input 'x' from 'wrong-shape.npz': shape [2, 5], the model wants ['?', 4]"
    assert shape_detail in failed["wrong-shape.npz"]["Detail"]
    assert "'pickled.npy' cannot be read safely" in failed["pickled.npy"]["Detail"]
    assert "allow_pickle" in failed["pickled.npy"]["Detail"]
    assert not marker.exists()  # the pickle was never loaded, in the child or anywhere else

    document = json.loads(Path(outcome["files"]["json"]).read_text())
    assert document["swarm"] == ["embedded"]  # no gate: the report says the figures are this machine's
    assert "swarm: the embedded local swarm" in Path(outcome["files"]["html"]).read_text()
    [good_row] = [r["row"] for r in document["results"] if r["row"]["Status"] == "Complete"]
    assert good_row["InputShapes"] == good["InputShapes"]
    pinned = document["campaign"]["jobs"][0]["spec"]["input_data"][0]
    assert (pinned["file"], pinned["input"]) == ("good.npz", None)
    assert pinned["sha256"] == hashlib.sha256((tmp_path / "good.npz").read_bytes()).hexdigest()


def test_a_missing_input_file_is_bad_input_exit_2(tmp_path: Path) -> None:
    _model(tmp_path / "add.onnx")
    done = _submit(tmp_path, _campaign(tmp_path, "{x: nowhere.npy}"))
    assert done.returncode == 2, done.stderr[-3000:]
    assert "jobs[0].input_data.x" in done.stderr
    assert "cannot read input data file 'nowhere.npy'" in done.stderr
