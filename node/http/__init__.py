"""`sark-node serve`: the original orchestrator's REST API and a live dashboard over a submitter node.

Modules:
    errors   ApiError (NotFound, BadRequest), UnsafeBind
    state    ApiState: the swarm's peers as discovery sees them, campaigns run by CampaignLoop
    shapes   the seeds' JSON shapes built from peers, tasks and stored campaigns
    routes   Endpoints: the handlers of every /api endpoint
    openapi  the hand-written OpenAPI schema served at /api/openapi.json
    app      build_app (Starlette, bearer token), serve_http (Hypercorn on trio), bind checks
"""

from __future__ import annotations

from node.http.app import build_app, check_bind, is_loopback, parse_bind, serve_http
from node.http.errors import ApiError, BadRequest, NotFound, UnsafeBind
from node.http.state import ApiState, ServeOptions, open_state

__all__ = [
    "ApiError",
    "ApiState",
    "BadRequest",
    "NotFound",
    "ServeOptions",
    "UnsafeBind",
    "build_app",
    "check_bind",
    "is_loopback",
    "open_state",
    "parse_bind",
    "serve_http",
]
