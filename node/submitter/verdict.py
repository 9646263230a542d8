"""What a delivered result becomes: refused with its reason, or the record the store keeps and the
event the scheduler takes.

A result whose lease is current is judged here and nowhere else on the submitter: its figures
derived again from its raw parts and its readings bounded by the profile it was placed by
(`scheduler.check_figures`), then a load client's records checked against the schedule this
submitter gave it (`scheduler.check_sends`: a fleet member's signed deal, or the seed drawn for a
lone open loop's offer), a fleet's or a lone loop's records to the floor this submitter measured of the
server itself (`node.submitter.floors`), and, where the job names the server's metrics, its count to the
rise of the server's own counters (`scheduler.count_problems`: with the job's results accepted before it,
a fleet's members among them). What passes is kept as the submitter derived it, never as sent.
"""

from __future__ import annotations

from dataclasses import dataclass

import scheduler as sch
from node.submitter.attempt import Attempt, Delivered
from node.submitter.outputs import pack_envelope, pack_measurement
from node.submitter.store import ResultRecord, utc_now
from protocol import DeviceProfile, TaskSpec
from scheduler.results.bundle import ServerWitness
from scheduler.verification import replica_of


@dataclass(frozen=True, slots=True)
class Counted:
    """The server's count a result is held to: the rise of its counters between this submitter's read
    before the job and its read when the result arrived, and what the job's results accepted before
    this one claimed (a fleet's members, a job's devices or replicas: every one sent after that read)
    and this submitter's own probes of the server finished before the second read
    (`node.submitter.floors.FloorBook.own`)."""

    count: sch.ServerCount
    before: sch.Claimed


@dataclass(frozen=True, slots=True)
class Accepted:
    """A result that passed: what the store keeps and what the scheduler hears."""

    record: ResultRecord
    event: sch.ResultAccepted


def judge(
    a: Attempt,
    delivered: Delivered,
    spec: TaskSpec,
    profile: DeviceProfile,
    floor: sch.ServerFloor | None = None,
    counted: Counted | None = None,
) -> Accepted | sch.ResultRejected:
    """The verdict on `delivered`, a result for the current lease of `a`'s task.

    `spec` is the job's spec as the campaign wrote it; `profile` the one the task was placed by;
    `floor` the job's server as this submitter measured it itself (`node.submitter.floors`); `counted`
    the server's own count where the job names its metrics and both reads gave one.
    """
    body = delivered.body
    figures = sch.check_figures(body.measurement, spec, profile, body.device)
    if not isinstance(figures, sch.Refusal):  # a load's records against the schedule it was given
        figures = sch.check_sends(figures, spec, a.spec, floor)
    if not isinstance(figures, sch.Refusal) and counted is not None:
        figures = sch.within_count(figures, spec, a.spec, counted.count, counted.before)
    if isinstance(figures, sch.Refusal):
        return sch.ResultRejected(a.task_id, delivered.lease_id, a.peer_id, figures.detail, figures.reason)
    record = ResultRecord(  # the outputs show the derived figures, rendered from these at output time
        task_id=a.task_id,
        lease_id=delivered.lease_id,
        peer_id=a.peer_id,
        status="Complete",
        envelope=pack_envelope(delivered.envelope),
        samples=figures.samples_ms,
        derived=pack_measurement(figures),
        received=utc_now(),
        witness=_witness(floor, counted),
    )
    said = replica_of(a.peer_id, figures, spec)
    median, spread, fingerprint = said.median_ms, said.spread, said.fingerprint
    event = sch.ResultAccepted(
        a.task_id,
        delivered.lease_id,
        a.peer_id,
        median,
        spread,
        fingerprint,
        said.core,
        said.pace_ms,
        said.pace_cut,
    )
    return Accepted(record, event)


def _witness(floor: sch.ServerFloor | None, counted: Counted | None) -> bytes | None:
    """What this submitter saw of the server when it judged the result, for the bundle (a reader holds
    the signed records to it again: `scheduler.results.proof`); None when it saw neither."""
    witness = ServerWitness.of(floor, counted.count if counted else None, counted.before if counted else None)
    return None if witness is None else witness.model_dump_json().encode()
