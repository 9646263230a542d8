"""`sark-node serve` keeps web pages out: foreign Host and Origin, form and text bodies, YAML bombs.

The rules are checked as a table first (no server); then against a real `serve` child on 127.0.0.1,
where every refused request must leave the campaign store as it was. The seeds' curl-style workflow
(no Origin, a JSON body) is the control: it must still work.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import httpx
import psutil
import pytest

from labs.views.test_http_api import ModelServer, Served, model_server, seeds_body, start_serve
from node.errors import ConfigError
from node.http import Admission, Rule, admission
from node.http.vetting import Vetted, url_problems
from node.intake import CPU_S
from node.transfer.urls import UrlPolicy
from scheduler import parse_campaign

__all__ = ["model_server"]  # the fixture, re-used from test_http_api

EVIL: Final = "http://evil.example"
ALLOWED_ORIGIN: Final = "http://bench.example:8080"
ALLOWED_HOST: Final = "bench.local"
HEALTH_BOUND_S: Final = 5.0
"""Generous bound on one /api/health answer while a bomb is validated (the stall it replaces: 42 s)."""

# 9 levels of 9 aliases: 9**9 items once expanded, from a body of under 400 bytes.
BOMB: Final = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
        "name: *i",
        "",
    ]
)

LOOPBACK = ("127.0.0.1", 5077)


# -- the rules as a table ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "server", "ok"),
    [
        ("127.0.0.1:5077", LOOPBACK, True),
        ("localhost:5077", LOOPBACK, True),
        ("LOCALHOST.:5077", LOOPBACK, True),
        ("[::1]:5077", LOOPBACK, True),
        ("evil.example:5077", LOOPBACK, False),  # DNS rebinding
        ("127.0.0.1:5078", LOOPBACK, False),
        ("127.0.0.1", LOOPBACK, False),  # port 80 implied
        ("", LOOPBACK, False),
        ("[::1", LOOPBACK, False),
        ("localhost:99999", LOOPBACK, False),
        ("bench.local:5077", LOOPBACK, True),  # --allowed-host bench.local: any port
        ("bench.local:1", LOOPBACK, True),
        ("pinned.local:7000", LOOPBACK, True),  # --allowed-host pinned.local:7000
        ("pinned.local:5077", LOOPBACK, False),
        ("10.1.2.3:5077", ("10.1.2.3", 5077), True),  # a token-guarded bind on a LAN address
        ("localhost:5077", ("10.1.2.3", 5077), False),
        ("10.1.2.4:5077", ("10.1.2.3", 5077), False),
        ("127.0.0.1:5077", None, False),
    ],
)
def test_host_rules(host: str, server: tuple[str, int] | None, ok: bool) -> None:
    rules = Admission(allowed_hosts=(ALLOWED_HOST, "pinned.local:7000"))
    assert rules.host_ok(host, server) is ok


@pytest.mark.parametrize(
    ("origin", "ok"),
    [
        ("http://127.0.0.1:5077", True),  # the dashboard itself
        ("http://localhost:5077", True),
        (EVIL, False),
        ("http://evil.example:5077", False),
        ("null", False),  # sandboxed frames, file:// pages
        ("http://127.0.0.1:5078", False),
        ("ftp://127.0.0.1:5077", False),
        (ALLOWED_ORIGIN, True),
        ("HTTP://Bench.Example:8080/", True),
        ("http://bench.example", False),
    ],
)
def test_origin_rules(origin: str, ok: bool) -> None:
    rules = Admission(allow_origins=(ALLOWED_ORIGIN,))
    assert rules.origin_ok(origin, LOOPBACK) is ok
    refusal = rules.check({"host": "127.0.0.1:5077", "origin": origin}, LOOPBACK)
    assert (refusal is None) is ok
    if refusal is not None:
        assert refusal.status == 403
        assert refusal.problems[0].rule is Rule.ORIGIN_NOT_ALLOWED
        assert "--allow-origin" in refusal.problems[0].hint


def test_a_request_without_origin_passes_and_a_foreign_host_is_misdirected() -> None:
    rules = Admission()
    assert rules.check({"host": "127.0.0.1:5077"}, LOOPBACK) is None
    refusal = rules.check({"host": "evil.example:5077"}, LOOPBACK)
    assert refusal is not None
    assert refusal.status == 421
    assert (refusal.problems[0].path, refusal.problems[0].rule) == ("header:Host", Rule.HOST_NOT_ALLOWED)
    assert "--allowed-host" in refusal.problems[0].hint


@pytest.mark.parametrize(
    ("hosts", "origins"),
    [
        (("bad host:1",), ()),
        (("a:b",), ()),
        ((), ("evil.example",)),
        ((), ("http://x/path",)),
        ((), ("http://x:99999",)),
    ],
)
def test_bad_flags_are_config_errors(hosts: tuple[str, ...], origins: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError):
        admission(hosts, origins)


def test_a_refused_loopback_url_names_its_field_and_the_flags() -> None:
    text = '{"model_url": "http://127.0.0.1:9/m.onnx", "jobs": [{"compute_unit": "CPU (ONNX)"}]}'
    vetted = Vetted(parse_campaign(text), {"m": "model_url"})
    [problem] = url_problems(vetted, UrlPolicy())
    assert (problem.path, problem.rule) == ("model_url", Rule.URL_REFUSED)
    assert "--allow-http" in problem.hint
    assert "--allow-network 127.0.0.0/8" in problem.hint
    assert url_problems(vetted, UrlPolicy(allow_http=True, allow_networks=("127.0.0.0/8",))) == []


# -- a real server ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = start_serve(
        tmp_path_factory.mktemp("guard"), "--allowed-host", ALLOWED_HOST, "--allow-origin", ALLOWED_ORIGIN
    )
    try:
        yield s
    finally:
        s.stop()


def _port(served: Served) -> int:
    return int(served.url.rsplit(":", 1)[1])


def _campaign_ids(served: Served) -> list[str]:
    listing = httpx.get(f"{served.api}/campaigns", timeout=30).json()
    return [c["campaign_id"] for c in listing["campaigns"]]


@pytest.fixture(scope="module")
def created(guarded: Served, model_server: ModelServer) -> str:
    """One campaign in the store, created the seeds' way (curl: no Origin, a JSON body)."""
    r = httpx.post(f"{guarded.api}/campaigns", json=seeds_body(model_server.model_url), timeout=60)
    assert r.status_code == 201, r.text
    campaign_id: str = r.json()["campaign_id"]
    assert campaign_id in _campaign_ids(guarded)
    return campaign_id


