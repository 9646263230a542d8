"""A recording harness that plays the node's part for a `Scheduler`, and a small fleet of devices.

`Node` feeds events with an explicit clock, records every command, carries out offers by each
peer's script of reactions, checks the node-side lease rule before passing on results, and
checks the machine's invariants (one ending per task, one FinishCampaign) as it goes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from protocol import (
    ComputeUnit,
    DeclineReason,
    DeviceProfile,
    FailureReason,
    GpuInfo,
    Load,
    ModelRef,
    Phase,
    Reachability,
    UnitStatus,
)
from scheduler import (
    Command,
    DrawKey,
    Event,
    FinishCampaign,
    LeaseReleased,
    OfferCommitted,
    OfferDeclined,
    OfferLost,
    PeersDiscovered,
    PeerView,
    ProgressReported,
    RecordOutcome,
    ResultAccepted,
    ResultRejected,
    Scheduler,
    SendOffer,
    TaskFailedRemotely,
    Tick,
)

SHA = "ab" * 32
KEY = DrawKey(bytes(range(32)))
"""A fixed campaign key for tests (the node draws a fresh one per campaign)."""
MODEL = ModelRef(
    name="mobilenet.onnx", size=14 * 1024 * 1024, sha256=SHA, sources=("https://example.org/m.onnx",)
)

CAMPAIGN_YAML = f"""\
name: mobilenet-fleet
priority: 50
processes: 3
model:
  url: https://example.org/mobilenet.onnx
  sha256: {SHA}
jobs:
  - compute_unit: CPU (ONNX)
    num_inference_runs: 100
    warmup_runs: 10
    load_runs: 3
    devices: all
    require: {{min_ram_gb: 4, os: [Linux, Darwin]}}
    input_shapes: {{input: [1, 3, 224, 224]}}
    timeout_s: 600
    strict_placement: true
  - compute_unit: GPU (ONNX)
    num_inference_runs: 100
