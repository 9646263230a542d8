"""A GET_PROVIDERS walk's rules and state, pure: the servers we know closest to a key, then closer (issue 43).

With more servers than k, the servers of our routing table closest to a key are mostly not the key's
holders: asking them all at once (`Kad.lookup_providers` in a small swarm) cost k requests that found
nothing and, with one departed server among them, the whole query deadline. A walk asks `ALPHA` at a
time and follows the closer peers each answer lists (`Shortlist`, the walk's state, pure: the simulator
`benchmarks/swarm_net.walk` runs the same one; `node.p2p.walk` is its trio driver). It ends at the
count asked, or when the k closest servers it knows that did not fail have all been asked and answered
(where a kad lookup ends; once a server listed providers, it does not wait out the deadline of one that
left: only requests still within their `HOP_S`). A request unanswered after `HOP_S` frees its slot for
the next server and stays open (a late answer still counts), so departed servers drawn at once do not
stall the walk for their deadline.

Holders that agree never end a walk short of its count (issue 50). The keys are public strings, so
a server id can be ground near one; before, three holders listing the same providers (`AGREED`) ended
the walk, and five hostile servers ground near a shard key (of 300 honest) that all listed the same
three Sybils ended 2-3 % of the walks with no honest provider, ten 11 %, and the key then read "not
full", so no deeper key was read. The hostile servers see the key and choose their ids, their lists
and how fast they answer; the walk now reads neither their agreement nor their count: it goes on to
the k closest and takes every list they gave, so a key's providers (and whether it is full: the
union of the lists, `Dht.lookup`) are decided by all of its holders. Once the k closest were asked
it waits for the requests still within their hop, and ends that wait early only when `AGREED` holders
among the k closest on distinct networks (`network`: `Kad` gives a server's /24 or /64,
`scheduler.verification.networks`), more of them than the k closest's requests still within their
hop, list the same providers, none lists more, and every request still open has been out longer than
the walk's round trip (`Shortlist.round_trip`: the median, over networks, of a network's slowest answer
among the servers outside the k closest known). With `ALPHA` (13) in flight the k closest are asked in
one or two rounds: agreement alone ended the wait for holders asked a moment before (a reader missed a
writer that 2 of 20 holders list in 8 of 20 walks, `test_a_reader_waits_for_the_holders_asked_last`);
a request within the walk's round trip is an answer on its way, and the walk waits for it. Answers
already delivered are all read before each decision.

The cheater's view: hostile servers see the key (a public string) and choose their ids (ground near
it: they are among its k closest), their lists and when they answer (at once: theirs are the first
answers to agree). They do not choose when the walk asks them (drawn among the k closest) nor how
long honest servers take. The rule reads their agreement only as networks (ids are free, networks are
not: hostile servers on one network are one voice and never agree), and their timing not at all: the
round trip is measured on the way to the key, outside its k closest, so quick answers ground near it
do not shorten the wait; answering late only lengthens a walk by at most a hop, as a departed server
does. What it does not stop: an attacker holding about as many networks as the key's k closest, all
agreeing at once, ends the wait for an honest holder slower than the median round trip
(`benchmarks/notes/swarm_hostile.md`: 19 networks near one key); a look then reads the key again with
`every` once its Sybils failed their probes (below). The rule before is kept for the
simulator's side-by-side (`short`) and its figures are in `benchmarks/notes/swarm_hostile.md`.

The count that ends a walk takes only providers that holders on `AGREED` distinct networks list, and
on more networks than the k closest that may still answer (not asked yet, or asked and within their
hop: `Shortlist.vouched`), and the walk's providers come in turns, one from each network that listed
any in each turn, the most vouched first (`Shortlist.ranked`; `Kad` keeps the first `count`). Before,
it was every provider any holder listed: a hostile server ground
near a full key that listed 20 Sybils at once ended the walk at its first answer, and in the
simulator one such server lost every honest provider in 24 % of the walks, five in 79.5 %
(`benchmarks/swarm_hostile.py --sybils 20`). The cheater's view: it chooses its list's length and
members and answers first; it does not choose how many networks it holds. One network's servers,
however many, vouch as one: none of its lists ends a walk, which reads on to the honest holders,
whose providers then rank first. The cost: a full key's walk now waits for three holders' answers
instead of one (at 10,000 devices `devices: 100` of a common unit p50 0.74 s instead of 0.55 s, the
rare lookup's p95 1.99 s instead of 1.98 s, 1,259 KB a lookup instead of 1,059: `swarm_sim.py`, 30
lookups, seed 1). Three networks were then enough: hostile servers on three networks or more near a
key vouched for their Sybils before the honest answers came (5 networks: 32 % of the walks lost every
honest provider, 10: 78 %), and a key's first 20, ranked by networks alone, held none of the honest
providers in 82 % and 100 % (`benchmarks/notes/swarm_hostile.md`). Now M networks that answered
first end no walk while more than M of the k closest may still answer (the honest holders), and the
turns give each network that listed providers its share of the first 20: 0 % lost at 5 and 10
networks, in the walks and in the first 20 (`tests/labs/swarm/test_hostile_networks.py`: four
networks of real servers in namespaces, 0 of 12 walks lost, both honest providers kept; 3 of 12
and none kept on the rule before). The cost: a full key's walk waits for a majority of its k
closest, not three (at 10,000 devices `devices: 100` of a common unit p50 / p95 1.19 / 1.30 s
instead of 0.74 / 0.88 s, 1,564 KB a lookup instead of 1,259; the rare lookup's p95 1.88 s, under
the 2 s target). What it does not stop alone: more networks near a key than honest holders among its
k closest (19 networks of 20: 99 % lost; the look's second read with `every`, below, loses none), and
honest networks outnumbered near the key keep only their share of its first 20.

Waiting for every one of the k closest (`every`, 2026-12-01) stops that: no honest provider lost
to hostile servers on 11, 15 or 19 networks of a key's 20 closest, where this rule loses every one in
15.5, 72.5 and 99 % of the walks (`benchmarks/swarm_hostile.py --sybils 20`, seed 1, both in one run).
It is not the rule of every walk, for what it costs honest users: each walk then waits for the slowest of
its key's 20 closest, or a departed one's hop (one key's walk p50 / p95 0.34 / 0.61 s instead of 0.18 /
0.23 s); at 10,000 devices with real connections' costs all 100 rare devices p95 3.48 s instead of
1.97 s (`swarm_sim.py`, both in one run), and a campaign's discovery of `devices: 100` with no
attacker at all found them within the default look's 5 s in 55 % of the trials, p50 4.98 s
(`swarm_sim.py --sybils`; 100 %, 4.22 s, at 8025c42). Hostile servers near a key cost an honest
provider its place there for one walk period at most (the read-back moves it below,
`Dht._read_back`); a default look that misses every second campaign costs every user. So a look
takes the providers this rule's walk lists, probes them, and reads a key again with `every` only when
most of its providers did not answer (`Hints.unanswered`, `node.p2p.lookup.read_again`): an honest
swarm's looks cost what they did, and a look past hostile servers on 11 to 19 networks of a key's 20
closest pays a probe's grace and one walk of every holder (`benchmarks/notes/swarm_hostile.md`).

A server whose request failed (an error, or its deadline passed) leaves the k closest, and the next
closest takes its place, to be asked in turn: the walk ends when the k closest servers that did not
fail were all asked and answered (or, a holder answered, are past their hop; go-libp2p-kad-dht's
query drops unreachable peers the same way). Before, a failed server stayed among the k closest: a
hostile server listing k fake ids closer to the key than any server (ids are free) ended the walk at
their failures with the key's live holders never asked, and departed servers kept live holders out
the same way. The cheater's view: it chooses the fake ids, how many it lists (an answer adds at most
its k closest to the key, `Shortlist.answered`), their addresses and whether they fail at once or
hang; fakes that fail cost the walk their failure, fakes that hang their deadline (3 s) when no
holder answered yet. Agreement counts only holders among the k closest that did not fail. What it
does not stop: hung fakes past their hop, once a holder answered, end the walk as a departed
server's silence does (the rule for `HOP_S`), with the holders they push out unasked.

The next server asked is drawn at random among the k closest known not yet asked, not the closest
one: closest first, every lookup of a key asked the same few holders first (the three closest to it),
and the holders of the keys every lookup reads (the top of each tree) carried 1.2 % of all lookup
traffic at 10,000 devices in the simulator; drawn, a key's reads spread over its k holders. It does
not stop at the first holder that lists providers: each writer sends its records to the k closest
servers its own walk found, and those views differ (in a lab of 22 serving workers a first holder
listed 2 of a key's 20 providers); three holders listing the same providers, none listing more, are
taken as the key's list, holders that disagree walk on to the k closest. A writer's read-back
(`Kad.provide_where_missing`, `agree=False`) walks on to the k closest and waits for their answers:
`Walked.lacking` names the holders its record is missing from, so it sends there again and agreeing
holders that all lack a writer become rarer.
"""