@pytest.fixture
def stored(guarded: Served, created: str) -> list[str]:
    """The store's campaigns before the test (never empty: refusals must leave them as they are)."""
    ids = _campaign_ids(guarded)
    assert created in ids
    return ids


def _refused(r: httpx.Response, status: int, rule: Rule) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["problems"][0]["rule"] == rule.value
    return body


def test_a_foreign_host_is_refused_and_changes_nothing(guarded: Served, stored: list[str]) -> None:
    rebound = {"Host": f"evil.example:{_port(guarded)}"}
    for path in ("/api/campaigns", "/api/workers", "/", "/api/results/files"):
        _refused(httpx.get(f"{guarded.url}{path}", headers=rebound), 421, Rule.HOST_NOT_ALLOWED)
    _refused(httpx.post(f"{guarded.api}/reset", headers=rebound), 421, Rule.HOST_NOT_ALLOWED)
    assert _campaign_ids(guarded) == stored
    named = {"Host": f"{ALLOWED_HOST}:{_port(guarded)}"}
    assert httpx.get(f"{guarded.api}/health", headers=named).status_code == 200
    assert (
        httpx.get(f"{guarded.api}/health", headers={"Host": f"localhost:{_port(guarded)}"}).status_code == 200
    )


def test_a_foreign_origin_is_refused_and_changes_nothing(guarded: Served, stored: list[str]) -> None:
    evil = {"Origin": EVIL}
    _refused(httpx.get(f"{guarded.api}/campaigns", headers=evil), 403, Rule.ORIGIN_NOT_ALLOWED)
    _refused(httpx.post(f"{guarded.api}/reset", headers=evil), 403, Rule.ORIGIN_NOT_ALLOWED)
    body = b'{"model_url": "http://127.0.0.1:9/m.onnx", "jobs": [{"compute_unit": "CPU (ONNX)"}]}'
    for kind in ("text/plain", "application/json"):
        r = httpx.post(
            f"{guarded.api}/campaigns", content=body, headers={**evil, "Content-Type": kind}, timeout=60
        )
        _refused(r, 403, Rule.ORIGIN_NOT_ALLOWED)
    assert _campaign_ids(guarded) == stored


