"""Bounded header checks: honest safetensors and GGUF files pass, every lie is named, none is allocated."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from kit.badfiles import write_gguf, write_safetensors
from kit.extras import gemma3, smollm2

from drivers import TaskFailed, check_model_file, detect_format
from drivers.files.headers import GgufHeader, check_gguf, check_safetensors
from protocol import FailureReason, ModelFormat


def _refused(check: object, path: Path) -> str:
    with pytest.raises(TaskFailed) as info:
        check(path)  # type: ignore[operator]
    assert info.value.reason == FailureReason.FORMAT
    assert info.value.stage is None  # the child places it; the check only says the cause
    return info.value.detail


def test_honest_files_pass(tmp_path: Path) -> None:
    check_safetensors(write_safetensors(tmp_path / "m.safetensors"))
    assert check_gguf(write_gguf(tmp_path / "m.gguf")) == GgufHeader("toy", None)  # no context declared
    check_gguf(write_gguf(tmp_path / "none.gguf", tensors=0))


def test_the_gguf_header_names_the_architecture_and_its_context() -> None:
    """The real SmolLM2 GGUF: `llama.context_length` read from the header walk, no tensor touched."""
    assert check_gguf(smollm2()) == GgufHeader("llama", 8192, chat_template=True)


def test_gemma3s_header_names_its_family_its_sliding_window_and_no_template() -> None:
    """The real Gemma 3 270M GGUF (a 2025 family): a base model, no chat template in its header."""
    assert check_gguf(gemma3()) == GgufHeader("gemma3", 32768, chat_template=False, sliding_window=512)


@pytest.mark.parametrize(
    ("arch", "metadata", "header"),
    [
        ("qwen3", [("qwen3.context_length", 40960)], GgufHeader("qwen3", 40960)),
        (
            "qwen3moe",
            [
                ("qwen3moe.context_length", 32768),
                ("qwen3moe.expert_count", 128),
                ("qwen3moe.expert_used_count", 8),
            ],
            GgufHeader("qwen3moe", 32768, experts=(128, 8)),
        ),
        (
            "llama4",
            [
                ("llama4.context_length", 10485760),
                ("llama4.expert_count", 16),
                ("llama4.expert_used_count", 1),
                ("tokenizer.chat_template", "{{ messages }}"),
            ],
            GgufHeader("llama4", 10485760, chat_template=True, experts=(16, 1)),
        ),
        (
            "gpt-oss",
            [
                ("gpt-oss.context_length", 131072),
                ("gpt-oss.attention.sliding_window", 128),
                ("gpt-oss.expert_count", 32),
                ("gpt-oss.expert_used_count", 4),
            ],
            GgufHeader("gpt-oss", 131072, sliding_window=128, experts=(32, 4)),
        ),
        (  # another family's keys are not this one's
            "gemma3",
            [("llama.context_length", 8192), ("gemma3.attention.sliding_window", 512)],
            GgufHeader("gemma3", None, sliding_window=512),
        ),
    ],
    ids=["qwen3", "qwen3moe", "llama4", "gpt-oss", "other-family"],
)
def test_the_new_families_keys_are_read_under_their_own_architecture(
    tmp_path: Path, arch: str, metadata: list[tuple[str, int | str]], header: GgufHeader
) -> None:
    """llama.cpp's key names of 2025-26 families (llm_kv: `<arch>.context_length`,
    `.attention.sliding_window`, `.expert_count`, `.expert_used_count`), read under the name the file
    declares."""
    assert check_gguf(write_gguf(tmp_path / "m.gguf", arch=arch, metadata=metadata)) == header


def test_suffixes_name_the_formats() -> None:
    assert detect_format(Path("m.gguf")) == ModelFormat.GGUF
    assert detect_format(Path("m.safetensors")) == ModelFormat.SAFETENSORS


def _safetensors(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)
    return path


@pytest.mark.parametrize(
    ("header", "data", "length", "fragment"),
    [
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"", None, "ends at byte 8"),
        ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "needs 12 bytes"),
        ({"a": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "unknown dtype"),
        ({"a": {"dtype": "F32", "shape": "x", "data_offsets": [0, 8]}}, b"\0" * 8, None, "shape"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8, None, "data_offsets"),
        ([1, 2], b"", None, "not a JSON object"),
        ({"a": 1}, b"", 1 << 62, "header claims"),
    ],
    ids=["past-end", "size", "dtype", "shape", "offsets", "not-object", "length"],
)
def test_safetensors_lies_are_named(
    tmp_path: Path, header: object, data: bytes, length: int | None, fragment: str
) -> None:
    assert fragment in _refused(
        check_safetensors, _safetensors(tmp_path / "m.safetensors", header, data, length)
    )


def test_safetensors_shorter_than_its_length_field_and_garbage(tmp_path: Path) -> None:
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x02")
    assert "shorter than" in _refused(check_safetensors, short)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(struct.pack("<Q", 4) + b"\xff\xfe{]")
    assert "not JSON" in _refused(check_safetensors, junk)


def test_a_lying_safetensors_tensor_is_refused(tmp_path: Path) -> None:
    assert "ends at byte" in _refused(
        check_safetensors, write_safetensors(tmp_path / "m.safetensors", lie=4096)
    )


def _gguf(path: Path, body: bytes) -> Path:
    path.write_bytes(b"GGUF" + body)
    return path


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (struct.pack("<I", 1) + b"\0" * 16, "version 1 is not supported"),
        (struct.pack("<IQQ", 3, 1 << 60, 0), "tensor count is 1152921504606846976"),
        (struct.pack("<IQQ", 3, 0, 1 << 40), "metadata count"),
        (struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 50) + b"\0" * 16, "metadata key length"),
        (struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77), "type 77"),
        (
            struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 0, 1 << 40),
            "array length",
        ),
        (
            struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 1) + b"t" + struct.pack("<I", 9) + b"\0" * 64,
            "9 dimensions",
        ),
        (struct.pack("<I", 3), "tensor count needs 8 bytes"),
    ],
    ids=["v1", "tensors", "kvs", "key", "kind", "array", "rank", "short"],
)
def test_gguf_lies_are_named(tmp_path: Path, body: bytes, fragment: str) -> None:
    assert fragment in _refused(check_gguf, _gguf(tmp_path / "m.gguf", body))


def test_a_gguf_tensor_past_the_end_and_a_wrong_magic_are_refused(tmp_path: Path) -> None:
    assert "end past the file" in _refused(check_gguf, write_gguf(tmp_path / "m.gguf", lie=1000))
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGML" + b"\0" * 64)
    assert "no GGUF magic" in _refused(check_gguf, other)


def test_check_model_file_dispatches_on_the_format(tmp_path: Path) -> None:
    lying = write_gguf(tmp_path / "m.gguf", lie=1000)
    with pytest.raises(TaskFailed, match="end past the file"):
        check_model_file(lying, ModelFormat.GGUF, allow_code_models=False)
    folder = tmp_path / "hf"
    folder.mkdir()
    write_safetensors(folder / "model-00001.safetensors")
    check_model_file(folder, ModelFormat.SAFETENSORS, allow_code_models=False)
    write_safetensors(folder / "model-00002.safetensors", lie=64)
    with pytest.raises(TaskFailed, match=r"model-00002\.safetensors: safetensors tensor 'b'"):
        check_model_file(folder, ModelFormat.SAFETENSORS, allow_code_models=False)
