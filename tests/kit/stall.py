"""A worker that holds a task without running it, for tests: the real `sark-node join`, whose runner
accepts each dispatch and never starts it.

Run as `python tests/kit/stall.py join ...`. It commits to offers and heartbeats as the node does, but
`Runner.dispatch` (wrapped in this process only) marks the job dispatched without queueing it, so
every heartbeat says "queued", forever. Nothing in the product reads this file.
"""

from __future__ import annotations

from node.cli import main
from node.worker.job import Job
from node.worker.runner import Runner


def stalled_dispatch(self: Runner, job: Job) -> None:
    """Dispatched, as far as the submitter can tell; never run."""
    job.dispatched = True
    job.orphaned_at = None


if __name__ == "__main__":
    Runner.dispatch = stalled_dispatch  # type: ignore[method-assign]
    main()
