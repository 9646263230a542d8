"""What a job asks of a device: runtime and unit, OS, memory from the model size, GPU memory, transfer.

Memory rule (a lower bound, documented so a user can predict a rejection):

- RAM: ``256 MB + 3 x model size`` (the runtime and interpreter, the file bytes, the runtime's
  copy of the graph and its optimised form), raised to ``require.min_ram_gb`` and to the spec's
  ``memory_limit_mb`` when those are higher. Constant folding can make the real peak far larger
  than the file (notes/measurement.md); this rule only rejects what cannot possibly fit.
- GPU memory, for GPU units: ``256 MB + 2 x model size`` (weights resident plus workspace), raised
  to ``require.min_vram_gb``. A device that reports no GPU memory of its own (unified memory:
  Apple silicon, integrated GPUs) must hold it in RAM instead, on top of the RAM need.
- Transfer: with an http(s) source a worker fetches the model itself, so a relayed worker is fine;
  without one the bytes come from the submitter over ``/sark/blob``, which never crosses a relay,
  so a relayed worker needs a direct connection first (it ranks after direct ones).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, Literal

from protocol import GPU_UNITS, RUNTIME_OF, ComputeUnit, Endpoint, ModelRef, Runtime, Value
from scheduler.errors import UnresolvedModelError
from scheduler.language.campaign import Campaign, Job
from scheduler.language.endpoints import endpoint_ref
from scheduler.language.peaks import is_peak_key, peak_ref

RAM_BASE_MB: Final = 256
RAM_PER_MODEL_BYTE: Final = 3
VRAM_BASE_MB: Final = 256
VRAM_PER_MODEL_BYTE: Final = 2
MAX_ADVERT_AGE_S: Final = 600.0
_MB: Final = 1024 * 1024


class Needs(Value):
    """A job's resource needs, the input of feasibility and ranking.

    Attributes:
        job_index: the job these needs belong to.
        unit: the compute unit that must have passed its probe on the device.
        runtime: the runtime behind the unit.
        os: allowed OS names (compared case-insensitively); empty means any.
        min_ram_mb: installed RAM the device must have.
        min_vram_mb: GPU memory the device must have (0 for non-GPU units).
        model_sha256: the pinned model.
        model_size: its size in bytes.
        transfer: "url" (the worker fetches it) or "direct" (from the submitter, never through a relay).
        peers: only these peer ids (empty: any).
        max_advert_age_s: a peer whose advert is older than this is not trusted to still exist.
        endpoint: the model server an endpoint job measures (its unit is then not checked).
        allow_unverified: a peer marked `claim_unverified` may be placed (`verify: {unverified: allow}`).
    """

    job_index: int
    unit: ComputeUnit
    runtime: Runtime
    os: tuple[str, ...] = ()
    min_ram_mb: int
    min_vram_mb: int = 0
    model_sha256: str
    model_size: int
    transfer: Literal["url", "direct"]
    peers: tuple[str, ...] = ()
    max_advert_age_s: float = MAX_ADVERT_AGE_S
    endpoint: Endpoint | None = None
    allow_unverified: bool = False

    @property
    def replicable(self) -> bool:
        """Whether replicas on peers of one class can check each other's figures: a model's, and a
        gray-box server's (each worker's own, serving the job's model on its device). Not a black-box
        URL: one server that every worker reaches from where it is, whose records the submitter holds
        to its own probe of it and the server's count instead (`scheduler.verification.serverfloor`);
        a campaign whose `verify:` would replicate one is refused when it is parsed."""
        return self.endpoint is None or self.endpoint.url is None


def needs_of(job: Job, model: ModelRef) -> Needs:
    """Derive a job's needs from its spec, requirements and pinned model (the module docstring's rule)."""
    model_mb = model.size / _MB
    ram = RAM_BASE_MB + math.ceil(RAM_PER_MODEL_BYTE * model_mb)
    ram = max(ram, math.ceil(job.require.min_ram_gb * 1024), job.spec.memory_limit_mb or 0)
    vram = 0
    if job.spec.compute_unit in GPU_UNITS:
        vram = VRAM_BASE_MB + math.ceil(VRAM_PER_MODEL_BYTE * model_mb)
        vram = max(vram, math.ceil(job.require.min_vram_gb * 1024))
    web = any(s.startswith(("http://", "https://")) for s in model.sources)
    return Needs(
        job_index=job.index,
        unit=job.spec.compute_unit,
        runtime=RUNTIME_OF[job.spec.compute_unit],
        os=job.require.os,
        min_ram_mb=ram,
        min_vram_mb=vram,
        model_sha256=model.sha256,
        model_size=model.size,
        transfer="url" if web else "direct",
        peers=job.require.peers,
        endpoint=job.spec.generate.endpoint if job.spec.generate else None,
    )


def endpoint_models(campaign: Campaign) -> dict[str, ModelRef]:
    """The pseudo-models of the campaign's endpoint and peaks jobs, by model key (they need no pinning)."""
    found = {
        job.model_key: endpoint_ref(job.spec.generate)
        for job in campaign.jobs
        if job.spec.generate is not None and job.spec.generate.endpoint is not None
    }
    peaks = {job.model_key: peak_ref(job.model_key) for job in campaign.jobs if is_peak_key(job.model_key)}
    return found | peaks


def campaign_needs(campaign: Campaign, models: Mapping[str, ModelRef]) -> tuple[Needs, ...]:
    """Every job's needs, in job order, once every model is pinned.

    Raises:
        UnresolvedModelError: a model has no `ModelRef`, or one whose sha256 contradicts the file.
    """
    missing = [m.key for m in campaign.models if m.key not in models]
    mismatched = [
        m.key for m in campaign.models if m.key in models and m.sha256 and m.sha256 != models[m.key].sha256
    ]
    if missing or mismatched:
        raise UnresolvedModelError(missing, mismatched)
    models = {**models, **endpoint_models(campaign)}
    return tuple(
        needs_of(job, models[job.model_key]).with_(
            allow_unverified=campaign.verify_of(job).unverified == "allow"
        )
        for job in campaign.jobs
    )
