"""The neighbour feed: a study's way onto the message bus.

``NeighborFeed.ingest`` turns a round's post-shaped actions into one batch of
posts on the bus; ``local_for`` hands an agent the messages it may see (the
seed page's rule, kept by :class:`desim.messaging.bus.InMemoryMessageBus`);
``contents`` and ``latest`` read a whole round for every reader at once,
without a ``Message`` per delivery.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Callable, Iterable

from desim.messaging.batches import messages_of
from desim.messaging.bus import (
    POST_KINDS,
    InMemoryMessageBus,
    MessageBus,
    missing_field,
)
from desim.records import Action, Message

chain_from = chain.from_iterable
_POST_KINDS = frozenset(POST_KINDS)
_ROUTING = frozenset(("content", "channel", "reply_to"))      # payload keys that shape the message
_agent_id, _kind, _payload = attrgetter("agent_id"), attrgetter("kind"), attrgetter("payload")


class NeighborFeed:
    """Routes post-shaped actions onto a bus and reads each agent's neighbours back.

    A run's network is fixed, so each reader's neighbours are resolved once,
    on its first read, and kept as a tuple (without the reader itself): a
    reader then costs its neighbours' dictionary lookups on the bus, not a
    walk through the networkx graph.
    """

    def __init__(self, neighbors_fn: Callable[[str], Iterable[str]], bus: MessageBus):
        self.neighbors_fn = neighbors_fn
        self.bus = bus
        self._neighbours: dict[str, tuple[str, ...]] = {}
        self._getters: dict[str, Callable | bool] = {}
        self._last_ids: tuple[list[str], list] | None = None
        self._seen: tuple[list, list] | None = None          # the readers and authors of the last read
        self._by_position: tuple[list, list, list] | None = None

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
        bus = self.bus
        if isinstance(bus, InMemoryMessageBus):
            return bus.post_batch(step, round_idx, *columns)
        posted = messages_of(step, round_idx, *columns)
        for m in posted:
            bus.post(m)
        return posted

    def neighbours(self, agent_id: str) -> tuple[str, ...]:
        found = self._neighbours.get(agent_id)
        if found is None:
            found = self._neighbours[agent_id] = tuple(n for n in self.neighbors_fn(agent_id) if n != agent_id)
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
        bus = self.bus
        if not isinstance(bus, InMemoryMessageBus):
            seen = [self.local_for(a, t, round_idx) for a in ids]
            if field is None:
                return [[m.content for m in ms] for ms in seen]
            try:
                return [[m.content[field] for m in ms] for ms in seen]
            except (KeyError, TypeError, IndexError):
                raise missing_field([m for ms in seen for m in ms], field) from None
        single = bus.single_contents(t, round_idx, field)
        if single is not None:
            return self._gather(ids, list(single), list(single.values()), True, single)
        by_author = bus.contents_by_author(t, round_idx, field)
        return self._gather(ids, list(by_author), list(by_author.values()), False, by_author)

    def latest(self, ids: Iterable[str], t: int, round_idx: int, field: str | None = None) -> list[list]:
        """For each of ``ids``, the latest visible content (or its ``field``) of each neighbour that
        has one, in neighbour order: each neighbour's current opinion, price or state, once.

        The latest is the one posted in the latest step and round, the last posted among equals:
        for ``ids[i]``, the last of each author's messages in ``local_for(ids[i], t, r)``.
        """
        ids = ids if type(ids) is list else list(ids)      # read more than once
        bus = self.bus
        if not isinstance(bus, InMemoryMessageBus):
            out = []
            for a in ids:
                last = {}
                for m in sorted(self.local_for(a, t, round_idx), key=lambda m: (m.step, m.round)):
                    last[m.author_id] = m
                try:
                    out.append([last[n].content if field is None else last[n].content[field]
                                for n in self.neighbours(a) if n in last])
                except (KeyError, TypeError, IndexError):
                    raise missing_field(list(last.values()), field) from None
            return out
        latest = bus._latest_by_author(t, round_idx, field)
        return self._gather(ids, latest.authors, latest.contents, True)

    def _gather(self, ids: Iterable[str], authors: list, contents: list, single: bool,
                by_author: dict | None = None) -> list[list]:
        """Each reader's neighbours' contents, in neighbour order: ``contents[i]`` is the content of
        ``authors[i]`` (``single``) or a list of them.

        When the readers and the authors are those of the read before (the usual round), each
        reader has a cached ``itemgetter`` over its neighbours' positions: one C call a reader,
        with no look-up by id. Otherwise the contents are looked up by author."""
        if not authors:                 # nobody has anything to show
            return [[] for _ in ids]
        row = self._positions_for(ids, authors)
        if row is None:
            return self._gather_by_author(ids, dict(zip(authors, contents)) if by_author is None else by_author,
                                          single)
        try:
            if single:
                return [list(get(contents)) for get in row]
            return [list(chain_from(get(contents))) for get in row]
        except TypeError:           # a reader with fewer than two neighbours to show (a tuple of positions)
            pass
        out = []
        add = out.append
        for get in row:
            if type(get) is tuple:
                add([contents[p] for p in get] if single else [c for p in get for c in contents[p]])
            else:
                add(list(get(contents)) if single else list(chain_from(get(contents))))
        return out

    def _positions_for(self, ids: Iterable[str], authors: list) -> list | None:
        """Per reader, its neighbours' positions among ``authors``: an ``itemgetter`` for two or
        more, else a tuple. Made when a read has the readers and authors of the read before (so a
        round whose participants change every time never pays for it), then kept."""
        kept = self._by_position
        if kept is not None and ids == kept[0] and authors == kept[1]:     # its own copies: compared, in C
            return kept[2]
        seen = self._seen
        if seen is None or not (ids == seen[0] and authors == seen[1]):
            self._seen = (list(ids), list(authors))
            return None
        position = {a: i for i, a in enumerate(seen[1])}     # an author listed twice: its last
        row = []
        for a in seen[0]:
            got = [position[n] for n in self.neighbours(a) if n in position]
            row.append(itemgetter(*got) if len(got) > 1 else tuple(got))
        self._by_position, self._seen = (seen[0], seen[1], row), None
        return row

    def _gather_by_author(self, ids: Iterable[str], by_author: dict, single: bool) -> list[list]:
        """``_gather`` by author: ``by_author`` holds one content per author (``single``) or a list.
        A cached ``itemgetter`` per reader makes it one C call a reader when all its neighbours
        have something to show."""
        row = self._getters_for(ids)
        try:
            if single:
                return [list(get(by_author)) for get in row]
            return [list(chain_from(get(by_author))) for get in row]
        except (KeyError, TypeError):       # a neighbour with nothing to show, or a reader with fewer than two
            pass
        out = []
        add = out.append
        for a, get in zip(ids, row):
            if get:
                try:
                    add(list(get(by_author)) if single else list(chain_from(get(by_author))))
                    continue
                except KeyError:
                    pass
            nbrs = self.neighbours(a)
            if single:
                add([by_author[n] for n in nbrs if n in by_author])
            else:
                add([c for n in nbrs for c in by_author.get(n, ())])
        return out

    def _getters_for(self, ids: Iterable[str]) -> list:
        """The readers' getters, in their order; the same readers as last round reuse the list."""
        last = self._last_ids
        if last is not None and ids == last[0]:
            return last[1]
        getters = self._getters
        row = [getters[a] if a in getters else self._getter(a) for a in ids]
        self._last_ids = (list(ids), row)
        return row

    def _getter(self, agent_id: str):
        """A cached ``itemgetter`` over the reader's neighbours (``False`` for fewer than two)."""
        nbrs = self.neighbours(agent_id)
        get = self._getters[agent_id] = itemgetter(*nbrs) if len(nbrs) > 1 else False
        return get
