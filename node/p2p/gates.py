"""Connecting to the gates: one line per failed round, a worker that never gives up, and holds a few.

A worker is a long-running service: a gate restarting, a network coming up late or an outage of
hours must not end it (under systemd's restart limit, exits would stop the service for good). It
tries every gate again, with backoff, for as long as it runs, and says so in one line per round. A
command (`submit`, `plan`, `peers`, `serve`) tries `COMMAND_ROUNDS` rounds quietly and then fails with
one line naming each gate and why it did not answer.

Links (issue 50): a worker holds connections to at most `GATE_LINKS` of the gates it lists, tried in a
random order (the operating system's), the others kept as spares (`Links`): a gate that refuses (full:
it closes the connection before the handshake, `ClosedAtHandshake`) or does not answer is passed over for
the next, and a gate lost later is replaced the same way (`node/worker/advertising.py`). A gate holds
`GATE_CONNECTIONS` (2,048), about 1,024 workers: when every device listed the same gates and connected to
all of them, the same first 1,024 devices filled every gate and the rest reached none. Commands connect
to every gate they are given: they are short-lived, and a look at the swarm reads every gate's DHT.

Cheater's view: a device chooses its own gates anyway (it may connect to every gate it knows, or hold
connections open), and nobody reads the order it drew; the rule only keeps an honest device from taking
more of a gate's connections than it needs. It gives a stranger nothing: the draw is the device's own,
and a gate's connections are still open to whoever comes first (its per-address share,
`--max-per-address`, is what bounds one address).

No libp2p import: `host` does the dialling.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Awaitable, Callable, Container, Iterable, Sequence
from typing import Final, Protocol, final

import trio

from node.errors import ClosedAtHandshake, NodeError, PeerIdMismatch, PeerUnreachable, error_chain

log = logging.getLogger(__name__)

COMMAND_ROUNDS: Final = 3
"""Rounds over the gates a command tries while none answers, 1 s then 2 s apart."""
BACKOFF_S: Final = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""The pause after each failed round (the last repeats): a worker retries at least twice a minute."""
CONNECT_S: Final = 10.0
"""Deadline of one gate's dial."""
GATE_LINKS: Final = 3
"""Gates a worker holds connections to at once, at least `RELAY_GATES` (2): a gate lost leaves a NAT'd
worker one relay slot and a connected gate to take the other at, while a spare replaces the lost one."""
_DRAW: Final = random.SystemRandom()
"""The order a worker tries its gates in: the operating system's."""


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


def _peer(addr: str) -> str:
    """The gate an address names (its `/p2p/` id): two addresses of one gate are one link."""
    return addr.rsplit("/p2p/", 1)[-1]


def _full(held: Sequence[str], want: int, addr: str) -> bool:
    """Whether `want` gates are held and `addr` is not one more address of one of them."""
    peers = {_peer(a) for a in held}
    return len(peers) >= want and _peer(addr) not in peers


async def _join(
    connect: Callable[[str], Awaitable[object]], gates: Sequence[str], want: int, held: Sequence[str] = ()
) -> tuple[list[str], list[str], list[str]]:
    """Try `gates` in their order until `want` gates are held (`held` counted): those joined, those
    that did not answer, and for each of these `ADDR: cause`. `connect(gate)` raises a `NodeError`
    saying why not."""
    joined: list[str] = []
    failed: list[str] = []
    causes: list[str] = []
    for addr in gates:
        if _full([*held, *joined], want, addr):
            continue
        try:
            await connect(addr)
        except NodeError as exc:
            failed.append(addr)
            causes.append(f"{addr}: {cause(exc)}")
            continue
        joined.append(addr)
    return joined, failed, causes


async def _round(host: Dialer, gates: Sequence[str], want: int) -> tuple[list[str], list[str]]:
    """One round over the gates, in their order, until `want` answered: those that did, and for each
    gate tried that did not, `ADDR: cause`."""
    connected, _, causes = await _join(lambda addr: host.connect(addr, timeout=CONNECT_S), gates, want)
    return connected, causes


