"""``NeighborFeed.contents`` (a round read in one pass) against ``local_for`` and against a
brute-force filter of every message ever posted, on random graphs with posts made in and
out of round order; ``contents_by_author`` and ``visible_to`` against the seed page's rule;
the local_for fallback for other buses; ``Message`` as a named tuple; ``drain``; ``ingest``.

The seed page's rule: ``visible_to(recipient, neighbors, step, round_idx)`` returns ``m``
iff its author is one of the recipient's neighbours (never the recipient itself) and
``m.step == step and m.round < round_idx``, or ``carry_previous_step and m.step == step - 1``.
The order (documented on ``Delivery``): neighbour by neighbour, each neighbour's messages
by (step, round), in posting order within a round.
"""
from __future__ import annotations

import random

import pytest

from desim import Action, InMemoryMessageBus, Message, NeighborFeed, neighbors_fn
from oracles import GRAPHS, ListBus, Poster, brute_by_author, brute_visible


@pytest.mark.parametrize("carry", [False, True])
@pytest.mark.parametrize("rounds", [1, 2, 3])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_contents_equal_local_for_and_the_rule(name, rounds, carry):
    g = GRAPHS[name]
    rnd = random.Random(f"{name}-{rounds}-{carry}")
    ids = list(g.nodes)
    nbrs = neighbors_fn(g)
    feed = NeighborFeed(nbrs, InMemoryMessageBus(carry_previous_step=carry))
    poster = Poster(rnd, feed, ids, rounds)
    checked = 0
    for step in range(1, 5):
        for r in range(rounds):
            for _ in range(2):
                readers = rnd.sample(ids, rnd.randint(0, len(ids)))      # a subset, in a random order
                for field in (None, "x", "n"):
                    got = feed.contents(readers, step, r, field)
                    assert len(got) == len(readers)
                    for a, heard in zip(readers, got):
                        via_local = [m.content if field is None else m.content[field]
                                     for m in feed.local_for(a, step, r)]
                        want = [m.content if field is None else m.content[field]
                                for m in brute_visible(poster.everything, a, nbrs(a), step, r, carry)]
                        assert heard == via_local == want, (a, step, r, field)
                        checked += len(heard)
            poster.round(step, r)
            # read again after this round's posts: round-r posts are not visible in round r
            readers = rnd.sample(ids, len(ids))
            assert feed.contents(readers, step, r) == [
                [m.content for m in brute_visible(poster.everything, a, nbrs(a), step, r, carry)] for a in readers]
    if rounds > 1 or carry:
        assert checked > 0                 # the random posts did reach somebody
    # an agent never hears itself, even with a self-loop in the graph
    if name == "isolated_and_self_loop":
        assert "x3" in nbrs("x3")
        for a in ("x3", "x4", "iso1"):
            heard = feed.contents([a], 4, rounds)[0]
            assert all(c["x"][0] != a for c in heard)
        assert feed.contents(["iso1", "iso2"], 4, rounds) == [[], []]


def test_contents_of_the_same_reader_twice_and_of_nobody():
    g = GRAPHS["gnp"]
    feed = NeighborFeed(neighbors_fn(g), InMemoryMessageBus())
    poster = Poster(random.Random(5), feed, list(g.nodes), 3)
    poster.round(1, 0)
    reader = next(a for a in g.nodes if feed.local_for(a, 1, 1))
    got = feed.contents([reader, reader], 1, 1)
    assert got[0] == got[1] == [m.content for m in feed.local_for(reader, 1, 1)] != []
    assert feed.contents([], 1, 1) == []
    assert feed.contents(list(g.nodes), 1, 0) == [[] for _ in g.nodes]     # round 0: nothing yet


@pytest.mark.parametrize("carry", [False, True])
def test_contents_by_author_and_visible_to_follow_the_rule(carry):
    rnd = random.Random(21 + carry)
    ids = [f"a{i}" for i in range(15)]
    bus = InMemoryMessageBus(carry_previous_step=carry)
    feed = NeighborFeed(lambda a: ids, bus)
    poster = Poster(rnd, feed, ids, 3)
    for step in range(1, 6):
        for r in range(3):
            for look in range(4):          # every round a reader may be asked about, incl. one past the last
                for field in (None, "x"):
                    assert bus.contents_by_author(step, look, field) == brute_by_author(
                        poster.everything, step, look, carry, field), (step, look, field)
                for _ in range(3):
                    recipient = rnd.choice(ids)
                    neighbors = rnd.sample(ids, rnd.randint(0, len(ids)))      # may include the recipient
                    got = bus.visible_to(recipient, neighbors, step, look)
                    want = brute_visible(poster.everything, recipient, neighbors, step, look, carry)
                    assert got == want, (step, look, recipient)
            poster.round(step, r)


