"""The per-task negotiation state machine of `/sark/negotiate/1.0.0`, for either role.

Everything that decides what may be said when lives in this module: `TRANSITIONS` is the whole table,
keyed by (state, message kind, sender). A move that is not in the table is illegal: a
`LocalProtocolError` when we send it, a `RemoteProtocolError` when the peer does, and the
conversation is in `ERROR` for good. So is a message for another task, or one that carries a lease
id other than the current one (a stale lease: a worker that froze and woke up after the task moved on).

Both ends keep the same state: each side runs one `Conversation`, feeds it what it sends (`send`)
and what it receives (`receive_data` / `next_event`). Time comes in as `now`; the lease deadline goes
out as data (`next_deadline`), and `tick(now)` is how the owner reports that time has passed. The
machine never reads a clock and never verifies a signature (the node does that).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, final, get_args

from protocol.codec import decode, encode
from protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from protocol.framing import FrameDecoder, frame
from protocol.messages import (
    Ack,
    Cancel,
    Commit,
    Decline,
    Dispatch,
    Failure,
    NegotiateMessage,
    Offer,
    Progress,
    Reclaim,
    Release,
    Result,
)


class State(enum.StrEnum):
    """Where one task's negotiation is, as both ends see it."""

    IDLE = "idle"
    OFFERED = "offered"
    COMMITTED = "committed"
    RUNNING = "running"
    RESULT_SENT = "result_sent"
    DONE = "done"
    DECLINED = "declined"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RELEASED = "released"
    LEASE_LOST = "lease_lost"
    ERROR = "error"


class Role(enum.StrEnum):
    """Which end of the negotiation a conversation is."""

    SUBMITTER = "submitter"
    WORKER = "worker"


class Effect(enum.Enum):
    """What a move does to the lease besides changing state."""

    NONE = "none"
    GRANT = "grant"
    """A commit: the lease id and ttl are set, the deadline is now + ttl."""
    HEARTBEAT = "heartbeat"
    """The deadline moves to now + ttl."""
    RECLAIM = "reclaim"
    """A lease granted earlier is taken over: the lease id is set, the deadline is now + ttl if known."""


@dataclasses.dataclass(frozen=True, slots=True)
class Move:
    """One entry of the transition table: the state a message leads to and its effect on the lease."""

    target: State
    effect: Effect = Effect.NONE


_S: Final = Role.SUBMITTER
_W: Final = Role.WORKER

TRANSITIONS: Final[Mapping[tuple[State, str, Role], Move]] = MappingProxyType(
    {
        # The happy path: offer, commit, dispatch, progress*, result, ack.
        (State.IDLE, "offer", _S): Move(State.OFFERED),
        (State.OFFERED, "commit", _W): Move(State.COMMITTED, Effect.GRANT),
        (State.OFFERED, "decline", _W): Move(State.DECLINED),
        (State.OFFERED, "cancel", _S): Move(State.CANCELLED),
        # Committed but not yet dispatched: the worker may report it is queued (a heartbeat).
        (State.COMMITTED, "progress", _W): Move(State.COMMITTED, Effect.HEARTBEAT),
        (State.COMMITTED, "dispatch", _S): Move(State.RUNNING, Effect.HEARTBEAT),
        (State.COMMITTED, "failure", _W): Move(State.FAILED),
        (State.COMMITTED, "cancel", _S): Move(State.CANCELLED),
        (State.RUNNING, "progress", _W): Move(State.RUNNING, Effect.HEARTBEAT),
        (State.RUNNING, "result", _W): Move(State.RESULT_SENT),
        (State.RUNNING, "failure", _W): Move(State.FAILED),
        (State.RUNNING, "cancel", _S): Move(State.CANCELLED),
        (State.RESULT_SENT, "ack", _S): Move(State.DONE),
        # A leaving worker hands back a lease it will not finish: final, no ack (the submitter offers the
        # task elsewhere at once).
        (State.COMMITTED, "release", _W): Move(State.RELEASED),
        (State.RUNNING, "release", _W): Move(State.RELEASED),
        # A submitter back from a crash takes over a lease it granted before.
        (State.IDLE, "reclaim", _S): Move(State.RUNNING, Effect.RECLAIM),
        # Messages that crossed a cancel in flight are accepted and ignored: the state stays CANCELLED.
        # A crossed commit still records its lease, so the worker's later messages on it are not stale.
        (State.CANCELLED, "commit", _W): Move(State.CANCELLED, Effect.GRANT),
        (State.CANCELLED, "decline", _W): Move(State.CANCELLED),
        (State.CANCELLED, "progress", _W): Move(State.CANCELLED),
        (State.CANCELLED, "result", _W): Move(State.CANCELLED),
        (State.CANCELLED, "failure", _W): Move(State.CANCELLED),
        (State.CANCELLED, "release", _W): Move(State.CANCELLED),
        # A result that crossed the cancel may still be acknowledged, so the worker can drop it.
        (State.CANCELLED, "ack", _S): Move(State.CANCELLED),
        # The same crossings seen from the worker's end: its decline, failure or result was already
        # on the wire when the submitter's cancel (or dispatch) went out.
        (State.DECLINED, "cancel", _S): Move(State.DECLINED),
        (State.FAILED, "cancel", _S): Move(State.FAILED),
        (State.FAILED, "dispatch", _S): Move(State.FAILED),
        (State.RESULT_SENT, "cancel", _S): Move(State.CANCELLED),
        (State.RELEASED, "cancel", _S): Move(State.RELEASED),
        (State.RELEASED, "dispatch", _S): Move(State.RELEASED),
        # DONE, DECLINED and RELEASED (but for a crossed cancel or dispatch), LEASE_LOST and ERROR accept
        # nothing.
    }
)

