"""The OpenAPI 3.0 description of /api, written by hand to match `node.http.routes` exactly."""

from __future__ import annotations

from typing import Any, Final

import scheduler as sch
from node.http.errors import Rule
from protocol import ComputeUnit

JSON = dict[str, Any]

_STR: Final[JSON] = {"type": "string"}
_INT: Final[JSON] = {"type": "integer"}
_NUM: Final[JSON] = {"type": "number"}
_BOOL: Final[JSON] = {"type": "boolean"}
_OBJ: Final[JSON] = {"type": "object"}
_NULL_STR: Final[JSON] = {"type": "string", "nullable": True}


def _obj(required: dict[str, JSON], optional: dict[str, JSON] | None = None) -> JSON:
    return {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}


def _array(items: JSON) -> JSON:
    return {"type": "array", "items": items}


def _ref(name: str) -> JSON:
    return {"$ref": f"#/components/schemas/{name}"}


_WORKER_STATUS: Final[JSON] = {"type": "string", "enum": ["active", "busy", "faulty"]}
_BREAKDOWN: Final[JSON] = _obj({k: _INT for k in ("pending", "running", "complete", "failed")})
_TASK_STATE: Final[JSON] = {"type": "string", "enum": [s.value for s in sch.TaskState]}
_STATES: Final[JSON] = _obj({s.value: _INT for s in sch.TaskState})  # sch.state_counts, every state