async def connect_gates(
    host: Dialer, gates: Sequence[str], *, patient: bool, rng: random.Random | None = None
) -> tuple[str, ...]:
    """The gates that answered the first round in which any did.

    `patient` (a worker): each round tries the gates in an order drawn from `rng` (the operating
    system's by default) until `GATE_LINKS` answered, and rounds go on with `backoff` until a gate
    answers, one warning line each. Otherwise every gate, `COMMAND_ROUNDS` rounds, quietly (INFO), then
    `NoGateAnswered`.

    Raises:
        NoGateAnswered: not patient, and no gate answered any round.
    """
    gates = list(dict.fromkeys(gates))
    want = GATE_LINKS if patient else len(gates)
    round_ = 0
    while gates:
        round_ += 1
        if patient:
            (rng or _DRAW).shuffle(gates)
        connected, causes = await _round(host, gates, want)
        if connected:
            if causes:  # one line for the gates that did not answer: a full one says so (P33)
                again = "; each a spare, tried again while this worker runs" if patient else ""
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


@final
class Links:
    """A worker's gates after it joined: those it holds connections to (at most `want`), and its spares
    in a drawn order, a lost gate last (tried again when the others are, once it is back).

    While it holds fewer than `want`, the spares are tried again after `backoff` (1 s to 30 s apart, a
    lost gate at once): a full gate is not dialled every few seconds by every device past its cap.
    """

    def __init__(
        self, gates: Sequence[str], held: Sequence[str], rng: random.Random, want: int = GATE_LINKS
    ) -> None:
        self.want = want
        self.held = list(dict.fromkeys(held))
        self.spares = [g for g in dict.fromkeys(gates) if g not in self.held]
        rng.shuffle(self.spares)
        self.failed_fills = 1 if self.short() else 0
        """Fills in a row that left us short: the round that joined us counts as the first."""
        self._due = -float("inf")  # trio time of the next fill while short

    def lose(self, gates: Iterable[str]) -> list[str]:
        """Drop `gates` from those held (they went away): the last spares now. Returns those dropped."""
        gone = set(gates)
        lost = [g for g in self.held if g in gone]
        self.held = [g for g in self.held if g not in gone]
        self.spares += lost
        if lost:
            self.failed_fills, self._due = 0, -float("inf")  # replaced at once, a failure said again
        return lost

    def short(self) -> bool:
        """Whether fewer than `want` gates are held (two addresses of one gate: one)."""
        return len({_peer(g) for g in self.held}) < self.want

    def due(self, now: float) -> bool:
        """Whether to try the spares now: short of `want`, with a spare, past the backoff."""
        return self.short() and bool(self.spares) and now >= self._due

    async def swap(
        self, gate: str, connect: Callable[[str], Awaitable[object]], passed: Container[str] = ()
    ) -> str | None:
        """Hold a spare in place of held `gate` (its relay full): the first spare not in `passed` that
        answers `connect`, tried in order (one that does not answer goes last). `gate` becomes the
        last spare. Returns the spare joined, or None (no spare answered: `gate` is kept)."""
        for spare in [s for s in self.spares if s not in passed]:
            try:
                await connect(spare)
            except NodeError:
                self.spares = [s for s in self.spares if s != spare] + [spare]
                continue
            self.held = [spare if g == gate else g for g in self.held]
            self.spares = [s for s in self.spares if s != spare] + [gate]
            return spare
        return None

    async def fill(
        self, connect: Callable[[str], Awaitable[object]], now: float
    ) -> tuple[list[str], list[str]]:
        """Try each spare once, in order, until `want` are held: those joined, and for each spare tried
        that did not answer, `ADDR: cause`. `connect(gate)` raises a `NodeError` saying why not."""
        spares = self.spares
        joined, failed, causes = await _join(connect, spares, self.want, self.held)
        self.held += joined
        tried = {*joined, *failed}
        self.spares = [g for g in spares if g not in tried] + failed  # those that failed go last
        self.failed_fills = self.failed_fills + 1 if self.short() else 0
        self._due = now + backoff(self.failed_fills) if self.failed_fills else -float("inf")
        return joined, causes


__all__ = [
    "BACKOFF_S", "COMMAND_ROUNDS", "GATE_LINKS", "Links", "NoGateAnswered", "backoff", "cause",
    "connect_gates",
]  # fmt: skip
