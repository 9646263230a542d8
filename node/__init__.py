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
