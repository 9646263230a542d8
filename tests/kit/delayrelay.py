"""A TCP relay between two hosts of a test or benchmark: it holds each chunk a set delay each way,
counts the bytes, and keeps the order in which the two directions spoke (its flights).

A flight is a run of chunks in one direction. Holding the way back (`hold_back`) shows what a
protocol sends before it has heard anything, without reading a clock: the tests pin with it that a
kad request leaves whole in its first flight; `benchmarks/conn_cost.py` times the round trips at two
delays.
"""

from __future__ import annotations

from typing import Any

import trio

OUT, BACK = "out", "back"


class DelayRelay:
    """Relays 127.0.0.1:`port` to 127.0.0.1:`target_port`, each chunk `delay` seconds late."""

    def __init__(self, target_port: int, delay: float = 0.0) -> None:
        self.target_port = target_port
        self.delay = delay
        self.bytes = 0
        self.port = 0
        self.chunks: list[tuple[str, int]] = []
        """(OUT: towards the target, or BACK; its bytes), in the order they were passed on."""
        self.back_open = trio.Event()
        """BACK's chunks wait for it (`hold_back`, `release_back`); set at first."""
        self.back_open.set()
        self._moved = trio.Event()  # set (and replaced) at each chunk passed on

    def hold_back(self) -> None:
        """From now on hold every chunk towards the dialler until `release_back`."""
        self.back_open = trio.Event()

    def release_back(self) -> None:
        self.back_open.set()

    async def until_sent(self, way: str, since: int, size: int) -> None:
        """Until `size` bytes were passed on in one direction among the chunks from `since` on."""
        while self.sent(way, since) < size:
            await self._moved.wait()

    def sent(self, way: str, since: int = 0) -> int:
        """The bytes passed on in one direction among the chunks from `since` on."""
        return sum(size for w, size in self.chunks[since:] if w == way)

    def flights(self, since: int = 0) -> list[tuple[str, int]]:
        """The runs of one direction among the chunks from `since` on: (direction, their bytes)."""
        runs: list[tuple[str, int]] = []
        for way, size in self.chunks[since:]:
            if runs and runs[-1][0] == way:
                runs[-1] = (way, runs[-1][1] + size)
            else:
                runs.append((way, size))
        return runs

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._one, listeners)

    async def _one(self, inbound: trio.SocketStream) -> None:
        outbound = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, inbound, outbound, OUT, nursery.cancel_scope)
            nursery.start_soon(self._pump, outbound, inbound, BACK, nursery.cancel_scope)

    async def _pump(
        self, src: trio.SocketStream, dst: trio.SocketStream, way: str, scope: trio.CancelScope
    ) -> None:
        send, receive = trio.open_memory_channel[tuple[float, bytes]](10_000)

        async def later() -> None:
            async for due, data in receive:
                await trio.sleep_until(due)
                if way == BACK:
                    await self.back_open.wait()
                try:
                    await dst.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                self.chunks.append((way, len(data)))
                self._moved.set()
                self._moved = trio.Event()
            scope.cancel()

        async with trio.open_nursery() as inner:
            inner.start_soon(later)
            try:
                while data := await src.receive_some(65536):
                    self.bytes += len(data)
                    await send.send((trio.current_time() + self.delay, data))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            await send.aclose()


__all__ = ["BACK", "OUT", "DelayRelay"]
