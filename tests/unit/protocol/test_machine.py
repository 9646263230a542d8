"""The negotiation machine: two Conversations over an in-memory wire, every legal path, every illegal move."""

from __future__ import annotations

import itertools

import pytest

from protocol import (
    TRANSITIONS,
    Ack,
    BlobEnd,
    Cancel,
    Commit,
    Conversation,
    Decline,
    DeclineReason,
    Dispatch,
    Envelope,
    Failure,
    FailureReason,
    LocalProtocolError,
    NegotiateMessage,
    Offer,
    Phase,
    Progress,
    Reclaim,
    Release,
    RemoteProtocolError,
    Result,
    Role,
    State,
    encode,
    frame,
)
from protocol.machine import NEGOTIATE_KINDS

TASK = "task-1"
LEASE = "lease-1"
TTL = 5.0
ENVELOPE = Envelope(peer_id="12D3KooW", public_key=b"k" * 32, payload=b"\x80", signature=b"s" * 64)
S, W = Role.SUBMITTER, Role.WORKER


def make(kind: str, lease: str | None = LEASE, task: str = TASK) -> NegotiateMessage:
    """A message of a kind for this task, naming `lease` where the kind carries one."""
    lease_id = lease or LEASE
    messages: dict[str, NegotiateMessage] = {
        "offer": Offer(task_id=task, envelope=ENVELOPE),
        "commit": Commit(task_id=task, lease_id=lease_id, lease_ttl_s=TTL),
        "decline": Decline(task_id=task, reason=DeclineReason.BUSY),
        "dispatch": Dispatch(task_id=task, lease_id=lease_id),
        "progress": Progress(task_id=task, lease_id=lease_id, phase=Phase.MEASURING, done=1, total=10),
        "result": Result(task_id=task, lease_id=lease_id, envelope=ENVELOPE),
        "failure": Failure(task_id=task, lease_id=lease_id, reason=FailureReason.LOAD),
        "ack": Ack(task_id=task, lease_id=lease_id),
        "cancel": Cancel(task_id=task, lease_id=lease, envelope=ENVELOPE),
        "reclaim": Reclaim(task_id=task, lease_id=lease_id),
        "release": Release(task_id=task, lease_id=lease_id, envelope=ENVELOPE),
    }
    return messages[kind]


class Wire:
    """A submitter and a worker Conversation joined by an in-memory byte stream."""

    def __init__(self) -> None:
        self.ends = {S: Conversation(S, TASK), W: Conversation(W, TASK)}

    def say(self, sender: Role, message: NegotiateMessage, now: float = 0.0) -> None:
        """`sender` sends; the other end receives (byte by byte) and must see the same message."""
        data = self.ends[sender].send(message, now)
        receiver = self.ends[W if sender is S else S]
        for i in range(len(data)):
            receiver.receive_data(data[i : i + 1])
        assert receiver.next_event(now) == message
        assert receiver.next_event(now) is None

    def states(self) -> tuple[State, State]:
        return self.ends[S].state, self.ends[W].state

    def walk(self, *moves: tuple[Role, str]) -> Wire:
        for sender, kind in moves:
            self.say(sender, make(kind, self.ends[sender].lease_id))
        return self


OFFER, COMMIT, DISPATCH = (S, "offer"), (W, "commit"), (S, "dispatch")
RESULT, ACK, CANCEL = (W, "result"), (S, "ack"), (S, "cancel")
PATH_TO: dict[State, tuple[tuple[Role, str], ...]] = {
    State.IDLE: (),
    State.OFFERED: (OFFER,),
    State.COMMITTED: (OFFER, COMMIT),
    State.RUNNING: (OFFER, COMMIT, DISPATCH),
    State.RESULT_SENT: (OFFER, COMMIT, DISPATCH, RESULT),
    State.DONE: (OFFER, COMMIT, DISPATCH, RESULT, ACK),
    State.DECLINED: (OFFER, (W, "decline")),
    State.FAILED: (OFFER, COMMIT, (W, "failure")),
    State.CANCELLED: (OFFER, COMMIT, CANCEL),
    State.RELEASED: (OFFER, COMMIT, DISPATCH, (W, "release")),
}


