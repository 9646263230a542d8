"""A worker whose probe claims `GPU (llama.cpp)` on a machine with no GPU build of llama.cpp: the
device that, in the field, runs its "GPU" LLM on the CPU because libcuda or libvulkan is missing.

Run as `python tests/kit/gpuclaim.py join ...`. It is the node's own worker; only the profile its
probe child sent is changed, in this process, to list `GPU (llama.cpp)` usable (the truthful probe
lists it unusable, naming each GPU build's missing library). The measuring children are spawned
afresh and run the real driver: what they record is what llama.cpp did. Nothing in the product reads
this file.
"""

from __future__ import annotations

from typing import Any

import drivers
from node.cli import main
from protocol import ComputeUnit, DeviceProfile, UnitStatus

CLAIMED = UnitStatus(unit=ComputeUnit.GPU_LLAMACPP, usable=True, provider="CUDA0 (claimed by the lab)")
_truthful = drivers.detect_profile_apart


async def claiming_profile(*args: Any, **kwargs: Any) -> DeviceProfile:
    """The real profile, `GPU (llama.cpp)` listed usable."""
    profile = await _truthful(*args, **kwargs)
    units = tuple(CLAIMED if s.unit == CLAIMED.unit else s for s in profile.units)
    return profile.with_(units=units)


if __name__ == "__main__":  # the spawned children import this file as a module: they stay truthful
    drivers.detect_profile_apart = claiming_profile
    main()
