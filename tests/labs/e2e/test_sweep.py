"""Issue 51, scope 3: a sweep of input length and concurrency against a loopback server, and its
throughput-latency front in results.json and report.html (looked at in headless Chromium).

`sark-node submit` runs one black-box job whose random dataset (exact token lengths under a real BPE
tokenizer) is swept over two input lengths and three concurrency levels: six jobs. The server makes
every request's first token wait longer the more requests it holds, and counts its tokens out at one
rate per request, so more concurrency gives more throughput at more latency: on a quiet machine each
level is a point of the front at its length (a level measured while the machine starves the server
can be beaten; each point's mark is checked against the figures, not the weather). results.json
lists each front (per server and length) with every point's load, throughput, latency,
verification, error share and cost, the front's points marked; report.html draws it (every point,
the front joined) and lists it; the page is screenshot at 1280 px and its front picture must be
drawn, in the page, in colour.
"""

from __future__ import annotations

import base64
import io
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kit import zygote
from kit.bpe import tokenizer_json
from kit.procs import SARK
from kit.sse_server import Reply, scheduled, serve_sse
from PIL import Image

from labs.views.test_http_dashboard import CHROMIUM, Cdp, page
from labs.views.test_report_screens import _look, _problems

__all__ = ["page"]  # the fixture, re-used from test_http_dashboard
LEVELS = [1, 2, 4]
LENGTHS = [16, 48]
RANK_E2E_MS = 60_000  # a bound every point meets: the ranking's choice is the best throughput, not timing


