"""The message bus: how agents hear each other within and across steps.

The engine never touches it. A study's environment owns a bus (usually made
in ``reset``), turns post-shaped actions into messages with
``NeighborFeed.ingest`` inside ``apply``, hands each agent its feed with
``NeighborFeed.local_for`` inside ``observe_batch``, and the collector
persists what ``drain()`` returns into the ``messages`` table.

The visibility rule (exact, from the seed page): ``visible_to(recipient,
neighbors, step, round_idx)`` returns message ``m`` iff its author is one of
the recipient's neighbours and either ``m.step == step and m.round <
round_idx`` (posted earlier this step) or ``carry_previous_step and m.step ==
step - 1`` (last step's).
An agent never reads its own posts: the recipient is skipped among its
neighbours, so a self-loop would change nothing, and ``population.json``
refuses one in explicit ``edges`` rather than let it look meaningful.

Delivery is indexed by step and author, so a reader costs its neighbours'
look-ups plus the messages it receives, never a scan of the whole bus.
Steps older than ``step - 1`` can never be seen again and are dropped.

Large rule-based studies on the columnar path use :class:`ColumnarFeed`
instead: the same rule over numpy arrays (agents are positions, the network a
CSR adjacency, a round's posts one batch of columns), so a round costs a few
array operations over the delivered messages rather than Python per agent.
``visible`` returns every delivered message (in ``visible_to``'s order);
``neighbour_sum`` only counts and sums them, in cache-sized blocks, which is
what most rule models need; ``drain`` returns an Arrow table.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Callable, Iterable

import networkx as nx
import numpy as np
import pyarrow as pa

from .schemas import Action, Message

POST_KINDS = ("post", "reply")


class MessageBus:
    """Where messages are posted and from which each agent reads its visible share."""

    def post(self, message: Message) -> None:
        raise NotImplementedError

    def visible_to(self, recipient: str, neighbors: Iterable[str], step: int, round_idx: int) -> list[Message]:
        raise NotImplementedError

    def drain(self) -> list[Message]:
        raise NotImplementedError


class InMemoryMessageBus(MessageBus):
    """A bus held in memory, indexed by step, then author, then round.

    ``_by_step[step][author]`` lists that author's messages of that step in
    round order, so a reader looks up each neighbour once per visible step
    and stops at the first message of a round it may not see yet. A message
    is stored once and the same object is handed to every reader.
    """

    def __init__(self, carry_previous_step: bool = False):
        self.carry_previous_step = carry_previous_step
        self._by_step: dict[int, dict[str, list[Message]]] = {}
        self._latest: int | None = None
        self._rounds: dict[int, int] = {}       # step -> the latest round posted in it
        self._step_cache: dict[tuple, dict[str, list]] = {}    # (step, field) -> _step_contents
        self._undrained: list[Message] = []

    def post(self, message: Message) -> None:
        self.post_many((message,))

    def post_many(self, messages: Iterable[Message]) -> None:
        """Post several messages, in order."""
        self._post_each(list(messages))

    def _post_round(self, messages: list[Message], step: int, round_idx: int) -> None:
        """Post one round's messages (all of ``step``, ``round_idx``), as ``NeighborFeed.ingest`` does."""
        latest = self._latest
        if not messages or (latest is not None and step < latest) or self._rounds.get(step, -1) > round_idx:
            self._post_each(messages)           # an earlier step or round than posted before: the slow way
            return
        if latest is None or step > latest:
            self._new_step(step)
        self._forget(step)
        self._rounds[step] = round_idx
        by_author = self._by_step.get(step)
        if by_author is None:                   # the step's first posts: one list per author, in C
            by_author = {m[0]: [m] for m in messages}
            if len(by_author) == len(messages):
                self._by_step[step] = by_author
                self._undrained.extend(messages)
                return
            by_author = {}                      # someone posted twice: the loop below
            self._by_step[step] = by_author
        add = by_author.setdefault
        for m in messages:                      # after every earlier round of the step: each only appends
            add(m[0], []).append(m)
        self._undrained.extend(messages)

    def _new_step(self, step: int) -> None:
        """``step`` is the latest: steps before ``step - 1`` can never be seen again."""
        self._latest = step
        for old in [s for s in self._by_step if s < step - 1]:
            del self._by_step[old]
            self._rounds.pop(old, None)
            self._forget(old)

    def _forget(self, step: int) -> None:
        """Drop what was gathered from ``step``'s messages: it has a new one."""
        if self._step_cache:
            for key in [k for k in self._step_cache if k[0] == step]:
                del self._step_cache[key]

    def _post_each(self, messages: list[Message]) -> None:
        by_step, undrained, rounds = self._by_step, self._undrained, self._rounds
        for m in messages:
            step = m[1]
            self._forget(step)
            if self._latest is None or step > self._latest:
                self._new_step(step)
            by_author = by_step.get(step)
            if by_author is None:
                by_author = by_step[step] = {}
            mine = by_author.get(m[0])
            if mine is None:
                by_author[m[0]] = [m]
            elif mine[-1][2] <= m[2]:
                mine.append(m)
            else:  # posted out of round order: keep the list sorted by round (stable)
                at = next(i for i, old in enumerate(mine) if old[2] > m[2])
                mine.insert(at, m)
            if m[2] > rounds.get(step, -1):
                rounds[step] = m[2]
            undrained.append(m)

    def _steps_for(self, step: int, round_idx: int):
        """(this step's messages if any round before ``round_idx`` exists, last step's if carried)."""
        now = self._by_step.get(step) if round_idx > 0 else None
        before = self._by_step.get(step - 1) if self.carry_previous_step else None
        return now, before

    def visible_to(self, recipient: str, neighbors: Iterable[str], step: int, round_idx: int) -> list[Message]:
        now, before = self._steps_for(step, round_idx)
        out: list[Message] = []
        if not now and not before:
            return out
        for author in neighbors:
            if author == recipient:
                continue
            if before:
                old = before.get(author)
                if old:
                    out += old
            if now:
                mine = now.get(author)
                if mine:
                    if mine[-1][2] < round_idx:
                        out += mine
                    else:
                        for m in mine:
                            if m[2] >= round_idx:
                                break
                            out.append(m)
        return out

    def contents_by_author(self, step: int, round_idx: int, field: str | None = None) -> dict[str, list]:
        """For every author, the contents (``content[field]`` with ``field``) of its messages a
        reader may see at ``step``, ``round_idx``, in ``visible_to``'s order; authors with none
        are absent.

        One pass over the messages of the visible steps: a round's readers then each cost only
        their neighbours' look-ups in this dict (``NeighborFeed.contents``).
        """
        now, before = self._steps_for(step, round_idx)
        try:
            out = dict(self._step_contents(step - 1, field)) if before else {}
            for a, ms in (now or {}).items():
                seen = [m for m in ms if m[2] < round_idx]      # sorted by round: the visible prefix
                if seen:
                    got = [m[3] for m in seen] if field is None else [m[3][field] for m in seen]
                    out[a] = out[a] + got if a in out else got
        except (KeyError, TypeError, IndexError):
            read = [*(m for ms in (before or {}).values() for m in ms),
                    *(m for ms in (now or {}).values() for m in ms if m[2] < round_idx)]
            raise _missing(read, field) from None
        return out

    def _step_contents(self, step: int, field: str | None) -> dict[str, list]:
        """Every author's contents of a whole step (every round), kept while nothing is posted to
        it: the previous step, read again in every round of this one."""
        key = (step, field)
        found = self._step_cache.get(key)
        if found is None:
            posts = self._by_step.get(step, {})
            if field is None:
                found = {a: [m[3] for m in ms] for a, ms in posts.items()}
            else:
                found = {a: [m[3][field] for m in ms] for a, ms in posts.items()}
            self._step_cache[key] = found
        return found

    def single_contents(self, step: int, round_idx: int, field: str | None = None) -> dict | None:
        """Like :meth:`contents_by_author`, one content per author instead of a list, when every
        author with a visible message has exactly one (the common case: one post a round, one
        step or one round visible); ``None`` otherwise."""
        now, before = self._steps_for(step, round_idx)
        if now and before:
            return None
        posts = now or before
        if not posts:
            return {}
        if set(map(len, posts.values())) != {1}:
            return None
        try:
            if now:
                got = {a: ms[0][3] for a, ms in posts.items() if ms[0][2] < round_idx}
                return got if field is None else {a: c[field] for a, c in got.items()}
            if field is None:
                return {a: ms[0][3] for a, ms in posts.items()}
            return {a: ms[0][3][field] for a, ms in posts.items()}
        except (KeyError, TypeError, IndexError):
            return None         # contents_by_author names the message at fault

    def drain(self) -> list[Message]:
        """The messages posted since the last drain, in posting order; the buffer is cleared."""
        out, self._undrained = self._undrained, []
        return out

    def stored_steps(self) -> list[int]:
        """The steps still held for reading (at most the latest two)."""
        return sorted(self._by_step)