def test_out_of_round_order_posts_are_read_by_round():
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: ["b", "c"], bus)
    late = Message(author_id="b", step=1, round=2, content={"x": "b2"})
    bus.post(late)                                             # round 2's post arrives first
    bus.post(Message(author_id="b", step=1, round=1, content={"x": "b1"}))
    bus.post(Message(author_id="b", step=1, round=0, content={"x": "b0"}))
    bus.post(Message(author_id="c", step=1, round=1, content={"x": "c1"}))
    bus.post(Message(author_id="b", step=1, round=1, content={"x": "b1-again"}))
    assert feed.contents(["a"], 1, 0, "x") == [[]]
    assert feed.contents(["a"], 1, 1, "x") == [["b0"]]
    assert feed.contents(["a"], 1, 2, "x") == [["b0", "b1", "b1-again", "c1"]]
    assert feed.contents(["a"], 1, 3, "x") == [["b0", "b1", "b1-again", "b2", "c1"]]
    assert [m.content["x"] for m in feed.local_for("a", 1, 3)] == ["b0", "b1", "b1-again", "b2", "c1"]
    assert bus.contents_by_author(1, 2, "x") == {"b": ["b0", "b1", "b1-again"], "c": ["c1"]}
    # drain keeps posting order, not round order
    assert [m.content["x"] for m in bus.drain()] == ["b2", "b1", "b0", "c1", "b1-again"]
    assert bus.drain() == []


# --- a missing field ------------------------------------------------------------------------
def test_missing_field_names_author_step_and_round():
    bus = InMemoryMessageBus(carry_previous_step=True)
    feed = NeighborFeed(lambda a: ["a", "b", "c"], bus)
    bus.post(Message(author_id="a", step=2, round=0, content={"x": 1}))
    bus.post(Message(author_id="b", step=2, round=0, content={"x": 2}))
    bus.post(Message(author_id="c", step=2, round=1, content={"y": 3}))          # no x
    assert feed.contents(["a"], 2, 1, "x") == [[2]]         # c's round-1 post is not read yet: no error
    with pytest.raises(KeyError) as err:
        feed.contents(["a"], 2, 2, "x")
    text = str(err.value)
    assert "'c'" in text and "step 2" in text and "round 1" in text and "'x'" in text
    # carried from the previous step too
    bus.post(Message(author_id="a", step=3, round=0, content={"x": 4}))
    with pytest.raises(KeyError) as err:
        feed.contents(["b"], 3, 0, "x")
    assert "'c'" in str(err.value) and "step 2" in str(err.value) and "round 1" in str(err.value)


def test_missing_field_error_names_the_message_that_was_read():
    """The error must name the message that lacks the field among those being read, not one
    of a round nobody may read yet."""
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: ["a", "b"], bus)
    bus.post(Message(author_id="a", step=2, round=0, content={"x": 1}))
    bus.post(Message(author_id="a", step=2, round=1, content={"y": 0}))     # no x, but round 1: unread at round 1
    bus.post(Message(author_id="b", step=2, round=0, content={"y": 2}))     # no x, read at round 1
    with pytest.raises(KeyError) as err:
        feed.contents(["r"], 2, 1, "x")
    text = str(err.value)
    assert "'b'" in text and "step 2" in text and "round 0" in text, text


@pytest.mark.parametrize("carry", [False, True])
def test_other_bus_reads_through_its_visible_to_and_agrees(carry):
    """A bus with only post, visible_to and drain: ``contents`` is the base class's default, one
    ``visible_to`` a read over the readers' neighbours (each once), and agrees with the fast bus."""
    g = GRAPHS["watts_strogatz"]
    ids = list(g.nodes)
    nbrs = neighbors_fn(g)
    mem = NeighborFeed(nbrs, InMemoryMessageBus(carry_previous_step=carry))
    other = NeighborFeed(nbrs, ListBus(carry_previous_step=carry))
    calls = []
    real = other.bus.visible_to

    def visible_to(who, authors, t, r):
        authors = list(authors)         # an iterable read once
        calls.append((who, authors))
        return real(who, authors, t, r)

    other.bus.visible_to = visible_to
    rnd = random.Random(31)
    for step in range(1, 4):
        for r in range(3):
            readers = rnd.sample(ids, 12)
            for field in (None, "x"):
                calls.clear()
                assert other.contents(readers, step, r, field) == mem.contents(readers, step, r, field)
                asked = list(dict.fromkeys(n for a in readers for n in nbrs(a) if n != a))
                assert calls == [(None, asked)]            # one visible_to, every neighbour once, in order
            actions = [Action(agent_id=a, step=step, kind="post", payload={"content": {"x": [a, step, r]}})
                       for a in ids if rnd.random() < 0.7]
            mem.ingest(actions, step, r)
            other.ingest(actions, step, r)
    assert other.bus.drain() == mem.bus.drain()


