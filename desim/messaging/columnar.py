"""The message bus of the columnar path: the visibility rule of ``desim.messaging.bus`` over arrays.

Large rule-based studies on the columnar path use :class:`ColumnarFeed`
instead of an ``InMemoryMessageBus`` and a ``NeighborFeed``: the same rule
(``visible_windows``, the one place it is written, selects the batches every
read sees) over numpy arrays (agents are positions, the network a CSR
adjacency, a round's posts one batch of columns), so a round costs a few array
operations over the delivered messages rather than Python per agent.
``visible`` returns every delivered message (in ``visible_to``'s order);
``neighbour_sum`` only counts and sums them, in cache-sized blocks, which is
what most rule models need; ``drain`` (and ``drain_columns``, the collector's
call on every bus) returns an Arrow table.

How it relates to the ``MessageBus`` protocol: it is not a subclass, because
what it takes and gives are arrays of positions, not ids and ``Message``
objects (``post`` takes a round's authors and content columns, ``visible``
answers for many recipients at once). What it shares is the rule, the
delivery order and the stored form: for the same posts, ``visible(...)`` holds
exactly the messages ``InMemoryMessageBus.visible_to`` returns, in the same
order, and ``drain()`` the rows ``drain_columns()`` would store (tested in
``tests/test_bus_properties.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import pyarrow as pa

from desim.messaging.batches import shown
from desim.messaging.bus import POST_KINDS, Drains, _caller, visible_windows
from desim.records import Message


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
    """A ``NeighborFeed`` and bus for the columnar path, with the same visibility rule
    (``visible_windows``) as every ``MessageBus``, over positions and arrays.

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
        self._drains = Drains()     # who drained the posts: the rule of desim.messaging.bus.Drains
        self._storing = False

    @property
    def taken(self) -> int:
        """Posts a study drained before desim stored any: missing from the messages table."""
        return self._drains.taken

    @property
    def taken_at(self) -> str:
        """Where the study drained them, for the error that says so."""
        return self._drains.taken_at

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

    @classmethod
    def from_network(cls, network, carry_previous_step: bool = False) -> "ColumnarFeed":
        """The same CSR as ``from_graph(ctx.graph, ...)``, read from the run's edge arrays (``ctx.network``)
        without building the networkx graph: a node hears its neighbours in the order of their edges,
        which is the order networkx keeps them in a graph built from those edges (predecessors, for a
        directed network), self-loops dropped. For large generated or file networks, where the graph
        of dicts costs more memory than the run."""
        indptr, cols, _ = network.rows(incoming=True)    # whom each agent hears: its predecessors
        row = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        keep = cols != row                               # an agent never hears itself
        if not keep.all():
            indptr = np.zeros_like(indptr)
            np.cumsum(np.bincount(row[keep], minlength=len(indptr) - 1), out=indptr[1:])
            cols = cols[keep]
        return cls(indptr, cols.astype(np.int32), network.ids, carry_previous_step)

    # --- posting ---------------------------------------------------------------
    def post(self, authors: np.ndarray, step: int, round_idx: int, columns: dict[str, np.ndarray],
             kind: str = "post", channel: str = "feed") -> int:
        """Post one message per author in ``authors`` (positions) with content ``columns``. Refused here, at
        the line that posts: a kind other than post or reply, a channel that is not text, an author that is
        not a position of an agent (a negative one would wrap round to another agent), a column name that
        is not text or a column whose length differs from the authors'."""
        if kind not in POST_KINDS:
            raise ValueError(f"ColumnarFeed.post: kind '{kind}' is not one of {POST_KINDS}")
        if not isinstance(channel, str):
            raise TypeError(f"ColumnarFeed.post: channel is {type(channel).__name__} {channel!r:.60}, not text")
        try:
            authors = np.asarray(authors, dtype=np.int64)
        except (TypeError, ValueError):
            raise TypeError(f"ColumnarFeed.post: authors {shown(authors)} are not agent positions (whole numbers: "
                            "ctx.index[agent_id] is an agent's)") from None
        if authors.ndim != 1:
            raise ValueError(f"ColumnarFeed.post: authors is a {authors.ndim}-d array; give one position per post")
        if len(authors) and (authors.min() < 0 or authors.max() >= self.n):
            bad = int(authors[(authors < 0) | (authors >= self.n)][0])
            raise ValueError(f"ColumnarFeed.post: author {bad} is not the position of an agent (0 to {self.n - 1})")
        cols = {k: np.array(v) for k, v in columns.items()}   # copies: the study may reuse its arrays
        for name, v in cols.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"ColumnarFeed.post: column name {name!r:.60} is not a non-empty string")
            if v.ndim == 0 or len(v) != len(authors):
                raise ValueError(f"ColumnarFeed.post: column '{name}' has {len(v) if v.ndim else 'one'} "
                                 f"value{'s' if v.ndim else ''} for {len(authors)} authors")
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
    def _visible_batches(self, step: int, round_idx: int) -> list[_Batch]:
        """The batches the rule lets a reader at ``step``, ``round_idx`` see, window by window
        (oldest first), each window's by round, posting order within a round."""
        out = []
        for s, below in visible_windows(step, round_idx, self.carry_previous_step):
            out += sorted((b for b in self._batches if b.step == s and b.round < below), key=lambda b: b.round)
        return out

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
        batches = self._visible_batches(step, round_idx)
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
        batches = [b for b in self._visible_batches(step, round_idx) if len(b.authors)]
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
        if self._storing:           # desim's drain: what the study drained itself first, then the rest
            batches, self._undrained = self._drains.by_desim(self._undrained), []
        else:
            batches, self._undrained = self._undrained, []
            self._drains.by_the_study(batches, sum(len(b.authors) for b in batches), _caller())
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

    def drain_columns(self) -> pa.Table:
        """:meth:`drain`: what the collector calls on any bus (``EnvironmentProvider.drain_messages``),
        already columns here."""
        self._storing = True
        try:
            return self.drain()
        finally:
            self._storing = False

    def drain_messages(self) -> list[Message]:
        """The drained posts as ``Message`` objects, for an engine that stores messages one by one."""
        table = self.drain_columns()
        if table.num_rows == 0:
            return []
        cols = table.to_pydict()
        return [Message(author_id=a, step=s, round=r, content=c, channel=ch, kind=k, reply_to=rt)
                for a, s, r, c, ch, k, rt in zip(cols["author_id"], cols["step"], cols["round"],
                                                 cols["content"], cols["channel"], cols["kind"],
                                                 cols["reply_to"])]

    def stored_steps(self) -> list[int]:
        return sorted({b.step for b in self._batches})
