"""LLM load clients side by side: each one's TTFT and TPOT against what a scheduled server really did.

One OpenAI-compatible server (its own process, asyncio, TCP_NODELAY, keep-alive) answers every
streamed chat or text completion with its first token after `--first-ms`, then one every
`--every-ms`, `--tokens` in all, and logs for each request when it read the request and when it
wrote each token (CLOCK_MONOTONIC). The server's own TTFT is first write - request read; its TPOT
(last write - first write) / (tokens - 1). Each client runs `--requests` requests at each
concurrency of `--concurrency`; its error is |its median - the server's median over the same
requests| for TTFT and TPOT. Clients: sark-node's endpoint job (always), and GuideLLM, AIPerf and
inference-perf when `--peers` names them: each is installed by this script into its own venv under
`--venvs` (pip from PyPI; never the project's venv), run offline against a local tokenizer this script
writes, and read back from its own output. A peer that cannot be installed or run is reported as such.

Usage: .venv/bin/python benchmarks/llm_clients.py [--requests 40] [--concurrency 1,8,32]
       [--peers guidellm,aiperf,inference-perf] [--venvs /tmp/sark-peers]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers.endpoint import EndpointOptions, run_endpoint  # noqa: E402
from protocol import Endpoint, GenerateSpec, Prompt  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "llm_clients.json"

SERVER = r"""
import asyncio, json, socket, sys, time
first_s, every_s, tokens = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
log = open(sys.argv[4], "a", buffering=1)

def event(obj):
    return b"data: " + json.dumps(obj).encode() + b"\n\n"

def chunk(data):
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"

async def answer(writer, path, body):
    read_ns = time.monotonic_ns()
    chat = path.endswith("/chat/completions")
    kind = "chat.completion.chunk" if chat else "text_completion"
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    await writer.drain()
    writes = []
    start = time.monotonic()
    for i in range(tokens):
        due = start + first_s + i * every_s
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        choice = {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok"}
        writer.write(chunk(event({"id": "x", "object": kind, "model": body.get("model", "m"),
                                  "created": 0, "choices": [choice]})))
        writes.append(time.monotonic_ns())
        await writer.drain()
    usage = {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}
    last = {"id": "x", "object": kind, "model": body.get("model", "m"), "created": 0,
            "choices": [], "usage": usage}
    tail = event(last) + b"data: [DONE]\n\n"
    writer.write(chunk(tail) + b"0\r\n\r\n")
    await writer.drain()
    log.write(json.dumps({"read": read_ns, "writes": writes}) + "\n")

async def serve(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            raw = await reader.readexactly(length) if length else b""
            if method == "GET":
                models = [{"id": "sched", "object": "model"}]
                listing = json.dumps({"object": "list", "data": models}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(listing)).encode() + b"\r\n\r\n" + listing)
                await writer.drain()
                continue
            await answer(writer, path, json.loads(raw or b"{}"))
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def _server_figures(log: Path, since: int) -> tuple[float, float, int]:
    """The server's median TTFT and TPOT (ms) over the requests it logged since line `since`."""
    entries = [json.loads(line) for line in log.read_text().splitlines()[since:]]
    ttft = [(e["writes"][0] - e["read"]) / 1e6 for e in entries]
    tpot = [(e["writes"][-1] - e["writes"][0]) / 1e6 / (len(e["writes"]) - 1) for e in entries]
    return statistics.median(ttft), statistics.median(tpot), len(entries)


def _sark(url: str, requests: int, concurrency: int, tokens: int, work: Path) -> tuple[float, float]:
    prompts = tuple(Prompt(id=f"p{i}", text=f"prompt {i}") for i in range(requests))
    spec = GenerateSpec(
        prompts=prompts,
        prompts_sha256="0" * 64,
        max_new_tokens=tokens,
        concurrency=concurrency,
        endpoint=Endpoint(model="sched"),
    )
    run = run_endpoint(spec, url, deadline_s=600.0, options=EndpointOptions(rtt_samples=1))
    ok = [r for r in run.records if r.error is None and r.ttft_ms is not None]
    ttft = statistics.median(r.ttft_ms or 0.0 for r in ok)
    tpot = statistics.median((r.e2e_ms - (r.ttft_ms or 0.0)) / (r.output_tokens - 1) for r in ok)
    return ttft, tpot


def _venv(venvs: Path, name: str, package: str) -> Path | None:
    """The venv of one peer tool (made and filled with pip on first use), or None if it cannot be."""
    folder = venvs / name
    python = folder / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", package], capture_output=True, text=True
        )
        if done.returncode != 0:
            print(f"{name}: pip install {package} failed: {done.stderr[-500:]}")
            return None
    return folder


def _tokenizer(work: Path) -> Path:
    """A small local tokenizer folder (word level) the peers load instead of downloading one."""
    folder = work / "tokenizer"
    if (folder / "tokenizer.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    words = ["[UNK]", "[PAD]", "<s>", "</s>", *[f"w{i}" for i in range(500)], "tok", "the", "a", "prompt"]
    vocab = {w: i for i, w in enumerate(words)}
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "pad_token": "[PAD]",
              "bos_token": "<s>", "eos_token": "</s>", "model_max_length": 4096}  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": len(vocab)}))
    return folder


def _hf_cache(work: Path) -> Path:
    """An HF_HOME whose hub cache holds the local tokenizer as repo `sark/tok` (for tools that resolve
    a tokenizer through the hub cache even offline)."""
    home = work / "hf"
    snapshot = home / "hub" / "models--sark--tok" / "snapshots" / ("0" * 40)
    if not snapshot.exists():
        snapshot.mkdir(parents=True)
        for file in _tokenizer(work).iterdir():
            (snapshot / file.name).write_bytes(file.read_bytes())
        refs = home / "hub" / "models--sark--tok" / "refs"
        refs.mkdir(parents=True)
        (refs / "main").write_text("0" * 40)
    return home


