"""Property tests, with shrinking (Hypothesis), of every bus and every ``NeighborFeed`` read against
the brute-force oracle of ``tests/oracles.py`` (the seed page's rule over every message posted).

Drawn: a small network (any neighbour lists: self-loops, repeats, isolated agents; for the
columnar bus a networkx graph, directed or not), ``carry_previous_step``, steps (some skipped),
rounds, and each round's posts (authors, kinds, through ``ingest`` with or without routing keys,
``post_batch`` or ``post``, some stamped with another round, some late to the previous step;
actions of other kinds that must not become messages). Before each round's posts, every read is
made at that round and the next: ``visible_to``, ``contents_by_author``, ``latest_by_author``,
``local_for``, ``contents`` and ``latest``, by a drawn list of readers and by everyone. The buses:
``InMemoryMessageBus``; a user's bus with only ``post``, ``visible_to`` and ``drain`` (the base
class's defaults do the rest); an ``InMemoryMessageBus`` subclass with a ``visible_to`` of its own
(its batch reads go back to the defaults); ``ColumnarFeed`` on the columnar path.

Reads are made at the latest step posted or later, as a run makes them (a bus may drop steps
that can never be seen again). Derandomized with no example database, so a run here is the same
run in CI; a failure prints the shrunk case.
"""
from __future__ import annotations

from collections import namedtuple

import networkx as nx
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desim import Action, InMemoryMessageBus, Message, MessageBus, NeighborFeed, neighbors_fn
from desim.messaging.bus import is_visible
from desim.messaging.columnar import ColumnarFeed
from oracles import brute_by_author, brute_latest, brute_visible