"""


def profile(
    name: str,
    *,
    units: Iterable[ComputeUnit] = (ComputeUnit.CPU_ONNX,),
    ram_gb: int = 16,
    os: str = "Linux",
    soc: str = "x86 CPU",
    gpu_vram_mb: int = 0,
    unavailable: Mapping[ComputeUnit, str] | None = None,
) -> DeviceProfile:
    """A device profile with the given usable units (and reasons for the unavailable ones)."""
    statuses = [UnitStatus(unit=u, usable=True) for u in units]
    statuses += [UnitStatus(unit=u, usable=False, reason=r) for u, r in (unavailable or {}).items()]
    gpus = (GpuInfo(name="RTX", vram_mb=gpu_vram_mb, source="nvml"),) if gpu_vram_mb else ()
    return DeviceProfile(
        device_name=name,
        soc=soc,
        cores_physical=4,
        cores_logical=8,
        ram_mb=ram_gb * 1024,
        os=os,
        os_version="6.1",
        gpus=gpus,
        units=tuple(statuses),
        fingerprint=f"fp-{name}",
    )


def peer(name: str, *, reach: str = "direct", load: Load | None = None, **kwargs: object) -> PeerView:
    """A candidate peer whose id is ``12D3-<name>``."""
    return PeerView(
        peer_id=f"12D3-{name}",
        profile=profile(name, **kwargs),  # type: ignore[arg-type]
        load=load or Load(mem_available_mb=8 * 1024),
        reachability=Reachability(reach),
    )


REFUSED_DETAIL = "inference_ms.median: the worker says 1.0, its raw parts give 2.0"
CPU_ONLY_REASON = "no CUDA device (nvidia-smi not found)"


def cpu_fleet(n: int = 3) -> tuple[PeerView, ...]:
    """`n` CPU-only Linux peers whose GPU (ONNX) probe failed."""
    return tuple(peer(f"cpu{i}", unavailable={ComputeUnit.GPU_ONNX: CPU_ONLY_REASON}) for i in range(n))


C = TypeVar("C")

Reaction = str
"""What a peer does with one offer: "complete", "commit" (then silence), "silent", "lost",
"decline:<reason>", "fail:<reason>", "forged" (commits, then sends a result that fails the node's checks),
"release" (commits, then hands the lease back: it is leaving), "refuse:<reason>" (commits, then sends a
result whose figures the node refuses: invalid, inconsistent)."""


@dataclass
class Node:
    """Plays the node: feeds events at an explicit time and records the scheduler's commands."""

    scheduler: Scheduler
    now: float = 1000.0
    scripts: dict[str, list[Reaction]] = field(default_factory=dict)
    log: list[Command] = field(default_factory=list)
    leases: int = 0
    queue: list[Command] = field(default_factory=list)

    def feed(self, event: Event) -> list[Command]:
        """Hand one event to the scheduler at `now`; record and return its commands."""
        out = self.scheduler.handle(event, self.now)
        self.log += out
        self.queue += out
        self._check_invariants()
        return out

    def tick_to_deadline(self) -> list[Command]:
        """Advance the clock to the scheduler's next deadline and tick."""
        deadline = self.scheduler.next_deadline()
        assert deadline is not None, "nothing pending and no deadline: the campaign is stuck"
        self.now = max(self.now, deadline)
        return self.feed(Tick())

    def run(self, max_steps: int = 500) -> None:
        """Carry out commands by the peers' scripts until the campaign is done."""
        for _ in range(max_steps):
            if self.scheduler.done:
                return
            if not self.queue:
                self.tick_to_deadline()
                continue
            command = self.queue.pop(0)
            if isinstance(command, SendOffer):
                self._react(command)
        raise AssertionError("campaign did not finish")

    def _react(self, offer: SendOffer) -> None:
        script = self.scripts.get(offer.peer_id, [])
        reaction = script.pop(0) if script else "complete"
        kind, _, arg = reaction.partition(":")
        task, who = offer.task_id, offer.peer_id
        if kind == "decline":
            self.feed(OfferDeclined(task, who, DeclineReason(arg)))
        elif kind == "lost":
            self.feed(OfferLost(task, who, "connection refused"))
        elif kind in ("complete", "commit", "fail", "forged", "release", "refuse"):
            lease = self.commit(task, who)
            if kind == "complete":
                self.feed(ProgressReported(task, lease, Phase.MEASURING, 50, 100, 12.5))
                self.deliver(task, lease, who)
            elif kind == "fail":
                self.feed(TaskFailedRemotely(task, lease, FailureReason(arg), "boom"))
            elif kind == "forged":
                self.feed(ResultRejected(task, lease, who, "result signature: bad signature"))
            elif kind == "release":
                self.feed(LeaseReleased(task, lease, who, "leaving"))
            elif kind == "refuse":
                self.feed(ResultRejected(task, lease, who, REFUSED_DETAIL, FailureReason(arg)))
        # "silent" and "commit" leave the scheduler's own deadlines to act

    def commit(self, task_id: str, peer_id: str, ttl: float = 30.0) -> str:
        """The worker commits: a fresh lease id, as a worker would grant it."""
        self.leases += 1
        lease = f"lease-{self.leases}"
        self.feed(OfferCommitted(task_id, peer_id, lease, 0, ttl))
        return lease

    def deliver(self, task_id: str, lease_id: str, peer_id: str) -> list[Command]:
        """A result arrives: the node passes it on only if its lease is the current one."""
        if self.scheduler.current_lease(task_id) != lease_id:
            return []
        return self.feed(ResultAccepted(task_id, lease_id, peer_id))

    def discover(self, peers: Sequence[PeerView]) -> list[Command]:
        """The node's discovery found these peers."""
        return self.feed(PeersDiscovered(tuple(peers)))

    def outcomes(self) -> dict[str, RecordOutcome]:
        """Each task's one recorded ending."""
        return {c.task_id: c for c in self.log if isinstance(c, RecordOutcome)}

    def sent(self, kind: type[C]) -> list[C]:
        """Every command of one kind, in order."""
        return [c for c in self.log if isinstance(c, kind)]

    def _check_invariants(self) -> None:
        endings = Counter(c.task_id for c in self.log if isinstance(c, RecordOutcome))
        assert all(n == 1 for n in endings.values()), f"a task ended twice: {endings}"
        assert len(self.sent(FinishCampaign)) <= 1
        for task in self.scheduler.tasks():
            assert task.ended == (task.task_id in endings), task