def reach(state: State, kind: str = "") -> Wire:
    """Both ends in `state` by a legal path (or by a broken stream for ERROR, by tick for LEASE_LOST)."""
    if state is State.CANCELLED and kind == "commit":
        return Wire().walk(OFFER, CANCEL)  # a commit can only cross a cancel sent before any lease
    if state is State.LEASE_LOST:
        wire = Wire().walk(*PATH_TO[State.RUNNING])
        for end in wire.ends.values():
            assert end.tick(TTL + 1) is State.LEASE_LOST
        return wire
    if state is State.ERROR:
        wire = Wire().walk(OFFER)
        for end in wire.ends.values():
            end.receive_data(b"\x01\xc1")
            with pytest.raises(RemoteProtocolError):
                end.next_event(0.0)
        return wire
    wire = Wire().walk(*PATH_TO[state])
    assert wire.states() == (state, state)
    return wire


def test_the_happy_path() -> None:
    wire = Wire()
    wire.say(S, make("offer"), now=0.0)
    assert wire.states() == (State.OFFERED, State.OFFERED)
    wire.say(W, make("commit"), now=1.0)
    assert wire.states() == (State.COMMITTED, State.COMMITTED)
    assert wire.ends[S].lease_id == wire.ends[W].lease_id == LEASE
    assert wire.ends[S].next_deadline() == 1.0 + TTL
    wire.say(W, Progress(task_id=TASK, lease_id=LEASE, phase=Phase.QUEUED, queue_position=1), now=2.0)
    wire.say(S, make("dispatch"), now=3.0)
    assert wire.states() == (State.RUNNING, State.RUNNING)
    for now in (4.0, 5.0, 6.0):
        wire.say(W, make("progress"), now=now)
        assert wire.ends[S].next_deadline() == now + TTL
    wire.say(W, make("result"), now=7.0)
    assert wire.states() == (State.RESULT_SENT, State.RESULT_SENT)
    assert wire.ends[S].next_deadline() is None
    wire.say(S, make("ack"), now=8.0)
    assert wire.states() == (State.DONE, State.DONE)


def test_decline() -> None:
    assert Wire().walk(OFFER, (W, "decline")).states() == (State.DECLINED, State.DECLINED)


@pytest.mark.parametrize("phase", [State.OFFERED, State.COMMITTED, State.RUNNING, State.RESULT_SENT])
def test_cancel_at_each_phase(phase: State) -> None:
    wire = reach(phase)
    lease = wire.ends[S].lease_id
    wire.say(S, make("cancel", lease))
    assert wire.states() == (State.CANCELLED, State.CANCELLED)
    assert wire.ends[S].next_deadline() is None


@pytest.mark.parametrize("phase", [State.COMMITTED, State.RUNNING])
def test_a_leaving_worker_releases_its_lease_and_the_conversation_ends(phase: State) -> None:
    wire = reach(phase).walk((W, "release"))
    assert wire.states() == (State.RELEASED, State.RELEASED)
    assert wire.ends[S].next_deadline() is None  # no lease to wait out: the task moves on at once
    with pytest.raises(LocalProtocolError):
        wire.ends[W].send(make("progress"), 1.0)  # nothing follows a release


def test_a_release_cannot_precede_a_lease_nor_follow_a_result() -> None:
    for state in (State.OFFERED, State.RESULT_SENT):
        with pytest.raises(LocalProtocolError):
            reach(state).ends[W].send(make("release"), 1.0)


@pytest.mark.parametrize("phase", [State.COMMITTED, State.RUNNING])
def test_failure_after_commit(phase: State) -> None:
    assert reach(phase).walk((W, "failure")).states() == (State.FAILED, State.FAILED)


def test_heartbeats_keep_the_lease_and_silence_loses_it() -> None:
    wire = Wire().walk(OFFER)
    wire.say(W, make("commit"), now=10.0)
    submitter = wire.ends[S]
    assert submitter.next_deadline() == 15.0
    assert submitter.tick(15.0) is State.COMMITTED  # at the deadline, not past it
    wire.say(S, make("dispatch"), now=14.0)
    wire.say(W, make("progress"), now=18.0)
    assert submitter.tick(22.9) is State.RUNNING
    assert submitter.tick(23.1) is State.LEASE_LOST
    assert submitter.next_deadline() is None
    assert submitter.tick(100.0) is State.LEASE_LOST


