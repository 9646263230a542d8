"""A worker that advertises a GPU it does not have and answers its GPU challenge with its CPU: the
rational cheater of issue 38's challenge (right rows, a CPU's speed).

Run as `python tests/kit/gpuliar.py join --profile FILE ...` with a profile that lists a GPU,
`GPU (PyTorch)` usable and a `gpu_tflops["cuda:0"]` claim (the truthful probe of this machine lists
no GPU). It is the node's own worker; only its challenge handler is changed, in this process: the
chain child it starts for `cuda:0` runs the very same kernel on torch's `cpu` device, so its
commitment and rows are right and only its speed tells. Nothing in the product reads this file.
"""

from __future__ import annotations

from typing import Any

import node.worker.challenge as handler
from drivers.measuring.spawning import start_child as _truthful
from node.cli import main


def on_the_cpu(entry: Any, args: tuple[object, ...], **kwargs: Any) -> Any:
    """The real child, started on torch's CPU device whatever device the submitter named."""
    return _truthful(entry, ("cpu",) if entry == handler.CHAIN_CHILD else args, **kwargs)


if __name__ == "__main__":  # the spawned children import this file as a module: they stay truthful
    vars(handler)["start_child"] = on_the_cpu  # the name the handler calls, rebound in this process
    main()
