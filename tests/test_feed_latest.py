"""``NeighborFeed.latest`` (each neighbour's latest visible content, once) against a brute-force
pick over every message ever posted, on random graphs with posts made in and out of round
order; ``latest_by_author``; the fallback for other buses; a missing field.

The reference: for reader ``a`` at step ``t``, round ``r``, each neighbour ``n`` (not ``a``, in
neighbour order) that has a message visible by the seed page's rule gives the content of the
visible message with the greatest (step, round), the last posted among equals.
"""
from __future__ import annotations

import random

import pytest

from desim import Action, InMemoryMessageBus, Message, NeighborFeed, neighbors_fn
from oracles import GRAPHS, ListBus, Poster, brute_latest, brute_visible


@pytest.mark.parametrize("carry", [False, True])
@pytest.mark.parametrize("rounds", [1, 2, 3])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_latest_follows_the_rule(name, rounds, carry):
    g = GRAPHS[name]
    rnd = random.Random(f"latest-{name}-{rounds}-{carry}")
    ids = list(g.nodes)
    nbrs = neighbors_fn(g)
    feed = NeighborFeed(nbrs, InMemoryMessageBus(carry_previous_step=carry))
    poster = Poster(rnd, feed, ids, rounds)
    heard_any = 0
    for step in range(1, 5):
        for r in range(rounds):
            for look in (r, r + 1):                 # this round, and one whose posts are not all in yet
                readers = rnd.sample(ids, rnd.randint(0, len(ids)))
                for field in (None, "x", "n"):
                    got = feed.latest(readers, step, look, field)
                    want = [brute_latest(poster.everything, a, nbrs(a), step, look, carry, field) for a in readers]
                    assert got == want, (step, look, field)
                    heard_any += sum(map(len, got))
            poster.round(step, r)
    if rounds > 1 or carry:
        assert heard_any > 0


def test_latest_prefers_this_step_then_the_latest_round_then_the_last_posted():
    bus = InMemoryMessageBus(carry_previous_step=True)
    feed = NeighborFeed(lambda a: ["c", "b", "d"], bus)
    for author, step, rnd, x in [("b", 1, 0, "b-1.0"), ("b", 1, 2, "b-1.2"), ("b", 1, 1, "b-1.1"),
                                 ("c", 1, 1, "c-1.1"), ("b", 2, 0, "b-2.0"), ("b", 2, 0, "b-2.0-again"),
                                 ("b", 2, 1, "b-2.1"), ("d", 2, 2, "d-2.2")]:
        bus.post(Message(author_id=author, step=step, round=rnd, content={"x": x}))
    assert feed.latest(["a"], 2, 0, "x") == [["c-1.1", "b-1.2"]]             # last step's latest round
    assert feed.latest(["a"], 2, 1, "x") == [["c-1.1", "b-2.0-again"]]       # this step's beats last step's
    assert feed.latest(["a"], 2, 2, "x") == [["c-1.1", "b-2.1"]]
    assert feed.latest(["a"], 2, 3, "x") == [["c-1.1", "b-2.1", "d-2.2"]]
    assert feed.latest(["c"], 2, 3) == [[{"x": "b-2.1"}, {"x": "d-2.2"}]]    # never itself
    assert bus.latest_by_author(2, 1, "x") == {"b": "b-2.0-again", "c": "c-1.1"}
    assert feed.latest(["a", "z"], 3, 0, "x") == [["b-2.1", "d-2.2"]] * 2    # step 1 can no longer be seen
    assert feed.latest([], 2, 1) == []


def test_latest_without_carry_reads_nothing_in_round_zero():
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: ["b"], bus)
    bus.post(Message(author_id="b", step=1, round=0, content={"x": 1}))
    assert feed.latest(["a"], 2, 0, "x") == [[]]
    bus.post(Message(author_id="b", step=2, round=0, content={"x": 2}))
    assert feed.latest(["a"], 2, 1, "x") == [[2]]


