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
    sender     the one request loop: closed, open (protocol.arrivals), a fleet deal, a capacity level
    rtt        the vantage point's TCP connect (and TLS handshake) time to a server
    load       load against a model server through `sender`; `run_endpoint` for the spawned child
    fleetload  a fleet member's start instant on this worker's clock (its deal is sent by `sender`)
    servers    model servers the owner declared (gray-box): list their models, try each, statuses
    capacity   a capacity search under an SLO: one endpoint run per level, over-saturated levels ended
    task       one endpoint task -> Measurement (the worker runs it in its own loop)
    tokencount a server's output counted with the campaign's pinned tokenizer, in a spawned child
"""

__all__: list[str] = []
