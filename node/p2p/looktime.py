"""A look's seconds: trio's clock less the seconds the submitter's trio thread waited, runnable, for a CPU.

A look for workers (`Discovery.initial`, and each round it runs) is given `timeout_s` seconds: 5 by
default (`node.cli.campaign.LOOK_S`), 60 with `--wait-peers`. Past Sybils a look reads level after
level of keys, each read a walk, a dial and a Noise handshake done by this process. On a busy laptop the
kernel can leave the process runnable and waiting for a core: at a small share of one (the Sybil-networks
lab's `submit` at nice 10 beside two spinners on its core) the 5 s ran out before the walks reached the
honest level, exit 1, "no worker found (no_answer): 20 peer(s) advertise any unit, but none answered",
while the workers were there and answering. What the machine took from the process is not time the
look had.

So a look counts its own seconds (`LookTime`): the real ones less the thread's run delay since the look
began, the kernel's count of the nanoseconds it was runnable on a run queue and not running
(`/proc/self/task/TID/schedstat`, its second field; sleeping in epoll is not counted, so a look that
waits for answers spends its seconds as before). Idle, the two are the same seconds. A probe's wait for
a provider's answer is counted so too (`within`): the dial and the handshake are this process's work;
and the look's reads of the DHT (`run_delay` of `Node.find_providers`: each request's deadline and each
hop of a walk, `node.p2p.walk`, and the asks of a small swarm's servers, `Kad.lookup_providers`), where
the walks past twenty Sybils' keys timed their requests out on real seconds. So does a reachability
dial-back (`node.p2p.reach`: the prober's dial, and the asker's wait for its answer), where a busy gate
called a reachable worker "relayed". Only these: a probe's slot (`networks.PROBE_SLOT_S`, which orders
probes, never drops one), leases, heartbeats and every other wait of the node stay on trio's clock. The
whole node on such a clock (every timeout, libp2p's own) cost the suite a quarter of its time, measured
side by side (docs/testing.md).

Bounded whatever the machine: a look lasts at most `STRETCH_MAX` times its seconds of real time (a
process that gets no CPU at all still ends its look, and says why it found none).

The cheater's view: a peer cannot make this process wait for a CPU. It can make it work (answer junk,
stall a probe, fill keys), and work and waits for answers are the look's own seconds, spent as before.
On a starved submitter a stalling Sybil's probe holds its in-flight place (of 256) longer, as an honest
worker's may: at most `STRETCH_MAX` times the probe's 3 s, its slot still released at `PROBE_SLOT_S`.
Where the kernel does not say (macOS, a kernel without schedstats), a look's seconds are real ones.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar, final

import trio

T = TypeVar("T")

STRETCH_MAX: Final = 6.0
"""A look's real seconds are at most this many times its own: 30 s for the default 5 s look."""


def run_delay_reader() -> Callable[[], float] | None:
    """A reader of the calling thread's run delay in seconds, or None where the kernel does not say.

    The file is opened at each read (a few microseconds; a look reads it a few times a second): no
    descriptor is held past a look. A read that fails later (the thread is gone) gives the last value."""
    path = f"/proc/self/task/{threading.get_native_id()}/schedstat"

    def read_once() -> float:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return int(os.read(fd, 128).split()[1]) / 1e9
        finally:
            os.close(fd)

    try:
        last = read_once()
    except (OSError, ValueError, IndexError):
        return None

    def read() -> float:
        nonlocal last
        with contextlib.suppress(OSError, ValueError, IndexError):
            last = read_once()
        return last

    return read


def no_delay() -> float:
    """The run delay where the kernel does not say: none (a look's seconds are real ones)."""
    return 0.0


def machine_run_delay() -> Callable[[], float]:
    """The reader of the run delay of the calling thread (the one running trio) where it means
    something: trio's clock is the machine's, and the kernel counts it. On a test's virtual clock
    (`trio.testing.MockClock`) the machine takes none of its seconds: `no_delay` (a reading there made
    the virtual seconds of a test depend on the machine's load)."""
    from trio.testing import MockClock  # light: the check runs once a discovery

    if isinstance(trio.lowlevel.current_clock(), MockClock):
        return no_delay
    return run_delay_reader() or no_delay


@final
class LookTime:
    """`seconds` of a look, counted from now on trio's clock less the seconds `waited` grew by (the run
    delay of the thread running trio), and at most `STRETCH_MAX` times them in real time."""

    def __init__(self, seconds: float, waited: Callable[[], float]) -> None:
        self.seconds = seconds
        self._waited = waited
        self._began = trio.current_time()
        self._waited_before = waited()

    def spent(self) -> float:
        """The look's own seconds so far (never fewer than its real ones over `STRETCH_MAX`)."""
        real = trio.current_time() - self._began
        return max(real - (self._waited() - self._waited_before), real / STRETCH_MAX)

    def left(self) -> float:
        """The look's own seconds left (0 once over): also the fewest real seconds left, so a wait of
        this long never outlasts the look, and one read again after it may find more."""
        return max(0.0, self.seconds - self.spent())

    def over(self) -> bool:
        return self.left() <= 0.0


async def within(seconds: float, waited: Callable[[], float], run: Callable[[], Awaitable[T]]) -> T | None:
    """`run()` given `seconds` of this process's own (a `LookTime`): its value, or None once they ran out.

    A probe's wait is the look's too: a starved submitter's dial and handshake with an honest worker
    are this process's work, and a probe timed out by the machine silenced the worker (the Sybil-networks
    lab's `submit` at nice 10 beside two spinners: the look's own 35 s ran out with both honest workers
    listed and silenced, their probes' 3 s spent waiting for a core); so is each read of the DHT a look
    makes (`node.p2p.walk`, `node.p2p.kad`). The wait lasts at most `seconds` x `STRETCH_MAX` real ones
    (a caller whose `run` takes a timeout of its own gives it that). With `no_delay` (every wait but a
    look's) it is trio's own deadline, with no task to keep it."""
    if waited is no_delay:
        with trio.move_on_after(seconds):
            return await run()
        return None
    time = LookTime(seconds, waited)
    value: T | None = None
    failed: Exception | None = None
    async with trio.open_nursery() as nursery:

        async def bound() -> None:
            while True:  # a wait of the seconds left is at least as long: read them again after it
                left = time.left()
                if left <= 0:
                    break
                await trio.sleep(left)
            nursery.cancel_scope.cancel()

        nursery.start_soon(bound)
        try:
            value = await run()
        except Exception as exc:  # raised as it is, not in the nursery's group
            failed = exc
        nursery.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return value
