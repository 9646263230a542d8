"""The original orchestrator's endpoints under /api, answered from the swarm's point of view.

Register, heartbeat, status and reset of a worker cannot command a peer (a worker's state is what
its signed advert, load and the last discovery round say): they answer in the seeds' shape with
``applied: false`` and a message that says so.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Final, final

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

import scheduler as sch
from node.http import shapes
from node.http.bodies import campaign_type, json_object, read_body
from node.http.errors import BadRequest, NotFound, Problem, Rule
from node.http.shapes import ApiJson
from node.http.state import ApiState, CampaignState, Seen

WORKER_STATUSES: Final = ("active", "busy", "cleanup", "faulty")
_FILE_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.csv$")
_NO_COMMAND: Final = (
    "peers are not commanded over HTTP: a worker's status is what its signed advert, load and "
    "the last discovery round say"
)


@final
class Endpoints:
    """Handlers of every /api endpoint over one `ApiState`."""

    def __init__(self, state: ApiState) -> None:
        self._s = state

    def routes(self) -> list[Route]:
        """The /api routes, paths as the seeds' README writes them."""
        table: list[tuple[str, str, Any]] = [
            ("/health", "GET", self.health),
            ("/reset", "POST", self.reset),
            ("/register", "POST", self.register),
            ("/workers", "GET", self.workers),
            ("/workers/{worker_id}", "GET", self.worker),
            ("/workers/{worker_id}/status", "PUT", self.worker_status),
            ("/workers/{worker_id}/heartbeat", "POST", self.heartbeat),
            ("/workers/{worker_id}/health", "GET", self.worker_health),
            ("/health/workers", "GET", self.workers_health),
            ("/workers/{worker_id}/reset", "PUT", self.worker_reset),
            ("/campaigns", "POST", self.create_campaign),
            ("/campaigns", "GET", self.campaigns),
            ("/campaigns/{campaign_id}", "GET", self.campaign),
            ("/campaigns/{campaign_id}/results", "GET", self.campaign_results),
            ("/jobs/{job_id}", "GET", self.job),
            ("/queue/status", "GET", self.queue),
            ("/results/files", "GET", self.result_files),
            ("/results/download/{filename}", "GET", self.download),
            ("/monitoring/stats", "GET", self.stats),
        ]
        return [Route(path, fn, methods=[method]) for path, method, fn in table]

    # -- health and reset ------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """GET /health: the node is up; `redis` is replaced by the swarm's own facts."""
        node = self._s.node
        return ApiJson(
            {
                "status": "healthy",
                "timestamp": shapes.iso(time.time()),
                "redis": {"connected": False, "note": "no Redis: state is the swarm and a SQLite store"},
                "swarm": {
                    "peer_id": node.host.peer_id,
                    "gates": list(node.gates),
                    "peers": len(self._s.peers),
                    "discovery_rounds": self._s.rounds,
                },
            }
        )

    async def reset(self, request: Request) -> Response:
        """POST /reset: stop running campaigns, forget stored ones and the local peer view."""
        stopped = self._s.reset()
        return ApiJson(
            {
                "status": "reset",
                "message": f"stopped {stopped} running campaign(s); store and peer view cleared; "
                "result files kept; peers reappear at the next discovery round",
                "workers_cleared": True,
                "campaigns_cleared": True,
                "jobs_cleared": True,
                "results_cleared": True,
            }
        )

    # -- workers ---------------------------------------------------------------------------------

    def _seen(self, request: Request) -> Seen:
        worker_id = request.path_params["worker_id"]
        seen = self._s.peers.get(worker_id)
        if seen is None:
            raise NotFound("worker", worker_id)
        return seen

    def _worker(self, seen: Seen) -> dict[str, Any]:
        return shapes.worker(seen, time.time(), self._s.options.stale_after_s)

    async def register(self, request: Request) -> Response:
        """POST /register: a device joins with `sark-node join`; known devices are found by name."""
        body = await json_object(request)
        name = body.get("device_name")
        found = [s for s in self._s.peers.values() if name and s.view.profile.device_name == name]
        return ApiJson(
            {
                "worker_id": found[0].view.peer_id if found else None,
                "status": "registered" if found else "not_registered",
                "action": "found" if found else "none",
                "message": "workers join the swarm with `sark-node join --gate ADDR`; "
                + (
                    "this device is in the swarm"
                    if found
                    else "no peer with this device_name is in the swarm"
                ),
            }
        )

    async def workers(self, request: Request) -> Response:
        """GET /workers: every peer discovery has seen."""
        items = [self._worker(s) for s in sorted(self._s.peers.values(), key=lambda s: s.view.peer_id)]
        return ApiJson({"count": len(items), "workers": items})

    async def worker(self, request: Request) -> Response:
        """GET /workers/{id}."""
        return ApiJson(self._worker(self._seen(request)))

    async def worker_status(self, request: Request) -> Response:
        """PUT /workers/{id}/status: validated, answered with the status the swarm reports."""
        seen = self._seen(request)
        body = await json_object(request)
        wanted = body.get("status")
        if wanted not in WORKER_STATUSES:
            message = f"status must be one of {', '.join(WORKER_STATUSES)}"
            raise BadRequest(message, [Problem("status", Rule.INVALID, message)])
        now = time.time()
        status = shapes.worker_status(seen, now, self._s.options.stale_after_s)
        return ApiJson(
            {
                "worker_id": seen.view.peer_id,
                "status": status,
                "requested": wanted,
                "applied": False,
                "message": _NO_COMMAND,
            }
        )

    async def heartbeat(self, request: Request) -> Response:
        """POST /workers/{id}/heartbeat: peers heartbeat over the swarm; this reports the last sighting."""
        seen = self._seen(request)
        status = shapes.worker_status(seen, time.time(), self._s.options.stale_after_s)
        return ApiJson(
            {
                "worker_id": seen.view.peer_id,
                "status": status,
                "action": "observed",
                "last_heartbeat": shapes.iso(seen.last_seen),
                "applied": False,
                "message": _NO_COMMAND,
            }
        )

    async def worker_health(self, request: Request) -> Response:
        """GET /workers/{id}/health."""
        seen = self._seen(request)
        return ApiJson(shapes.health(seen, time.time(), self._s.options.stale_after_s))

    async def workers_health(self, request: Request) -> Response:
        """GET /health/workers."""
        now = time.time()
        items = [shapes.health(s, now, self._s.options.stale_after_s) for s in self._s.peers.values()]
        healthy = sum(1 for h in items if h["is_healthy"])
        return ApiJson(
            {"total": len(items), "healthy": healthy, "unhealthy": len(items) - healthy, "workers": items}
        )

    async def worker_reset(self, request: Request) -> Response:
        """PUT /workers/{id}/reset: nothing to reset here; a faulty peer recovers by answering again."""
        seen = self._seen(request)
        status = shapes.worker_status(seen, time.time(), self._s.options.stale_after_s)
        return ApiJson(
            {
                "worker_id": seen.view.peer_id,
                "status": status,
                "applied": False,
                "message": f"{_NO_COMMAND}; a faulty peer is active again once it answers discovery",
            }
        )

    # -- campaigns and jobs ----------------------------------------------------------------------

    async def create_campaign(self, request: Request) -> Response:
        """POST /campaigns: the seeds' body (or any campaign file as JSON/YAML), run by the scheduler."""
        campaign_type(request)
        raw = await read_body(request)
        try:
            text = raw.decode()
        except UnicodeDecodeError as exc:
            problem = Problem("", Rule.NOT_UTF8, "the body is not UTF-8 text")
            raise BadRequest("the body is not UTF-8", [problem]) from exc
        live = await self._s.create(text)
        state = self._s.campaign(live.run.campaign_id)
        assert state is not None
        return ApiJson(shapes.created(state), status_code=201)

    async def campaigns(self, request: Request) -> Response:
        """GET /campaigns."""
        items = [shapes.campaign(s, *self._s.fronts(s), self._s.speedups(s)) for s in self._s.campaigns()]
        return ApiJson({"count": len(items), "campaigns": items})

    async def campaign(self, request: Request) -> Response:
        """GET /campaigns/{id}."""
        campaign_id = request.path_params["campaign_id"]
        state = self._s.campaign(campaign_id)
        if state is None:
            raise NotFound("campaign", campaign_id)
        return ApiJson(shapes.campaign(state, *self._s.fronts(state), self._s.speedups(state)))

    async def campaign_results(self, request: Request) -> Response:
        """GET /campaigns/{id}/results: the CSV as it stands (final once the campaign completed)."""
        campaign_id = request.path_params["campaign_id"]
        text = self._s.csv(campaign_id)
        if text is None:
            raise NotFound("campaign", campaign_id)
        return Response(
            text,
            media_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{campaign_id}_results.csv"'},
        )

    async def job(self, request: Request) -> Response:
        """GET /jobs/{id}: a seeds job id (campaign-X-job-N) or a task id (campaign-X-job-N-M)."""
        job_id = request.path_params["job_id"]
        campaign_id, sep, rest = job_id.rpartition("-job-")
        state = self._s.campaign(campaign_id) if sep else None
        if state is None:
            raise NotFound("job", job_id)
        tasks = [t for t in state.tasks if t.task_id == job_id or t.task_id.startswith(f"{job_id}-")]
        index = rest.split("-", 1)[0]
        jobs = [j for j in state.campaign.jobs if str(j.index) == index]
        if not jobs or (not tasks and "-" in rest):
            raise NotFound("job", job_id)
        return ApiJson(self._job_json(job_id, state, jobs[0], tasks))

    def _job_json(
        self, job_id: str, state: CampaignState, job: sch.Job, tasks: list[sch.TaskView]
    ) -> dict[str, Any]:
        campaign_id = state.record.campaign_id
        stored = {r.task_id for r in self._s.store.results(campaign_id)}
        rows = self._s.rows(state)
        shown = [sch.ReportTask.of(row, r) for row, r in rows if r is not None and r.merged is None]
        asked = state.campaign.verify_of(job).replicated
        results = shapes.job_results(shown, {t.task_id for t in tasks} & stored, asked=asked)
        states = shapes.breakdown(tasks)
        status = next((k for k in ("running", "pending", "failed") if states[k]), "complete")
        return {
            "job": {
                "job_id": job_id,
                "campaign_id": campaign_id,
                "compute_unit": job.spec.compute_unit.value,
                "status": status if tasks else "pending",
            },
            "result": results[0] if results else None,
            "results": results,
            "tasks": [shapes.task(t) for t in tasks],
        }

    async def queue(self, request: Request) -> Response:
        """GET /queue/status: each peer's own queue, and tasks not yet leased per compute unit."""
        workers = {
            s.view.peer_id: {
                "device_name": s.view.profile.device_name,
                "queue_size": s.view.load.queued,
                "running": s.view.load.running,
            }
            for s in self._s.peers.values()
        }
        waiting: dict[str, int] = {}
        for state in self._s.campaigns():
            for t in state.tasks if state.running else ():
                if t.state in (sch.TaskState.PENDING, sch.TaskState.OFFERED):
                    waiting[t.unit.value] = waiting.get(t.unit.value, 0) + 1
        return ApiJson({"worker_queues": workers, "capability_queues": waiting, "results_queue_size": 0})

    # -- result files ----------------------------------------------------------------------------

    async def result_files(self, request: Request) -> Response:
        """GET /results/files: the flat CSV files in the results folder."""
        files = []
        for path in self._s.result_files():
            st = path.stat()
            files.append(
                {
                    "filename": path.name,
                    "size_mb": round(st.st_size / 1_000_000, 3),
                    "size_bytes": st.st_size,
                    "modified": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(st.st_mtime)),
                }
            )
        return ApiJson({"count": len(files), "files": files})

    async def download(self, request: Request) -> Response:
        """GET /results/download/{filename}: only a plain .csv name directly inside the results folder."""
        name = request.path_params["filename"]
        path = self._file(name)
        return FileResponse(path, media_type="text/csv", filename=path.name)

    def _file(self, name: str) -> Path:
        if not _FILE_NAME.fullmatch(name) or ".." in name:
            raise NotFound("file", name)
        root = self._s.options.results_dir.resolve()
        path = (root / name).resolve()
        if path.parent != root or not path.is_file():
            raise NotFound("file", name)
        return path

    async def stats(self, request: Request) -> Response:
        """GET /monitoring/stats: liveness as the swarm sees it, and the scheduler's lease rules."""
        now = time.time()
        stale = self._s.options.stale_after_s
        statuses = [shapes.worker_status(s, now, stale) for s in self._s.peers.values()]
        states = self._s.campaigns()
        return ApiJson(
            {
                "health_monitor": {
                    "workers": len(statuses),
                    "healthy": sum(1 for s in statuses if s != "faulty"),
                    "faulty": sum(1 for s in statuses if s == "faulty"),
                    "refresh_s": self._s.options.refresh_s,
                    "faulty_after_s": stale,
                    "discovery_rounds": self._s.rounds,
                },
                "timeout_handler": {
                    "lease_ttl_s": self._s.config.lease_ttl_s,
                    "heartbeat_s": self._s.config.heartbeat_s,
                    "retry_budget": 3,
                },
                "campaigns": {
                    "total": len(states),
                    "running": sum(1 for s in states if s.running),
                },
                "uptime_s": round(now - self._s.started, 1),
            }
        )