def test_a_late_result_after_the_lease_was_lost_is_rejected() -> None:
    wire = reach(State.RUNNING)
    submitter, worker = wire.ends[S], wire.ends[W]
    assert submitter.tick(TTL + 1) is State.LEASE_LOST
    submitter.receive_data(worker.send(make("result"), now=TTL + 2))  # the frozen worker wakes up
    with pytest.raises(RemoteProtocolError):
        submitter.next_event(TTL + 2)
    assert submitter.state is State.ERROR


@pytest.mark.parametrize("kind", ["progress", "result", "failure"])
def test_a_stale_lease_is_rejected_on_receive_and_on_send(kind: str) -> None:
    wire = reach(State.RUNNING)
    stale = make(kind, lease="lease-0")
    submitter = wire.ends[S]
    submitter.receive_data(frame(encode(stale)))
    with pytest.raises(RemoteProtocolError):
        submitter.next_event(1.0)
    assert submitter.state is State.ERROR
    with pytest.raises(RemoteProtocolError):
        submitter.next_event(1.0)  # ERROR is for good
    with pytest.raises(LocalProtocolError):
        submitter.send(make("cancel"), 1.0)
    with pytest.raises(LocalProtocolError):
        wire.ends[W].send(stale, 1.0)
    assert wire.ends[W].state is State.ERROR


def test_a_message_for_another_task_is_an_error() -> None:
    wire = reach(State.COMMITTED)
    wire.ends[W].receive_data(frame(encode(make("dispatch", task="task-2"))))
    with pytest.raises(RemoteProtocolError):
        wire.ends[W].next_event(0.0)
    with pytest.raises(LocalProtocolError):
        wire.ends[S].send(make("dispatch", task="task-2"), 0.0)
    assert wire.states() == (State.ERROR, State.ERROR)


def test_a_message_of_another_protocol_is_an_error() -> None:
    wire = reach(State.OFFERED)
    wire.ends[W].receive_data(frame(encode(BlobEnd())))
    with pytest.raises(RemoteProtocolError):
        wire.ends[W].next_event(0.0)
    with pytest.raises(LocalProtocolError):
        wire.ends[S].send(BlobEnd(), 0.0)  # type: ignore[arg-type]
    assert wire.states() == (State.ERROR, State.ERROR)


def test_reclaim_after_a_submitter_restart() -> None:
    wire = Wire()
    wire.ends[S].reclaim(LEASE, lease_ttl_s=TTL)
    wire.say(S, make("reclaim"), now=100.0)
    assert wire.states() == (State.RUNNING, State.RUNNING)
    assert wire.ends[W].lease_id == LEASE
    assert wire.ends[S].next_deadline() == 100.0 + TTL
    assert wire.ends[W].next_deadline() is None  # the worker was not told the ttl
    wire.say(W, make("progress"), now=101.0)
    assert wire.ends[S].next_deadline() == 101.0 + TTL
    wire.say(W, make("result"), now=102.0)
    wire.say(S, make("ack"), now=103.0)
    assert wire.states() == (State.DONE, State.DONE)


def test_reclaim_of_another_lease_than_prepared_is_refused() -> None:
    worker = Conversation(W, TASK)
    worker.reclaim(LEASE)
    worker.receive_data(frame(encode(make("reclaim", lease="lease-9"))))
    with pytest.raises(RemoteProtocolError):
        worker.next_event(0.0)
    submitter = Conversation(S, TASK)
    submitter.reclaim(LEASE)
    with pytest.raises(LocalProtocolError):
        submitter.send(make("reclaim", lease="lease-9"), 0.0)


def test_reclaim_is_only_for_a_fresh_conversation() -> None:
    wire = reach(State.OFFERED)
    with pytest.raises(LocalProtocolError):
        wire.ends[S].reclaim(LEASE)
    assert wire.ends[S].state is State.OFFERED


def test_a_worker_that_does_not_know_the_reclaimed_lease_fails_it() -> None:
    wire = Wire()
    wire.say(S, make("reclaim"))
    wire.say(W, Failure(task_id=TASK, lease_id=LEASE, reason=FailureReason.UNKNOWN_LEASE))
    assert wire.states() == (State.FAILED, State.FAILED)