def _missing(read: list[Message], field: str) -> KeyError:
    """The error for the first message read whose content has no ``field``."""
    bad = next((m for m in read if not isinstance(m[3], dict) or field not in m[3]), None)
    if bad is None:
        return KeyError(field)
    return KeyError(f"the message of '{bad[0]}' at step {bad[1]} round {bad[2]} has no content "
                    f"field '{field}' (content: {bad[3]!r:.80})")


_new = tuple.__new__
chain_from = chain.from_iterable


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

    def ingest(self, actions: Iterable[Action], step: int, round_idx: int) -> list[Message]:
        """Post every ``post`` or ``reply`` action; other kinds pass through untouched.

        The message content is ``payload["content"]`` when present, else the
        payload; ``payload["channel"]`` and ``payload["reply_to"]`` set those
        fields. Returns the messages posted.
        """
        posted = []
        add = posted.append
        for a in actions:
            kind = a.kind
            if kind != "post" and kind != "reply":
                continue
            p = a.payload
            if "content" in p or "channel" in p or "reply_to" in p:
                add(_new(Message, (a.agent_id, step, round_idx, p.get("content", p), p.get("channel", "feed"),
                                   kind, "neighbors", p.get("reply_to"))))
            else:
                add(_new(Message, (a.agent_id, step, round_idx, p, "feed", kind, "neighbors", None)))
        bus = self.bus
        if isinstance(bus, InMemoryMessageBus):
            bus._post_round(posted, step, round_idx)
        else:
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
        bus = self.bus
        if not isinstance(bus, InMemoryMessageBus):
            seen = [self.local_for(a, t, round_idx) for a in ids]
            if field is None:
                return [[m.content for m in ms] for ms in seen]
            try:
                return [[m.content[field] for m in ms] for ms in seen]
            except (KeyError, TypeError, IndexError):
                raise _missing([m for ms in seen for m in ms], field) from None
        single = bus.single_contents(t, round_idx, field)
        if single is not None:
            return self._gather_single(ids, single) if single else [[] for _ in ids]
        by_author = bus.contents_by_author(t, round_idx, field)
        if not by_author:
            return [[] for _ in ids]
        getters, get, out = self._getters, by_author.get, []
        add, chain = out.append, chain_from
        for a in ids:
            many = getters.get(a)
            if many is None:
                nbrs = self.neighbours(a)
                many = getters[a] = itemgetter(*nbrs) if len(nbrs) > 1 else False
            if many:
                try:
                    add(list(chain(many(by_author))))
                    continue
                except KeyError:    # a neighbour has nothing to show
                    pass
            heard = []
            for n in self.neighbours(a):
                got = get(n)
                if got:
                    heard += got
            add(heard)
        return out

    def _gather_single(self, ids: Iterable[str], single: dict) -> list[list]:
        """Each reader's neighbours' one content each, through a cached ``itemgetter`` per reader
        (one C call a reader when all its neighbours posted)."""
        getters = self._getters
        if self._last_ids is not None and (ids is self._last_ids[0] or ids == self._last_ids[0]):
            row = self._last_ids[1]             # the same readers as last round: their getters, in order
        else:
            row = [getters.get(a) or self._getter(a) for a in ids]
            self._last_ids = (list(ids), row)
        try:                                    # everyone's neighbours all posted: one C call a reader
            return [list(get(single)) for get in row]
        except (KeyError, TypeError):           # a neighbour did not post, or a reader has fewer than two
            pass
        out = []
        add = out.append
        for a in ids:
            get = getters.get(a)
            if get is None:
                nbrs = self.neighbours(a)
                get = getters[a] = itemgetter(*nbrs) if len(nbrs) > 1 else False
            if get:
                try:
                    add(list(get(single)))
                    continue
                except KeyError:    # a neighbour did not post
                    pass
            add([single[n] for n in self.neighbours(a) if n in single])
        return out

    def _getter(self, agent_id: str):
        """A cached ``itemgetter`` over the reader's neighbours (``False`` for fewer than two)."""
        nbrs = self.neighbours(agent_id)
        get = self._getters[agent_id] = itemgetter(*nbrs) if len(nbrs) > 1 else False
        return get


