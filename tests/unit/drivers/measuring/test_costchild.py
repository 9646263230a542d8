"""Each model's FLOPs and bytes counted in one capped child (issue 53): the same count as in-process, a
hostile or broken file a reason naming the file and the stage, a child stopped at a limit a reason too,
and never an exception in the caller."""

from __future__ import annotations

from pathlib import Path

from kit.badfiles import write_text_as_onnx, write_truncated_onnx

from drivers.files.graphcost import graph_cost
from drivers.files.models import packaged_model
from drivers.measuring.costchild import count_costs


def test_the_child_counts_what_graph_cost_counts_and_names_each_failure(tmp_path: Path) -> None:
    resnet = packaged_model("light_resnet50")
    text = write_text_as_onnx(tmp_path / "text.onnx")
    cut = write_truncated_onnx(tmp_path / "cut.onnx")
    squeeze = packaged_model("light_squeezenet")
    found = count_costs({"resnet": resnet, "text": text, "cut": cut, "squeeze": squeeze})
    assert found["resnet"] == graph_cost(resnet)  # the child's value is the in-process count, pickled back
    assert found["squeeze"] == graph_cost(squeeze)  # after two failures: counted
    for key, name in (("text", "text.onnx"), ("cut", "cut.onnx")):
        reason = found[key]
        assert isinstance(reason, str)
        assert reason.startswith(f"{name}: load: ")


def test_a_child_stopped_at_a_limit_is_each_model_s_reason(tmp_path: Path) -> None:
    resnet = packaged_model("light_resnet50")
    starved = count_costs({"resnet": resnet}, memory_mb=1)  # no room to import onnx, let alone a graph
    assert isinstance(starved["resnet"], str)
    assert starved["resnet"].startswith("light_resnet50.onnx: count: ")
    late = count_costs({"resnet": resnet}, timeout_s=0.001)
    assert late == {"resnet": "light_resnet50.onnx: count: timed out after 0.001 s"}
    assert count_costs({}) == {}
