"""A small real GGUF for the model-server tests: SmolLM2-135M-Instruct cut to its first blocks and tokens.

`transformers serve` in tests/labs/e2e/test_endpoints_live.py is measured for its server, SSE stream, usage
chunk and batching, and the whole 135M model would make every request (and the conversion, about 30 s
on two cores: dequantizing 30 blocks, converting 49,152 tokens of BPE) ten times slower. This cut keeps
the packaged model's architecture, its first `blocks` blocks, and its first `vocab` tokens with the
merges among them (the vocabulary is in merge order, the chat template's special tokens first), so
transformers loads it the same way, in about a tenth of the time. Its text is not English; the
gate lab (tests/labs/e2e/test_generate.py) and the drivers' lab (tests/labs/runtimes/test_llm.py)
generate with it too, README's examples on the embedded swarm load the whole model. `dequantized`
writes a GGUF out as a safetensors folder (for `transformers serve` and the fidelity benchmark).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from drivers.files.models import packaged_llm

CUT_NAME = "SmolLM2-cut.gguf"
EMBEDDING = "token_embd.weight"  # one row of quantized blocks per token: the first rows are the first tokens


def smollm2_cut(folder: Path, *, blocks: int = 2, vocab: int = 2048) -> Path:
    """Write the cut model into `folder` (once) and return its path."""
    import gguf

    path = folder / CUT_NAME
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    reader = gguf.GGUFReader(packaged_llm())
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()[:vocab]
    kept = set(tokens)
    merges = [
        m
        for m in reader.fields["tokenizer.ggml.merges"].contents()
        if all(part in kept for part in m.split(" ")) and m.replace(" ", "") in kept
    ]
    changed: dict[str, Any] = {
        "llama.block_count": blocks,
        "llama.vocab_size": vocab,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": reader.fields["tokenizer.ggml.token_type"].contents()[:vocab],
        "tokenizer.ggml.merges": merges,
        "general.name": "SmolLM2 135M cut for tests",
    }
    partial = path.with_suffix(".partial")
    writer = gguf.GGUFWriter(partial, "llama")
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, changed.get(field.name, field.contents()), kind, sub_type=sub)
    wanted = [t for t in reader.tensors if _kept(t.name, blocks)]
    data = {
        t.name: np.ascontiguousarray(t.data[:vocab] if t.name == "token_embd.weight" else t.data)
        for t in wanted
    }
    for t in wanted:
        array = data[t.name]
        writer.add_tensor_info(t.name, array.shape, array.dtype, array.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in wanted:
        writer.write_tensor_data(data[t.name], tensor_endianess=reader.endianess)
    writer.close()
    partial.rename(path)
    return path


def _kept(name: str, blocks: int) -> bool:
    if not name.startswith("blk."):
        return True
    return int(name.split(".")[1]) < blocks


def dequantized(gguf: Path, folder: Path) -> Path:
    """`gguf` loaded by transformers (de-quantized to fp32) and saved into `folder` as a Hugging Face
    folder: config (with `architectures`), safetensors weights, tokenizer and chat template."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)  # a de-quantized copy: plain fp32 safetensors
    settings["architectures"] = [type(loaded).__name__]
    model = type(loaded)(AutoConfig.for_model(**settings))
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