@pytest.mark.parametrize(
    ("state", "kind", "sender"), sorted(TRANSITIONS, key=str), ids=lambda v: str(getattr(v, "value", v))
)
def test_every_entry_of_the_table_is_a_legal_move_on_both_ends(state: State, kind: str, sender: Role) -> None:
    wire = reach(state, kind)
    wire.say(sender, make(kind, wire.ends[sender].lease_id))
    target = TRANSITIONS[state, kind, sender].target
    assert wire.states() == (target, target)


COMPLEMENT = sorted(
    (key for key in itertools.product(State, NEGOTIATE_KINDS, Role) if key not in TRANSITIONS), key=str
)


def test_the_complement_is_most_of_the_space() -> None:
    assert len(NEGOTIATE_KINDS) == 11
    assert len(COMPLEMENT) + len(TRANSITIONS) == len(State) * 11 * 2
    assert len(COMPLEMENT) > 180


@pytest.mark.parametrize(("state", "kind", "sender"), COMPLEMENT, ids=lambda v: str(getattr(v, "value", v)))
def test_every_move_outside_the_table_raises(state: State, kind: str, sender: Role) -> None:
    wire = reach(state)
    message = make(kind, wire.ends[sender].lease_id)
    with pytest.raises(LocalProtocolError):
        wire.ends[sender].send(message, 0.0)
    receiver = wire.ends[W if sender is S else S]
    receiver.receive_data(frame(encode(message)))
    with pytest.raises(RemoteProtocolError):
        receiver.next_event(0.0)
    assert wire.states() == (State.ERROR, State.ERROR)


CROSSINGS = [
    (state, s_kind, w_kind)
    for (state, s_kind, s_sender) in TRANSITIONS
    for (w_state, w_kind, w_sender) in TRANSITIONS
    # The worker's moves in CANCELLED are themselves what crossed the cancel: not a start state.
    if s_sender is S and w_sender is W and state is w_state and state is not State.CANCELLED
]


@pytest.mark.parametrize(("state", "s_kind", "w_kind"), CROSSINGS, ids=lambda v: str(getattr(v, "value", v)))
def test_two_legal_moves_that_cross_on_the_wire_break_neither_end(
    state: State, s_kind: str, w_kind: str
) -> None:
    wire = reach(state, w_kind)
    submitter, worker = wire.ends[S], wire.ends[W]
    from_s = submitter.send(make(s_kind, submitter.lease_id), 1.0)
    from_w = worker.send(make(w_kind, worker.lease_id), 1.0)
    submitter.receive_data(from_w)
    worker.receive_data(from_s)
    assert submitter.next_event(2.0) is not None
    assert worker.next_event(2.0) is not None
    assert State.ERROR not in wire.states()


def test_crossings_cover_cancel_against_every_worker_move() -> None:
    crossed = {(state, w_kind) for state, s_kind, w_kind in CROSSINGS if s_kind == "cancel"}
    assert crossed >= {
        (State.OFFERED, "commit"),
        (State.OFFERED, "decline"),
        (State.COMMITTED, "progress"),
        (State.COMMITTED, "failure"),
        (State.RUNNING, "progress"),
        (State.RUNNING, "result"),
        (State.RUNNING, "failure"),
        (State.RUNNING, "release"),
    }


def test_a_result_that_crossed_a_cancel_is_returned_and_ignored() -> None:
    wire = reach(State.RUNNING)
    submitter, worker = wire.ends[S], wire.ends[W]
    from_s = submitter.send(make("cancel", LEASE), 1.0)
    from_w = worker.send(make("result"), 1.0)
    submitter.receive_data(from_w)
    assert isinstance(submitter.next_event(2.0), Result)
    assert submitter.state is State.CANCELLED
    worker.receive_data(from_s)
    assert isinstance(worker.next_event(2.0), Cancel)
    assert wire.states() == (State.CANCELLED, State.CANCELLED)
    wire.say(S, make("ack"))  # acknowledged all the same, so the worker can drop the stored result
    assert wire.states() == (State.CANCELLED, State.CANCELLED)


def test_no_state_but_committed_and_running_has_a_deadline() -> None:
    for state in State:
        if state in (State.ERROR, State.LEASE_LOST):
            continue
        submitter = reach(state).ends[S]
        leased = state in (State.COMMITTED, State.RUNNING)
        assert (submitter.next_deadline() is not None) is leased, state