SCHEMAS: Final[JSON] = {
    "Error": _obj({"error": _STR, "problems": _array(_ref("Problem"))}),
    "Problem": _obj(
        {
            "path": _STR,
            "rule": {"type": "string", "enum": [r.value for r in Rule]},
            "message": _STR,
            "hint": _STR,
        }
    ),
    "Health": _obj({"status": _STR, "timestamp": _STR, "redis": _OBJ, "swarm": _OBJ}),
    "Reset": _obj(
        {
            "status": _STR,
            "message": _STR,
            "workers_cleared": _BOOL,
            "campaigns_cleared": _BOOL,
            "jobs_cleared": _BOOL,
            "results_cleared": _BOOL,
        }
    ),
    "RegisterRequest": {
        "type": "object",
        "properties": {
            "device_name": _STR,
            "ip_address": _STR,
            "capabilities": _array(_STR),
            "device_info": _OBJ,
        },
    },
    "Registered": _obj(
        {
            "worker_id": _NULL_STR,
            "status": {"type": "string", "enum": ["registered", "not_registered"]},
            "action": {"type": "string", "enum": ["found", "none"]},
            "message": _STR,
        }
    ),
    "Unit": _obj({"unit": _STR, "usable": _BOOL, "reason": _STR}),
    "Worker": _obj(
        {
            "worker_id": _STR,
            "device_name": _STR,
            "ip_address": _STR,
            "capabilities": _array(_STR),
            "device_info": _OBJ,
            "status": _WORKER_STATUS,
            "last_heartbeat": _STR,
            "is_healthy": _BOOL,
            "source": _STR,
            "reachability": _STR,
            "addresses": _array(_STR),
            "units": _array(_ref("Unit")),
            "load": _OBJ,
        }
    ),
    "WorkerList": _obj({"count": _INT, "workers": _array(_ref("Worker"))}),
    "StatusRequest": _obj({"status": {"type": "string", "enum": ["active", "busy", "cleanup", "faulty"]}}),
    "StatusAnswer": _obj(
        {"worker_id": _STR, "status": _WORKER_STATUS, "requested": _STR, "applied": _BOOL, "message": _STR}
    ),
    "HeartbeatAnswer": _obj(
        {
            "worker_id": _STR,
            "status": _WORKER_STATUS,
            "action": _STR,
            "last_heartbeat": _STR,
            "applied": _BOOL,
            "message": _STR,
        }
    ),
    "WorkerHealth": _obj(
        {
            "worker_id": _STR,
            "device_name": _STR,
            "status": _WORKER_STATUS,
            "is_healthy": _BOOL,
            "last_heartbeat": _STR,
            "seconds_since_heartbeat": _NUM,
        }
    ),
    "WorkersHealth": _obj(
        {"total": _INT, "healthy": _INT, "unhealthy": _INT, "workers": _array(_ref("WorkerHealth"))}
    ),
    "WorkerReset": _obj({"worker_id": _STR, "status": _WORKER_STATUS, "applied": _BOOL, "message": _STR}),
    "CampaignRequest": {
        "type": "object",
        "required": ["model_url", "jobs"],
        "properties": {
            "model_url": {"type": "string", "pattern": "^https?://[^/]+"},
            "jobs": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["compute_unit"],
                    "properties": {
                        "compute_unit": {"type": "string", "enum": [u.value for u in ComputeUnit]},
                        "num_inference_runs": {"type": "integer", "minimum": 1},
                    },
                },
            },
        },
    },
    "JobCreated": _obj({"job_id": _STR, "compute_unit": _STR, "status": _STR}),
    "CampaignCreated": _obj(
        {"campaign_id": _STR, "total_jobs": _INT, "status": _STR, "jobs": _array(_ref("JobCreated"))}
    ),
    "Task": _obj(
        {
            "task_id": _STR,
            "job_index": _INT,
            "compute_unit": _STR,
            "state": _TASK_STATE,
            "ended": _BOOL,
            "status": _STR,
            "worker_id": _NULL_STR,
            "device_name": _STR,
            "phase": _NULL_STR,
            "done": _INT,
            "total": _INT,
            "median_ms": {"type": "number", "nullable": True},
            "attempts": _INT,
            "detail": _STR,
            "reasons": _array(_STR),
        }
    ),
    "Campaign": _obj(
        {
            "campaign_id": _STR,
            "name": _STR,
            "model_url": _STR,
            "status": {
                "type": "string",
                "enum": ["running", "completed", "cancelled", "interrupted", "failed"],
            },
            "created_at": _STR,
            "total_jobs": _INT,
            "completed_jobs": _INT,
            "job_breakdown": _BREAKDOWN,
            "states": _STATES,
            "tasks": _array(_ref("Task")),
            "error": _NULL_STR,
            "verification": _array(_ref("GroupVerification")),  # [] when no job asked verify:
        },
        {
            # scheduler.results.Front and Ranking, as results.json has them: [] and null where none
            "fronts": _array(_OBJ),
            "ranking": {"type": "object", "nullable": True},
            # task id -> SpeedupVsCpu as the campaign's files have it now (scheduler.results.speedup)
            "speedups": {"type": "object", "additionalProperties": _STR},
        },
    ),
    "GroupVerification": _obj(  # scheduler.results.GroupVerification: one replica group, as results.json
        {"group": _STR, "job_index": _INT, "outcome": _STR, "replicas": _array(_ref("ReplicaFigure"))},
        {
            **{k: _STR for k in ("device_class", "model", "unit", "reference", "reason")},
            "agreed_ms": {"type": "number", "nullable": True},
            "band": {"type": "number", "nullable": True},
            "networks": _array(_STR),
            "owners": _array(_STR),
            "outliers": _array(_STR),
        },
    ),
    "ReplicaFigure": _obj(
        {"task_id": _STR},
        {
            **{k: _STR for k in ("peer", "device", "network", "owner", "verdict")},
            "figure_ms": {"type": "number", "nullable": True},
        },
    ),
    "CampaignList": _obj({"count": _INT, "campaigns": _array(_ref("Campaign"))}),
    "Result": _obj(
        {"status": _STR, "row": {"type": "object", "additionalProperties": _STR}},
        # the figures typed (numbers, flags, lists) from the derived measurement; null without one
        {"figures": {"type": "object", "nullable": True}},
    ),
    "Job": _obj(
        {
            "job": _obj({"job_id": _STR, "campaign_id": _STR, "compute_unit": _STR, "status": _STR}),
            "result": {"allOf": [_ref("Result")], "nullable": True},
            "results": _array(_ref("Result")),
            "tasks": _array(_ref("Task")),
        }
    ),
    "Queue": _obj(
        {
            "worker_queues": {
                "type": "object",
                "additionalProperties": _obj({"device_name": _STR, "queue_size": _INT, "running": _INT}),
            },
            "capability_queues": {"type": "object", "additionalProperties": _INT},
            "results_queue_size": _INT,
        }
    ),
    "ResultFile": _obj({"filename": _STR, "size_mb": _NUM, "size_bytes": _INT, "modified": _STR}),
    "ResultFiles": _obj({"count": _INT, "files": _array(_ref("ResultFile"))}),
    "Stats": _obj({"health_monitor": _OBJ, "timeout_handler": _OBJ, "campaigns": _OBJ, "uptime_s": _NUM}),
}