# --- the columnar path ------------------------------------------------------------------
@dataclass
class _Batch:
    """One round's posts: authors (agent positions) and their content columns."""

    step: int
    round: int
    authors: np.ndarray
    slot: np.ndarray            # agent position -> row in this batch, -1 when it did not post
    columns: dict[str, np.ndarray]
    kind: str
    channel: str


@dataclass
class Delivery:
    """What a set of recipients sees, grouped by recipient.

    Recipient ``i`` (the ``i``-th entry of the positions asked for) sees rows
    ``offsets[i]:offsets[i+1]``, in the order ``InMemoryMessageBus.visible_to``
    returns them: neighbour by neighbour, each neighbour's posts by (step,
    round). ``recipient`` gives each row's recipient index, ``author`` its
    author's position, ``batch`` which (step, round) it was posted in (an index
    into ``batch_steps`` / ``batch_rounds``), ``columns`` the content fields.
    """

    offsets: np.ndarray
    recipient: np.ndarray
    author: np.ndarray
    batch: np.ndarray
    batch_steps: np.ndarray
    batch_rounds: np.ndarray
    columns: dict[str, np.ndarray]

    @property
    def step(self) -> np.ndarray:
        return self.batch_steps[self.batch]

    @property
    def round(self) -> np.ndarray:
        return self.batch_rounds[self.batch]

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def column(self, name: str) -> np.ndarray:
        """Content field ``name`` of every delivered message (empty when nothing was delivered)."""
        if name in self.columns:
            return self.columns[name]
        if len(self.author) == 0:
            return np.zeros(0)
        raise KeyError(f"delivered messages have no content field '{name}' (fields: {sorted(self.columns)})")

    def sum(self, name: str) -> np.ndarray:
        """Per recipient, the sum of content field ``name`` over what it sees (0 for nothing).

        Rows are contiguous per recipient, so this is one segmented sum, added
        in delivery order.
        """
        values = self.column(name)
        counts = self.counts()
        if len(values) == 0:
            return np.zeros(len(counts))
        starts = np.minimum(self.offsets[:-1], len(values) - 1)
        return np.where(counts > 0, np.add.reduceat(values, starts), 0)

    def mean(self, name: str, empty: float = np.nan) -> np.ndarray:
        n = self.counts()
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, self.sum(name) / np.maximum(n, 1), empty)