def _run_tool(args: list[str], cwd: Path, env: dict[str, str]) -> str | None:
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=900)
    if done.returncode != 0:
        return (done.stderr or done.stdout)[-800:]
    return None


Peer = Callable[[Path, str, int, int, int, Path], tuple[float, float] | str]


def _guidellm(
    venv: Path, url: str, requests: int, concurrency: int, tokens: int, work: Path
) -> tuple[float, float] | str:
    out = work / f"guidellm-{concurrency}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": ""}
    tok = _tokenizer(work)
    args = [str(venv / "bin" / "guidellm"), "benchmark", "run", "--target", url, "--model", "sched"]
    args += ["--processor", str(tok), "--rate-type", "concurrent", "--rate", str(concurrency)]
    args += ["--max-requests", str(requests), "--data", f"prompt_tokens=16,output_tokens={tokens}"]
    args += ["--output-path", str(out), "--disable-progress", "--disable-console-outputs"]
    failed = _run_tool(args, work, env)
    if failed:
        return f"failed: {failed}"
    document = json.loads(out.read_text())
    bench = document["benchmarks"][0]
    metrics = bench["metrics"]
    ttft = metrics["time_to_first_token_ms"]["successful"]["median"]
    tpot = metrics["inter_token_latency_ms"]["successful"]["median"]
    return float(ttft), float(tpot)


def _aiperf(
    venv: Path, url: str, requests: int, concurrency: int, tokens: int, work: Path
) -> tuple[float, float] | str:
    out = work / f"aiperf-{concurrency}"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": "", "HF_HOME": str(_hf_cache(work)), "HF_HUB_OFFLINE": "1"}
    args = [
        str(venv / "bin" / "aiperf"),
        "profile",
        "--model",
        "sched",
        "--url",
        url,
        "--endpoint-type",
        "chat",
    ]
    args += ["--streaming", "--concurrency", str(concurrency), "--request-count", str(requests)]
    args += [
        "--tokenizer",
        "sark/tok",  # the local tokenizer, from the hub cache `_hf_cache` wrote
        "--synthetic-input-tokens-mean",
        "16",
        "--output-tokens-mean",
        str(tokens),
    ]
    args += ["--artifact-dir", str(out), "--ui", "none"]
    failed = _run_tool(args, work, env)
    if failed:
        return f"failed: {failed}"
    found = sorted(out.rglob("profile_export_aiperf.json"))
    if not found:
        return "failed: no profile_export_aiperf.json"
    document = json.loads(found[0].read_text())
    records = document.get("records", document)
    ttft = records["time_to_first_token"]["p50"]
    itl = records["inter_token_latency"]["p50"]
    return float(ttft), float(itl)


PEERS: dict[str, tuple[str, Peer]] = {
    "guidellm": ("guidellm", _guidellm),
    "aiperf": ("aiperf", _aiperf),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--first-ms", type=float, default=200.0)
    parser.add_argument("--every-ms", type=float, default=25.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--peers", default="")
    parser.add_argument("--venvs", type=Path, default=Path("/tmp/sark-peers"))
    args = parser.parse_args()
    work = args.venvs / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"server-{os.getpid()}.log"
    log.write_text("")
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SERVER,
            str(args.first_ms / 1e3),
            str(args.every_ms / 1e3),
            str(args.tokens),
            str(log),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    url = f"http://127.0.0.1:{int(server.stdout.readline())}"
    clients: list[tuple[str, Callable[[str, int, int, int, Path], tuple[float, float] | str]]] = [
        ("sark-node", _sark)
    ]
    for name in filter(None, args.peers.split(",")):
        package, run = PEERS[name]
        venv = _venv(args.venvs, name, package)
        if venv is not None:
            clients.append((name, lambda u, r, c, t, w, run=run, venv=venv: run(venv, u, r, c, t, w)))
    rows = []
    load = os.getloadavg()[0]
    print(
        f"load average {load:.2f}; schedule {args.first_ms:g} ms, then {args.every_ms:g} ms"
        f" x {args.tokens - 1}"
    )
    head = ("client", "conc", "TTFT ms", "server", "error", "TPOT ms", "server", "error")
    widths = (14, 5, 9, 9, 7, 8, 8, 7)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)) + "  load")
    try:
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            for name, run in clients:
                since = len(log.read_text().splitlines())
                measured = run(url, args.requests, concurrency, args.tokens, work)
                time.sleep(0.5)
                if isinstance(measured, str):
                    print(f"{name:>14} {concurrency:>5}  {measured[:300]}")
                    rows.append({"client": name, "concurrency": concurrency, "failed": measured})
                    continue
                s_ttft, s_tpot, n = _server_figures(log, since)
                ttft, tpot = measured
                load = os.getloadavg()[0]
                print(
                    f"{name:>14} {concurrency:>5} {ttft:>9.2f} {s_ttft:>9.2f} {abs(ttft - s_ttft):>7.2f}"
                    f" {tpot:>8.3f} {s_tpot:>8.3f} {abs(tpot - s_tpot):>7.3f}  {load:.2f}"
                )
                rows.append(
                    {"client": name, "concurrency": concurrency, "ttft_ms": ttft, "server_ttft_ms": s_ttft,
                     "tpot_ms": tpot, "server_tpot_ms": s_tpot, "server_requests": n, "load": load}
                )  # fmt: skip
    finally:
        server.communicate("", timeout=30)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
