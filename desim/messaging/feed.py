"""The neighbour feed: a study's way onto the message bus.

``NeighborFeed.ingest`` turns a round's post-shaped actions into one batch of posts on the bus
(``post_batch``); ``local_for`` hands an agent the messages it may see (``visible_to``, the seed
page's rule); ``contents`` and ``latest`` read a whole round for every reader at once, through
the bus's answers by author (``contents_by_author``, ``latest_by_author``), without a ``Message``
per delivery. It uses only the :class:`desim.messaging.bus.MessageBus` protocol, so it reads any
bus; ``InMemoryMessageBus`` answers the batch methods fast.
"""
from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Callable, Iterable

from desim.messaging.batches import ByAuthor
from desim.messaging.bus import POST_KINDS, MessageBus
from desim.messaging.index import ReadIndex, unique_neighbours
from desim.records import Action, Message

_POST_KINDS = frozenset(POST_KINDS)
_ROUTING = frozenset(("content", "channel", "reply_to"))      # payload keys that shape the message
_agent_id, _kind, _payload = attrgetter("agent_id"), attrgetter("kind"), attrgetter("payload")


class NeighborFeed:
    """Routes post-shaped actions onto a bus and reads each agent's neighbours back.

    Each reader's neighbours are what ``neighbors_fn`` says at the read. When they cannot change during
    the run (``fixed``) the feed keeps them: each reader's resolved once, on its first read, as a tuple
    (each once, without the reader itself), so a reader then costs its neighbours' look-ups, not a call;
    and one :class:`desim.messaging.index.ReadIndex`, the readers' neighbours' positions among the
    authors of the last batch read, replaced whenever a read's authors differ.

    ``fixed`` defaults to what ``neighbors_fn`` says of itself: :func:`desim.neighbors_fn` (a snapshot of
    a graph) and ``ctx.neighbors`` (the run's network, fixed for the run) are fixed; a function of the
    study's own (agents who share a room, which they change) is asked at every read, so a reader never
    reads a neighbourhood it has left. ``fixed=True`` declares a function of one's own fixed.
    """

    def __init__(self, neighbors_fn: Callable[[str], Iterable[str]], bus: MessageBus, *, fixed: bool | None = None):
        if not isinstance(bus, MessageBus):
            raise TypeError(f"NeighborFeed: the bus is a {type(bus).__name__}, not a desim.MessageBus "
                            "(subclass it: post, visible_to and drain are enough)")
        self.neighbors_fn = neighbors_fn
        self.bus = bus
        self.fixed = bool(getattr(neighbors_fn, "fixed_network", False)) if fixed is None else bool(fixed)
        self._neighbours: dict[str, tuple[str, ...]] = {}
        self._index: ReadIndex | None = None

    def ingest(self, actions: Iterable[Action], step: int, round_idx: int) -> Sequence[Message]:
        """Post every ``post`` or ``reply`` action; other kinds pass through untouched.

        The message content is ``payload["content"]`` when present, else the
        payload; ``payload["channel"]`` and ``payload["reply_to"]`` set those
        fields. Returns the messages posted (on an ``InMemoryMessageBus``, a
        sequence whose ``Message`` objects are made when it is first read).
        """
        actions = actions if type(actions) is list else list(actions)
        payloads = list(map(_payload, actions))
        kinds = set(map(_kind, actions))
        if kinds <= _POST_KINDS and _ROUTING.isdisjoint(set().union(*payloads)):    # all keys in one C call
            # every action a post whose payload is its content (the usual round): the round as it is
            columns = (list(map(_agent_id, actions)), payloads, kinds.pop() if len(kinds) == 1
                       else list(map(_kind, actions)))
        else:
            authors, contents, kinds, channels, reply_to = [], [], [], [], []
            for a in actions:
                if a.kind not in _POST_KINDS:
                    continue
                p = a.payload
                authors.append(a.agent_id)
                kinds.append(a.kind)
                contents.append(p.get("content", p))
                channels.append(p.get("channel", "feed"))
                reply_to.append(p.get("reply_to"))
            columns = (authors, contents, kinds, channels, "neighbors", reply_to)
        if not columns[0]:
            return []
        return self.bus.post_batch(step, round_idx, *columns)

    def neighbours(self, agent_id: str) -> tuple[str, ...]:
        """``agent_id``'s neighbours, each once, without itself: kept when ``fixed``, else asked now."""
        found = self._neighbours.get(agent_id)
        if found is None:
            found = tuple(dict.fromkeys(n for n in self.neighbors_fn(agent_id) if n != agent_id))
            if self.fixed:
                self._neighbours[agent_id] = found
        return found

    def local_for(self, agent_id: str, t: int, round_idx: int) -> list[Message]:
        """The messages ``agent_id`` may see at step ``t``, round ``round_idx``."""
        return self.bus.visible_to(agent_id, self.neighbours(agent_id), t, round_idx)

    def contents(self, ids: Iterable[str], t: int, round_idx: int, field: str | None = None) -> list[list]:
        """For each of ``ids``, the contents of the messages it may see (``local_for``'s messages,
        in its order), or with ``field`` each content's ``field``: the fast way to read a round.

        ``feed.contents(ids, t, r, "opinion")[i]`` equals
        ``[m.content["opinion"] for m in feed.local_for(ids[i], t, r)]``: the round's messages
        are gathered by author once, then each reader looks up its neighbours.
        """
        ids = ids if type(ids) is list else list(ids)      # read more than once
        got = self.bus.contents_by_author(t, round_idx, field, authors=unique_neighbours(ids, self.neighbours))
        return self._gather(ids, got, chained=True)

    def latest(self, ids: Iterable[str], t: int, round_idx: int, field: str | None = None) -> list[list]:
        """For each of ``ids``, the latest visible content (or its ``field``) of each neighbour that
        has one, in neighbour order: each neighbour's current opinion, price or state, once.

        The latest is the one posted in the latest step and round, the last posted among equals:
        for ``ids[i]``, the last of each author's messages in ``local_for(ids[i], t, r)``.
        """
        ids = ids if type(ids) is list else list(ids)      # read more than once
        got = self.bus.latest_by_author(t, round_idx, field, authors=unique_neighbours(ids, self.neighbours))
        return self._gather(ids, got, chained=False)

    def _gather(self, ids: list, got: ByAuthor, chained: bool) -> list[list]:
        """Each reader's neighbours' values in ``got``, in neighbour order (``chained``: each value
        a list, joined). The index is replaced here and only here, when the authors differ."""
        if not got.authors:                 # nobody has anything to show
            return [[] for _ in ids]
        index = self._index
        if index is None or not index.fits(got.authors) or not self.fixed:     # neighbours that move: anew
            index = self._index = ReadIndex(got.authors, self.neighbours)
        return index.gather(ids, got.contents, chained)
