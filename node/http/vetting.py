"""A campaign posted over HTTP, checked without stalling the node: validated in a child, models checked.

`vet_campaign` hands the text to the intake child (`node.intake`, started isolated by the one
launcher, `node.submitter.vetting.run_intake`) and waits for it off the event loop, at most
`limiter`'s count at once. What a campaign may cost is the child's own CPU and memory caps
(`node.intake.CPU_S`, `MEMORY_BYTES`), so a YAML bomb costs one child, never the loop. Those caps do
not read the machine's load; a wall-clock deadline did: on a busy machine (the suite beside it, load
average 6) a valid campaign's child waited past 10 s for a core and the campaign was refused
`too_costly`. `VET_DEADLINE_S` is now a backstop only for a child that does not run at all; the
child is killed at it or on cancel. A child that could not start is the server's fault (503),
not the campaign's. `model_problems` turns a model the URL policy refuses into a problem at the
model's field, with the `serve` options that would allow it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import trio

import scheduler as sch
from node.errors import ChildNotStarted
from node.http.errors import ApiError, BadRequest, Problem, Rule
from node.intake import CPU_S, MEMORY_BYTES
from node.submitter.vetting import Limit, Stopped, run_intake
from node.transfer.urls import FetchError, UrlPolicy
from protocol import FailureReason

MAX_VETTING: Final = 2
"""How many campaigns are validated at once; more posts wait their turn (the loop does not)."""
VET_DEADLINE_S: Final = 120.0
"""Wall-clock backstop of one validation child: 12 times its CPU cap (`node.intake.CPU_S`), so only a
child that does not run (stopped, or starved twelve times over) reaches it."""
_AVOID_ALIASES: Final = "write the campaign without YAML anchors and aliases (&name / *name)"


@dataclass(frozen=True)
class Vetted:
    """A campaign the child found valid.

    Attributes:
        campaign: the validated campaign.
        url_fields: model key to the field its URL is written in (``model_url``, ``models[1].url``).
    """

    campaign: sch.Campaign
    url_fields: dict[str, str]


def _costly(message: str) -> BadRequest:
    return BadRequest("not a valid campaign", (Problem("", Rule.TOO_COSTLY, message, _AVOID_ALIASES),))


async def vet_campaign(text: str, limiter: trio.CapacityLimiter) -> Vetted:
    """Validate a campaign's text in a child process.

    Raises:
        BadRequest: the campaign is invalid (every problem at its field), or validating it took
            more CPU time or memory than the child may use, or it did not end by the backstop
            `VET_DEADLINE_S` (rule too_costly).
        ApiError: 503, the child could not start (a broken install, not the campaign).
    """
    try:
        async with limiter:
            answer = await run_intake(text, VET_DEADLINE_S)
    except ChildNotStarted as exc:
        raise ApiError(503, f"the child that validates campaigns could not start ({exc.why})") from None
    if isinstance(answer, Stopped):
        raise _costly(_why(answer))
    if answer.campaign is None:
        problems = [Problem(p.path, Rule.INVALID, p.problem) for p in answer.problems]
        raise BadRequest("not a valid campaign", problems)
    return Vetted(answer.campaign, answer.url_fields)


def _why(stopped: Stopped) -> str:
    """The limit that stopped the validation child, in words."""
    if stopped.limit is Limit.DEADLINE:
        return f"validation did not finish within {VET_DEADLINE_S:g} s"
    return (
        f"validation stopped (exit code {stopped.returncode}): it needs more than {CPU_S} s of CPU or "
        f"{MEMORY_BYTES >> 20} MiB of memory"
    )


def endpoint_keys(
    campaign: sch.Campaign, key_source: Callable[[str], str | None]
) -> tuple[dict[str, str], list[Problem]]:
    """A black-box campaign's API keys, by variable name, from `key_source` (the serving process's
    environment); a problem for each variable that is not set there. The keys stay in memory."""
    keys: dict[str, str] = {}
    problems: list[Problem] = []
    for job in campaign.jobs:
        endpoint = job.spec.generate.endpoint if job.spec.generate else None
        name = endpoint.api_key_env if endpoint else None
        if name is None or name in keys:
            continue
        value = key_source(name)
        if value:
            keys[name] = value
        else:
            path = f"{job.label.split(' ')[0]}.endpoint.api_key_env"
            hint = f"set {name} in the environment of `sark-node serve`"
            problems.append(Problem(path, Rule.INVALID, f"{name} is not set on the server", hint))
    return keys, problems


def local_path_problems(campaign: sch.Campaign) -> list[Problem]:
    """A problem for each model given as a path: the API never reads files on the serving machine."""
    return [
        Problem(
            "model.path" if len(campaign.models) == 1 else f"models[{index}].path",
            Rule.LOCAL_PATH,
            f"model {m.key}: a local path; models must be URLs",
            "give the model as a URL (model_url, or model: {url: ...})",
        )
        for index, m in enumerate(campaign.models)
        if m.path is not None
    ]


def url_problems(vetted: Vetted, policy: UrlPolicy) -> list[Problem]:
    """A problem for each model URL the policy refuses on its text alone (scheme, literal address)."""
    problems = []
    for source in vetted.campaign.models:
        if source.url is None:
            continue
        try:
            policy.check_url(source.url)
        except FetchError as exc:
            field = vetted.url_fields.get(source.key, "model_url")
            problems.append(refusal_problem(field, source.url, exc, policy, resolved=False))
    return problems


def refusal_problem(field: str, url: str, exc: FetchError, policy: UrlPolicy, *, resolved: bool) -> Problem:
    """The problem for a model that could not be fetched, with the options that would allow its URL.

    Args:
        field: where the URL is written.
        url: the model's URL.
        exc: why it could not be fetched.
        policy: the URL policy in force.
        resolved: the refusal came after resolving the host (its address), not from the URL's text.
    """
    if exc.reason is not FailureReason.URL_REFUSED:
        return Problem(field, Rule.MODEL_UNAVAILABLE, f"{url}: {exc.detail}")
    message = f"{url} is refused by the URL policy: {exc.detail}"
    flags = _flags(url, policy, resolved=resolved)
    hint = f"start serve with {' and '.join(flags)} (allow_http, allow_networks in the config file)"
    return Problem(field, Rule.URL_REFUSED, message, hint if flags else "")


def _flags(url: str, policy: UrlPolicy, *, resolved: bool) -> list[str]:
    """The options of `serve` that would let this URL through."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return []
    flags = ["--allow-http"] if parts.scheme == "http" and not policy.allow_http else []
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if host == "localhost" or (address is not None and address.is_loopback):
        flags.append(
            "--allow-network 127.0.0.0/8"
            if address is None or address.version == 4
            else "--allow-network ::1/128"
        )
    elif address is not None and not address.is_global:
        flags.append(f"--allow-network {address}/{address.max_prefixlen}")
    elif address is None and resolved:
        flags.append("--allow-network CIDR (the network the name resolves to)")
    return flags
