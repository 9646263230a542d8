"""Model servers the device's owner declared (gray-box endpoints): what they serve, and whether it works.

`sark-node join --endpoint NAME=URL` declares a local OpenAI-compatible server. The probe lists its
models (`GET /v1/models`) and sends each one short streamed completion through the same client the
measurements use; what answered becomes an `EndpointStatus` in the signed profile. Neither the URL
nor any secret is advertised: submitters match on the served model id only.
"""

from __future__ import annotations

import json
import ssl
from typing import Final

import httpx
import trio

from drivers.endpoint.completion import RetryPolicy, Server, complete, open_client, request_body
from drivers.endpoint.http1 import Pool
from drivers.endpoint.load import completions_url
from protocol import EndpointStatus, GenerateSpec, Prompt, control_characters

PROBE_TIMEOUT_S: Final = 30.0
MAX_LISTING_BYTES: Final = 1 << 20
MAX_MODELS: Final = 16
PROBE_PROMPT: Final = Prompt(id="probe", text="Say OK.")
NO_RETRY: Final = RetryPolicy(max_retries=0)


def models_url(url: str) -> str:
    """The `/v1/models` URL of a server given as its root or its `/v1` base."""
    base = url.rstrip("/")
    return (base if base.endswith("/v1") else base + "/v1") + "/models"


def probe_servers(
    declared: dict[str, str], *, timeout_s: float = PROBE_TIMEOUT_S
) -> tuple[EndpointStatus, ...]:
    """Probe every declared server (name -> URL) and return one status per served model (blocking)."""

    async def all_of() -> tuple[EndpointStatus, ...]:
        found: list[EndpointStatus] = []
        for name, url in sorted(declared.items()):
            found.extend(await probe_server(name, url, timeout_s=timeout_s))
        return tuple(found)

    return trio.run(all_of)


async def probe_server(name: str, url: str, *, timeout_s: float = PROBE_TIMEOUT_S) -> list[EndpointStatus]:
    """List a server's models and try each with one short streamed completion, under `timeout_s`."""
    deadline = trio.current_time() + timeout_s
    async with open_client() as client:
        try:
            with trio.fail_after(max(0.0, deadline - trio.current_time())):
                models = await _list_models(models_url(url))
        except (httpx.HTTPError, trio.TooSlowError, ValueError) as exc:
            reason = f"GET /v1/models failed: {type(exc).__name__}: {exc}"[:500]
            return [EndpointStatus(name=name, usable=False, reason=reason)]
        if not models:
            return [EndpointStatus(name=name, usable=False, reason="GET /v1/models lists no model")]
        return [await _try_model(client, name, url, model, deadline) for model in models[:MAX_MODELS]]


async def _list_models(url: str) -> list[str]:
    """The model ids of an OpenAI `GET /v1/models` answer; ValueError for anything else."""
    body = b""
    listing_client = httpx.AsyncClient(
        timeout=None, trust_env=False, follow_redirects=False, verify=ssl.create_default_context()
    )
    async with listing_client as client, client.stream("GET", url) as response:
        with trio.CancelScope() as reading:  # a cancel, not a break: a break abandons httpx's generator
            async for raw in response.aiter_bytes():
                body += raw
                if len(body) > MAX_LISTING_BYTES:
                    reading.cancel()
    if response.status_code != 200:
        raise ValueError(f"HTTP {response.status_code}")
    if len(body) > MAX_LISTING_BYTES:
        raise ValueError(f"the listing passed {MAX_LISTING_BYTES} bytes")
    listing = json.loads(body)
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        raise ValueError("the answer has no `data` list")
    ids = [entry.get("id") for entry in data if isinstance(entry, dict)]
    # an id a profile could not carry (too long, a control character) is left out, never escaped:
    # a campaign names the served id exactly
    return [i for i in ids if isinstance(i, str) and 0 < len(i) <= 256 and not control_characters(i)]


async def _try_model(client: Pool, name: str, url: str, model: str, deadline: float) -> EndpointStatus:
    spec = GenerateSpec(prompts=(PROBE_PROMPT,), prompts_sha256="0" * 64, max_new_tokens=4)
    server = Server(completions_url(url, chat=True), model)
    outcome = await complete(
        client, server, request_body(model, PROBE_PROMPT, spec), deadline=deadline, retry=NO_RETRY
    )
    record = outcome.record
    if record.error is not None:
        return EndpointStatus(
            name=name, model=model, usable=False, reason=f"{record.error}: {record.error_detail}"[:500]
        )
    return EndpointStatus(name=name, model=model, usable=True)


__all__ = ["models_url", "probe_server", "probe_servers"]