NEGOTIATE_KINDS: Final[tuple[str, ...]] = tuple(
    str(cls.model_fields["kind"].default) for cls in get_args(NegotiateMessage)
)
"""Every message kind of `/sark/negotiate/1.0.0`."""

_NEGOTIATE_TYPES: Final = (
    Offer,
    Commit,
    Decline,
    Dispatch,
    Progress,
    Result,
    Failure,
    Ack,
    Cancel,
    Reclaim,
    Release,
)
_LEASED: Final = frozenset({State.COMMITTED, State.RUNNING})


@final
class Conversation:
    """One task's negotiation, from one end: h11-style, no I/O, time passed in."""

    def __init__(self, role: Role, task_id: str) -> None:
        """Start in IDLE.

        Args:
            role: which end this is.
            task_id: the task every message of this conversation must name.
        """
        self._role = role
        self._peer = _W if role is _S else _S
        self._task_id = task_id
        self._state = State.IDLE
        self._lease_id: str | None = None
        self._ttl: float | None = None
        self._deadline: float | None = None
        self._decoder = FrameDecoder()

    @property
    def role(self) -> Role:
        """Which end this conversation is."""
        return self._role

    @property
    def task_id(self) -> str:
        """The task this conversation is about."""
        return self._task_id

    @property
    def state(self) -> State:
        """The current state."""
        return self._state

    @property
    def lease_id(self) -> str | None:
        """The current lease, once granted (or reclaimed)."""
        return self._lease_id

    @property
    def lease_ttl_s(self) -> float | None:
        """The lease's ttl: how long it holds with nothing heard, once known."""
        return self._ttl

    def send(self, message: NegotiateMessage, now: float) -> bytes:
        """Check that we may send a message now, apply it, and return its frame.

        Args:
            message: the message to send.
            now: the current time, in the owner's clock (seconds).

        Returns:
            The framed bytes to write to the stream.

        Raises:
            LocalProtocolError: the move is illegal; the conversation is now in ERROR for good.
        """
        if self._state is State.ERROR:
            raise LocalProtocolError("conversation is in ERROR")
        try:
            if not isinstance(message, _NEGOTIATE_TYPES):
                raise LocalProtocolError(f"{type(message).__name__} is not a negotiate message")
            data = frame(encode(message))
            self._apply(message, self._role, now, LocalProtocolError)
        except LocalProtocolError:
            self._state = State.ERROR
            raise
        return data

    def receive_data(self, data: bytes, now: float | None = None) -> None:
        """Feed bytes read from the stream; `next_event` takes messages out.

        Bytes are the peer's word that it is there: with `now`, while a lease runs, any that arrive move
        its deadline as a heartbeat does. A result of megabytes is one frame on a slow or busy link, and
        no heartbeat can pass it on the stream. The cheater's view: a peer that trickles a frame keeps
        the lease no longer than one that sends heartbeats; a frame has its size bound (`MAX_FRAME`) and
        the submitter's lease its end whatever it hears (`scheduler.state.leases`).

        Args:
            data: any slice of the stream.
            now: the current time (seconds), when the bytes are to count as the peer's heartbeat.
        """
        self._decoder.feed(data)
        if now is not None and data and self._state in _LEASED and self._ttl is not None:
            self._deadline = now + self._ttl

    def next_event(self, now: float) -> NegotiateMessage | None:
        """Take the next whole incoming message, checked against the table, and apply it.

        Messages that crossed our cancel are returned too; the state stays CANCELLED.

        Args:
            now: the current time (seconds), used for lease deadlines.

        Returns:
            The validated message, or None while more bytes are needed.

        Raises:
            RemoteProtocolError: bad bytes or an illegal move; the conversation is now in ERROR for good.
        """
        if self._state is State.ERROR:
            raise RemoteProtocolError("conversation is in ERROR")
        try:
            payload = self._decoder.next_frame()
            if payload is None:
                return None
            message = decode(payload)
            if not isinstance(message, _NEGOTIATE_TYPES):
                raise RemoteProtocolError(f"{message.kind} is not a negotiate message")
            self._apply(message, self._peer, now, RemoteProtocolError)
        except RemoteProtocolError:
            self._state = State.ERROR
            raise
        return message

    def next_deadline(self) -> float | None:
        """When the lease lapses unless a heartbeat comes first; None when no lease is running."""
        return self._deadline if self._state in _LEASED else None

    def tick(self, now: float) -> State:
        """Report that time has passed: a lease past its deadline is lost.

        Args:
            now: the current time (seconds).

        Returns:
            The state after the check (LEASE_LOST if the deadline has passed).
        """
        deadline = self.next_deadline()
        if deadline is not None and now > deadline:
            self._state = State.LEASE_LOST
        return self._state

    def reclaim(self, lease_id: str, *, lease_ttl_s: float | None = None) -> None:
        """Prepare a fresh conversation to take over a lease granted earlier (after a restart).

        The Reclaim message sent (submitter) or received (worker) next must carry this lease id; it moves
        the conversation from IDLE to RUNNING. Without `lease_ttl_s` there is no deadline until the ttl
        is known, so heartbeats cannot move it: pass the ttl the lease was granted with.

        Args:
            lease_id: the lease granted earlier.
            lease_ttl_s: that lease's ttl in seconds, if known.

        Raises:
            LocalProtocolError: the conversation is not in IDLE.
        """
        if self._state is not State.IDLE:
            raise LocalProtocolError(f"cannot reclaim a lease in {self._state}")
        self._lease_id = lease_id
        self._ttl = lease_ttl_s

    def _apply(self, message: NegotiateMessage, sender: Role, now: float, error: type[ProtocolError]) -> None:
        """Check one move against the table and the lease, then take it."""
        if message.task_id != self._task_id:
            raise error(f"{message.kind} for task {message.task_id!r}, this is {self._task_id!r}")
        move = TRANSITIONS.get((self._state, message.kind, sender))
        if move is None:
            raise error(f"{sender} may not send {message.kind} in {self._state}")
        self._check_lease(message, move, error)
        if move.effect is Effect.GRANT:
            assert isinstance(message, Commit)
            self._lease_id = message.lease_id
            self._ttl = message.lease_ttl_s
            self._deadline = now + message.lease_ttl_s
        elif move.effect is Effect.RECLAIM:
            assert isinstance(message, Reclaim)
            self._lease_id = message.lease_id
            self._deadline = None if self._ttl is None else now + self._ttl
        elif move.effect is Effect.HEARTBEAT and self._ttl is not None:
            self._deadline = now + self._ttl
        self._state = move.target

    def _check_lease(self, message: NegotiateMessage, move: Move, error: type[ProtocolError]) -> None:
        """A granted lease is granted once; every other lease id named must be the current one."""
        lease = getattr(message, "lease_id", None)
        if move.effect is Effect.GRANT:
            if self._lease_id is not None:
                raise error(f"a lease was already granted: {self._lease_id!r}")
        elif move.effect is Effect.RECLAIM:
            if self._lease_id is not None and lease != self._lease_id:
                raise error(f"reclaim of lease {lease!r}, expected {self._lease_id!r}")
        elif lease is not None and lease != self._lease_id:
            raise error(f"{message.kind} carries stale lease {lease!r}, current is {self._lease_id!r}")
