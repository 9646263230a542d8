"""A job's `input_data:`: input arrays the campaign gives in files, pinned into the task spec.

Two shapes, paths relative to the campaign file:

    input_data: inputs.npz                   # one .npz whose arrays are named after the model's inputs
    input_data: {x: x.npy, mask: mask.npy}   # one .npy per input

node/ reads the files (`campaign_files` names them) and hands their bytes in by name; here they are
checked for kind (the .npy/.npz magic) and size (`MAX_INPUT_DATA` in all: they travel in the signed
offer), digested, and pinned into the spec. The arrays are parsed only in the measuring child
(`drivers/files/inputs.py`), never in a node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final

from protocol import MAX_INPUT_DATA, InputData
from scheduler.language.problems import Problems, describe, unread

NPY_MAGIC: Final = b"\x93NUMPY"
NPZ_MAGIC: Final = b"PK\x03\x04"  # an .npz is a zip archive of .npy members


def input_data_files(job: object) -> list[str]:
    """The file names a raw job's `input_data:` names (its sweep values too), for node/ to read."""
    if not isinstance(job, dict):
        return []
    sweep = job.get("sweep")
    swept = sweep.get("input_data") if isinstance(sweep, dict) else None
    values = [job.get("input_data"), *(swept if isinstance(swept, list) else [])]
    names: list[str] = []
    for value in values:
        names += [value] if isinstance(value, str) else []
        names += [v for v in value.values() if isinstance(v, str)] if isinstance(value, dict) else []
    return names


def parse_input_data(
    raw: object, where: str, files: Mapping[str, bytes], problems: Problems
) -> tuple[InputData, ...] | None:
    """The job's input data files, or None with each problem at its path (``jobs[0].input_data.x``)."""
    if isinstance(raw, str):
        entries: list[tuple[str | None, object, str]] = [(None, raw, where)]
    elif isinstance(raw, dict) and raw and all(isinstance(k, str) for k in raw):
        entries = [(name, file, f"{where}.{name}") for name, file in raw.items()]
    else:
        problems.add(
            where, f"expected an .npz file, or a mapping of input name: .npy file, got {describe(raw)}"
        )
        return None
    before = len(problems.items)
    pinned = [_one(input_name, file, at, files, problems) for input_name, file, at in entries]
    total = sum(len(p.data) for p in pinned if p is not None)
    if len(problems.items) == before and total > MAX_INPUT_DATA:
        problems.add(
            where, f"input data is {total} bytes, at most {MAX_INPUT_DATA} (it travels in the offer)"
        )
    if len(problems.items) > before:
        return None
    return tuple(p for p in pinned if p is not None)


def _one(
    input_name: str | None, file: object, at: str, files: Mapping[str, bytes], problems: Problems
) -> InputData | None:
    suffix, magic = (".npz", NPZ_MAGIC) if input_name is None else (".npy", NPY_MAGIC)
    if not isinstance(file, str) or not file.endswith(suffix):
        problems.add(at, f"expected a {suffix} file name, got {describe(file)}")
        return None
    data = files.get(file)
    if data is None:
        problems.add(
            at, unread(files, file, f"cannot read input data file {file!r} (relative to the campaign file)")
        )
        return None
    if len(data) > MAX_INPUT_DATA:
        problems.add(at, f"{file!r} is {len(data)} bytes, at most {MAX_INPUT_DATA} (it travels in the offer)")
        return None
    if not data.startswith(magic):
        problems.add(at, f"{file!r} is not an {suffix} file (its first bytes are not the {suffix} magic)")
        return None
    return InputData(file=file, input=input_name, sha256=hashlib.sha256(data).hexdigest(), data=data)


__all__ = ["input_data_files", "parse_input_data"]
