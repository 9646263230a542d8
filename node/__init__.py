"""The libp2p edge and composition root: the node's roles, their wiring, and the CLI.

Packages and modules:
    build      what this program is: version, commit, build kind (binary or pip), for --version and reasons
    config     the node's one frozen configuration (file, environment, flags)
    datadir    the data folder (where it is, every path under it) and the settings file; no pydantic
    errors     NodeError and its leaves
    events     structured event lines (`--events`)
    campaignfiles  the files a campaign names (prompts, datasets, tokenizers), read beside it for the parser
    intake     `python -m node.intake`: a campaign (posted, or a file and its files) validated in a child
               process the node can kill; its one answer (`Answer`)
    isolation  how a child that reads untrusted files starts: `-I`, an empty folder, a scrubbed environment
    ownerkey   an owner key (a device owner's Ed25519 seed in a file) and the statement it signs per device
    service    the worker as a user service: systemd unit and launchd agent paths and text (pure)
    p2p        the libp2p edge: host, kad, dht, wire, identity, open_node (the only libp2p importers)
    transfer   model bytes: cache, /sark/blob serving and fetching, URL policy, download
    worker     the worker role: advertising, negotiator, runner, outbox
    submitter  the submitter role: one campaign run, its loop, attempts, discovery, store, outputs
    http       `sark-node serve`: the original orchestrator's REST API and a dashboard
    cli        the `sark-node` command line: the composition root (the only importer of `gate`)

Imports point down this list's roles: `p2p` imports nothing of node's roles; `transfer` uses `p2p`;
`report` renders a campaign for `submitter`, which runs `intake` in a child; `worker` and `submitter`
use `p2p` and `transfer`; `http` uses `submitter`; the gate role (`gate/`) is built on `config` and
`p2p`; `cli` composes everything. tests/unit/repository/test_imports.py pins the order (NODE_ORDER), gate
included.

The daemon and its children
---------------------------

The daemon and its children. `join` (and `gate`) is one long-running process that holds only the network:
libp2p, the DHT, the negotiation, the runner's queue and the outbox. Everything that loads a runtime runs in
a fresh child and ends with it (on Linux forked by a fork server that imported the measuring modules and no
runtime, elsewhere spawned: `drivers/measuring/spawning.py`): the device probe, the calibration and the
declared-server probes
(`drivers/probe/apart.py`: the child tells its stage, then sends the `DeviceProfile` as JSON, which the
parent parses with the protocol's model; a child that fails, dies or outlives its deadline is
`DeviceProbeFailed` naming the stage, and `join` exits 1 with that one line), every measurement
(`drivers/measuring/harness.py` + `child.py` / `genchild.py`: the parent imports only
`drivers/measuring/jobs.py`, the job, and names the child's module for `drivers/measuring/spawning.py` to
start), and campaign intake on the submitter side. `drivers` loads its names lazily, so the daemon never
imports torch, onnxruntime, transformers, matplotlib or numpy. The embedded swarm probes once for all its
in-process workers (one device). libp2p 0.8.1 imports QUIC, WebSocket, mDNS, UPnP, TLS/SECIO, AutoTLS
(ACME), persistent peerstores and Prometheus whether or not they are used; `node/p2p/trim.py`, imported
first by `node/p2p/__init__.py`, serves those modules as stubs whose names raise `LeftOut` if ever called
(each cut names the libp2p file that imports it), and turns off dnspython's DoH and DoQ. Measured
(`benchmarks/footprint.py`): an idle joined worker went from 344 MiB RSS (libtorch and onnxruntime mapped)
to about 80 MiB, at the gate's footprint (docs/operators.md, "What it costs to run").

Trust and bad input
-------------------

Full disks: `node/errors.py` `disk_full` recognises ENOSPC, EDQUOT and SQLite's SQLITE_FULL under any
wrapping, and the `disk_errors(folder, what)` seam turns them into `DiskFull` (one line naming the folder
and what was written, exit 1) around model pinning, the campaign store (one transaction per block) and the
results files (`outputs.write_whole`: a temp file renamed into place). `resume` of an ended campaign only
writes its files. On a worker, a full cache fails the task with `FailureReason.DISK` (partial model removed;
the holders loop stops at once), and a full outbox leaves the result in memory (delivered, but not kept
across a crash). `serve` says a campaign is `completed` only once its files are written and listed
(`Live.status`); a failure while writing them (any `Exception`: a full disk, a folder where a file goes)
fails that campaign alone, with `error: "outputs not written: ..."` in its API object and a
`campaign_failed` event, and the server and its other campaigns go on (`ApiState._write_out`; cancellation
and Ctrl-C are no `Exception` and pass).

Addresses and ids from the user are checked before anything starts (`node/cli/options.py` `check_flags`,
`check_settings`, over `node/p2p/addrs.py` `parse_multiaddr`, `parse_gate`, `parse_peer_id`): a multiaddr
(no space or control character: the `multiaddr` package takes a trailing newline), a gate's ending in
`/p2p/<id>`, an `--allow` a peer id; exit 2 naming the flag (or the setting, from a file or `SARK_*`), in
every command and in `service install`, which also checks the paths that go into the unit or plist
(`node/service.py` `check_words`: no control character, valid UTF-8; named `--config`, `XDG_CONFIG_HOME` or
`HOME`) and runs `systemd-analyze --user verify` on the unit, in a scratch folder, where the tool exists
(refused: exit 1, nothing written). Each install option replaces the file's value; `--no-open`,
`--no-allow-http`, `--calibrate` and `--reset NAME` take one back, and `--allow` without `--open` turns open
mode off.

Offers only from allowed submitters (checked on the Noise connection), signed offers and results, the SSRF
URL policy for models and endpoints, pickle formats refused, torch programs only with the owner's opt-in.
The submitter inspects its local model files as a worker's child does (`node.intake --folder`: pickle
sniffing, zip structure, an ONNX protobuf with a graph walked at the wire level, safetensors and GGUF
headers; no runtime load) and refuses a bad one with exit 2 before sending it. `serve` accepts only its own
Host and Origin (or flagged ones) and JSON/YAML bodies, and validates campaigns in a child process off the
event loop. Exit codes: 0 success, 1 a task failed (or `--strict` and one was unschedulable; `peers` and
`submit` when no worker was found, with the cause; a full disk), 2 bad input, 130 Ctrl-C (one line).
"""

from __future__ import annotations

__all__ = [
    "build",
    "campaignfiles",
    "cli",
    "config",
    "datadir",
    "errors",
    "events",
    "http",
    "intake",
    "isolation",
    "ownerkey",
    "p2p",
    "service",
    "submitter",
    "transfer",
    "worker",
]
