"""Copies with changed fields: a misspelt name is an error, never silently kept (`with_`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from node.config import NodeConfig
from node.errors import ConfigError
from protocol import ModelRef, TaskSpec, field_problems

MODEL = ModelRef(name="m.onnx", size=10, sha256="a" * 64)


def test_with_changes_a_field_and_keeps_the_rest() -> None:
    changed = MODEL.with_(size=20)
    assert (changed.size, changed.name, MODEL.size) == (20, "m.onnx", 10)


def test_with_refuses_a_name_that_is_no_field() -> None:
    with pytest.raises(TypeError, match="sizes"):
        MODEL.with_(sizes=20)


def test_config_with_validates_names_and_values(tmp_path: Path) -> None:
    config = NodeConfig(data_dir=tmp_path)
    assert config.with_(gates=("/ip4/127.0.0.1/tcp/1",)).gates == ("/ip4/127.0.0.1/tcp/1",)
    with pytest.raises(ConfigError, match="gate"):
        config.with_(gate=("/ip4/127.0.0.1/tcp/1",))
    with pytest.raises(ConfigError, match="max_queue"):
        config.with_(max_queue=-1)


def test_field_problems_names_each_field_by_its_path() -> None:
    with pytest.raises(ValidationError) as caught:
        TaskSpec.model_validate({"num_inference_runs": 0, "input_shapes": {"x": ["a"]}})
    problems = field_problems(caught.value)
    assert any(p.startswith("num_inference_runs: ") for p in problems)
    assert any(p.startswith("input_shapes.x.0: ") for p in problems)
