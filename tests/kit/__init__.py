"""Reusable test labs: `sark-node` processes read through JSON event lines, on loopback or in namespaces.

Modules:
    procs  `Lab`: start gates, workers and any command as real child processes (optionally inside a
           network namespace), wait for their events, kill them
    netns  `NetLab`: h1, h2 on a bridge and h3 behind a NAT, in network namespaces with a per-lab prefix
    routed  `RoutedNet`: h1, h2, h3 (or any hosts) on /24s of their own joined by a router namespace
           (the network rule's lab, the hostile-networks lab)
    dhtservers  child script: honest and hostile DHT servers of this code (ids ground near a key, the
           same Sybils listed at once) and honest providers, on loopback or an address of their own
    walker  `learn_servers`; child script: the hostile-networks lab's asker, walking to a key in its
           namespace under the rule before issue 50 and the node's
    probe  child script: find workers through a gate, then a `/sark/profile` round trip to each
    flood  child script: stream, malformed-frame, raw-TCP and drip flooders, and an honest pinger
    faults `Faults`: kill9, stop/cont, cgroup freeze/thaw, partition/heal, loss, delay, tbf; undoes itself
    netdelay  child script: the NFQUEUE delay shim (netem's stand-in), run inside a namespace
    fleet  `FaultNet` (the lab plus h4), `Fleet` (gates, model server, submitter, workers in namespaces),
           `run_fault` and `run_impaired`: the scenarios tests/faults and benchmarks/chaos.py share
    badfiles  broken and hostile model files (truncated, mislabelled, empty, lying headers, missing
           external data) and the stage each must fail at
    powercap  `advancing_powercap`: a RAPL powercap tree a writer process advances (with wrap-arounds)
    sse_server  `serve_sse`: a scripted OpenAI-compatible streaming server on 127.0.0.1 (faults included)
    hostile  child script: hostile model servers on raw sockets (endless, huge lines, giant headers,
           broken chunking, slowloris, gzip bomb, redirect, 500, 429 with odd Retry-After) and their count
    clockserver  `serve_on_clock`: `serve_sse`'s scripts served from tasks of the test's own trio run,
           so that a test on trio's virtual clock hears each request at the instant it was sent
    liar   child script: a real `join` whose measurements halve their median
    boundliar  child script: a real `join` whose readings are absurd but self-consistent, a lie per task
    loadliar   child script: a `join` load client that signs lying records (a fleet member's fabricated or
               repeated ones, a lone open loop's own schedule or hidden backlog, a closed loop's
               crowded or zero-length ones)
    replicaliar  child script: a `join` replica that halves or shaves (0.72x) its samples, never runs the
           model, advertises a calibration its CPU cannot reach, scatters its processes or predicts
           spot checks (MODE: halve, shave, norun, claim, scatter, predict)
    gpuclaim  child script: a real `join` whose profile claims `GPU (llama.cpp)` usable on a machine with
           no GPU build of llama.cpp (the forced llama.cpp fallback)
    gpuliar  child script: a real `join` that advertises a GPU (`--profile`) and answers its GPU
           challenge with the same kernel on its CPU (right rows, a CPU's speed)
    stall  child script: a `join` worker that commits and heartbeats "queued" forever, never running
    knee   `KneeStub`: a `serve_sse` script whose first token comes later beyond a known number in flight
"""