from __future__ import annotations

import hashlib
import math
import random
import statistics
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Final, Generic, TypeVar, final

if TYPE_CHECKING:
    from libp2p.peer.id import ID

ALPHA: Final = 13
"""Requests of one walk in flight at once (go-libp2p-kad-dht's and py-libp2p's own alpha is 10). With
the round trips of real connections (`benchmarks/conn_cost.py`) the simulator puts all 100 rare
devices of 10,000 at p95 1.95 s with 13 (seeds 2 and 3: 1.92 and 1.85 s), 2.30 s with 10 and 5.96 s
with 3 under the same rule (`swarm_sim.py`: `sharded_auto_conn` and its `_alpha3`, seed 1; recall 1.0
each). The trade: 13 costs 1,074 KB a lookup against 934 with 10 (+15 %), a serving device's kad
traffic unchanged (971 B/s, near the 1 KB/s target: lookups are the asker's bytes); 16 gave 1.77 s
at 1,228 KB (+31 %) but a lookup at 1,000 devices found 99 of 100 (recall 0.99), so it is not taken.
Before failed servers left the k closest (`Shortlist.failed`) 10 gave 2.41 s. A py-libp2p server
limits only ADD_PROVIDER per sender (P34); a GET_PROVIDERS meets only its host-wide cap on inbound
kad streams, which `kadpatch` raises to 128 (P23), and the requests in flight go to distinct
servers."""
BEFORE_ALPHA: Final = 3
"""The walk's requests in flight before issue 50 (the `short` rule's side-by-side: with more, answers
read together break the hostile servers' agreement more often, and the attack's baseline thins)."""
K: Final = 20
"""kad's k: the servers closest to a key that hold its records, and that a walk asks (the one k of
`node.p2p`: `kad` writes to k, `closest` keeps k a key)."""
HOP_S: Final = 1.0
"""A request unanswered this long frees its slot for the next server; it stays open until its deadline
(`Kad`'s 3 s) and a late answer still counts. rust-libp2p's `ClosestPeersIter` does the same after its
`peer_timeout` (10 s there); go-libp2p-kad-dht's query holds a slot until the request fails. 1 s is 5 x
the p95 RTT of the simulator's wide-area model: a departed server no longer stalls a walk whose three
slots it and its like hold (the lookup of all rare devices at 5,000 waited out the 3 s deadline)."""
AGREED: Final = 3
"""Holders on distinct networks listing the same providers, and no holder listing one more: once the
k closest were asked, they end the wait for requests out longer than the walk's round trip (before
issue 50 they ended a walk short of its count, `short`: in the simulator two gave 0.30 % on the
busiest server at 10,000, three 0.37 %, none 0.74 %; three, as holders of a young swarm can list the
same few of a key's providers)."""

