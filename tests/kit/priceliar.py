"""A worker that lies about its price, for tests: the real `sark-node join`, its price patched in memory.

Run as `python tests/kit/priceliar.py ADVERTISED SAID join ...`. It is the node's own worker, speaking
the real protocol with its own key; only two names are wrapped, in this process: the profile it
builds (`node.worker.role.device_profile`), so that its signed advert asks ADVERTISED per hour, and
the result it signs (`node.worker.runner.signed_result`), whose device then says SAID: an owner who
changes its price once a task was placed, or who asks a negative, infinite or absurd price (any float
Python reads: "-5", "inf", "nan", "1e308"). Nothing in the product reads this file.
"""

from __future__ import annotations

import sys
from typing import Any

import node.worker.role as role
import node.worker.runner as runner
from node.cli import main
from node.worker.job import Job, signed_result
from protocol import DeviceProfile, Failure, Measurement, Result

_profile = role.device_profile


def lying(advertised: float, said: float) -> None:
    """Wrap the profile and the signed result so that they ask these prices."""

    async def profile(*args: Any, **kwargs: Any) -> DeviceProfile:
        return (await _profile(*args, **kwargs)).with_(price_per_hour=advertised)

    def signed(job: Job, worker: str, key: bytes, device: DeviceProfile, m: Measurement) -> Result | Failure:
        return signed_result(job, worker, key, device.with_(price_per_hour=said), m)

    role.device_profile = profile
    setattr(runner, "signed_result", signed)  # noqa: B010  (the name the runner calls, imported there)


if __name__ == "__main__":  # the measuring children are spawned and import this file: they stay honest
    advertised, said = float(sys.argv[1]), float(sys.argv[2])
    del sys.argv[1:3]
    lying(advertised, said)
    main()
