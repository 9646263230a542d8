"""A reusable test lab: `sark-node` gate and worker processes on loopback, read through JSON event lines.

Modules:
    procs  `Lab`: start gates and workers as real child processes, wait for their events, kill them
"""
