"""The peer load clients (GuideLLM, AIPerf), each installed into a venv of its own and run as a user
would, offline, against the benchmarks' scheduled server; and the load every client is given.

Never the project's venv: each tool is pip-installed on first use under `--venvs`, given a small local
tokenizer this module writes (word level; as a folder, and as a hub-cache repo `sark/tok` for tools
that resolve one through the hub even offline), and read back from its own output files. A peer that
cannot be installed or run is reported as such, as a string.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Shape:
    """One load, the same for every client: closed (`concurrency` in flight, `requests` in all) or
    open (Poisson arrivals at `rate` req/s for `duration_s`)."""

    concurrency: int = 0
    requests: int = 0
    rate: float = 0.0
    duration_s: float = 0.0

    @property
    def tag(self) -> str:
        return f"r{self.rate:g}" if self.rate else f"c{self.concurrency}"


@dataclass(frozen=True)
class Measured:
    """A client's own TTFT and TPOT medians (ms) and its CPU seconds over its run (sark: this process
    over `run_endpoint`; a peer: its whole process tree, start-up included)."""

    ttft_ms: float
    tpot_ms: float
    cpu_s: float


Peer = Callable[[Path, str, Shape, int, Path], Measured | str]


def venv(venvs: Path, name: str, package: str) -> Path | None:
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


def tokenizer(work: Path) -> Path:
    """A small local tokenizer folder (word level) the peers load instead of downloading one."""
    folder = work / "tokenizer"
    if (folder / "tokenizer.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    words = ["[UNK]", "[PAD]", "<s>", "</s>", *[f"w{i}" for i in range(500)], "tok", "the", "a", "prompt"]
    vocab = {w: i for i, w in enumerate(words)}
    spec: dict[str, object] = {
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


def hf_cache(work: Path) -> Path:
    """An HF_HOME whose hub cache holds the local tokenizer as repo `sark/tok` (for tools that resolve
    a tokenizer through the hub cache even offline)."""
    home = work / "hf"
    snapshot = home / "hub" / "models--sark--tok" / "snapshots" / ("0" * 40)
    if not snapshot.exists():
        snapshot.mkdir(parents=True)
        for file in tokenizer(work).iterdir():
            (snapshot / file.name).write_bytes(file.read_bytes())
        refs = home / "hub" / "models--sark--tok" / "refs"
        refs.mkdir(parents=True)
        (refs / "main").write_text("0" * 40)
    return home


def run_tool(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[str | None, float]:
    """Run a peer to its end: its failure (None if none) and its process tree's CPU seconds (the
    children this process waited for, the tool's own waited-for children included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode != 0:
        return (done.stderr or done.stdout)[-800:], cpu_s
    return None, cpu_s


def guidellm(folder: Path, url: str, shape: Shape, tokens: int, work: Path) -> Measured | str:
    out = work / f"guidellm-{shape.tag}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": ""}
    tok = tokenizer(work)
    args = [str(folder / "bin" / "guidellm"), "benchmark", "run", "--target", url, "--model", "sched"]
    args += ["--processor", str(tok), "--data", f"prompt_tokens=16,output_tokens={tokens}"]
    if shape.rate:
        args += [
            "--rate-type",
            "poisson",
            "--rate",
            f"{shape.rate:g}",
            "--max-seconds",
            f"{shape.duration_s:g}",
        ]
    else:
        args += ["--rate-type", "concurrent", "--rate", str(shape.concurrency)]
        args += ["--max-requests", str(shape.requests)]
    args += ["--output-path", str(out), "--disable-progress", "--disable-console-outputs"]
    failed, cpu_s = run_tool(args, work, env)
    if failed:
        return f"failed: {failed}"
    document = json.loads(out.read_text())
    bench = document["benchmarks"][0]
    metrics = bench["metrics"]
    ttft = metrics["time_to_first_token_ms"]["successful"]["median"]
    tpot = metrics["inter_token_latency_ms"]["successful"]["median"]
    return Measured(float(ttft), float(tpot), cpu_s)


def aiperf(folder: Path, url: str, shape: Shape, tokens: int, work: Path) -> Measured | str:
    out = work / f"aiperf-{shape.tag}"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": "", "HF_HOME": str(hf_cache(work)), "HF_HUB_OFFLINE": "1"}
    args = [str(folder / "bin" / "aiperf"), "profile", "--model", "sched", "--url", url]
    args += ["--endpoint-type", "chat", "--streaming"]
    if shape.rate:
        args += ["--request-rate", f"{shape.rate:g}", "--benchmark-duration", f"{shape.duration_s:g}"]
        args += ["--benchmark-grace-period", "30"]
    else:
        args += ["--concurrency", str(shape.concurrency), "--request-count", str(shape.requests)]
    args += ["--tokenizer", "sark/tok"]  # the local tokenizer, from the hub cache `hf_cache` wrote
    args += ["--synthetic-input-tokens-mean", "16", "--output-tokens-mean", str(tokens)]
    args += ["--artifact-dir", str(out), "--ui", "none"]
    failed, cpu_s = run_tool(args, work, env)
    if failed:
        return f"failed: {failed}"
    found = sorted(out.rglob("profile_export_aiperf.json"))
    if not found:
        return "failed: no profile_export_aiperf.json"
    document = json.loads(found[0].read_text())
    records = document.get("records", document)
    ttft = records["time_to_first_token"]["p50"]
    itl = records["inter_token_latency"]["p50"]
    return Measured(float(ttft), float(itl), cpu_s)


PEERS: dict[str, tuple[str, Peer]] = {
    "guidellm": ("guidellm", guidellm),
    "aiperf": ("aiperf", aiperf),
}
