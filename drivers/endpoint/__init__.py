"""The HTTP load client of model servers: one request loop, streamed bodies read under one memory
budget, the declared servers probed, a capacity search, an endpoint task as a Measurement.

Modules:
    sse        server-sent events of an OpenAI-compatible stream, decoded incrementally (pure)
    http1      HTTP/1.1 on trio sockets and h11: a keep-alive pool, each read stamped on arrival
    retrying   how a 429 or 5xx is retried: the policy's bounds, the server's Retry-After
    budget     the memory one run's requests in flight keep together (bytes, pieces), and its cut
    attempt    one attempt's body read as it arrives and decoded under the run's budget
    completion one streamed completion request to a model server, timed per read, as a RequestRecord
    options    EndpointOptions: how a load runs beyond its spec (retries, budget, the drain, ...)
    sender     the one request loop: closed, open (protocol.arrivals), a fleet deal, a capacity level;
               sessions (a dataset's `turns:`): each send a conversation replayed turn by turn, each
               turn carrying the earlier ones with the server's own answers (`Prompt.turn`)
    rtt        the vantage point's round trip to a server (TCP's handshake as the kernel timed it; TLS's)
    floorprobe the submitter's own view of a server: its round trip and its shortest answer (a floor)
    metricsread a server's Prometheus metrics page, read by the submitter itself within limits
    load       load against a model server through `sender`; `run_endpoint` for the spawned child
    fleetload  a fleet member's start instant on this worker's clock (its deal is sent by `sender`)
    servers    model servers the owner declared (gray-box): list their models, try each, statuses
    capacity   a capacity search under an SLO: one endpoint run per level, over-saturated levels ended
    task       one endpoint task -> Measurement (the worker runs it in its own loop)
    tokencount a server's output counted with the campaign's pinned tokenizer, in a spawned child

Fleet load
----------

**Fleet load** (`fleet: N`): `scheduler/language/fleet.py` (pure) parses it into `devices: N` and
`GenerateSpec.fleet_size` (`fleet_seed` if given); `scheduler/state/fleet.py` (pure) makes the arrival
schedule from the seeded SplitMix64 of `protocol/arrivals.py` (the one arrival generator; a lone worker's
open loop plans its sends with it too) (Poisson for `request_rate`, dealt k mod N; C slots per member for
`concurrency`) and turns ping-pong rounds into an offset (the tightest round's midpoint, half its trip as
the bound). On the submitter, `node/submitter/fleet.py` `FleetBook` fixes a fleet's seed and start instant
(`FLEET_LEAD_S`, 5 s, after its first offer, submitter wall clock) and, before each member's offer, probes
that worker's clock over `/sark/clock/1.0.0` (`node/worker/clock.py`); the loop puts the member's
`FleetDeal` (start, offset, bound, planned send times and prompt indices) into the signed offer's spec. The
worker (`drivers/endpoint/fleetload.py`) maps the instant onto its monotonic clock with the offset; the one
request loop (`drivers/endpoint/sender.py`, which also sends a lone worker's closed or open loop and a
capacity level) sends each request at its planned time (late if the client fell behind, and then every
overdue send starts in the same scheduler pass, so a stalled loop catches up at once; what the deadline
prevents is counted as `unsent`) and records `planned_s` and `started_s` after the instant, so all members'
records share the submitter's time base; `client_cpu_pct` is the process's CPU over the run. Every endpoint
row (fleet or not) derives from these raw parts (`protocol/clientload.py`, on the worker and again on the
submitter) the achieved send rate over the schedule's span, the send lag p50/p99, and `ClientSaturated` with
its reason (CPU over 90 %, p99 lag over 10 ms, unsent sends, or under 95 % of the planned sends sent within
the span), shown in results.csv, the terminal table and report.html. Before the members send, the
submitter measures the server itself (`floorprobe`: its round trip, five one-token requests marked
`user: sark-floor-probe`): the floor no member's record may go under (`scheduler.verification.serverfloor`).

The client, and what a server sends
-----------------------------------

The endpoint client (`drivers/endpoint/completion.py`, `drivers/endpoint/http1.py`) starts a request's clock
when its first byte is written (after a connection was taken), stamps each read with the kernel's receive
time (`SO_TIMESTAMPNS`, mapped onto the perf clock, held on for the whole run by a socket of the client's
own, `http1.kernel_stamps`, so the first token's read is stamped too; elsewhere the time the read
returned), and decodes the
body as it arrives (`drivers/endpoint/attempt.py`): reads are queued while the socket holds more (so parsing
never lets bytes pile up behind and share a later stamp) and decoded when it holds none, linear in the bytes
(`drivers/endpoint/sse.py` cuts lines on bytes, each decoded once), with a checkpoint every 2 ms of work, so
a hostile stream never holds the worker's loop (heartbeats) and the run's deadline is met while it parses.
What the requests in flight keep together (lines in progress, data lines, text, one time per delta, queued
reads) is held to one budget per run (`drivers/endpoint/budget.py`, 64 MiB and 2^20 pieces): the request
that would pass it ends `response_too_large` naming the server; what the ended requests' records keep is
held too (32 Mi characters of text, past which a record drops its text as `text_dropped`; 8 Mi token times,
past which a request ends `response_too_large`). A body sent with a content-encoding (never asked:
`identity`) is refused, an error answer's body gets 2 s, and a `Retry-After` that is not delay-seconds or an
HTTP date within a day is treated as absent. A `duration_s` run's deadline is the earlier of the task's
timeout and the duration's end plus a drain of 30 s (`drivers.endpoint.options.DRAIN_S`, AIPerf's grace
period): requests a server still holds then end `deadline`, so a server that never answers cannot keep a
timed job until the timeout. Each record counts the attempts that reached the server (`attempts`, retries
included) and a failed one's `http_status`; the row shows `RequestsSent` and `ErrorShare`, and a figure that
no successful request gave is empty, never 0. A run whose every request failed is no measurement: it fails
`FailureReason.SERVER` ("all 23 requests failed: HTTP 500 x23; the server received 92"), final in the retry
policy (every vantage point meets the same server) (`tests/labs/endpoint/test_hostile_servers.py` over
`tests/kit/hostile.py`, `tests/labs/e2e/test_server_fails.py`).

Endpoint tasks and the capacity search
--------------------------------------

Endpoint tasks load nothing: the runner resolves the target (`node/worker/targets.py`: the owner's declared
URL, or the campaign's URL checked by the URL policy and resolved once, the client then connecting to the
checked address) and runs `drivers.measure_endpoint` in the worker's own trio loop, not in a spawned child:
the bytes are decoded as they arrive under the run's memory budget, with a checkpoint every 2 ms of work
("The client, and what a server sends" above), so no server can pause the loop that carries the heartbeats
(the target still says a child should parse untrusted bytes: a gap, narrowed). The measurement's
`generation` has the round trip (`rtt_ms`, TCP's handshake), goodput under the SLOs, errors by kind, and token
counts from the usage chunk (else counted and flagged). A capacity search (`generate.capacity`,
`drivers/endpoint/capacity.py` over the pure `protocol/capacity.py`) runs one `drive_endpoint` load per
level that `next_level` picks (doubling, then bisecting between the highest passing and the lowest failing
level); a watch (`EndpointOptions.watch`) judges the level on its ended requests (`saturation`: errors,
misses that `level_requests` no longer allows, first-token times rising with send time) and, once it is
over-saturated, stops sending and lets the requests in flight end unrecorded (not cancelled: a cancel
mid-body abandons httpx's body generator), so the level's records are exactly those its verdict came from.
The measurement keeps every level in `capacity`, and `generation` is the knee level's figures (its records
stay in that level, one copy on the wire).
"""

__all__: list[str] = []