class Queueing:
    """A server whose first token waits 15 ms per request it holds (a queue: those whose answer it has
    not finished), then 8 tokens 4 ms apart."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ends: list[float] = []  # when each answer given will have been sent (monotonic)

    def __call__(self, body: dict[str, object], attempt: int) -> Reply:
        with self.lock:
            now = time.monotonic()
            self.ends = [end for end in self.ends if end > now]
            first_s = 0.015 * (1 + len(self.ends))
            self.ends.append(now + first_s + 8 * 0.004)
        return scheduled(["tok"] * 8, first_s=first_s, every_s=0.004, usage=(20, 8))


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "tok.json").write_bytes(tokenizer_json())
    with serve_sse(Queueing()) as server:
        job = {
            "endpoint": {"url": server.url, "model": "queue"},
            "generate": {
                "tokenizer": "tok.json",
                "dataset": {
                    "random": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 8}, "seed": 2}
                },
                "sweep": {"input_tokens": LENGTHS},
                "num_prompts": 12,
                "concurrency": LEVELS,
            },
        }
        campaign = {"name": "sweep", "jobs": [job], "rank": {"by": "throughput", "e2e_ms": RANK_E2E_MS}}
        (tmp / "sweep.yaml").write_text(json.dumps(campaign))
        args = [*SARK, "submit", str(tmp / "sweep.yaml"), "--workers", "1", "--wait-peers", "1"]
        args += ["--out", str(tmp / "out"), "--data-dir", str(tmp / "data")]
        args += ["--allow-http", "--allow-network", "127.0.0.0/8"]
        env = {**os.environ, "SARK_CALIBRATE": "false", "COLUMNS": "200"}
        done = zygote.run(args, capture_output=True, text=True, timeout=400, env=env, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp / "out"
    return {
        "json": json.loads(next(out.rglob("results.json")).read_text()),
        "html": next(out.rglob("report.html")),
        "terminal": done.stdout,
    }


def test_results_json_lists_each_front_with_every_points_figures(swept: dict[str, Any]) -> None:
    fronts = swept["json"]["fronts"]
    assert [(f["input_tokens"], f["output_tokens"]) for f in fronts] == [(n, None) for n in LENGTHS]
    for front in fronts:
        assert "127.0.0.1" in front["target"] or "queue" in front["target"]
        points = front["points"]
        assert sorted(p["load"] for p in points) == [f"concurrency={c}" for c in LEVELS]
        latencies = [p["latency_ms"] for p in points]
        assert latencies == sorted(latencies)  # listed by latency
        for p in points:
            assert p["throughput"] > 0
            assert p["error_share"] == 0.0
            assert "verified" in p
            assert "cost_per_m_tokens" in p
        assert any(p["on_front"] for p in points)
        print(
            front["target"],
            front["input_tokens"],
            [(p["load"], round(p["throughput"]), round(p["latency_ms"]), p["on_front"]) for p in points],
        )
        by_load = {p["load"]: p for p in points}
        # the queueing server: more requests held, more throughput (four at once against one)
        assert by_load["concurrency=4"]["throughput"] > by_load["concurrency=1"]["throughput"]
        # each point is marked by its own figures: on the front where no other point beats it on both.
        # (Not that every level is on it: on a loaded machine the server's sleeps wake late, and a
        # level measured in such a spell is slower than the one after it, beaten; CI at e462e30 timed
        # concurrency=1 at 159 ms, against 91 ms at concurrency=4.)
        for p in points:
            beaten = any(
                q is not p and q["throughput"] >= p["throughput"] and q["latency_ms"] <= p["latency_ms"]
                and (q["throughput"] > p["throughput"] or q["latency_ms"] < p["latency_ms"])
                for q in points
            )  # fmt: skip
            assert p["on_front"] is not beaten, (p["load"], points)


def test_the_ranking_takes_each_lengths_best_point_in_every_view(swept: dict[str, Any]) -> None:
    document = swept["json"]
    ranking = document["ranking"]
    assert ranking["rule"] == f"output tok/s at E2E median <= {RANK_E2E_MS} ms"
    standings = ranking["standings"]
    assert [(s["input_tokens"], s["rank"]) for s in standings] == [(n, 1) for n in LENGTHS]
    for standing, front in zip(standings, document["fronts"], strict=True):
        best = max(front["points"], key=lambda p: p["throughput"])
        assert (standing["score"], standing["load"]) == (best["throughput"], best["load"])
        assert standing["bounded"]["e2e_ms"] <= RANK_E2E_MS
        assert standing["tier"] == "unchecked"  # no verify: asked: one peer's word, said so
    terminal = " ".join(swept["terminal"].split())
    assert "throughput-latency front per device or server" in terminal
    assert f"Ranking: output tok/s at E2E median <= {RANK_E2E_MS} ms" in terminal
    assert "unchecked · single" in terminal
    on_front = sum(p["on_front"] for f in document["fronts"] for p in f["points"])
    listed = [line for line in swept["terminal"].splitlines() if "concurrency=" in line and "│" in line]
    assert len(listed) >= on_front + len(standings)  # each point on a front, then each standing's point
    html = swept["html"].read_text()
    assert html.count('<tr data-rank="1">') == len(LENGTHS)


def _keep(image: Image.Image) -> None:
    """The front's screenshot into `SARK_SHOTS` when set (to look at)."""
    shots = os.environ.get("SARK_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        image.save(Path(shots) / "front.png")


FRONT = """
(() => {
  const figure = document.getElementById("front");
  const box = figure.getBoundingClientRect();
  return JSON.stringify({
    svg: !!figure.querySelector("svg"), note: figure.classList.contains("not-drawn"),
    box: {x: box.left + window.scrollX, y: box.top + window.scrollY, width: box.width, height: box.height},
    points: document.querySelectorAll("#front-points tbody tr").length,
  });
})()
"""


@pytest.mark.chromium
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
async def test_report_html_draws_the_front_and_reads_at_1280_px(page: Cdp, swept: dict[str, Any]) -> None:
    seen, png, pdf = await _look(page, swept["html"])
    assert _problems(seen, png, pdf) == []
    assert page.problems == []
    front = json.loads(await page.evaluate(FRONT))
    assert front["svg"]
    assert not front["note"]
    assert front["points"] == len(LEVELS) * len(LENGTHS)
    assert 300 < front["box"]["width"] <= 1280
    clip = {**front["box"], "scale": 1}
    shot = await page.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
    image = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    _keep(image)
    colours = image.getcolors(maxcolors=1 << 20) or []
    # the two fronts' lines in matplotlib's first two colours (C0 blue, C1 orange), drawn in the picture
    assert any(abs(r - 31) < 20 and abs(g - 119) < 20 and abs(b - 180) < 20 for _, (r, g, b) in colours)
    assert any(abs(r - 255) < 20 and abs(g - 127) < 20 and abs(b - 14) < 30 for _, (r, g, b) in colours)
