"""A model from its holders over /sark/blob: the other workers that hold it first, the submitter last.

The submitter seeds: while another holder gives a reason to wait for it (it is spreading the model to
others and answered `busy`, or it does not have the model yet in the first `HOLDERS_FIRST_S`), the
submitter is left alone. A holder that answers `busy` because it is measuring is no reason to wait:
it serves no one until its measurement ends, so the submitter is asked in the same round. Rounds
repeat with a growing pause until a source serves the model (a partial file is resumed) or
`FETCH_PATIENCE_S` passed.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Final

import trio

from node.errors import disk_full
from node.p2p.wire import Channel
from node.transfer.blob_fetch import fetch_blob
from node.transfer.cache import ModelCache
from node.transfer.fetch import FetchError
from node.transfer.urls import PeerTrouble
from protocol import FailureReason, OfferBody

FETCH_PATIENCE_S: Final = 600.0
"""How long a worker keeps asking holders and the submitter for a model before the task fails."""
HOLDERS_FIRST_S: Final = 20.0
"""How long a worker waits for holders that do not have the model yet before it asks the submitter."""
FIRST_PAUSE_S: Final = 0.2
MAX_PAUSE_S: Final = 2.0

ChannelOpener = Callable[[str, tuple[str, ...]], Awaitable[Channel]]
Source = tuple[str, tuple[str, ...]]


async def fetch_from_holders(
    offer: OfferBody, me: str, cache: ModelCache, max_bytes: int, open_blob: ChannelOpener
) -> tuple[Path, str]:
    """Fetch `offer`'s model into `cache` from its holders or its submitter.

    Returns:
        The cached file and the peer id that served it.

    Raises:
        FetchError: the bytes are wrong or too many (at once), or no source served them in time.
    """
    holders = [(h.peer_id, h.addrs) for h in offer.holders if h.peer_id not in (me, offer.submitter)]
    random.shuffle(holders)
    fetch = partial(_fetch_one, offer, cache, max_bytes, open_blob)
    started = trio.current_time()
    deadline = started + FETCH_PATIENCE_S
    pause = FIRST_PAUSE_S
    while True:
        early = trio.current_time() - started < HOLDERS_FIRST_S
        hopeful, failure = False, None
        for holder in list(holders):
            try:
                return await fetch(holder), holder[0]
            except FetchError as exc:
                if exc.reason != FailureReason.FETCH or disk_full(exc):
                    raise  # the bytes are wrong or too many, or our disk full: no other source helps
                failure = exc
                if exc.peer is PeerTrouble.UNREACHABLE:
                    holders.remove(holder)  # a holder we cannot reach is not waited for
                # spreading to others: our turn comes; not there yet: soon, early on; measuring: no
                hopeful |= exc.peer is PeerTrouble.BUSY or (exc.peer is None and early)
        if not hopeful:
            try:
                return await fetch((offer.submitter, offer.submitter_addrs)), offer.submitter
            except FetchError as exc:
                if exc.reason != FailureReason.FETCH or disk_full(exc):
                    raise
                failure = exc
        if trio.current_time() + pause > deadline and failure is not None:
            raise failure
        await trio.sleep(pause)
        pause = min(MAX_PAUSE_S, pause * 2)


async def _fetch_one(
    offer: OfferBody, cache: ModelCache, max_bytes: int, open_blob: ChannelOpener, source: Source
) -> Path:
    model = offer.model
    opener = partial(open_blob, *source)
    return await fetch_blob(opener, model.sha256, model.size, cache, max_bytes=max_bytes, attempts=1)


__all__ = ["FETCH_PATIENCE_S", "HOLDERS_FIRST_S", "ChannelOpener", "fetch_from_holders"]
