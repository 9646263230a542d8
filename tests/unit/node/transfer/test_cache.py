"""The content-addressed model cache on a real directory: hits, corruption, digests, LRU eviction."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from node.transfer.cache import ModelCache
from node.transfer.fetch import FetchError
from protocol import FailureReason


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _put(cache: ModelCache, data: bytes) -> tuple[str, Path]:
    sha = _sha(data)
    temp = cache.temp_path(sha)
    temp.write_bytes(data)
    return sha, cache.commit(sha, temp)


def _flip_first_byte(path: Path) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))


def test_hit_after_commit(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache")
    data = os.urandom(300_000)
    sha = _sha(data)
    assert cache.path_for(sha) is None
    temp = cache.temp_path(sha)
    assert temp.parent == cache.root
    temp.write_bytes(data)
    path = cache.commit(sha, temp)
    assert cache.path_for(sha) == path
    assert path.read_bytes() == data
    assert cache.size_of(sha) == len(data)
    assert not temp.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert ModelCache(tmp_path / "cache").path_for(sha) == path  # survives a restart


def test_commit_with_wrong_digest_deletes_the_temp(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path)
    claimed = _sha(b"the real model")
    temp = cache.temp_path(claimed)
    temp.write_bytes(b"a tampered model")
    with pytest.raises(FetchError) as info:
        cache.commit(claimed, temp)
    assert info.value.reason is FailureReason.DIGEST_MISMATCH
    assert cache.path_for(claimed) is None
    assert sorted(os.listdir(tmp_path)) == []


def test_modified_file_is_detected_and_dropped(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path)
    sha, path = _put(cache, os.urandom(10_000))
    before = path.stat().st_mtime_ns
    _flip_first_byte(path)
    os.utime(path, ns=(before + 1_000_000, before + 1_000_000))  # any mtime change is seen, even 1 ms
    assert cache.path_for(sha) is None
    assert sorted(os.listdir(tmp_path)) == []


def test_truncated_file_is_detected(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path)
    sha, path = _put(cache, os.urandom(10_000))
    os.chmod(path, 0o644)
    os.truncate(path, 5_000)
    assert cache.path_for(sha) is None


def test_verify_catches_a_flip_that_kept_size_and_mtime(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path)
    sha, path = _put(cache, os.urandom(10_000))
    assert cache.verify(sha)
    st = path.stat()
    _flip_first_byte(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cache.path_for(sha) == path  # the cheap check cannot see it ...
    assert not cache.verify(sha)  # ... the full re-hash does, and drops the entry
    assert cache.path_for(sha) is None
    assert not path.exists()


def test_add_file_copies_so_later_edits_cannot_change_the_cache(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache")
    src = tmp_path / "model.onnx"
    data = os.urandom(2_500_000)
    src.write_bytes(data)
    sha, path = cache.add_file(src)
    assert sha == _sha(data)
    assert cache.add_file(src) == (sha, path)
    src.write_bytes(b"edited")
    assert cache.path_for(sha) == path
    assert cache.verify(sha)
    assert sorted(os.listdir(cache.root)) == [sha, f"{sha}.json"]


def test_evicts_least_recently_used_first(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path, max_bytes=250)
    a, _ = _put(cache, b"a" * 100)
    b, _ = _put(cache, b"b" * 100)
    for sha, t in ((a, 1_000_000_000), (b, 2_000_000_000)):
        os.utime(tmp_path / f"{sha}.json", ns=(t, t))  # a older than b ...
    assert cache.path_for(a) is not None  # ... until a is used now
    c, _ = _put(cache, b"c" * 100)  # 300 bytes > 250: the least recently used (b) goes
    assert cache.path_for(b) is None
    assert cache.path_for(a) is not None
    assert cache.path_for(c) is not None
    assert cache.evict() == []


def test_a_model_larger_than_the_budget_is_kept_while_just_committed(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path, max_bytes=50)
    sha, path = _put(cache, b"x" * 100)
    assert cache.path_for(sha) == path


@pytest.mark.parametrize("bad", ["../../etc/passwd", "ABC", "0" * 63, "G" * 64, ""])
def test_digest_must_be_hex_since_it_names_a_file(bad: str, tmp_path: Path) -> None:
    cache = ModelCache(tmp_path)
    with pytest.raises(ValueError, match="sha256"):
        cache.path_for(bad)
    with pytest.raises(ValueError, match="sha256"):
        cache.temp_path(bad)
