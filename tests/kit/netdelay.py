"""The NFQUEUE delay shim (netem's stand-in): hold each queued packet for a delay, then accept it.

Run inside the namespace whose egress it delays, beside an `iptables -j NFQUEUE --queue-bypass` rule:
    python tests/kit/netdelay.py QUEUE DELAY_MS [JITTER_MS] [LOSS_PCT]
Prints one `ready` JSON line once bound; SIGTERM releases every held packet and exits.
(shared/notes/faults-and-security.md §3; test-only randomness for jitter and loss.)
"""

from __future__ import annotations

import heapq
import json
import random
import select
import signal
import socket
import sys
import time
from typing import Any

from netfilterqueue import NetfilterQueue


class _Stop(Exception):
    pass


def _term(*_: Any) -> None:
    raise _Stop


def main(argv: list[str]) -> None:
    """Delay packets of one queue until SIGTERM."""
    signal.signal(signal.SIGTERM, _term)
    queue, delay = int(argv[1]), float(argv[2]) / 1000
    jitter = float(argv[3]) / 1000 if len(argv) > 3 else 0.0
    loss = float(argv[4]) / 100 if len(argv) > 4 else 0.0
    held: list[tuple[float, int, Any]] = []
    seq = 0

    def on_packet(packet: Any) -> None:
        nonlocal seq
        if random.random() < loss:
            packet.drop()
            return
        due = time.monotonic() + max(0.0, delay + random.uniform(-jitter, jitter))
        heapq.heappush(held, (due, seq, packet))
        seq += 1

    nfq = NetfilterQueue()
    nfq.bind(queue, on_packet, max_len=65536)
    fd = socket.fromfd(nfq.get_fd(), socket.AF_NETLINK, socket.SOCK_RAW)
    print(json.dumps({"event": "ready", "queue": queue}), flush=True)
    try:
        while True:
            wait = max(0.0, held[0][0] - time.monotonic()) if held else 1.0
            if select.select([fd], [], [], wait)[0]:
                nfq.run(block=False)
            now = time.monotonic()
            while held and held[0][0] <= now:
                heapq.heappop(held)[2].accept()  # a verdict after the callback returned works
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        for _, _, packet in held:
            packet.accept()
        nfq.unbind()


if __name__ == "__main__":
    main(sys.argv)