def test_latest_missing_field_names_the_message_read():
    bus = InMemoryMessageBus(carry_previous_step=True)
    feed = NeighborFeed(lambda a: ["b", "c"], bus)
    bus.post(Message(author_id="b", step=1, round=0, content={"y": 0}))     # no x, but not b's latest
    bus.post(Message(author_id="b", step=1, round=1, content={"x": 1}))
    bus.post(Message(author_id="c", step=1, round=0, content={"x": 2}))
    assert feed.latest(["a"], 2, 0, "x") == [[1, 2]]
    bus.post(Message(author_id="c", step=2, round=0, content={"z": 3}))     # c's latest has no x
    with pytest.raises(KeyError) as err:
        feed.latest(["a"], 2, 1, "x")
    text = str(err.value)
    assert "'c'" in text and "step 2" in text and "round 0" in text and "'x'" in text


@pytest.mark.parametrize("carry", [False, True])
def test_other_bus_agrees(carry):
    g = GRAPHS["watts_strogatz"]
    ids = list(g.nodes)
    nbrs = neighbors_fn(g)
    rnd = random.Random(f"other-{carry}")
    mem = Poster(random.Random(8), NeighborFeed(nbrs, InMemoryMessageBus(carry_previous_step=carry)), ids, 3)
    other = NeighborFeed(nbrs, ListBus(carry_previous_step=carry))
    for step in range(1, 4):
        for r in range(3):
            mem.round(step, r)
            for m in mem.feed.bus.drain():
                other.bus.post(m)
            readers = rnd.sample(ids, 12)
            for look in (r, r + 1):
                assert other.latest(readers, step, look, "x") == mem.feed.latest(readers, step, look, "x") == [
                    brute_latest(mem.everything, a, nbrs(a), step, look, carry, "x") for a in readers]


@pytest.mark.parametrize("carry", [False, True])
@pytest.mark.parametrize("name", ["gnp", "directed"])
def test_latest_and_contents_of_round_by_round_posts(name, carry):
    """Posts made only through ``ingest``, a round at a time (kept as batches, indexed on demand), some
    authors posting twice or not at all; midway one message posted directly to an earlier round."""
    g = GRAPHS[name]
    rnd = random.Random(f"batches-{name}-{carry}")
    ids = list(g.nodes)
    nbrs = neighbors_fn(g)
    bus = InMemoryMessageBus(carry_previous_step=carry)
    feed = NeighborFeed(nbrs, bus)
    everything: list[Message] = []
    serial = 0
    for step in range(1, 6):
        for r in range(3):
            if rnd.random() < 0.5:          # read the latest before anyone asks by author
                readers = rnd.sample(ids, 15)
                assert feed.latest(readers, step, r, "n") == [
                    brute_latest(everything, a, nbrs(a), step, r, carry, "n") for a in readers]
            actions = []
            for a in ids:
                for _ in range(rnd.choice([0, 1, 1, 1, 2])):
                    serial += 1
                    actions.append(Action(agent_id=a, step=step, kind="post", payload={"n": serial}))
            everything += feed.ingest(actions, step, r)
            if step == 3 and r == 1:        # out of batches: an earlier round of this step
                m = Message(author_id=ids[0], step=3, round=0, content={"n": -1})
                bus.post(m)
                everything.append(m)
            readers = rnd.sample(ids, 20)
            for look in (r, r + 1):
                if rnd.random() < 0.5:
                    assert feed.contents(readers, step, look, "n") == [
                        [m.content["n"] for m in brute_visible(everything, a, nbrs(a), step, look, carry)]
                        for a in readers]
                assert feed.latest(readers, step, look, "n") == [
                    brute_latest(everything, a, nbrs(a), step, look, carry, "n") for a in readers]
                assert feed.latest(readers, step, look) == [
                    brute_latest(everything, a, nbrs(a), step, look, carry) for a in readers]
    assert bus.stored_steps() == [4, 5]
    assert bus.drain() == everything


