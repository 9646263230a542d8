"""Errors of the node package: the network edge, named for who is at fault."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

FULL_DISK: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errnos of a full disk: no space left, or the user's quota spent."""


class NodeError(Exception):
    """Base of every error raised by `node`.

    Attributes:
        detail: what went wrong, for people and logs; never branched on.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class PeerUnreachable(NodeError):
    """No connection to the peer could be made (direct or through a relay).

    Attributes:
        peer_id: the peer.
        why: what failed, without the peer (`detail` is the whole sentence).
    """

    def __init__(self, peer_id: str, why: str) -> None:
        super().__init__(f"peer {peer_id} unreachable: {why}")
        self.peer_id = peer_id
        self.why = why


class PeerIdMismatch(PeerUnreachable):
    """A peer answered at the address, but with another id than the one the address names (a wrong
    `/p2p/<id>`, or a gate that was given a new identity).

    Attributes:
        addr: the address dialled.
        answered: the id of the peer that answered there ("" when libp2p did not say).
    """

    def __init__(self, peer_id: str, addr: str, answered: str) -> None:
        super().__init__(peer_id, f"a peer answered there with another id ({answered or 'not told'})")
        self.addr = addr
        self.answered = answered


class ClosedAtHandshake(PeerUnreachable):
    """The peer took the TCP connection and closed it before the security handshake (P33): what a
    py-libp2p host at its connection limit does (a sark gate past `--max-connections`, or holding its
    share of connections from our address, `--max-per-address`), or one that refuses us for another
    reason it does not tell.

    Attributes:
        addr: the address dialled.
    """

    def __init__(self, peer_id: str, addr: str) -> None:
        super().__init__(
            peer_id,
            "it took the connection and closed it before the handshake (a libp2p host at its connection "
            "limit does so: a full gate, or one holding all it takes from our address)",
        )
        self.addr = addr


class RelayFull(PeerUnreachable):
    """A gate's relay refused us a slot because every slot is taken (RESOURCE_LIMIT_EXCEEDED): a worker
    with spare gates takes one of those in its place (`node/worker/advertising.py`)."""


class PeerGone(NodeError):
    """The peer closed or reset the stream before the message we waited for."""

    def __init__(self, peer_id: str) -> None:
        super().__init__(f"peer {peer_id} closed the stream")
        self.peer_id = peer_id


class PeerTimeout(NodeError):
    """The peer did not answer within the deadline."""

    def __init__(self, peer_id: str, what: str) -> None:
        super().__init__(f"peer {peer_id} timed out: {what}")
        self.peer_id = peer_id
        self.what = what


class StreamRefused(NodeError):
    """The peer answered our stream with `busy`: too many of our streams in flight there, or (with
    `measuring`) a worker that serves no model while its own measurement runs."""

    def __init__(self, peer_id: str, detail: str, *, measuring: bool = False) -> None:
        super().__init__(f"peer {peer_id} refused the stream: {detail}")
        self.peer_id = peer_id
        self.measuring = measuring


class ConfigError(NodeError):
    """Bad configuration or input from the user (a field and what is wrong with it)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class DeviceProbeFailed(NodeError):
    """This device (or a model server its owner declared) could not be probed: the spawned probe child
    failed, died or timed out at `stage` (start, device, calibration, units, servers, result)."""

    def __init__(self, stage: str, why: str) -> None:
        super().__init__(f"this device could not be probed: {stage} failed: {why}")
        self.stage = stage
        self.why = why


class ChildNotStarted(NodeError):
    """A child the node starts to read untrusted files (campaign intake) could not start: a broken
    install, not the files it was given and not a limit.

    Attributes:
        what: what the child was for.
        why: its exit code and the last line it wrote on stderr.
    """

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"the child that {what} could not start ({why})")
        self.what = what
        self.why = why


class DiskFull(NodeError):
    """A folder's file system is full (or its quota spent): nothing was half-written, free space and
    go on (`submit --resume` for a campaign).

    Attributes:
        folder: the folder that could not be written.
        what: what was being written there.
    """

    def __init__(self, folder: Path, what: str) -> None:
        super().__init__(f"no space left on {folder} while {what}")
        self.folder = folder
        self.what = what


def disk_full(exc: BaseException | None) -> bool:
    """Whether an error comes from a full disk (an OSError with ENOSPC or EDQUOT, or SQLite's
    SQLITE_FULL), however many times it was wrapped (`raise ... from`, or raised while handling it)."""
    import sqlite3

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in FULL_DISK:
            return True
        if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@contextmanager
def disk_errors(folder: Path, what: str) -> Iterator[None]:
    """The seam for full disks: an error of the block that `disk_full` recognises becomes
    `DiskFull(folder, what)`; every other error passes unchanged."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as exc:
        if disk_full(exc):
            raise DiskFull(folder, what) from exc
        raise


def megabytes(size: int) -> str:
    """A size for people: "412 MB", "0.3 MB"."""
    mb = size / 1e6
    return f"{mb:.0f} MB" if mb >= 10 else f"{mb:.1f} MB"


class Interrupted(NodeError):
    """The user stopped the command (Ctrl-C): not a failure; the CLI prints `detail` and exits 130."""


class CampaignInterrupted(Interrupted):
    """A campaign stopped by Ctrl-C: its tasks out on offer or lease were withdrawn and the store says
    "interrupted"; `sark-node submit --resume <id>` goes on from there."""

    def __init__(self, campaign_id: str, flags: str = "") -> None:
        super().__init__(
            f"campaign {campaign_id} stopped, its leases released; "
            f"resume it with: sark-node submit --resume {campaign_id}{flags}"
        )
        self.campaign_id = campaign_id


@contextmanager
def map_exceptions(peer_id: str, what: str) -> Iterator[None]:
    """The one seam for libp2p's errors: any error in the block becomes `PeerUnreachable`.

    py-libp2p raises a zoo of types (its own, plain `Exception`s from the resource manager, OSError,
    trio's and multiaddr's: P27 in node/p2p/host.py), so the block's foreign errors all become
    `PeerUnreachable(peer_id, "<what>: <error>")`. Our own errors pass through unchanged; trio's
    cancellation is a BaseException and is never caught.
    """
    try:
        yield
    except NodeError:
        raise
    except Exception as exc:  # the seam: libp2p's zoo of types ends here
        raise PeerUnreachable(peer_id, f"{what}: {exc}") from exc


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every error behind it, each once: causes, contexts and the members of a group (an
    ExceptionGroup's `exceptions`, libp2p's MultiError's `errors`), nearest first."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack += [e for e in (current.__cause__, current.__context__) if e is not None]
        for members in ("exceptions", "errors"):
            stack += [e for e in getattr(current, members, ()) if isinstance(e, BaseException)]
