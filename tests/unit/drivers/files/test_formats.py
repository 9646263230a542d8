"""Model file checks: pickles refused unopened, torch programs need opt-in, external data stays inside."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from kit.extras import silero
from onnx import helper, numpy_helper

from drivers import TaskFailed, check_model_file, detect_format
from drivers.files.formats import external_locations
from drivers.files.models import write_convnet
from protocol import FailureReason, ModelFormat


class Payload:
    """Unpickling this creates the marker file: proof that pickle ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.makedirs, (str(self.marker),))


def _refused(path: Path, fmt: ModelFormat, allow: bool = False) -> str:
    with pytest.raises(TaskFailed) as info:
        check_model_file(path, fmt, allow_code_models=allow)
    assert info.value.reason == FailureReason.FORMAT
    return info.value.detail


def test_a_pickled_whole_model_pt_is_refused_before_pickle_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    model = tmp_path / "model.pt"
    model.write_bytes(pickle.dumps(Payload(marker), protocol=4))
    assert "pickle stream" in _refused(model, ModelFormat.TORCHSCRIPT, allow=True)
    assert not marker.exists()


def test_pkl_suffix_is_refused_whatever_the_format(tmp_path: Path) -> None:
    model = tmp_path / "m.pkl"
    model.write_bytes(b"not even read")
    assert "pickle files are refused" in _refused(model, ModelFormat.ONNX)
    with pytest.raises(TaskFailed, match="pickle"):
        detect_format(model)


def _zip(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, b"\x80\x02}q\x00.")
    return path


def test_a_zip_torch_save_whole_model_is_refused_even_with_opt_in(tmp_path: Path) -> None:
    model = _zip(
        tmp_path / "m.pt", ["archive/data.pkl", "archive/data/0", "archive/version", "archive/byteorder"]
    )
    assert "whole-model torch.save" in _refused(model, ModelFormat.TORCHSCRIPT, allow=True)


def test_torchscript_archives_need_the_owner_opt_in(tmp_path: Path) -> None:
    model = _zip(tmp_path / "m.pt", ["m/data.pkl", "m/constants.pkl", "m/code/__torch__/m.py", "m/version"])
    assert "not opted in" in _refused(model, ModelFormat.TORCHSCRIPT)
    check_model_file(model, ModelFormat.TORCHSCRIPT, allow_code_models=True)


def test_a_zip_claiming_to_be_onnx_is_refused(tmp_path: Path) -> None:
    model = _zip(tmp_path / "m.onnx", ["x"])
    assert "not an ONNX model" in _refused(model, ModelFormat.ONNX)


def _external(tmp_path: Path, location: str) -> Path:
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    onnx.external_data_helper.set_external_data(weight, location=location)
    weight.ClearField("raw_data")
    weight.data_location = onnx.TensorProto.EXTERNAL
    io = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [1, 4]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", io[:1], io[1:], [weight])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return path


@pytest.mark.parametrize(
    ("location", "fragment"),
    [("/etc/passwd", "absolute"), ("../secret.bin", "leaves the model directory"), ("a/../../x", "leaves")],
)
def test_onnx_external_data_outside_the_model_directory_is_refused(
    tmp_path: Path, location: str, fragment: str
) -> None:
    assert fragment in _refused(_external(tmp_path, location), ModelFormat.ONNX)


def test_onnx_external_data_through_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.bin").write_bytes(b"\0" * 64)
    (tmp_path / "w.bin").symlink_to(tmp_path / "elsewhere.bin")
    assert "symlink" in _refused(_external(tmp_path, "w.bin"), ModelFormat.ONNX)


def test_plain_relative_external_data_is_accepted(tmp_path: Path) -> None:
    path = _external(tmp_path, "weights/w.bin")
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "w.bin").write_bytes(np.ones((4, 4), np.float32).tobytes())
    assert list(external_locations(memoryview(path.read_bytes()))) == ["weights/w.bin"]
    check_model_file(path, ModelFormat.ONNX, allow_code_models=False)


def test_missing_external_data_is_refused_before_the_runtime_looks(tmp_path: Path) -> None:
    assert "'w.bin' is missing" in _refused(_external(tmp_path, "w.bin"), ModelFormat.ONNX)


def test_a_truncated_onnx_is_a_format_failure_not_a_buffer_error(tmp_path: Path) -> None:
    whole = write_convnet(tmp_path / "c.onnx", channels=32, blocks=4).read_bytes()
    for keep in (100_000, 1000, 7):
        cut = tmp_path / f"cut{keep}.onnx"
        cut.write_bytes(whole[:keep])
        assert "not a valid ONNX protobuf" in _refused(cut, ModelFormat.ONNX)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert "empty file" in _refused(empty, ModelFormat.ONNX)


def test_real_models_pass_and_garbage_does_not(tmp_path: Path) -> None:
    check_model_file(silero(), ModelFormat.ONNX, allow_code_models=False)
    check_model_file(write_convnet(tmp_path / "c.onnx"), ModelFormat.ONNX, allow_code_models=False)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff" * 32)
    assert "not a valid ONNX protobuf" in _refused(junk, ModelFormat.ONNX)
    assert "not a regular file" in _refused(tmp_path, ModelFormat.ONNX)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.onnx", ModelFormat.ONNX), ("a.pt2", ModelFormat.TORCH_EXPORT), ("a.jit", ModelFormat.TORCHSCRIPT),
     ("a.mlpackage", ModelFormat.COREML)],
)  # fmt: skip
def test_detect_format_by_suffix(name: str, fmt: ModelFormat) -> None:
    assert detect_format(Path(name)) == fmt


def test_unknown_suffix_is_a_format_failure() -> None:
    with pytest.raises(TaskFailed, match="unknown model format"):
        detect_format(Path("model.bin"))


def test_random_bytes_are_refused_in_every_format_that_has_a_structure(tmp_path: Path) -> None:
    noise = np.random.default_rng(30).bytes(100_000)
    for name, fmt in [
        ("m.onnx", ModelFormat.ONNX),
        ("m.pt", ModelFormat.TORCHSCRIPT),
        ("m.pt2", ModelFormat.TORCH_EXPORT),
        ("m.safetensors", ModelFormat.SAFETENSORS),
        ("m.gguf", ModelFormat.GGUF),
    ]:
        (tmp_path / name).write_bytes(noise)
        assert _refused(tmp_path / name, fmt, allow=True)


def test_a_protobuf_without_a_graph_is_not_an_onnx_model(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07\x12\x04sark")  # ir_version 7, producer_name "sark": valid wire, no graph
    assert "no graph" in _refused(model, ModelFormat.ONNX)
    check_model_file(write_convnet(tmp_path / "c.onnx"), ModelFormat.ONNX, allow_code_models=False)