SETTINGS = settings(max_examples=70, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FIELDS = Message._fields


# --- the buses ----------------------------------------------------------------------------------
class MinimalBus(MessageBus):
    """A user's own bus, as small as the protocol allows: one list, filtered by the rule."""

    def __init__(self, carry_previous_step: bool = False):
        self.carry = carry_previous_step
        self.kept: list[Message] = []
        self.undrained: list[Message] = []

    def post(self, message):
        self.kept.append(message)
        self.undrained.append(message)

    def visible_to(self, recipient, neighbors, step, round_idx):
        out = []
        for n in neighbors:
            if n != recipient:
                mine = [m for m in self.kept if m.author_id == n and is_visible(m, step, round_idx, self.carry)]
                out += sorted(mine, key=lambda m: (m.step, m.round))
        return out

    def drain(self):
        out, self.undrained = self.undrained, []
        return out


class OwnRule(InMemoryMessageBus):
    """A subclass with a ``visible_to`` of its own (here the same rule, called through): its
    ``contents_by_author`` and ``latest_by_author`` are the base class's, built on it."""

    def visible_to(self, recipient, neighbors, step, round_idx):
        return super().visible_to(recipient, neighbors, step, round_idx)


BUSES = (InMemoryMessageBus, MinimalBus, OwnRule)


def test_a_subclass_with_its_own_rule_reads_in_batches_through_it():
    assert OwnRule.latest_by_author is MessageBus.latest_by_author
    assert OwnRule.contents_by_author is MessageBus.contents_by_author
    assert OwnRule.post_batch is InMemoryMessageBus.post_batch          # its post is the bus's own
    assert MinimalBus.drain_columns is MessageBus.drain_columns


# --- drawing a run --------------------------------------------------------------------------------
Post = namedtuple("Post", "author via kind stamp routed")       # via: ingest, batch, direct, late, move
Read = namedtuple("Read", "readers field")


@st.composite
def networks(draw):
    n = draw(st.integers(1, 7))
    ids = [f"a{i}" for i in range(n)]
    adjacency = {a: draw(st.lists(st.sampled_from(ids), max_size=n + 1)) for a in ids}
    return ids, adjacency


def posts(n):
    return st.lists(st.builds(Post, st.integers(0, n - 1),
                              st.sampled_from(["ingest", "ingest", "ingest", "batch", "direct", "late", "move"]),
                              st.sampled_from(["post", "reply"]), st.sampled_from([0, 0, 1, -1]), st.booleans()),
                    max_size=2 * n + 1)


def reads(n):
    return st.builds(Read, st.lists(st.integers(0, n - 1), max_size=n + 2), st.sampled_from([None, "x"]))


@st.composite
def runs(draw):
    ids, adjacency = draw(networks())
    n = len(ids)
    steps = []
    step = draw(st.integers(0, 1))
    for _ in range(draw(st.integers(1, 4))):
        rounds = [(draw(reads(n)), draw(posts(n))) for _ in range(draw(st.integers(1, 3)))]
        steps.append((step, rounds))
        step += draw(st.sampled_from([1, 1, 2]))
    return ids, adjacency, draw(st.booleans()), steps


# --- playing it on every bus ------------------------------------------------------------------------
class Played:
    """The same posts on every bus, and every message posted, in posting order, for the oracle."""

    def __init__(self, adjacency, carry):
        self.adjacency, self.carry = adjacency, carry
        self.feeds = [NeighborFeed(adjacency.__getitem__, bus(carry_previous_step=carry)) for bus in BUSES]
        self.everything: list[Message] = []
        self.undrained: list[Message] = []
        self.kept: list[list[Message]] = [[] for _ in self.feeds]     # per bus: a study's drains, for the store
        self.serial = 0

    def content(self, author):
        self.serial += 1
        return {"x": self.serial, "by": author}

    def round(self, ids, step, r, drawn):
        chunk = []          # consecutive ingest (and move) posts go in one ingest call, batch posts in one post_batch
        for p in drawn + [None]:
            if chunk and (p is None or (p.via == "batch") != (chunk[0].via == "batch")):
                self.flush(ids, step, r, chunk)
                chunk = []
            if p is None:
                break
            if p.via in ("ingest", "move", "batch"):
                chunk.append(p)
            else:
                author = ids[p.author]
                at, stamp = (step - 1, max(0, p.stamp + 1)) if p.via == "late" else (step, max(0, r + p.stamp))
                m = Message(author, at, stamp, self.content(author), kind=p.kind)
                for feed in self.feeds:
                    feed.bus.post(m)
                self.everything.append(m)
                self.undrained.append(m)

    def flush(self, ids, step, r, chunk):
        if chunk[0].via == "batch":
            authors = [ids[p.author] for p in chunk]
            contents = [self.content(a) for a in authors]
            kinds = [p.kind for p in chunk]
            got = [list(f.bus.post_batch(step, r, authors, contents, kinds)) for f in self.feeds]
        else:
            actions = []
            for p in chunk:
                a = ids[p.author]
                if p.via == "move":
                    actions.append(Action(a, step, "move", {"x": 0}))
                elif p.routed:
                    actions.append(Action(a, step, p.kind, {"content": self.content(a), "channel": "dm"}))
                else:
                    actions.append(Action(a, step, p.kind, self.content(a)))
            got = [list(f.ingest(actions, step, r)) for f in self.feeds]
            assert len(got[0]) == sum(a.kind != "move" for a in actions)
        assert all(g == got[0] for g in got)
        self.everything += got[0]
        self.undrained += got[0]


def value(m, field):
    return m.content if field is None else m.content[field]


def check_reads(played, ids, step, look, read):
    everything, carry, adjacency = played.everything, played.carry, played.adjacency
    by_author = {f: brute_by_author(everything, step, look, carry, f) for f in (None, "x")}
    for readers in ([ids[i] for i in read.readers], ids):
        for feed in played.feeds:
            bus = feed.bus
            for a in readers:
                want = brute_visible(everything, a, adjacency[a], step, look, carry)
                assert feed.local_for(a, step, look) == want
                assert bus.visible_to(a, list(dict.fromkeys(adjacency[a])), step, look) == want
            f = read.field
            assert feed.contents(readers, step, look, f) == [
                [value(m, f) for m in brute_visible(everything, a, adjacency[a], step, look, carry)] for a in readers]
            assert feed.latest(readers, step, look, f) == [
                brute_latest(everything, a, adjacency[a], step, look, carry, f) for a in readers]
            assert bus.contents_by_author(step, look, f, authors=iter(ids)) == by_author[f]
            assert bus.latest_by_author(step, look, f, authors=iter(ids)) == {
                a: got[-1] for a, got in by_author[f].items()}


@SETTINGS
@given(runs())
def test_every_bus_and_feed_read_follows_the_rule(run):
    ids, adjacency, carry, steps = run
    played = Played(adjacency, carry)
    for k, (step, rounds) in enumerate(steps):
        for r, (read, drawn) in enumerate(rounds):
            for look in (r, r + 1):
                check_reads(played, ids, step, look, read)
            played.round(ids, step, r, drawn)
        check_reads(played, ids, step, len(rounds), rounds[0][0])      # the step's every round visible
        # the store's drain (columns) at odd steps; at even ones a study's own, which desim's buses keep for
        # the store once it has stored any (a user's minimal bus has no such memory)
        for i, feed in enumerate(played.feeds):
            if k % 2:
                expected = played.kept[i] + played.undrained
                assert feed.bus.drain_columns() == {f: [getattr(m, f) for m in expected] for f in FIELDS}
                played.kept[i] = []
            else:
                assert feed.bus.drain() == played.undrained
                if k > 0 and isinstance(feed.bus, InMemoryMessageBus):
                    played.kept[i] += played.undrained
        played.undrained = []