P = TypeVar("P", bound=Hashable)


@final
class Shortlist(Generic[P]):
    """The state of one walk: the peers known and their distance to the key, who was asked, what the
    holders listed. Pure: the caller sends the requests and reports each answer or failure.

    Args:
        start: the peers known at first (our routing table's closest).
        distance: a peer's XOR distance to the key.
        count: providers that end the walk, each listed by holders on `agreed` networks (`vouched`).
        draw: the generator that draws the next peers among the k closest (None: closest first, as
            libp2p's own FIND_NODE walk asks).
        agree: once a holder answered, stop waiting for requests past their hop, and at `agreed`
            holders that agree for those past the walk's round trip (False: walk on to the k closest
            and wait for every answer, as a writer's read-back does: it must reach every holder that
            lacks its record).
        agreed: how many holders listing the same providers end the walk (`AGREED`; the simulator
            varies it to weigh the rule).
        short: whether holders that agree may end the walk with a list short of `count` (the rule
            before issue 50, which a few hostile servers near a key used; the simulator's baseline).
        network: a server's network, so that agreement and the round trip count networks, not
            servers (None: each server its own; the simulator's).
        keep_failed: servers whose request failed stay among the k closest (the rule before: a
            departed server, or a fake closer id a hostile server lists, kept a live holder out of
            the set the walk must ask; the simulator's side-by-side).
        every: end only when none of the k closest may still answer (each answered, failed or past
            its hop), at the count as at the wait: no minority of the k closest ends a walk (a look's
            second read of a key whose providers did not answer, `node.p2p.dht.Dht.lookup`; not every
            walk's rule: its cost in the module's docstring).
    """

    def __init__(
        self,
        start: Iterable[P],
        distance: Callable[[P], int],
        count: int,
        draw: random.Random | None,
        agree: bool = True,
        agreed: int = AGREED,
        short: bool = False,
        network: Callable[[P], Hashable] | None = None,
        keep_failed: bool = False,
        every: bool = False,
    ) -> None:
        self._distance = distance
        self.known = {peer: distance(peer) for peer in start}
        self.asked: set[P] = set()
        self.found: set[Hashable] = set()
        self.count = count
        self.held = False
        self._draw = draw
        self._agree = agree
        self._agreed = agreed
        self._short = short
        self._network = network
        self._keep_failed = keep_failed
        self._every = every
        self.failures: set[P] = set()  # servers whose request failed (an error, or its deadline)
        self._lists: dict[P, tuple[Hashable, frozenset[Hashable]]] = {}  # a holder -> its network, list
        self._union: frozenset[Hashable] = frozenset()  # every provider a holder listed
        self._took: dict[P, tuple[Hashable, float]] = {}  # a server that answered -> its network, seconds
        self._sizes: dict[P, tuple[Hashable, int]] = {}  # a server that answered -> its network, list length
        self._vouch: dict[Hashable, set[Hashable]] = {}  # a provider -> the networks of holders listing it

    def closest(self) -> list[P]:
        """The k closest peers known that did not fail, closest first (where a kad lookup ends:
        go-libp2p-kad-dht's query counts the k closest it queried and heard from, and drops the
        unreachable ones)."""
        live = self.known if self._keep_failed else (p for p in self.known if p not in self.failures)
        return sorted(live, key=self.known.__getitem__)[:K]

    def next(self, free: int) -> list[P]:
        """Up to `free` peers to ask now, among the k closest known not asked yet (marked asked)."""
        pending = [p for p in self.closest() if p not in self.asked]
        if self._draw is not None:
            self._draw.shuffle(pending)
        chosen = pending[: max(0, free)]
        self.asked.update(chosen)
        return chosen

    def answered(
        self, peer: P, providers: frozenset[Hashable], closer: Iterable[P], took: float | None = None
    ) -> None:
        """`peer` answered: the providers it lists (a holder lists others than itself), closer peers (the
        k closest of them to the key: a server listing more, as fake ids a hostile one invents, adds
        no more than k), and `took`: the seconds from its request to its answer (the walk's round
        trip: `done`)."""
        where = peer if self._network is None else self._network(peer)
        if took is not None:
            self._took[peer] = (where, took)
        self._sizes[peer] = (where, len(providers - {peer}))
        if providers - {peer}:
            self.held = True
            self._lists[peer] = (where, providers)
            self._union |= providers
            for provider in providers - {peer}:
                self._vouch.setdefault(provider, set()).add(where)
        self.found |= providers
        listed = {p: self._distance(p) for p in closer}  # a kad server lists k: more add nothing
        nearest = sorted(listed, key=listed.__getitem__)[:K]
        self.known.update((p, listed[p]) for p in nearest if p not in self.known)

    def failed(self, peer: P) -> None:
        """`peer`'s request failed (an error, or its deadline passed; not one merely past its hop,
        which may still answer): it leaves the k closest, and the next closest takes its place, to
        be asked in turn. A failure is final: it is not asked again."""
        self.failures.add(peer)

    def done(self, ages: Mapping[P, float], hop: float = math.inf) -> bool:
        """Is the walk over, `ages` the seconds each open request has been out? At the count vouched for; or
        once the k closest known were asked: when none is open, or (a holder answered) when none is
        within its `hop`, or when `agreed` holders among the k closest on distinct networks, more than
        the k closest's requests within their hop, list the same providers, none more, and every
        request still within its hop has been out longer than the walk's `round_trip`
        (it waits for those within their first round trip: a quick agreement does not end the wait for
        an answer on its way). With `short` (the rule before issue 50), that agreement ends the walk
        before the k closest were asked, whatever is in flight."""
        if self._short:
            if len(self.found) >= self.count or (self._agree and self._agreement()):
                return True
        else:
            may_answer = self._may_answer(ages, hop)
            if (not self._every or not may_answer) and self.vouched(may_answer) >= self.count:
                return True
        if any(p not in self.asked for p in self.closest()):
            return False
        if not ages:
            return True
        if not (self.held and self._agree):
            return False
        active = [age for age in ages.values() if age < hop]
        if not active:
            return True
        if self._every:
            return False
        near = set(self.closest())
        waiting = sum(1 for peer, age in ages.items() if age < hop and peer in near)
        return self._agreement(near, waiting) and min(active) > self.round_trip

    def vouched(self, may_answer: int = 0) -> int:
        """Providers listed by holders on `agreed` distinct networks or more, and on more networks than
        `may_answer` (the k closest servers that may still answer, `_may_answer`): the count that ends
        a walk. One network's holders, however many, list as one voice; holders on several networks
        that answered first end no walk while as many of the key's k closest are still to answer, who
        may list others."""
        need = max(self._agreed, may_answer + 1)
        return sum(1 for networks in self._vouch.values() if len(networks) >= need)

    def _may_answer(self, ages: Mapping[P, float], hop: float) -> int:
        """The k closest known that may still answer: not asked yet, or asked and within their hop."""
        return sum(1 for p in self.closest() if p not in self.asked or ages.get(p, math.inf) < hop)

    def ranked(self, providers: Iterable[P]) -> list[P]:
        """`providers` taken in turns, one from each network that listed any in each turn (its next in
        the order of how many networks list each), each turn in that order: a lookup that keeps
        `count` of a key's providers gives every network an equal share of them, so networks that
        outnumber the rest near a key (all listing the same Sybils) never push every provider of the
        others out; where every network lists the same, it keeps the ones most holders vouch for."""
        order = sorted(providers, key=lambda p: -len(self._vouch.get(p, ())))
        rank = {p: i for i, p in enumerate(order)}
        lists: dict[Hashable, set[Hashable]] = {}
        for where, listed in self._lists.values():
            lists.setdefault(where, set()).update(listed)
        queues = [deque(p for p in order if p in listed) for listed in lists.values()]
        out: list[P] = []
        taken: set[P] = set()
        while any(queues):
            turn = []
            for queue in queues:
                while queue and queue[0] in taken:
                    queue.popleft()
                if queue:
                    taken.add(queue[0])
                    turn.append(queue.popleft())
            out.extend(sorted(turn, key=rank.__getitem__))
        return out + [p for p in order if p not in taken]

    @property
    def round_trip(self) -> float:
        """The walk's round trip: the median, over the networks of the servers that answered outside
        the k closest known (the way there, not the key's neighbours: ids ground near a key cannot
        set it), of a network's slowest answer (seconds from request to answer). Unknown (no answer
        from outside the k closest: a walk that started among the key's holders) it is infinite: no
        agreement ends the wait for a request within its hop."""
        near = set(self.closest())
        slowest: dict[Hashable, float] = {}
        for peer, (where, took) in self._took.items():
            if peer not in near:
                slowest[where] = max(took, slowest.get(where, 0.0))
        return statistics.median(slowest.values()) if slowest else math.inf

    def holds(self, every: bool = False) -> int:
        """How many providers the key holds, as most of its holders' networks say (`holding`, over the
        answers of the k closest known; `every`: of every server that answered, a small swarm's, where
        each holds every record): what a placement and a lookup read "full" by (`node.p2p.dht`)."""
        near = self._sizes.keys() if every else self.closest()
        return holding(self._sizes[p] for p in near if p in self._sizes)

    def _agreement(self, near: set[P] | None = None, waiting: int = 0) -> bool:
        """`agreed` holders' networks, and more than `waiting` (the requests among the k closest still
        within their hop), list every provider any holder listed (`near`: only the holders among
        those peers count). Agreement ends the wait only when the agreeing networks outnumber the
        servers still answering: hostile servers on 10 networks of a key's 20 closest, answering at
        once, cut the 10 honest holders' answers on their way in 1 of 500 walks with 13 in flight."""
        agreeing = {
            where
            for peer, (where, listed) in self._lists.items()
            if listed == self._union and (near is None or peer in near)
        }
        return len(agreeing) >= max(self._agreed, waiting + 1)


