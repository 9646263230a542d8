"""A stranger to an `--open` worker's challenge (issue 50, scope 3): a real process with a key of its
own, speaking `/sark/challenge/1.2.0` over the node's own host as a hostile peer would.

    python tests/kit/challenge_stranger.py WORKER_PEER_ID WORKER_ADDR

then one command a line on stdin, each answered with JSON event lines on stdout:

    hold   open a challenge and only ping, once a second, until the worker ends it: `holding` once it
           is ready (the slot is this stranger's), then `closed` with the worker's reason and the seconds
           held (the issue's attack: pings every 25 s held the slot for 90 s, every honest asker busy)
    burn   open one and ask the CPU stream for a round of the GPU chain's size (16,384 rows, 2,048
           steps: the issue's 10 CPU-s per 20 s in the worker's child): `burned` with the answer
    rate   open one more: `paced` with the answer (a stranger starts a few challenges a minute)
"""

from __future__ import annotations

import json
import sys
import time

import trio

from node.p2p.host import Host, HostConfig, open_host
from node.p2p.wire import Channel
from node.submitter.challenge import open_challenge
from protocol import (
    CHALLENGE_PINGS,
    CHALLENGE_ROUNDS,
    ChallengeChainSeed,
    ChallengeOpen,
    ChallengePing,
    ChallengePong,
    ChallengeReady,
    Message,
)

LOOPBACK = "/ip4/127.0.0.1/tcp/0"
WAIT_S = 60.0
"""The longest this stranger waits for one answer (the worker's own windows are far shorter)."""


def say(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def said(answer: Message | BaseException) -> str:
    """An answer in words: a refusal's reason, another frame's kind, or the error that ended the stream."""
    if isinstance(answer, BaseException):
        return f"{type(answer).__name__}: {answer}"
    return str(getattr(answer, "reason", answer.kind))


async def ask(channel: Channel, frame: Message | None) -> Message | BaseException:
    """Send `frame` (None: nothing) and read the answer; the error instead, when the stream ended."""
    try:
        if frame is not None:
            await channel.send(frame)
        return await channel.receive(timeout=WAIT_S)
    except Exception as exc:  # the worker closed the stream: how it ended is the answer
        return exc


async def hold(host: Host, peer: str, addr: str) -> None:
    channel = await open_challenge(host, peer, (addr,))
    began = time.monotonic()
    answer = await ask(channel, ChallengeOpen())
    if isinstance(answer, ChallengeReady):
        say("holding")
        number = 0
        while isinstance(answer := await ask(channel, ChallengePing(round=number)), ChallengePong):
            number = (number + 1) % (CHALLENGE_ROUNDS * CHALLENGE_PINGS)
            await trio.sleep(1.0)
    say("closed", reason=said(answer), held_s=round(time.monotonic() - began, 2))
    await channel.close()


async def burn(host: Host, peer: str, addr: str) -> None:
    channel = await open_challenge(host, peer, (addr,))
    answer = await ask(channel, ChallengeOpen())
    began = time.monotonic()
    if isinstance(answer, ChallengeReady):
        answer = await ask(channel, ChallengeChainSeed(round=0, n=16384, steps=2048, seed=7))
    say("burned", answer=said(answer), seconds=round(time.monotonic() - began, 3))
    await channel.close()


async def rate(host: Host, peer: str, addr: str) -> None:
    channel = await open_challenge(host, peer, (addr,))
    say("paced", answer=said(await ask(channel, ChallengeOpen())))
    await channel.close()


async def main(peer: str, addr: str) -> None:
    commands = {"hold": hold, "burn": burn, "rate": rate}
    async with open_host(HostConfig(key_file=None, listen=(LOOPBACK,))) as host:
        await host.connect(addr, timeout=WAIT_S)
        say("ready", peer_id=host.peer_id)
        lines = trio.wrap_file(sys.stdin)
        while line := (await lines.readline()).strip():
            await commands[line](host, peer, addr)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
