"""The dashboard in headless Chromium (DevTools protocol over a websocket): peers appear, a campaign's
tasks move to done, the results matrix fills, and the page logs no console error or exception.

Waits are promises in the page (a MutationObserver) awaited under a deadline; no sleeps.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from kit import owntime
from kit.chromium import chromium_env
from trio_websocket import WebSocketConnection, open_websocket_url

from labs.views.test_http_api import ModelServer, Served, model_server, seeds_body, start_serve

CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
__all__ = ["model_server"]  # the fixture, re-used from test_http_api

WAIT_FOR = """
(selector) => new Promise(resolve => {
  const done = () => {
    const el = document.querySelector(selector);
    if (el) { resolve(el.outerHTML); return true; }
  };
  if (done()) return;
  const observer = new MutationObserver(() => { if (done()) observer.disconnect(); });
  observer.observe(document, { subtree: true, childList: true, attributes: true });
})
"""


class Cdp:
    """A tiny DevTools client on one page session: commands by id, events collected."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.session = ""
        self.problems: list[str] = []
        self.loaded = trio.Event()

    async def pump(self) -> None:
        while True:
            message = json.loads(await self._ws.get_message())
            if "id" in message and message["id"] in self._waiting:
                await self._waiting.pop(message["id"]).send(message)
            else:
                self._note(message)

    def _note(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Page.loadEventFired":
            self.loaded.set()
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.problems.append(f"console: {params.get('args')}")
        elif method == "Runtime.exceptionThrown":
            self.problems.append(f"exception: {params['exceptionDetails']}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.problems.append(f"log: {params['entry']['text']}")

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[ident] = send
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        await self._ws.send_message(json.dumps(message))
        reply = await receive.receive()
        assert "error" not in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    async def wait_for(self, selector: str, seconds: float) -> str:
        """The outerHTML of the first element matching `selector`, once the page shows one."""
        with owntime.fail_after(seconds):
            reply = await self.send(
                "Runtime.evaluate",
                expression=f"({WAIT_FOR})({json.dumps(selector)})",
                awaitPromise=True,
                returnByValue=True,
            )
        assert "exceptionDetails" not in reply, reply
        return str(reply["result"]["value"])

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        reply = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in reply, reply
        return reply["result"]["value"]

    async def open(self, url: str, seconds: float) -> None:
        """Navigate and wait for the page's load event."""
        self.loaded = trio.Event()
        await self.send("Page.navigate", url=url)
        with owntime.fail_after(seconds):
            await self.loaded.wait()


async def _devtools_url(proc: trio.Process) -> str:
    assert proc.stderr is not None
    seen = b""
    with owntime.fail_after(30):
        async for chunk in proc.stderr:
            seen += chunk
            found = re.search(rb"DevTools listening on (ws://\S+)", seen)
            if found:
                return found.group(1).decode()
    raise AssertionError(f"chromium printed no DevTools address: {seen[-500:]!r}")


async def _drain(proc: trio.Process) -> None:
    assert proc.stderr is not None
    async for _ in proc.stderr:
        pass


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Cdp]:
    args = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "about:blank",
    ]
    # a zone 14 h off UTC: a local clock cannot pass as UTC
    with chromium_env(TZ="Pacific/Kiritimati") as env:
        async with trio.open_nursery() as nursery:
            proc = await trio.lowlevel.open_process(
                args,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
            )
            try:
                url = await _devtools_url(proc)
                nursery.start_soon(_drain, proc)
                async with open_websocket_url(url, max_message_size=64 << 20) as ws:
                    cdp = Cdp(ws)
                    nursery.start_soon(cdp.pump)
                    target = await cdp.send("Target.createTarget", url="about:blank")
                    attached = await cdp.send(
                        "Target.attachToTarget", targetId=target["targetId"], flatten=True
                    )
                    cdp.session = attached["sessionId"]
                    for domain in ("Runtime", "Log", "Page"):
                        await cdp.send(f"{domain}.enable")
                    yield cdp
                    nursery.cancel_scope.cancel()
            finally:
                os.killpg(proc.pid, signal.SIGKILL)
                with trio.CancelScope(shield=True):
                    await proc.wait()
                    if proc.stderr is not None:
                        await proc.stderr.aclose()
                shutil.rmtree(tmp_path / "chromium", ignore_errors=True)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = start_serve(tmp_path / "serve")
    try:
        yield s
    finally:
        s.stop()