def _json(name: str, description: str) -> JSON:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


_CSV: Final[JSON] = {"description": "CSV file", "content": {"text/csv": {"schema": _STR}}}
_ERRORS: Final[dict[str, JSON]] = {
    "401": _json("Error", "a token is set and the request did not carry it"),
    "403": _json("Error", "the request's Origin is neither this server nor one allowed with --allow-origin"),
    "421": _json(
        "Error", "the request's Host is not this server's address nor one allowed with --allowed-host"
    ),
}
_NOT_FOUND: Final[JSON] = _json("Error", "no such item")
_BAD: Final[JSON] = _json("Error", "invalid body or parameter")


def _param(name: str) -> JSON:
    return {"name": name, "in": "path", "required": True, "schema": _STR}


def _op(
    summary: str,
    ok: JSON,
    *,
    code: str = "200",
    params: tuple[str, ...] = (),
    more: dict[str, JSON] | None = None,
    **extra: JSON,
) -> JSON:
    responses: JSON = {code: ok, **_ERRORS}
    if params:
        responses["404"] = _NOT_FOUND
    body = extra.pop("body", None)
    responses.update(more or {})
    if body is not None:
        responses["400"] = _BAD
        responses["413"] = _json("Error", "the body is larger than 1 MiB")
    op: JSON = {"summary": summary, "responses": responses, "parameters": [_param(p) for p in params]}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def _paths() -> JSON:
    w = ("worker_id",)
    return {
        "/health": {"get": _op("Node health", _json("Health", "healthy"))},
        "/reset": {"post": _op("Stop and forget every campaign", _json("Reset", "reset"))},
        "/register": {
            "post": _op(
                "Find a device in the swarm", _json("Registered", "answer"), body=_ref("RegisterRequest")
            )
        },
        "/workers": {"get": _op("Swarm peers", _json("WorkerList", "peers"))},
        "/workers/{worker_id}": {"get": _op("One peer", _json("Worker", "peer"), params=w)},
        "/workers/{worker_id}/status": {
            "put": _op(
                "Reported status (peers are not commanded)",
                _json("StatusAnswer", "status"),
                params=w,
                body=_ref("StatusRequest"),
            )
        },
        "/workers/{worker_id}/heartbeat": {
            "post": _op("Last sighting of a peer", _json("HeartbeatAnswer", "heartbeat"), params=w)
        },
        "/workers/{worker_id}/health": {"get": _op("Peer health", _json("WorkerHealth", "health"), params=w)},
        "/health/workers": {"get": _op("Health of every peer", _json("WorkersHealth", "health"))},
        "/workers/{worker_id}/reset": {
            "put": _op("Reported status (peers are not commanded)", _json("WorkerReset", "status"), params=w)
        },
        "/campaigns": {
            "post": _op(
                "Create and run a campaign",
                _json("CampaignCreated", "created"),
                code="201",
                body=_ref("CampaignRequest"),
                more={
                    "415": _json("Error", "the body is not JSON or YAML (application/json, application/yaml)")
                },
            ),
            "get": _op("Every campaign", _json("CampaignList", "campaigns")),
        },
        "/campaigns/{campaign_id}": {
            "get": _op("One campaign", _json("Campaign", "campaign"), params=("campaign_id",))
        },
        "/campaigns/{campaign_id}/results": {"get": _op("Results as CSV", _CSV, params=("campaign_id",))},
        "/jobs/{job_id}": {
            "get": _op("A job or task and its result", _json("Job", "job"), params=("job_id",))
        },
        "/queue/status": {"get": _op("Queues", _json("Queue", "queues"))},
        "/results/files": {"get": _op("Result CSV files", _json("ResultFiles", "files"))},
        "/results/download/{filename}": {
            "get": _op("Download a result CSV file", _CSV, params=("filename",))
        },
        "/monitoring/stats": {"get": _op("Monitoring", _json("Stats", "stats"))},
    }


def openapi_schema() -> JSON:
    """The schema served at /api/openapi.json."""
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "sark-node HTTP API",
            "version": "1",
            "description": "The original orchestrator's REST API, answered by a sark-node submitter "
            "from its view of the swarm.",
        },
        "servers": [{"url": "/api"}],
        "paths": _paths(),
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
