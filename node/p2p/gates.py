"""Connecting to the gates at start-up: one line per failed round, a worker that never gives up.

A worker is a long-running service: a gate restarting, a network coming up late or an outage of
hours must not end it (under systemd's restart limit, exits would stop the service for good). It
tries every gate again, with backoff, for as long as it runs, and says so in one line per round. A
command (`submit`, `plan`, `peers`, `serve`) tries `COMMAND_ROUNDS` rounds quietly and then fails with
one line naming each gate and why it did not answer.

No libp2p import: `host` does the dialling.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Final, Protocol

import trio

from node.errors import ClosedAtHandshake, NodeError, PeerIdMismatch, PeerUnreachable, error_chain

log = logging.getLogger(__name__)

COMMAND_ROUNDS: Final = 3
"""Rounds over the gates a command tries while none answers, 1 s then 2 s apart."""
BACKOFF_S: Final = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""The pause after each failed round (the last repeats): a worker retries at least twice a minute."""
CONNECT_S: Final = 10.0
"""Deadline of one gate's dial."""


class Dialer(Protocol):
    """What connecting needs of a host."""

    async def connect(self, addr: str, timeout: float = 10.0) -> str: ...


class NoGateAnswered(PeerUnreachable):
    """Not one gate answered, after every round a command tries."""

    def __init__(self, gates: Sequence[str], causes: Sequence[str], rounds: int) -> None:
        why = f"no gate answered ({rounds} round{'s' if rounds > 1 else ''}): {'; '.join(causes)}"
        super().__init__(",".join(gates), why)
        self.detail = why  # the whole line: each gate is named in `causes`
        self.args = (why,)


def cause(exc: NodeError) -> str:
    """Why a dial failed, briefly: a peer that answered with another id, in full; the operating
    system's words where the failure came from a socket (libp2p wraps them in "unable to connect ...,
    no addresses established a successful connection"); else the error's own reason."""
    for current in error_chain(exc):
        if isinstance(current, PeerIdMismatch | ClosedAtHandshake):
            return current.why
        if isinstance(current, OSError) and current.errno:
            return os.strerror(current.errno).lower()
    why = exc.why if isinstance(exc, PeerUnreachable) else str(exc)
    return why if len(why) <= 120 else why[:117] + "..."


def backoff(round_: int) -> float:
    """The pause after failed round `round_` (1-based)."""
    return BACKOFF_S[min(round_, len(BACKOFF_S)) - 1]


async def _round(host: Dialer, gates: Sequence[str]) -> tuple[list[str], list[str]]:
    """One round over the gates: those that answered, and for each other, `ADDR: cause`."""
    connected: list[str] = []
    causes: list[str] = []
    for addr in gates:
        try:
            await host.connect(addr, timeout=CONNECT_S)
            connected.append(addr)
        except NodeError as exc:
            causes.append(f"{addr}: {cause(exc)}")
    return connected, causes


async def connect_gates(host: Dialer, gates: Sequence[str], *, patient: bool) -> tuple[str, ...]:
    """The gates that answered the first round in which any did.

    `patient` (a worker): rounds go on with `backoff` until a gate answers, one warning line each.
    Otherwise `COMMAND_ROUNDS` rounds, quietly (INFO), then `NoGateAnswered`.

    Raises:
        NoGateAnswered: not patient, and no gate answered any round.
    """
    round_ = 0
    while gates:
        round_ += 1
        connected, causes = await _round(host, gates)
        if connected:
            if causes:  # one line for the gates that did not answer: a full one says so (P33)
                again = "; tried again while this worker runs" if patient else ""
                log.log(
                    logging.WARNING if patient else logging.INFO,
                    "joined %d of %d gates; not joined: %s%s",
                    len(connected),
                    len(gates),
                    "; ".join(causes),
                    again,
                )
            return tuple(connected)
        if not patient and round_ >= COMMAND_ROUNDS:
            raise NoGateAnswered(gates, causes, round_)
        pause = backoff(round_)
        level = logging.WARNING if patient else logging.INFO
        log.log(
            level, "no gate answered (attempt %d): %s; trying again in %g s", round_, "; ".join(causes), pause
        )
        await trio.sleep(pause)
    return ()


__all__ = ["BACKOFF_S", "COMMAND_ROUNDS", "NoGateAnswered", "backoff", "cause", "connect_gates"]
