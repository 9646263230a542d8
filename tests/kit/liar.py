"""A hostile worker for tests: the real `sark-node join`, whose measurements lie before it signs them.

Run as `python tests/kit/liar.py join ...`. It is the node's own worker, speaking the real protocol
with its own key; only `drivers.measure` is wrapped, in this process, so that every measurement keeps
its raw samples but claims half their median, as a worker patched to look fast would. Nothing in the
product reads this file.
"""

from __future__ import annotations

from typing import Any

import drivers
from node.cli import main
from protocol import Measurement

_honest = drivers.measure


def lying_measure(*args: Any, **kwargs: Any) -> Measurement:
    """The real measurement, its inference median halved (the samples left as measured)."""
    m = _honest(*args, **kwargs)
    return m.with_(inference_ms=m.inference_ms.with_(median=m.inference_ms.median / 2))


if __name__ == "__main__":  # the measuring children are spawned and import this file: they stay honest
    drivers.measure = lying_measure
    main()
