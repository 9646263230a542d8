"""The worker's content-addressed model cache: one file per sha256, verified before it is used.

Layout under `root`:

    <sha256>          the model bytes, read-only (0444), moved in only after its digest checked
    <sha256>.json     the record: size and mtime_ns at commit; its own mtime is the last access (LRU)
    <sha256>.part     a partial transfer, kept across failures so a transfer can resume

A file whose size or mtime no longer matches its record is treated as corrupt and dropped;
`verify` re-hashes the whole file for a stronger check. Every method does blocking file I/O: call it
from a thread (`trio.to_thread.run_sync`) in async code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Final, final

from node.config import NodeConfig
from node.transfer.fetch import FetchError
from protocol import FailureReason

HASH_BLOCK: Final = 1 << 20
_SHA256: Final = re.compile(r"^[0-9a-f]{64}$")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (hashlib releases the GIL on them)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _checked(sha256: str) -> str:
    """The digest itself, if it is 64 lowercase hex digits (it becomes a file name)."""
    if not _SHA256.match(sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return sha256


@final
class ModelCache:
    """Models on disk by sha256, with an optional size budget evicted least recently used first.

    Args:
        root: the cache directory (created if missing); temp files live here too, so renames are atomic.
        max_bytes: budget for committed models; None means no eviction.
    """

    def __init__(self, root: Path, *, max_bytes: int | None = None) -> None:
        self.root = root
        self.max_bytes = max_bytes
        root.mkdir(parents=True, exist_ok=True)

    def _blob(self, sha256: str) -> Path:
        return self.root / _checked(sha256)

    def _record(self, sha256: str) -> Path:
        return self.root / f"{_checked(sha256)}.json"

    def path_for(self, sha256: str) -> Path | None:
        """The model's path if it is present and matches its record (marking it used), else None."""
        blob, record = self._blob(sha256), self._record(sha256)
        try:
            expected = json.loads(record.read_text())
            st = blob.stat()
        except (OSError, ValueError):
            return None
        if (st.st_size, st.st_mtime_ns) != (expected.get("size"), expected.get("mtime_ns")):
            self._drop(sha256)
            return None
        with contextlib.suppress(OSError):
            os.utime(record)
        return blob

    def size_of(self, sha256: str) -> int | None:
        """The recorded size of a present model, or None."""
        path = self.path_for(sha256)
        return None if path is None else path.stat().st_size

    def temp_path(self, sha256: str) -> Path:
        """Where a partial transfer of this model lives (same directory: the final rename is atomic)."""
        return self.root / f"{_checked(sha256)}.part"

    def commit(self, sha256: str, temp: Path, *, digest: str | None = None) -> Path:
        """Verify `temp` against `sha256` and move it into the cache.

        Args:
            digest: the sha256 of `temp`'s bytes if the caller hashed them as it wrote them;
                otherwise the file is hashed here.

        Raises:
            FetchError: DIGEST_MISMATCH; `temp` is deleted.
        """
        actual = file_sha256(temp) if digest is None else digest
        if actual != _checked(sha256):
            temp.unlink(missing_ok=True)
            raise FetchError(FailureReason.DIGEST_MISMATCH, f"expected sha256 {sha256}, got {actual}")
        return self._install(sha256, temp)

    def add_file(self, src: Path) -> tuple[str, Path]:
        """Hash a local file and copy it into the cache (submitter side); returns (sha256, path).

        A copy, not a hard link: a link shares the inode, so a later edit of `src` would change the
        cached bytes behind their digest.
        """
        fd, name = tempfile.mkstemp(dir=self.root, prefix=".add.", suffix=".part")
        temp = Path(name)
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out, src.open("rb") as f:
                while block := f.read(HASH_BLOCK):
                    digest.update(block)
                    out.write(block)
            sha256 = digest.hexdigest()
            return sha256, self._install(sha256, temp)
        finally:
            temp.unlink(missing_ok=True)

    def verify(self, sha256: str) -> bool:
        """Re-hash a present model; drop it and return False if its bytes changed."""
        path = self.path_for(sha256)
        if path is None:
            return False
        if file_sha256(path) == sha256:
            return True
        self._drop(sha256)
        return False

    def evict(self, *, keep: frozenset[str] = frozenset()) -> list[str]:
        """Remove least recently used models until the cache fits `max_bytes`; returns their digests."""
        if self.max_bytes is None:
            return []
        entries = []
        for record in self.root.glob("*.json"):
            sha256 = record.stem
            with contextlib.suppress(OSError):
                entries.append((record.stat().st_mtime_ns, sha256, self._blob(sha256).stat().st_size))
        total = sum(size for _, _, size in entries)
        removed = []
        for _, sha256, size in sorted(entries):
            if total <= self.max_bytes:
                break
            if sha256 in keep:
                continue
            self._drop(sha256)
            total -= size
            removed.append(sha256)
        return removed

    def _install(self, sha256: str, temp: Path) -> Path:
        """Move verified bytes into place and write their record."""
        existing = self.path_for(sha256)
        if existing is not None:
            temp.unlink(missing_ok=True)
            return existing
        blob = self._blob(sha256)
        os.chmod(temp, 0o444)
        os.replace(temp, blob)
        st = blob.stat()
        record_tmp = self.root / f".{sha256}.json.tmp"
        try:
            record_tmp.write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns}))
            os.replace(record_tmp, self._record(sha256))
        except OSError:  # a full disk: no record, so the model is not there (path_for), and no litter
            record_tmp.unlink(missing_ok=True)
            blob.unlink(missing_ok=True)
            raise
        self.evict(keep=frozenset({sha256}))
        return blob

    def _drop(self, sha256: str) -> None:
        self._record(sha256).unlink(missing_ok=True)
        self._blob(sha256).unlink(missing_ok=True)


def model_cache(config: NodeConfig) -> ModelCache:
    """The node's content-addressed model cache under its data directory."""
    return ModelCache(config.data.models)


__all__ = ["ModelCache", "file_sha256", "model_cache"]
