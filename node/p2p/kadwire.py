"""The kad-dht messages we build and read ourselves, as a standard kad-dht (go, js) sends them.

py-libp2p 0.8.1 attaches our signed peer record (~215 B) to every request it sends, twice to an
ADD_PROVIDER (as sender and in the provider entry), and reads a GET_PROVIDERS refusal as "no
providers" (issue 15). `node.p2p.kad` sends these instead: ids and addresses only (issue 43: a
worker's refresh copies were mostly those records).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from libp2p.kad_dht.pb.kademlia_pb2 import Message
from libp2p.peer.id import ID
from multiaddr import Multiaddr


def add_provider_request(key: bytes, peer: ID, addrs: Sequence[Multiaddr]) -> bytes:
    """An ADD_PROVIDER as a standard kad-dht sends it: our id and addresses, no signed peer record."""
    message = Message(type=Message.MessageType.ADD_PROVIDER, key=key)
    message.providerPeers.add(id=peer.to_bytes(), addrs=[a.to_bytes() for a in addrs])
    return bytes(message.SerializeToString())


def put_value_request(key: bytes, record: Any) -> bytes:
    """A PUT_VALUE of a record libp2p's value store holds, without our signed peer record."""
    message = Message(type=Message.MessageType.PUT_VALUE, key=key)
    message.record.CopyFrom(record)
    message.record.ClearField("timeReceived")  # the receiver sets it
    return bytes(message.SerializeToString())


def get_providers_request(key: bytes) -> bytes:
    """A GET_PROVIDERS of a key, no signed peer record."""
    return bytes(Message(type=Message.MessageType.GET_PROVIDERS, key=key).SerializeToString())


Listed = list[tuple[bytes, list[Multiaddr]]]
"""Peers an answer lists: (peer id bytes, its readable addresses)."""


def providers_of(reply: bytes) -> Listed:
    """The providers a GET_PROVIDERS answer lists.

    Raises:
        ValueError: the answer is no GET_PROVIDERS (protobuf's DecodeError is one too).
    """
    return answer_of(reply)[0]


def answer_of(reply: bytes) -> tuple[Listed, Listed]:
    """The providers and the closer peers a GET_PROVIDERS answer lists.

    Raises:
        ValueError: the answer is no GET_PROVIDERS (protobuf's DecodeError is one too).
    """
    message = Message()
    message.ParseFromString(reply)
    if message.type != Message.MessageType.GET_PROVIDERS:
        raise ValueError(f"answered message type {message.type} to GET_PROVIDERS")
    listed = [
        [(bytes(p.id), _multiaddrs(p.addrs)) for p in peers]
        for peers in (message.providerPeers, message.closerPeers)
    ]
    return listed[0], listed[1]


def _multiaddrs(raw: Any) -> list[Multiaddr]:
    out: list[Multiaddr] = []
    for data in raw:
        try:
            out.append(Multiaddr(data))
        except Exception:  # a foreign server's unreadable address: skip it, keep the others
            continue
    return out


__all__ = [
    "Listed",
    "add_provider_request",
    "answer_of",
    "get_providers_request",
    "providers_of",
    "put_value_request",
]
