"""Independent quorums: replicas' hosts compared by network, as a cheater with several keys on one
machine (or one /64) would try them."""

from __future__ import annotations

import dataclasses

import pytest
from kit.scheduler_harness import MODEL, SHA, peer

from protocol import ComputeUnit
from scheduler import parse_campaign
from scheduler.state import explain
from scheduler.state.replication import candidate
from scheduler.verification import pick_replicas
from scheduler.verification.networks import LOOPBACK, network_of

REFUSE = parse_campaign(
    f"model: {{url: https://example.org/m.onnx, sha256: {SHA}}}\n"
    "verify: {replicas: 2}\njobs: [{compute_unit: CPU (ONNX), devices: all}]\n"
)


@pytest.mark.parametrize(
    ("host", "network"),
    [
        ("127.0.0.1", LOOPBACK),
        ("127.0.0.2", LOOPBACK),  # a second loopback address is the same machine
        ("::1", LOOPBACK),
        ("::ffff:127.0.0.1", LOOPBACK),
        ("10.0.0.1", "10.0.0.0/24"),
        ("10.0.0.200", "10.0.0.0/24"),
        ("10.0.1.1", "10.0.1.0/24"),
        ("::ffff:10.0.0.9", "10.0.0.0/24"),  # a v4-mapped v6 address is its v4 address
        ("2001:db8::1", "2001:db8::/64"),
        ("2001:db8::ffff:2", "2001:db8::/64"),  # one /64: one host's
        ("[2001:db8::5]", "2001:db8::/64"),
        ("2001:db8:0:1::1", "2001:db8:0:1::/64"),
        ("", ""),  # relayed: the submitter never saw its address
        ("relay", ""),
        ("0.0.0.0", ""),
        ("10.0.0.1/24", ""),
    ],
)
def test_a_host_counts_as_its_network(host: str, network: str) -> None:
    assert network_of(host) == network


@pytest.mark.parametrize(
    ("hosts", "quorum"),
    [
        (["127.0.0.1", "127.0.0.2"], 1),  # two keys on one machine, two loopback addresses
        (["2001:db8::1", "2001:db8::2"], 1),  # two addresses of one /64
        (["10.0.0.7", "::ffff:10.0.0.7"], 1),  # v4 and its ::ffff: form
        (["10.0.0.7", "10.0.0.8"], 1),  # one /24
        (["", "10.0.0.7"], 1),  # a relayed peer pairs with nobody
        (["", ""], 0),
        (["10.0.0.7", "10.0.1.7"], 2),  # two networks: a quorum
        (["2001:db8::1", "2001:db8:0:1::1"], 2),
    ],
)
def test_a_quorum_counts_networks_not_address_strings(hosts: list[str], quorum: int) -> None:
    peers = [dataclasses.replace(peer(f"b{i}"), host=h) for i, h in enumerate(hosts)]
    verify = REFUSE.verify_of(REFUSE.jobs[0])
    picked = pick_replicas([candidate(p, ComputeUnit.CPU_ONNX, verify) for p in peers], 2)
    assert len(picked) == quorum
    (plan,) = explain(REFUSE, {"m": MODEL}, peers).jobs
    assert len(plan.chosen) == (2 if quorum == 2 else 0)  # a quorum is placed whole or not at all
    assert bool(plan.shortfall) == plan.unverifiable == (quorum < 2)


def test_the_lab_switch_stays_explicit_and_pairs_one_machine() -> None:
    allowed = parse_campaign(
        f"model: {{url: https://example.org/m.onnx, sha256: {SHA}}}\n"
        "verify: {replicas: 2, same_host: allow}\njobs: [{compute_unit: CPU (ONNX), devices: all}]\n"
    )
    peers = [dataclasses.replace(peer(f"b{i}"), host="127.0.0.1") for i in range(2)]
    (plan,) = explain(allowed, {"m": MODEL}, peers).jobs
    assert len(plan.chosen) == 2
    (refused,) = explain(REFUSE, {"m": MODEL}, peers).jobs
    assert "distinct networks" in refused.shortfall
