"""Model transfer throughput: `/sark/blob/1.0.0` between libp2p hosts vs HTTP, same file, one run.

    .venv/bin/python benchmarks/transfer.py [--large] [--fetchers K] [--runs N] [--chunk B] [--streams S]

Random files of 10 MB and 100 MB (and 500 MB with --large) are served on loopback, each method from
one separate process: by a libp2p host with `node.transfer.blob.blob_handler` (the holder), and by Python's
threading `http.server`. They are fetched by separate fetcher processes, each a real libp2p host
like a worker: with `node.transfer.blob_fetch.fetch_blob` (--streams parallel streams, default 4, into a fresh
`ModelCache`; sha256 computed while receiving, by a worker thread reading the gap-free prefix back
from disk) and with `node.transfer.fetch.download` (sha256 computed while streaming). Both timings include
verification and the final rename.

Two modes per size, each method's runs interleaved with the other's:

- direct: one fetcher pulls the file;
- concurrent: K fetchers (--fetchers, default 4) pull the same file at once from the one holder,
  and K download it at once from the one HTTP server.

Every fetcher connects to the holder before it is timed (connection set-up is not transfer time),
waits for a line on stdin that releases all of them together, and reports its own start and end
(CLOCK_MONOTONIC, one clock for every process on the machine) as JSON on stdout. Throughput is
aggregate: K * size / (last end - first start), best of --runs, after one untimed round of each
method on the smallest file. Prints one line per (size, mode) with blob MB/s, HTTP MB/s and
blob/HTTP; writes benchmarks/out/transfer.json.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from node.p2p.host import HostConfig, open_host
from node.p2p.wire import Channel
from node.transfer.blob import CHUNK_SIZE, UploadSlots, blob_handler
from node.transfer.blob_fetch import STREAMS, fetch_blob
from node.transfer.cache import ModelCache
from node.transfer.fetch import UrlPolicy, download
from protocol import BLOB

OUT = Path(__file__).parent / "out"
MB = 1_000_000
SIZES = (10 * MB, 100 * MB)
LARGE = 500 * MB
METHODS = ("http", "blob")  # the order of each run's rounds


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


# --- child processes --------------------------------------------------------------------------------


async def _hold(cache_dir: Path, chunk: int, streams: int) -> None:
    """Holder process: serve the cache over /sark/blob until stdin closes.

    Any number of peers at once (`UploadSlots(None)`), each with up to `streams` streams.
    """
    cache = ModelCache(cache_dir)
    async with open_host(HostConfig(key_file=None)) as host:
        handler = blob_handler(cache, is_relayed=host.is_relayed, chunk_size=chunk, slots=UploadSlots(None))
        host.set_handler(BLOB, handler, max_per_peer=max(streams, 1), deadline=3600)
        print(json.dumps({"peer_id": host.peer_id, "addrs": host.addrs()}), flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)


async def _fetch(work: Path, holder: dict[str, Any], streams: int) -> None:
    """Fetcher process: connect to the holder, say ready, then one fetch per stdin line until EOF.

    A line is a JSON job {"method": "blob" | "http", "sha256", "size", "url"}; the answer is a JSON
    line {"start", "end"} in CLOCK_MONOTONIC seconds, written after the fetched file is removed.
    """
    policy = UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8",), max_bytes=4 << 30)
    async with open_host(HostConfig(key_file=None)) as host:

        async def channel() -> Channel:
            return await host.open_channel(holder["peer_id"], BLOB, addrs=holder["addrs"], read_timeout=60)

        await host.connect(holder["addrs"][0])  # connection set-up is not transfer time
        print(json.dumps({"ready": host.peer_id}), flush=True)
        while line := await trio.to_thread.run_sync(sys.stdin.readline):
            job = json.loads(line)
            sha, size = job["sha256"], job["size"]
            if job["method"] == "blob":
                cache = ModelCache(work / "blob-cache")
                start = time.monotonic()
                await fetch_blob(channel, sha, size, cache, max_bytes=size, streams=streams)
                end = time.monotonic()
                await trio.to_thread.run_sync(shutil.rmtree, cache.root)
            else:
                dest = work / "http.bin"
                start = time.monotonic()
                await download(job["url"], dest, sha256=sha, policy=policy)
                end = time.monotonic()
                dest.unlink()
            print(json.dumps({"start": start, "end": end}), flush=True)


# --- the benchmark ------------------------------------------------------------------------------------


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
    with contextlib.suppress(BrokenPipeError):  # a fetcher that already died
        proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _read_json(proc: subprocess.Popen[str], what: str) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{what} (pid {proc.pid}) exited with {proc.wait()} before answering")
    answer: dict[str, Any] = json.loads(line)
    return answer


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


@dataclass(frozen=True)
class _File:
    size: int
    sha256: str
    url: str


def _round(fetchers: list[subprocess.Popen[str]], method: str, file: _File) -> dict[str, Any]:
    """Release every fetcher at once on one job; their aggregate throughput."""
    job = json.dumps({"method": method, "sha256": file.sha256, "size": file.size, "url": file.url})
    for proc in fetchers:  # all of them are waiting on stdin, connected
        assert proc.stdin is not None
        proc.stdin.write(job + "\n")
        proc.stdin.flush()
    times = [_read_json(proc, f"{method} fetcher") for proc in fetchers]
    wall = max(t["end"] for t in times) - min(t["start"] for t in times)
    return {
        "wall_seconds": wall,
        "aggregate_mb_s": len(fetchers) * file.size / MB / wall,
        "fetcher_seconds": [t["end"] - t["start"] for t in times],
        "fetcher_start_spread_seconds": max(t["start"] for t in times) - min(t["start"] for t in times),
    }


def _measure(fetchers: list[subprocess.Popen[str]], file: _File, mode: str, runs: int) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, Any]]] = {method: [] for method in METHODS}
    for _ in range(runs):
        for method in METHODS:
            rounds[method].append(_round(fetchers, method, file))
    best = {method: max(r["aggregate_mb_s"] for r in rounds[method]) for method in METHODS}
    return {
        "size_bytes": file.size,
        "mode": mode,
        "fetchers": len(fetchers),
        "blob_seconds": [r["wall_seconds"] for r in rounds["blob"]],
        "http_seconds": [r["wall_seconds"] for r in rounds["http"]],
        "blob_runs": rounds["blob"],
        "http_runs": rounds["http"],
        "blob_mb_s": best["blob"],
        "http_mb_s": best["http"],
        "ratio_blob_over_http": best["blob"] / best["http"],
    }


def _run(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    sizes = [*SIZES, *([LARGE] if args.large else [])]
    serve_dir = work / "serve"
    serve_dir.mkdir()
    holder_cache = ModelCache(work / "holder")
    shas = {}
    for size in sizes:
        shas[size] = _random_file(serve_dir / f"model-{size}.bin", size)
        holder_cache.add_file(serve_dir / f"model-{size}.bin")
    procs: list[subprocess.Popen[str]] = []
    try:
        streams = ["--streams", str(args.streams)]
        holder = _spawn([__file__, "--hold", str(holder_cache.root), "--chunk", str(args.chunk), *streams])
        procs.append(holder)
        http, port = _http_server(serve_dir)
        procs.append(http)
        info = json.dumps(_read_json(holder, "holder"))
        fetchers = []
        for i in range(args.fetchers):
            (work / f"fetcher-{i}").mkdir()
            fetchers.append(
                _spawn([__file__, "--fetch", str(work / f"fetcher-{i}"), "--holder", info, *streams])
            )
            procs.append(fetchers[-1])
        for proc in fetchers:
            _read_json(proc, "fetcher")  # connected to the holder
        modes = [("direct", fetchers[:1])] + ([("concurrent", fetchers)] if len(fetchers) > 1 else [])
        files = [_File(size, shas[size], f"http://127.0.0.1:{port}/model-{size}.bin") for size in sizes]
        for method in METHODS:  # untimed: first use of thread pools, buffers, the HTTP server's threads
            _round(fetchers, method, files[0])
        results = []
        for file in files:
            for mode, group in modes:
                row = _measure(group, file, mode, args.runs)
                results.append(row)
                plural = "s" if len(group) > 1 else " "
                print(
                    f"{file.size // MB:>4} MB  {mode:<10} {len(group)} fetcher{plural}"
                    f"  blob {row['blob_mb_s']:7.1f} MB/s   http {row['http_mb_s']:7.1f} MB/s"
                    f"   blob/http {row['ratio_blob_over_http']:.2f}",
                    flush=True,
                )
        return results
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="sark-transfer-") as tmp:
        print(
            f"best of {args.runs}; aggregate MB/s; chunk {args.chunk}; {args.streams} blob streams a fetcher",
            flush=True,
        )
        results = _run(args, Path(tmp))
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
        "fetchers": args.fetchers,
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
    parser.add_argument(
        "--fetchers", type=int, default=4, help="fetcher processes of the concurrent rows (1: direct only)"
    )
    parser.add_argument("--chunk", type=int, default=CHUNK_SIZE, help="blob chunk size in bytes")
    parser.add_argument("--streams", type=int, default=STREAMS, help="parallel blob streams per fetcher")
    parser.add_argument("--runs", type=int, default=1, help="runs per method and mode; the best is reported")
    parser.add_argument("--hold", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--fetch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--holder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold is not None:
        trio.run(_hold, args.hold, args.chunk, args.streams)
    elif args.fetch is not None:
        trio.run(_fetch, args.fetch, json.loads(args.holder), args.streams)
    elif args.runs < 1 or args.fetchers < 1 or args.streams < 1:
        parser.error("--runs, --fetchers and --streams must be >= 1")
    else:
        _main(args)


if __name__ == "__main__":
    main()
