"""A job's `input_data:` in the campaign parser: files named, pinned with their digest, problems at paths."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest

from protocol import MAX_INPUT_DATA
from scheduler import CampaignError, parse_campaign
from scheduler.language import campaign_files

HEAD = "model: {path: m.onnx}\njobs:\n  - compute_unit: CPU (ONNX)\n"


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _npz(**arrays: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def _problems(text: str, files: dict[str, bytes]) -> list[tuple[str, str]]:
    with pytest.raises(CampaignError) as caught:
        parse_campaign(text, files=files)
    return [(p.path, p.problem) for p in caught.value.problems]


def test_an_npz_and_npy_files_are_named_read_and_pinned_with_their_digest() -> None:
    text = (
        HEAD + "    input_data: in.npz\n  - compute_unit: CPU (ONNX)\n    input_data: {x: x.npy, y: y.npy}\n"
    )
    files = {
        "in.npz": _npz(x=np.zeros((1, 4), np.float32)),
        "x.npy": _npy(np.ones(3)),
        "y.npy": _npy(np.ones(2)),
    }
    assert campaign_files(text) == ["in.npz", "x.npy", "y.npy"]
    first, second = (job.spec.input_data for job in parse_campaign(text, files=files).jobs)
    [npz] = first
    assert (npz.file, npz.input, npz.data) == ("in.npz", None, files["in.npz"])
    assert npz.sha256 == hashlib.sha256(files["in.npz"]).hexdigest()
    assert [(d.file, d.input) for d in second] == [("x.npy", "x"), ("y.npy", "y")]


def test_swept_input_files_are_named_too() -> None:
    text = HEAD + "    sweep: {input_data: [a.npz, b.npz]}\n"
    assert campaign_files(text) == ["a.npz", "b.npz"]
    files = {n: _npz(x=np.zeros(2)) for n in ("a.npz", "b.npz")}
    assert [j.spec.input_data[0].file for j in parse_campaign(text, files=files).jobs] == ["a.npz", "b.npz"]


@pytest.mark.parametrize(
    ("field", "files", "path", "words"),
    [
        ("missing.npz", {}, "jobs[0].input_data", "cannot read input data file 'missing.npz'"),
        ("{x: gone.npy}", {}, "jobs[0].input_data.x", "cannot read input data file 'gone.npy'"),
        ("in.csv", {"in.csv": b"1,2"}, "jobs[0].input_data", "expected a .npz file name"),
        ("{x: x.npz}", {}, "jobs[0].input_data.x", "expected a .npy file name"),
        ("fake.npz", {"fake.npz": b"not a zip"}, "jobs[0].input_data", "is not an .npz file"),
        ("[a.npz]", {}, "jobs[0].input_data", "expected an .npz file, or a mapping"),
        ("big.npz", {"big.npz": b"PK\x03\x04" + bytes(MAX_INPUT_DATA)}, "jobs[0].input_data", "at most"),
    ],
)
def test_bad_input_data_is_a_problem_at_its_path(
    field: str, files: dict[str, bytes], path: str, words: str
) -> None:
    problems = _problems(HEAD + f"    input_data: {field}\n", files)
    assert [p for p, _ in problems] == [path]
    assert words in problems[0][1]