def holding(answers: Iterable[tuple[Hashable, int]]) -> int:
    """How many providers a key holds, as most of the networks of its holders that answered say
    (`answers`: each holder's network and how many providers it listed; 0 when none answered).

    Each network's word is its holders' upper median (one holder of a network that missed records does
    not outvote the rest), and the key's is the lower median over networks: a count that holders on
    more than half of the networks list at least. The cheater's view: hostile servers ground near a key
    choose what they list (20 Sybils under every key, a full key's count) but not how many networks
    answer beside them; their lists move this count only when they hold more than half of the key's
    holders' networks. The union of the lists, read before, was theirs to fill.
    """
    by_network: dict[Hashable, list[int]] = {}
    for where, size in answers:
        by_network.setdefault(where, []).append(size)
    if not by_network:
        return 0
    return statistics.median_low([statistics.median_high(sizes) for sizes in by_network.values()])


def key_distance(key: bytes) -> Callable[[ID], int]:
    """A peer's kad distance to a key: sha256 of each, XOR."""
    target = int.from_bytes(hashlib.sha256(key).digest(), "big")

    def distance(peer: ID) -> int:
        return target ^ int.from_bytes(hashlib.sha256(peer.to_bytes()).digest(), "big")

    return distance


__all__ = ["AGREED", "ALPHA", "BEFORE_ALPHA", "HOP_S", "K", "Shortlist", "holding", "key_distance"]