def test_latest_of_batches_ignores_a_missing_field_in_an_earlier_post():
    """Only the latest post counts: an author's earlier post in the same round without the field is no error."""
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: ["b", "c"], bus)
    feed.ingest([Action(agent_id="b", step=1, kind="post", payload={"y": 0}),
                 Action(agent_id="b", step=1, kind="post", payload={"x": 1}),
                 Action(agent_id="c", step=1, kind="post", payload={"x": 2})], 1, 0)
    assert feed.latest(["a"], 1, 1, "x") == [[1, 2]]
    feed.ingest([Action(agent_id="c", step=1, kind="post", payload={"z": 3})], 1, 1)
    with pytest.raises(KeyError) as err:
        feed.latest(["a"], 1, 2, "x")
    assert "'c'" in str(err.value) and "round 1" in str(err.value)


def test_latest_needs_the_field_only_in_the_message_it_reads():
    """Last step's latest post of b has no ``x``, but b posted again this step: nothing is missing."""
    bus = InMemoryMessageBus(carry_previous_step=True)
    feed = NeighborFeed(lambda a: ["b", "c"], bus)
    feed.ingest([Action(agent_id="b", step=1, kind="post", payload={"y": 0}),
                 Action(agent_id="c", step=1, kind="post", payload={"x": 2})], 1, 0)
    feed.ingest([Action(agent_id="b", step=2, kind="post", payload={"x": 1})], 2, 0)
    assert feed.latest(["a"], 2, 1, "x") == [[1, 2]]
    with pytest.raises(KeyError) as err:            # in round 0 of step 2, b's latest is still step 1's
        feed.latest(["a"], 2, 0, "x")
    assert "'b'" in str(err.value) and "step 1 round 0" in str(err.value)


def test_latest_by_author_cannot_be_changed_by_the_caller():
    """What ``latest_by_author`` returns is a read-only mapping (its lists are the bus's own, kept
    for the next reader): it reads like a dict and refuses a change."""
    bus = InMemoryMessageBus(carry_previous_step=True)
    feed = NeighborFeed(lambda a: ["b"], bus)
    feed.ingest([Action(agent_id="b", step=1, kind="post", payload={"x": 1})], 1, 0)
    got = bus.latest_by_author(2, 0, "x")
    assert got == {"b": 1} and got["b"] == 1 and list(got) == ["b"] and len(got) == 1 and "c" not in got
    with pytest.raises(TypeError):
        got["b"] = 99
    assert bus.latest_by_author(2, 0, "x") == {"b": 1}
    assert feed.latest(["a"], 2, 0, "x") == [[1]]


def test_readers_may_come_as_any_iterable():
    """A generator of readers reads the same as a list, on a first read and once positions are kept."""
    bus = InMemoryMessageBus()
    nbrs = {"a": ["b", "c"], "b": ["a", "c"], "c": ["a", "b"]}
    feed = NeighborFeed(lambda a: nbrs[a], bus)
    bus.post_batch(0, 0, list("abc"), [{"x": 1}, {"x": 2}, {"x": 3}])
    want = [[2, 3], [1, 3], [1, 2]]
    for _ in range(3):
        assert feed.latest((a for a in "abc"), 0, 1, "x") == want
        assert feed.contents((a for a in "abc"), 0, 1, "x") == want


def test_a_late_post_to_last_step_is_seen_after_this_step_covered_it():
    """Once this step's authors covered last step's, a post made afterwards to last step by someone who
    has not spoken this step is still each reader's latest from that author (carry_previous_step)."""
    bus = InMemoryMessageBus(carry_previous_step=True)
    feed = NeighborFeed(lambda a: ["a", "b", "c"], bus)
    bus.post_batch(1, 0, ["a", "b"], [1, 2])
    bus.post_batch(2, 0, ["a", "b"], [3, 4])
    assert bus.latest_by_author(2, 1) == {"a": 3, "b": 4}
    bus.post(Message("c", 1, 0, 5))
    assert bus.latest_by_author(2, 1) == {"a": 3, "b": 4, "c": 5}
    assert feed.latest(["z"], 2, 1) == [[3, 4, 5]]
