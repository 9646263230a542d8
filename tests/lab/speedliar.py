"""Calibrated workers for the challenge lab: the real `sark-node join`, calibrating, by MODE.

Run as `python tests/lab/speedliar.py MODE join ...` with the lab's usual arguments: `--no-calibrate`
(which the lab passes to save time) is dropped, so the worker measures its calibration for real;
by MODE:

- `honest`: nothing else; it is `sark-node join`.
- `fast`: the profile it advertises claims `FACTOR` times the CPU GFLOPS it measured (its memory
  bandwidth as measured): a unique claim, so a class of one that no class median refutes.

Nothing in the product reads this file.
"""

from __future__ import annotations

import sys
from typing import Any

import drivers
from protocol import DeviceProfile

MODES = ("honest", "fast")
FACTOR = 4.0
_honest_profile = drivers.detect_profile_apart


async def faster_profile(*args: Any, **kwargs: Any) -> DeviceProfile:
    """The real profile with its measured cpu_gflops multiplied by FACTOR."""
    profile = await _honest_profile(*args, **kwargs)
    assert profile.calibration is not None, "the lab's fast liar calibrates"
    claimed = profile.calibration.with_(cpu_gflops=profile.calibration.cpu_gflops * FACTOR)
    return profile.with_(calibration=claimed)


if __name__ == "__main__":
    mode = sys.argv.pop(1)
    assert mode in MODES, mode
    sys.argv.remove("--no-calibrate")
    if mode == "fast":
        drivers.detect_profile_apart = faster_profile
    from node.cli import main

    main()
