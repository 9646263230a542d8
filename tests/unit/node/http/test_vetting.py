"""`serve`'s posted campaigns through the intake child's one launcher (`node.submitter.vetting.run_intake`):
the child's `Answer` read as `serve` words it (a 400 at each field, too_costly at a limit, 503 when the
child cannot start); the same launcher `submit` and `plan` use (tests/unit/node/submitter/test_vetting.py)."""

from __future__ import annotations

import pytest
import trio

from node.http import vetting
from node.http.errors import ApiError, BadRequest, Rule
from node.submitter import vetting as launcher

VALID = """name: posted
models: [{url: "https://example.org/a.onnx"}]
jobs: [{compute_unit: CPU (ONNX)}]
"""


async def test_a_valid_campaign_comes_back_with_where_each_url_is_written() -> None:
    vetted = await vetting.vet_campaign(VALID, trio.CapacityLimiter(1))
    assert vetted.campaign.name == "posted"
    (model,) = vetted.campaign.models
    assert vetted.url_fields == {model.key: "models[0].url"}


async def test_an_invalid_campaign_is_a_400_at_each_field() -> None:
    with pytest.raises(BadRequest) as info:
        await vetting.vet_campaign(
            '{"name": "x", "jobs": [{"num_inference_runs": -1}]}', trio.CapacityLimiter(1)
        )
    assert {p.rule for p in info.value.problems} == {Rule.INVALID}
    assert any(p.path.startswith("jobs[0]") for p in info.value.problems), info.value.problems


async def test_a_child_killed_at_its_cap_is_too_costly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "CHILD", "tests.kit.badintake")  # says it started, then SIGKILL
    with pytest.raises(BadRequest) as info:
        await vetting.vet_campaign(VALID, trio.CapacityLimiter(1))
    (problem,) = info.value.problems
    assert problem.rule is Rule.TOO_COSTLY
    said = "validation stopped (exit code -9): it needs more than 10 s of CPU or 512 MiB of memory"
    assert problem.message == said


async def test_a_child_that_cannot_start_is_the_servers_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "CHILD", "node.no_such_module")  # what a broken install looks like
    with pytest.raises(ApiError) as info:
        await vetting.vet_campaign(VALID, trio.CapacityLimiter(1))
    assert info.value.status == 503
    assert "No module named node.no_such_module" in info.value.detail