class ColumnarFeed:
    """A ``NeighborFeed`` and bus for the columnar path, with the same visibility rule.

    Agents are positions ``0..n-1`` in population order; the network is a CSR
    adjacency (``indptr``, ``indices``) of whom each agent hears (its
    neighbours; predecessors in a directed graph, as ``neighbors_fn``).
    ``post`` takes a round's posts as arrays (at most one per author per
    round), ``visible`` returns what recipients see, ``drain`` returns the
    posts since the last drain as an Arrow table shaped like the ``messages``
    table. A round costs O(recipients * degree * visible batches), all in numpy.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, ids: list[str] | pa.Array,
                 carry_previous_step: bool = False):
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices, dtype=np.int32)
        self.n = len(self.indptr) - 1
        self.ids = ids if isinstance(ids, pa.Array) else pa.array(list(ids), pa.string())
        if len(self.ids) != self.n:
            raise ValueError(f"ColumnarFeed: {len(self.ids)} ids for an adjacency of {self.n} agents")
        self.carry_previous_step = carry_previous_step
        self._rows_all = np.repeat(np.arange(self.n, dtype=np.int32), np.diff(self.indptr))
        self._batches: list[_Batch] = []
        self._undrained: list[_Batch] = []

    @classmethod
    def from_graph(cls, graph: nx.Graph, ids: list[str], carry_previous_step: bool = False) -> "ColumnarFeed":
        """The CSR of ``graph`` over ``ids`` (population order), in ``neighbors_fn``'s neighbour
        order (predecessors for a directed graph), self-loops dropped."""
        pos = {a: i for i, a in enumerate(ids)}
        adj = graph.pred if graph.is_directed() else graph.adj
        lens = np.fromiter((len(adj[a]) for a in ids), dtype=np.int64, count=len(ids))
        cols = np.fromiter((pos[v] for a in ids for v in adj[a]), dtype=np.int32, count=int(lens.sum()))
        rows = np.repeat(np.arange(len(ids), dtype=np.int32), lens)
        keep = rows != cols
        indptr = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(np.bincount(rows[keep], minlength=len(ids)), out=indptr[1:])
        return cls(indptr, cols[keep], ids, carry_previous_step)

    # --- posting ---------------------------------------------------------------
    def post(self, authors: np.ndarray, step: int, round_idx: int, columns: dict[str, np.ndarray],
             kind: str = "post", channel: str = "feed") -> int:
        """Post one message per author in ``authors`` (positions) with content ``columns``."""
        if kind not in POST_KINDS:
            raise ValueError(f"ColumnarFeed.post: kind '{kind}' is not one of {POST_KINDS}")
        authors = np.asarray(authors, dtype=np.int64)
        cols = {k: np.array(v) for k, v in columns.items()}   # copies: the study may reuse its arrays
        for name, v in cols.items():
            if len(v) != len(authors):
                raise ValueError(f"ColumnarFeed.post: column '{name}' has {len(v)} values for {len(authors)} authors")
        slot = np.full(self.n, -1, np.int32)
        slot[authors] = np.arange(len(authors), dtype=np.int32)
        if len(authors) and not np.array_equal(slot[authors], np.arange(len(authors))):
            raise ValueError(f"ColumnarFeed.post: an author posts twice in step {step} round {round_idx}")
        if self._batches and step > max(b.step for b in self._batches):
            self._batches = [b for b in self._batches if b.step >= step - 1]
        batch = _Batch(step, round_idx, authors, slot, cols, kind, channel)
        self._batches.append(batch)
        self._undrained.append(batch)
        return len(authors)

    # --- reading ---------------------------------------------------------------
    def _neighbours_of(self, recipients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(recipient row, neighbour position) for every edge out of ``recipients``."""
        if len(recipients) == self.n and np.array_equal(recipients, np.arange(self.n)):
            return self._rows_all, self.indices
        starts, ends = self.indptr[recipients], self.indptr[recipients + 1]
        lens = ends - starts
        rows = np.repeat(np.arange(len(recipients), dtype=np.int32), lens)
        first = np.cumsum(lens) - lens
        flat = np.arange(int(lens.sum())) - np.repeat(first, lens) + np.repeat(starts, lens)
        return rows, self.indices[flat]

    def visible(self, recipients: np.ndarray, step: int, round_idx: int) -> Delivery:
        """What each of ``recipients`` (positions) sees at ``step``, ``round_idx``: the rule of
        :class:`InMemoryMessageBus` (neighbours' posts of earlier rounds of this step, and of the
        previous step with ``carry_previous_step``), in the same order.

        Every (neighbour edge, visible batch) pair is looked up once in a table
        of shape edges x batches; reading it row by row gives the order
        recipient, neighbour, (step, round) with no sort.
        """
        recipients = np.asarray(recipients, dtype=np.int64)
        r = len(recipients)
        batches = sorted((b for b in self._batches
                          if (b.step == step and b.round < round_idx)
                          or (self.carry_previous_step and b.step == step - 1)),
                         key=lambda b: (b.step, b.round))
        names = sorted({k for b in batches for k in b.columns})
        batch_steps = np.array([b.step for b in batches], np.int32)
        batch_rounds = np.array([b.round for b in batches], np.int32)
        if not batches or r == 0:
            none = np.zeros(0, np.int32)
            return Delivery(np.zeros(r + 1, np.int64), none, none, none, batch_steps, batch_rounds,
                            {k: np.zeros(0) for k in names})
        rows, nbrs = self._neighbours_of(recipients)
        nb = len(batches)
        hit = np.empty((len(nbrs), nb), np.int32)          # row in the batch, -1: that neighbour did not post
        for j, b in enumerate(batches):
            hit[:, j] = b.slot[nbrs]
        base = np.cumsum([0] + [len(b.authors) for b in batches])[:-1].astype(np.int32)
        valid = hit >= 0
        if valid.all():                                    # every neighbour posted in every batch
            message = (hit + base).ravel()
            recipient, author = np.repeat(rows, nb), np.repeat(nbrs, nb)
            which = np.tile(np.arange(nb, dtype=np.int32), len(nbrs))
        else:
            message = (hit + base)[valid]                  # row in the batches' concatenation
            shape = (len(nbrs), nb)
            recipient = np.broadcast_to(rows[:, None], shape)[valid]
            author = np.broadcast_to(nbrs[:, None], shape)[valid]
            which = np.broadcast_to(np.arange(nb, dtype=np.int32), shape)[valid]
        offsets = np.zeros(r + 1, np.int64)
        np.cumsum(np.bincount(recipient, minlength=r), out=offsets[1:])
        columns = {}
        for k in names:
            missing = [b for b in batches if k not in b.columns]
            if missing:
                raise ValueError(f"ColumnarFeed: step {missing[0].step} round {missing[0].round} posts "
                                 f"have no field '{k}'")
            columns[k] = np.concatenate([b.columns[k] for b in batches])[message]
        return Delivery(offsets, recipient, author, which, batch_steps, batch_rounds, columns)

    def neighbour_sum(self, recipients: np.ndarray, step: int, round_idx: int, name: str,
                      block: int = 1 << 15) -> tuple[np.ndarray, np.ndarray]:
        """(count, sum of content field ``name``) per recipient over what it sees, without
        building the per-message arrays of :meth:`visible`.

        Same rule and the same messages as ``visible(...).counts()`` and ``.sum(name)``
        (sums equal up to floating-point rounding: here each neighbour's posts are
        added first). Recipients are taken ``block`` at a time so the working arrays
        stay in cache: the cost per agent-round is then flat in N, not bound by memory.
        """
        recipients = np.asarray(recipients, dtype=np.int64)
        r = len(recipients)
        count, total = np.zeros(r, np.int64), np.zeros(r)
        batches = sorted((b for b in self._batches
                          if len(b.authors) and ((b.step == step and b.round < round_idx)
                                                 or (self.carry_previous_step and b.step == step - 1))),
                         key=lambda b: (b.step, b.round))
        for b in batches:
            if name not in b.columns:
                raise ValueError(f"ColumnarFeed: step {b.step} round {b.round} posts have no field '{name}'")
        if not batches:
            return count, total
        everyone = r == self.n and np.array_equal(recipients, np.arange(self.n))
        for lo in range(0, r, block):
            hi = min(r, lo + block)
            if everyone:
                a, z = self.indptr[lo], self.indptr[hi]
                rows, nbrs = self._rows_all[a:z] - lo, self.indices[a:z]
            else:
                rows, nbrs = self._neighbours_of(recipients[lo:hi])
            if len(nbrs) == 0:
                continue
            edge_count = np.zeros(len(nbrs), np.int32)
            edge_sum = np.zeros(len(nbrs))
            for b in batches:
                hit = b.slot[nbrs]
                posted = hit >= 0
                edge_count += posted
                edge_sum += np.where(posted, b.columns[name][hit], 0.0)
            degree = np.bincount(rows, minlength=hi - lo)
            starts = np.cumsum(degree) - degree
            count[lo:hi] = np.bincount(rows, weights=edge_count, minlength=hi - lo)
            total[lo:hi] = np.where(degree > 0, np.add.reduceat(edge_sum, np.minimum(starts, len(nbrs) - 1)), 0.0)
        return count, total

    # --- persisting --------------------------------------------------------------
    def drain(self) -> pa.Table:
        """The posts since the last drain as one Arrow table (step, round, author_id, channel,
        kind, content struct, audience, reply_to), in posting order; the buffer is cleared."""
        batches, self._undrained = self._undrained, []
        tables = []
        for b in batches:
            n = len(b.authors)
            content = (pa.StructArray.from_arrays([pa.array(v) for v in b.columns.values()],
                                                  names=list(b.columns))
                       if b.columns else pa.nulls(n, pa.struct([])))
            tables.append(pa.table({
                "step": pa.array(np.full(n, b.step, np.int32)),
                "round": pa.array(np.full(n, b.round, np.int32)),
                "author_id": self.ids.take(pa.array(b.authors)),
                "channel": pa.repeat(pa.scalar(b.channel), n) if n else pa.array([], pa.string()),
                "kind": pa.repeat(pa.scalar(b.kind), n) if n else pa.array([], pa.string()),
                "content": content,
                "audience": pa.repeat(pa.scalar("neighbors"), n) if n else pa.array([], pa.string()),
                "reply_to": pa.nulls(n, pa.string())}))
        if not tables:
            return pa.table({"step": pa.array([], pa.int32()), "round": pa.array([], pa.int32()),
                             "author_id": pa.array([], pa.string())})
        return pa.concat_tables(tables, promote_options="default")

    def drain_messages(self) -> list[Message]:
        """The drained posts as ``Message`` objects, for an engine that stores messages one by one."""
        table = self.drain()
        if table.num_rows == 0:
            return []
        cols = table.to_pydict()
        return [Message(author_id=a, step=s, round=r, content=c, channel=ch, kind=k, reply_to=rt)
                for a, s, r, c, ch, k, rt in zip(cols["author_id"], cols["step"], cols["round"],
                                                 cols["content"], cols["channel"], cols["kind"],
                                                 cols["reply_to"])]

    def stored_steps(self) -> list[int]:
        return sorted({b.step for b in self._batches})