def test_other_bus_missing_field_names_the_author():
    bus = ListBus()
    feed = NeighborFeed(lambda a: ["a", "b"], bus)
    bus.post(Message(author_id="b", step=1, round=0, content={"y": 1}))
    with pytest.raises(KeyError) as err:
        feed.contents(["a"], 1, 1, "x")
    assert "'b'" in str(err.value), str(err.value)


# --- Message ------------------------------------------------------------------------------------
def test_message_is_a_named_tuple_with_pydantic_spellings():
    m = Message(author_id="a", step=3, round=1, content={"x": [1, 2]})
    assert isinstance(m, tuple)
    assert (m.channel, m.kind, m.audience, m.reply_to) == ("feed", "post", "neighbors", None)
    assert m.model_dump() == {"author_id": "a", "step": 3, "round": 1, "content": {"x": [1, 2]},
                              "channel": "feed", "kind": "post", "audience": "neighbors", "reply_to": None}
    assert Message.model_validate(m.model_dump()) == m
    full = Message(author_id="b", step=0, round=2, content="hi", channel="dm", kind="reply",
                   audience="all", reply_to="a")
    assert Message.model_validate(full.model_dump()) == full
    assert Message.model_construct(**full.model_dump()) == full
    changed = m.model_copy(update={"content": "new", "round": 2})
    assert (changed.content, changed.round, changed.author_id, changed.step) == ("new", 2, "a", 3)
    assert (m.content, m.round) == ({"x": [1, 2]}, 1)                # the original is unchanged
    assert m.model_copy() == m
    with pytest.raises(AttributeError):
        m.content = "edited"
    with pytest.raises(TypeError):
        Message(author_id="a", step=1)                                # round and content are required
    with pytest.raises(TypeError):
        Message.model_validate({**m.model_dump(), "colour": "red"})  # an unknown field


def test_drain_posting_order_across_steps_and_clears():
    bus = InMemoryMessageBus()
    posted = []
    rnd = random.Random(41)
    serial = iter(range(50))
    for step in range(1, 6):
        for _ in range(10):
            m = Message(author_id=rnd.choice("abc"), step=step, round=rnd.randrange(3), content=next(serial))
            bus.post(m)
            posted.append(m)
        if step == 3:
            assert bus.drain() == posted
            assert bus.drain() == []
            posted = []
    drained = bus.drain()
    assert drained == posted and [m.content for m in drained] == list(range(30, 50))
    assert all(a is b for a, b in zip(drained, posted))                # the same objects
    assert bus.drain() == []


# --- ingest -------------------------------------------------------------------------------------
def test_ingest_posts_only_posts_and_replies_and_honours_the_payload():
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: ["a", "b", "c", "d", "e", "f", "g"], bus)
    actions = [
        Action(agent_id="a", step=4, kind="post", payload={"content": {"opinion": 0.5}}),
        Action(agent_id="b", step=4, kind="move", payload={"content": "never"}),
        Action(agent_id="c", step=4, kind="reply", payload={"content": "yes", "reply_to": "a", "channel": "dm"}),
        Action(agent_id="d", step=4, kind="post", payload={"opinion": 0.25}),          # no content key
        Action(agent_id="e", step=4, kind="Post", payload={"content": "wrong case"}),
        Action(agent_id="f", step=4, kind="post", payload={"channel": "town", "text": "hi"}),
        Action(agent_id="g", step=4, kind="reply", payload={}),
    ]
    posted = feed.ingest(actions, 4, 2)
    assert posted == [
        Message(author_id="a", step=4, round=2, content={"opinion": 0.5}),
        Message(author_id="c", step=4, round=2, content="yes", channel="dm", kind="reply", reply_to="a"),
        Message(author_id="d", step=4, round=2, content={"opinion": 0.25}),
        Message(author_id="f", step=4, round=2, content={"channel": "town", "text": "hi"}, channel="town"),
        Message(author_id="g", step=4, round=2, content={}, kind="reply"),
    ]
    assert all(type(m) is Message for m in posted)
    assert all(Message.model_validate(m.model_dump()) == m for m in posted)
    drained = bus.drain()
    assert drained == posted and all(a is b for a, b in zip(drained, posted))
    assert [m.author_id for m in feed.local_for("z", 4, 3)] == ["a", "c", "d", "f", "g"]
    assert feed.ingest([Action(agent_id="b", step=4, kind="move")], 4, 3) == []
    assert feed.ingest([], 4, 3) == []
    assert bus.drain() == []
