"""A results folder's bundle read from disk with limits, and checked (`scheduler.results.proof`).

Both files are untrusted: each is read at most `MAX_FILE_BYTES` (a bigger one is no bundle), and a
file that cannot be read or parsed is a `BundleError` naming the file, the stage and the cause; the
judgement itself is pure and total over what parsed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from scheduler.results.bundle import BUNDLE_FILE
from scheduler.results.proof import RESULTS_FILE, BundleError, Proof, check

MAX_FILE_BYTES: Final = 512 << 20
"""The largest results.json or bundle.json read (about 100,000 rows of a tensor campaign)."""


def read_capped(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """A file's bytes, at most `limit`; `BundleError` when missing, unreadable or bigger."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise BundleError(path.name, "reading the file", exc.strerror or str(exc)) from exc
    if len(data) > limit:
        raise BundleError(path.name, "reading the file", f"over {limit >> 20} MiB")
    return data


def verify_folder(folder: Path) -> Proof:
    """The judgement on a results folder (results.json and bundle.json).

    Raises:
        BundleError: the folder holds no bundle this version can read.
    """
    if not folder.is_dir():
        raise BundleError(str(folder), "opening the folder", "not a folder")
    bundle = read_capped(folder / BUNDLE_FILE)
    results = read_capped(folder / RESULTS_FILE)
    return check(bundle, results)
