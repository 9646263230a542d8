"""The measuring child and its parent: one spawn seam, one frame, meters stacked around the timed
phase, the device's facts, calibration and the challenge's kernels.

Modules:
    spawning       start_child, the one way drivers start a child: apart from Ctrl-C and the caller's
                   folder, capped (RLIMIT_AS set here only), a start that failed said so
    childio        a spawned child from trio: its next message awaited, the child stopped and reaped
    jobs           what a measuring child is given (no runtime imported)
    frame          the measuring children's frame: boundary, stages, timed loads, meters stacked
    child          the spawned child's side of a measurement: one process's Measurement
    genchild       the spawned child's side of a generate task (load timed, warm-up, one request per prompt)
    harness        measure: the parent side, spawned children, timeout, cancel, the processes pooled
    meters         the Meter shape; peak memory, CPU, NVML sampler, placement, thermal and power state
    energy         EnergyMeter (and IdleEnergy): idle and measured-phase energy from NVML or RAPL (a
                   declared method, never an estimate), or the reason there is none
    telemetry      the sampler thread: CPU clock per core group, temperatures, CPU use and share, NVML GPU
    offers         unit_offers, machine_telemetry: per unit, the energy method and telemetry this
                   device offers, or why not
    sustain        marks on the timed phase's time axis, and a sustained run's timed loop
    stats          the median's confidence interval and the warm-up rule (summaries: protocol.stats)
    outputs        a fingerprint of a model's outputs (rounded, hashed) that replicas of one class compare
    calibrate      CPU matmul throughput and memory bandwidth, cached per device and runtime version
    challengechild the CPU challenge's kernel (matrices from a seed, product, row digests), its child
    chainchild     the GPU challenge's kernel (an exact integer chain of products through torch on the
                   claimed device, the CPU's in tests), its child, and the submitter's recomputation
    device         CPU, RAM, OS, GPUs (NVML, torch, nvidia-smi), runtime versions, fingerprint
"""

__all__: list[str] = []
