"""Request bodies as the API reads them: bounded in size, JSON objects, campaigns only as JSON or YAML."""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.requests import Request

from node.http.errors import BadRequest, Problem, Refused, Rule

MAX_BODY: Final = 1 << 20
"""Largest request body read (a campaign is a few KiB)."""
CAMPAIGN_TYPES: Final = frozenset({"application/json", "application/yaml", "application/x-yaml", "text/yaml"})


async def read_body(request: Request) -> bytes:
    """The request body, refused with 413 past `MAX_BODY` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            message = f"the body is larger than {MAX_BODY} bytes"
            raise Refused(413, Problem("", Rule.BODY_TOO_LARGE, message))
        chunks.append(chunk)
    return b"".join(chunks)


async def json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object (any content type: the seeds' README posts ``curl -d '{...}'``)."""
    raw = await read_body(request)
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError) as exc:
        problem = Problem("", Rule.NOT_JSON, "the body is not valid JSON", "send a JSON object")
        raise BadRequest("the body is not valid JSON", [problem]) from exc
    if not isinstance(body, dict):
        problem = Problem("", Rule.NOT_JSON, "the body must be a JSON object", "send a JSON object")
        raise BadRequest("the body must be a JSON object", [problem])
    return body


def campaign_type(request: Request) -> None:
    """Refuse (415) a campaign body that is not JSON or YAML: a form or text/plain is what a page
    elsewhere can post without a CORS preflight."""
    given = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if given not in CAMPAIGN_TYPES:
        problem = Problem(
            "header:Content-Type",
            Rule.MEDIA_TYPE,
            f"a campaign is JSON or YAML, not {given or 'a body without Content-Type'}",
            "send Content-Type: application/json (or application/yaml)",
        )
        raise Refused(415, problem)
