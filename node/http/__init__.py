"""`sark-node serve`: the original orchestrator's REST API and a live dashboard over a submitter node.

Modules:
    errors   ApiError (NotFound, BadRequest, Refused), Problem and its Rule, UnsafeBind
    guard    Admission, RequestGuard: only this server's Host, only its own or allowed Origins
    bodies   request bodies: size cap (413), JSON objects, campaigns only as JSON or YAML (415)
    vetting  a posted campaign validated in a child (`node.intake`) off the event loop; URL problems
    state    ApiState: the swarm's peers as discovery sees them, campaigns run by CampaignLoop
    shapes   the seeds' JSON shapes built from peers, tasks and stored campaigns
    routes   Endpoints: the handlers of every /api endpoint
    openapi  the hand-written OpenAPI schema served at /api/openapi.json
    app      build_app (Starlette, bearer token), serve_http (Hypercorn on trio), bind checks
"""

from __future__ import annotations

from node.http.app import build_app, check_bind, is_loopback, parse_bind, serve_http
from node.http.errors import ApiError, BadRequest, NotFound, Problem, Refused, Rule, UnsafeBind
from node.http.guard import Admission, RequestGuard, admission
from node.http.state import ApiState, ServeOptions, open_state

__all__ = [
    "Admission",
    "ApiError",
    "ApiState",
    "BadRequest",
    "NotFound",
    "Problem",
    "Refused",
    "RequestGuard",
    "Rule",
    "ServeOptions",
    "UnsafeBind",
    "admission",
    "build_app",
    "check_bind",
    "is_loopback",
    "open_state",
    "parse_bind",
    "serve_http",
]
