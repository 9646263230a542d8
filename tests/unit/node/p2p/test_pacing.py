"""P34's pacer on trio's virtual clock: at most `most` sends to one server per window, the rest held
until the window closed (plus the margin), each server on its own count."""

from __future__ import annotations

import trio
import trio.testing

from node.p2p.pacing import ProvidePacer


def run_virtual(fn: object) -> None:
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))  # type: ignore[arg-type]


def test_sends_past_the_rate_wait_for_the_next_window_even_when_all_ask_at_once() -> None:
    times: dict[str, list[float]] = {"a": [], "b": []}

    async def main() -> None:
        pacer = ProvidePacer(most=10, window_s=10.0, margin_s=1.0)

        async def send(server: str) -> None:
            await pacer.turn(server)
            times[server].append(trio.current_time())

        async with trio.open_nursery() as nursery:
            for _ in range(25):
                nursery.start_soon(send, "a")
            for _ in range(3):
                nursery.start_soon(send, "b")

    run_virtual(main)
    assert times["a"] == [0.0] * 10 + [11.0] * 10 + [22.0] * 5
    assert times["b"] == [0.0] * 3  # another server's window is its own


def test_a_window_opens_at_the_first_send_after_the_last_one_closed() -> None:
    times: list[float] = []

    async def main() -> None:
        pacer = ProvidePacer(most=2, window_s=10.0, margin_s=1.0)
        for at in (0.0, 5.0, 6.0, 30.0, 31.0, 32.0):
            await trio.sleep_until(at)
            await pacer.turn("a")
            times.append(trio.current_time())

    run_virtual(main)
    # 0 and 5 fill the window opened at 0; 6 waits to 11; 30 opens a new one, 31 fills it, 32 waits to 41
    assert times == [0.0, 5.0, 11.0, 30.0, 31.0, 41.0]