def test_own_and_allowed_origins_pass(guarded: Served) -> None:
    own = {"Origin": guarded.url}
    assert httpx.get(f"{guarded.api}/health", headers=own).status_code == 200
    allowed = httpx.get(f"{guarded.api}/health", headers={"Origin": ALLOWED_ORIGIN})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    preflight = httpx.options(
        f"{guarded.api}/campaigns",
        headers={
            "Origin": ALLOWED_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    dashboard = httpx.get(f"{guarded.url}/", headers=own)
    assert dashboard.status_code == 200
    assert "<html" in dashboard.text.lower()


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_campaign_bodies_are_json_or_yaml_only(
    guarded: Served, stored: list[str], content_type: str | None
) -> None:
    body = b'{"model_url": "http://127.0.0.1:9/m.onnx", "jobs": [{"compute_unit": "CPU (ONNX)"}]}'
    headers = {"Content-Type": content_type} if content_type else {}
    request = httpx.Request("POST", f"{guarded.api}/campaigns", content=body, headers=headers)
    if content_type is None:
        request.headers.pop("Content-Type", None)
    with httpx.Client(timeout=60) as client:
        r = client.send(request)
    problem = _refused(r, 415, Rule.MEDIA_TYPE)["problems"][0]
    assert problem["path"] == "header:Content-Type"
    assert _campaign_ids(guarded) == stored


def test_a_yaml_campaign_is_accepted(guarded: Served, model_server: ModelServer) -> None:
    text = (
        f"model_url: {model_server.model_url}\njobs:\n- compute_unit: CPU (ONNX)\n  num_inference_runs: 3\n"
    )

    r = httpx.post(
        f"{guarded.api}/campaigns", content=text, headers={"Content-Type": "application/yaml"}, timeout=60
    )
    assert r.status_code == 201, r.text
    assert r.json()["campaign_id"] in _campaign_ids(guarded)


def _intake_child(serve: psutil.Process, posting: threading.Thread) -> psutil.Process:
    """The validation child `serve` started for the post in flight, caught while it starts (its
    imports alone take some 0.3 CPU-s; polled every millisecond)."""
    while posting.is_alive():
        for child in serve.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "'node.intake'" in " ".join(child.cmdline()):
                    return child
        time.sleep(0.001)
    raise AssertionError("the post was answered before its validation child was seen")


def test_a_valid_campaign_whose_validation_waits_for_a_core_is_accepted(
    guarded: Served, model_server: ModelServer
) -> None:
    """A busy machine, made certain: the validation child is given no CPU for longer than its whole CPU
    cap (stopped, SIGSTOP, for `CPU_S` + 2 s), and the campaign is accepted once it runs. What a
    posted campaign may cost is the child's own CPU time, which waiting does not spend; a wall-clock
    deadline of 10 s refused this campaign `too_costly` beside a suite run at load 6."""
    posted: dict[str, httpx.Response] = {}

    def post() -> None:
        posted["r"] = httpx.post(
            f"{guarded.api}/campaigns", json=seeds_body(model_server.model_url), timeout=120
        )

    thread = threading.Thread(target=post)
    thread.start()
    try:
        child = _intake_child(psutil.Process(guarded.popen.pid), thread)
        child.suspend()
        try:
            time.sleep(CPU_S + 2)
            assert child.status() == psutil.STATUS_STOPPED  # still waiting: no answer was sent meanwhile
            assert thread.is_alive()
        finally:
            child.resume()
    finally:
        thread.join(timeout=120)
    assert posted["r"].status_code == 201, posted["r"].text


def test_400_names_the_field_and_the_flag(guarded: Served) -> None:
    body = {"model_url": "http://10.255.0.1/m.onnx", "jobs": [{"compute_unit": "CPU (ONNX)"}]}
    problem = _refused(httpx.post(f"{guarded.api}/campaigns", json=body, timeout=60), 400, Rule.URL_REFUSED)[
        "problems"
    ][0]
    assert problem["path"] == "model_url"
    assert "--allow-network 10.255.0.1/32" in problem["hint"]
    body = {"model_url": "http://127.0.0.1:9/m.onnx", "jobs": [{"compute_unit": "CPU (ONNX)", "runs": "x"}]}
    problems = _refused(httpx.post(f"{guarded.api}/campaigns", json=body, timeout=60), 400, Rule.INVALID)[
        "problems"
    ]
    assert [p["path"] for p in problems] == ["jobs[0].runs"]
    _refused(httpx.post(f"{guarded.api}/register", content=b"not json"), 400, Rule.NOT_JSON)


def test_health_answers_while_a_yaml_bomb_is_validated(guarded: Served, stored: list[str]) -> None:
    assert len(BOMB) < 400
    bomb: dict[str, Any] = {}

    def post() -> None:
        started = time.monotonic()
        bomb["response"] = httpx.post(
            f"{guarded.api}/campaigns", content=BOMB, headers={"Content-Type": "application/yaml"}, timeout=60
        )
        bomb["took"] = time.monotonic() - started

    thread = threading.Thread(target=post)
    thread.start()
    answered_during = 0
    try:
        while thread.is_alive():
            health = httpx.get(f"{guarded.api}/health", timeout=HEALTH_BOUND_S)
            assert health.status_code == 200
            answered_during += thread.is_alive()
    finally:
        thread.join(timeout=60)
    assert bomb["response"].status_code == 400, bomb["response"].text
    assert bomb["response"].json()["problems"][0]["rule"] in (Rule.TOO_COSTLY.value, Rule.INVALID.value)
    # a slow validation (the alias bomb runs to the child's deadline) saw health answer meanwhile
    assert answered_during > 0 or bomb["took"] < HEALTH_BOUND_S
    assert _campaign_ids(guarded) == stored
