"""Model transfer throughput: `/sark/blob/1.0.0` between two libp2p hosts vs HTTP, same file, one run.

    .venv/bin/python benchmarks/transfer.py [--large] [--chunk BYTES] [--runs N]

A random 100 MB file (and 500 MB with --large) is served, each from a separate process on loopback:
by a libp2p host with `node.blob.blob_handler`, and by Python's threading `http.server`. This process
fetches it with `node.blob.fetch_blob` (into a fresh `ModelCache`, sha256 checked at commit) and with
`node.fetch.download` (sha256 checked while streaming). Both timings include verification and the
final rename. Prints MB/s of each and the blob/HTTP ratio; writes benchmarks/out/transfer.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from node.blob import CHUNK_SIZE, STREAMS, blob_handler, fetch_blob
from node.cache import ModelCache
from node.fetch import UrlPolicy, download
from node.host import HostConfig, open_host
from node.wire import Channel
from protocol import BLOB

OUT = Path(__file__).parent / "out"
MB = 1_000_000


def _random_file(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as f:
        left = size
        while left:
            block = os.urandom(min(left, 1 << 20))
            digest.update(block)
            f.write(block)
            left -= len(block)
    return digest.hexdigest()


async def _hold(cache_dir: Path, chunk: int) -> None:
    """Holder process: serve the cache over /sark/blob until stdin closes."""
    cache = ModelCache(cache_dir)
    async with open_host(HostConfig(key_file=None)) as host:
        host.set_handler(
            BLOB, blob_handler(cache, is_relayed=host.is_relayed, chunk_size=chunk), deadline=3600
        )
        print(json.dumps({"peer_id": host.peer_id, "addrs": host.addrs()}), flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)


def _spawn(args: list[str], *, quiet: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _blob_run(holder: dict[str, Any], sha: str, size: int, work: Path, streams: int) -> float:
    cache = ModelCache(work / "blob-cache")
    async with open_host(HostConfig(key_file=None)) as host:

        async def channel() -> Channel:
            return await host.open_channel(holder["peer_id"], BLOB, addrs=holder["addrs"], read_timeout=60)

        await host.connect(holder["addrs"][0])  # connection set-up is not transfer time
        start = time.perf_counter()
        await fetch_blob(channel, sha, size, cache, max_bytes=size, streams=streams)
        elapsed = time.perf_counter() - start
    shutil.rmtree(cache.root)
    return elapsed


async def _http_run(port: int, name: str, sha: str, work: Path) -> float:
    policy = UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8",), max_bytes=4 << 30)
    dest = work / "http.bin"
    start = time.perf_counter()
    await download(f"http://127.0.0.1:{port}/{name}", dest, sha256=sha, policy=policy)
    elapsed = time.perf_counter() - start
    dest.unlink()
    return elapsed


def _http_server(root: Path) -> tuple[subprocess.Popen[str], int]:
    code = (
        "import http.server, functools, sys\n"
        "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n"
        "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n"
        "print(s.server_address[1], flush=True)\n"
        "import threading; threading.Thread(target=s.serve_forever, daemon=True).start()\n"
        "sys.stdin.read()\n"
    )
    proc = _spawn(["-c", code, str(root)], quiet=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


async def _measure(size: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    serve_dir = work / f"serve-{size}"
    serve_dir.mkdir()
    name = "model.bin"
    sha = await trio.to_thread.run_sync(_random_file, serve_dir / name, size)
    holder_cache = ModelCache(work / f"holder-{size}")
    await trio.to_thread.run_sync(holder_cache.add_file, serve_dir / name)
    holder = _spawn([__file__, "--hold", str(holder_cache.root), "--chunk", str(args.chunk)])
    http, port = _http_server(serve_dir)
    try:
        assert holder.stdout is not None
        info = json.loads(await trio.to_thread.run_sync(holder.stdout.readline))
        blob_s, http_s = [], []
        for _ in range(args.runs):
            http_s.append(await _http_run(port, name, sha, work))
            blob_s.append(await _blob_run(info, sha, size, work, args.streams))
    finally:
        _stop(holder)
        _stop(http)
    blob_best, http_best = min(blob_s), min(http_s)
    return {
        "size_bytes": size,
        "blob_seconds": blob_s,
        "http_seconds": http_s,
        "blob_mb_s": size / MB / blob_best,
        "http_mb_s": size / MB / http_best,
        "ratio_blob_over_http": http_best / blob_best,
    }


async def _main(args: argparse.Namespace) -> None:
    sizes = [100 * MB] + ([500 * MB] if args.large else [])
    results = []
    with tempfile.TemporaryDirectory(prefix="sark-transfer-") as tmp:
        for size in sizes:
            row = await _measure(size, args, Path(tmp))
            results.append(row)
            print(
                f"{size // MB:>4} MB  blob {row['blob_mb_s']:7.1f} MB/s   http {row['http_mb_s']:7.1f} MB/s"
                f"   blob/http {row['ratio_blob_over_http']:.2f}"
                f"   (best of {args.runs}, chunk {args.chunk}, {args.streams} streams)",
                flush=True,
            )
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    report = {
        "benchmark": "transfer",
        "when_utc": stamp,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "chunk_bytes": args.chunk,
        "streams": args.streams,
        "runs": args.runs,
        "results": results,
    }
    path = OUT / "transfer.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--large", action="store_true", help="also transfer a 500 MB file")
    parser.add_argument("--chunk", type=int, default=CHUNK_SIZE, help="blob chunk size in bytes")
    parser.add_argument("--streams", type=int, default=STREAMS, help="parallel blob streams")
    parser.add_argument("--runs", type=int, default=1, help="runs per method; the best is reported")
    parser.add_argument("--hold", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold is not None:
        trio.run(_hold, args.hold, args.chunk)
    elif not math.isfinite(args.runs) or args.runs < 1:
        parser.error("--runs must be >= 1")
    else:
        trio.run(_main, args)


if __name__ == "__main__":
    main()