async def test_dashboard_shows_peers_and_a_campaign_to_done(
    page: Cdp, served: Served, model_server: ModelServer
) -> None:
    await page.open(f"{served.url}/", 30)
    peer = await page.wait_for("tr[data-peer]", 60)
    assert 'data-status="active"' in peer
    assert "CPU (ONNX)" in peer

    async with httpx.AsyncClient() as client:
        r = await client.post(f"{served.api}/campaigns", json=seeds_body(model_server.model_url), timeout=60)
    assert r.status_code == 201
    cid = r.json()["campaign_id"]
    section = await page.wait_for(f'section[data-campaign="{cid}"][data-status="completed"]', 90)
    assert f'data-task="{cid}-job-0-0" data-state="done"' in section
    assert '<td class="ok">done</td>' in section
    assert "100% (" not in section  # a finished task shows that it is done, not its last phase
    assert 'data-state="unschedulable"' in section
    tally = await page.evaluate(
        f"document.querySelector('section[data-campaign=\"{cid}\"] .tally').textContent"
    )
    assert "0 failed, 1 unschedulable" in tally  # a unit no peer has is not a failure
    assert tally.endswith(" 1 done, 0 failed, 1 unschedulable")  # each state named as its row names it
    status = await page.evaluate("document.getElementById('status').textContent")
    shown = re.search(r"updated (\d\d):\d\d:\d\d UTC$", status)
    assert shown is not None, status  # issue 41: UTC like every other time, not a local 12-hour clock
    hours = {f"{(datetime.now(UTC) - timedelta(minutes=m)).hour:02d}" for m in (0, 2)}
    assert shown.group(1) in hours, (status, hours)  # the browser's zone is UTC+14
    await page.wait_for(f'#matrix[data-campaign="{cid}"] td[data-median]', 30)
    await page.wait_for(f'#picture svg g[data-task="{cid}-job-0-0"]', 30)  # the latency picture
    strip = json.loads(await page.evaluate(STRIP))
    assert strip["overTheCaption"] == []
    assert strip["cut"] == []
    shown = await page.evaluate(
        "JSON.stringify([...document.querySelectorAll('#matrix td[data-task]')]"
        ".map(td => [td.dataset.task, td.textContent, td.title]))"
    )
    cells = {task: (text, title) for task, text, title in json.loads(shown)}
    async with httpx.AsyncClient() as client:
        r = await client.get(f"{served.api}/campaigns/{cid}/results", timeout=30)
    rows = {row["JobId"]: row for row in csv.DictReader(io.StringIO(r.text))}
    assert set(cells) == set(rows)  # one cell per task, the page's numbers are results.csv's
    for task, row in rows.items():
        text, title = cells[task]
        if row["Status"] == "Complete":
            median = text.split()[0]  # rounded to what its spread supports, as report.html's matrix
            decimals = len(median.partition(".")[2])
            assert (
                abs(float(median) - float(row["InferenceMsMedian"])) <= 0.5 * 10**-decimals + 5e-4
            )  # csv: 3
            assert re.search(r"\bn \d+", text), text  # its tail ends with its count
            assert ("*" in text) == (row["Unstable"] == "True")
            assert title == (
                "unstable: " + row["UnstableReasons"].replace(";", "; ") if "*" in text else "stable"
            )
        else:  # a unit that did not run says why
            assert text.startswith("unschedulable: ")
            assert "GPU (ONNX) unavailable" in text
    peers = await page.wait_for("#peers tbody tr[data-peer]", 5)
    assert "✗ GPU (ONNX): " in peers  # an unavailable unit with its reason
    assert page.problems == []


STRIP = """
(() => {
  // the latency strip: its ticks, whether one sits on the caption, and whether one runs off the picture
  const svg = document.querySelector("#picture svg"), box = svg.getBoundingClientRect();
  const on = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const ticks = [...svg.querySelectorAll("text.tick")].map(t => [t.textContent, t.getBoundingClientRect()]);
  const caption = svg.querySelector("text.caption").getBoundingClientRect();
  return JSON.stringify({
    ticks: ticks.map(([text]) => text),
    overTheCaption: ticks.filter(([, b]) => on(b, caption)).map(([text]) => text),
    cut: ticks.filter(([, b]) => b.left < box.left || b.right > box.right).map(([text]) => text),
  });
})()
"""


CROSS_SITE = """
async (api, campaign) => {
  const sent = [];
  for (const [path, body] of [["/reset", ""], ["/campaigns", campaign]]) {
    // no-cors with text/plain: a "simple" request the browser sends without asking the server first
    const r = await fetch(api + path, {method: "POST", mode: "no-cors",
                                       headers: {"Content-Type": "text/plain"}, body});
    sent.push(r.type);
  }
  return sent;
}
"""


async def test_a_page_of_another_origin_cannot_reset_or_create(
    page: Cdp, served: Served, model_server: ModelServer
) -> None:
    async with httpx.AsyncClient() as client:
        r = await client.post(f"{served.api}/campaigns", json=seeds_body(model_server.model_url), timeout=60)
        assert r.status_code == 201
        before = (await client.get(f"{served.api}/campaigns", timeout=30)).json()["campaigns"]
    other = model_server.model_url.rsplit("/", 1)[0] + "/"  # 127.0.0.1 on another port: another origin
    await page.open(other, 30)
    body = json.dumps(seeds_body(model_server.model_url))
    with owntime.fail_after(60):
        reply = await page.send(
            "Runtime.evaluate",
            expression=f"({CROSS_SITE})({json.dumps(served.api)}, {json.dumps(body)})",
            awaitPromise=True,
            returnByValue=True,
        )
    assert reply["result"]["value"] == ["opaque", "opaque"], reply  # the browser did send both
    async with httpx.AsyncClient() as client:
        after = (await client.get(f"{served.api}/campaigns", timeout=30)).json()["campaigns"]
    assert [c["campaign_id"] for c in after] == [c["campaign_id"] for c in before]
