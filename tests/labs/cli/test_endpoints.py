"""A black-box endpoint URL passes the worker's URL policy before any request is sent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from kit import owntime, zygote
from kit.procs import SARK

from node.submitter.attempt import with_key
from node.transfer.endpoints import checked_endpoint_address
from node.transfer.urls import FetchError, UrlPolicy
from protocol import ComputeUnit, Endpoint, FailureReason, GenerateSpec, Prompt, TaskSpec

OPEN_LOOPBACK = UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8", "::1/128"))


@pytest.mark.parametrize(
    ("url", "policy"),
    [
        ("http://127.0.0.1:8000/v1", UrlPolicy()),  # http refused by default
        ("https://127.0.0.1:8000/v1", UrlPolicy()),  # loopback refused by default
        ("https://localhost:8000/v1", UrlPolicy()),  # a name that resolves to loopback
        ("http://169.254.169.254/latest", UrlPolicy(allow_http=True)),  # cloud metadata
        ("https://user:pw@127.0.0.1/v1", OPEN_LOOPBACK),  # userinfo
        ("https://2130706433/v1", OPEN_LOOPBACK),  # a numeric spelling of 127.0.0.1
        ("http://10.0.0.5:8000/v1", OPEN_LOOPBACK),  # private, not the allowed network
    ],
)
async def test_a_refused_endpoint_is_url_refused(url: str, policy: UrlPolicy) -> None:
    with pytest.raises(FetchError) as caught:
        await checked_endpoint_address(url, policy)
    assert caught.value.reason == FailureReason.URL_REFUSED


async def test_an_allowed_endpoint_gives_the_checked_address() -> None:
    assert await checked_endpoint_address("http://127.0.0.1:8000/v1", OPEN_LOOPBACK) == "127.0.0.1"
    assert await checked_endpoint_address("http://localhost:8000/v1", OPEN_LOOPBACK) in ("127.0.0.1", "::1")


def test_the_offer_spec_carries_the_key_the_campaign_spec_does_not() -> None:
    endpoint = Endpoint(model="m", url="https://api.example.com/v1", api_key_env="EXAMPLE_API_KEY")
    generate = GenerateSpec(prompts=(Prompt(id="p", text="hi"),), prompts_sha256="0" * 64, endpoint=endpoint)
    spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=generate)
    offered = with_key(spec, {"EXAMPLE_API_KEY": "sk-secret"})
    assert offered.generate is not None
    assert offered.generate.endpoint is not None
    assert offered.generate.endpoint.api_key == "sk-secret"
    assert "sk-secret" not in repr(offered)  # repr=False: a log line of the spec shows no key
    assert spec.generate is not None
    assert spec.generate.endpoint is not None
    assert spec.generate.endpoint.api_key is None
    assert with_key(spec, {}) == spec  # no key in the submitter's environment: nothing to add


def _sark(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return zygote.run([*SARK, *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


@pytest.mark.parametrize("flag", ["local", "=http://127.0.0.1:8000", "local=ftp://127.0.0.1"])
def test_join_with_a_malformed_endpoint_exits_2_naming_it(flag: str, tmp_path: Path) -> None:
    gate = "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWJWoaqZhDaoEFshF7Rh1bpY9ohihFhzcW6d69Lr2NASuq"
    done = _sark("join", "--gate", gate, "--data-dir", str(tmp_path), "--endpoint", flag, "--no-calibrate")
    assert done.returncode == 2, done.stderr
    assert "endpoint" in done.stderr


@pytest.mark.parametrize(
    "flags",
    [
        ["--endpoint-on-device", "local=tpu"],  # no such unit
        ["--endpoint-on-device", "local"],  # no unit
        ["--endpoint-on-device", "other=gpu_torch"],  # names no declared server
    ],
)
def test_join_with_a_bad_endpoint_on_device_exits_2_naming_it(flags: list[str], tmp_path: Path) -> None:
    gate = "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWJWoaqZhDaoEFshF7Rh1bpY9ohihFhzcW6d69Lr2NASuq"
    declared = ["--endpoint", "local=http://127.0.0.1:8000"]
    done = _sark("join", "--gate", gate, "--data-dir", str(tmp_path), *declared, *flags, "--no-calibrate")
    assert done.returncode == 2, done.stderr
    assert "endpoint" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_key_variable_missing_from_the_environment_exits_2_naming_the_field(tmp_path: Path) -> None:
    campaign = tmp_path / "black.yaml"
    endpoint = {"url": "https://api.example.com/v1", "model": "m", "api_key_env": "SARK_UNSET_TEST_KEY"}
    job = {"endpoint": endpoint, "generate": {"prompts": "builtin:summaries"}}
    campaign.write_text(json.dumps({"jobs": [job]}))
    env = {k: v for k, v in os.environ.items() if k != "SARK_UNSET_TEST_KEY"}
    done = _sark("submit", str(campaign), "--data-dir", str(tmp_path / "data"), env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "jobs[0].endpoint.api_key_env: SARK_UNSET_TEST_KEY is not set" in done.stderr


async def test_a_cancelled_endpoint_task_sends_nothing_more_and_fails_cancelled() -> None:
    import trio
    from kit.sse_server import Reply, chunk_event, serve_sse

    from drivers import TaskFailed
    from node.worker.targets import Targets

    hang = Reply(pieces=((0.0, chunk_event("a")),), hang=True)
    stop = trio.CancelScope()
    stop.cancel()  # the submitter's cancel, as Runner.cancel gives it to a running endpoint task
    with serve_sse(lambda body, attempt: hang) as server:
        endpoint = Endpoint(model="m", url=server.url)
        generate = GenerateSpec(
            prompts=(Prompt(id="p", text="hi"),), prompts_sha256="0" * 64, endpoint=endpoint
        )
        spec = TaskSpec(compute_unit=ComputeUnit.CPU_ONNX, generate=generate, timeout_s=60)
        with owntime.fail_after(20), pytest.raises(TaskFailed) as caught:
            await Targets(OPEN_LOOPBACK).measure(spec, endpoint, stop)
        seen = list(server.seen)
    assert caught.value.reason == FailureReason.CANCELLED
    assert seen == []


def test_endpoint_on_device_names_a_unit_by_either_spelling() -> None:
    from node.cli.options import endpoints_on_device
    from node.config import load_config

    flags = endpoints_on_device(["local=gpu_torch", "cpu=CPU (ONNX)"])
    assert flags == {"local": "GPU (PyTorch)", "cpu": "CPU (ONNX)"}
    declared = {"local": "http://127.0.0.1:8000", "cpu": "http://127.0.0.1:8001"}
    config = load_config(None, {}, endpoints=declared, endpoints_on_device=flags)
    assert config.endpoints_on_device == {"local": ComputeUnit.GPU_TORCH, "cpu": ComputeUnit.CPU_ONNX}
