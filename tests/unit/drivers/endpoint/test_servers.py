"""Declared model servers are probed: listed models, one short stream each, statuses without the URL."""

from __future__ import annotations

import json

from kit.sse_server import Reply, prompt_of, scheduled, serve_sse

from drivers.endpoint.servers import models_url, probe_servers
from protocol import DeviceProfile, EndpointStatus

LISTING = json.dumps({"object": "list", "data": [{"id": "tiny-chat"}, {"id": "broken"}]}).encode()


def _server(body: dict[str, object], attempt: int) -> Reply:
    if not body:  # GET /v1/models
        return Reply(200, (("content-type", "application/json"),), ((0.0, LISTING),))
    if body.get("model") == "broken":
        return Reply(500, (("content-type", "text/plain"),), ((0.0, b"model failed to load"),))
    assert prompt_of(body)
    return scheduled(["OK"], usage=(3, 1))


def test_each_listed_model_is_tried_and_reported_without_the_url() -> None:
    with serve_sse(_server) as server:
        found = probe_servers({"local": server.url})
        paths = [seen.path for seen in server.seen]
    assert found[0] == EndpointStatus(name="local", model="tiny-chat", usable=True)
    assert (found[1].model, found[1].usable) == ("broken", False)
    assert found[1].reason.startswith("server_error")
    assert paths[0] == "/v1/models"
    assert all(server.url not in status.model_dump_json() for status in found)


def test_a_server_that_is_not_there_is_one_unusable_status() -> None:
    with serve_sse(_server) as server:
        url = server.url
    (status,) = probe_servers({"gone": url}, timeout_s=10)
    assert (status.name, status.model, status.usable) == ("gone", "", False)
    assert "GET /v1/models failed" in status.reason


def test_a_listing_that_is_not_openai_is_unusable() -> None:
    html = Reply(200, (("content-type", "text/html"),), ((0.0, b"<html>hi</html>"),))
    with serve_sse(lambda body, attempt: html) as server:
        (status,) = probe_servers({"web": server.url + "/v1/"}, timeout_s=10)
    assert not status.usable


def test_the_profile_carries_the_statuses() -> None:
    fields = {"device_name": "d", "soc": "s", "cores_physical": 1, "cores_logical": 1, "ram_mb": 1}
    fields |= {"os": "Linux", "os_version": "6", "fingerprint": "f"}
    status = EndpointStatus(name="local", model="tiny-chat", usable=True)
    profile = DeviceProfile.model_validate(fields | {"endpoints": (status,)})
    assert DeviceProfile.model_validate_json(profile.model_dump_json()).endpoints == (status,)
    assert models_url("http://h:8000/v1/") == "http://h:8000/v1/models"


async def test_the_worker_probes_again_and_keeps_what_is_served_now() -> None:
    import trio

    from node.worker.targets import LiveProfile, probe_declared, reprobe_forever

    state = {"loaded": False}

    def loading(body: dict[str, object], attempt: int) -> Reply:
        if body and not state["loaded"]:
            return Reply(503, (("content-type", "text/plain"),), ((0.0, b"still loading"),))
        return _server(body, attempt)

    fields = {"device_name": "d", "soc": "s", "cores_physical": 1, "cores_logical": 1, "ram_mb": 1}
    base = DeviceProfile.model_validate(fields | {"os": "Linux", "os_version": "6", "fingerprint": "f"})
    with serve_sse(loading) as server:
        declared = {"local": server.url}
        live = LiveProfile(base.with_(endpoints=await probe_declared(declared)))
        assert not any(s.usable for s in live.get().endpoints)
        state["loaded"] = True
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reprobe_forever, declared, live, 0.1)
                while not any(s.usable for s in live.get().endpoints):
                    await live.changed()
                nursery.cancel_scope.cancel()
    assert [s.model for s in live.get().endpoints if s.usable] == ["tiny-chat"]
