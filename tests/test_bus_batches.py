"""The bus keeps each ``ingest`` as one batch of plain lists and makes ``Message`` objects only for
reads that want them: every way of reading it (``latest``, ``contents``, ``local_for``,
``drain``, ``drain_columns``) must still give what the seed page's rule gives over every message
posted, for rounds of plain posts (the batch kept as it is), mixed with direct posts stamped
with other rounds."""
from __future__ import annotations

import random

import pytest

from desim import Action, InMemoryMessageBus, Message, NeighborFeed, neighbors_fn
from desim.study.failures import FieldError
from desim.store.tables import message_rows
from oracles import GRAPHS, brute_latest, brute_visible

FIELDS = ("author_id", "step", "round", "content", "channel", "kind", "audience", "reply_to")


def plain_round(rnd, feed, ids, step, r, everything, undrained):
    """A round of plain posts (payload = content) by a random subset, some twice, some replies; now
    and then a direct post stamped with another round."""
    actions = []
    for a in rnd.sample(ids, rnd.randint(0, len(ids))):
        for _ in range(rnd.choice([1, 1, 1, 2])):
            actions.append(Action(a, step, rnd.choice(["post", "post", "reply"]), {"x": rnd.random(), "by": a}))
    if rnd.random() < 0.3:
        m = Message(rnd.choice(ids), step, rnd.choice([r, r + 1, max(0, r - 1)]), {"x": -1.0, "by": "direct"})
        feed.bus.post(m)
        everything.append(m)
        undrained.append(m)
    posted = feed.ingest(actions, step, r)
    assert len(posted) == len(actions)
    assert [(m.author_id, m.step, m.round, m.content, m.kind) for m in posted] == \
        [(a.agent_id, step, r, a.payload, a.kind) for a in actions]
    everything += posted
    undrained += posted


@pytest.mark.parametrize("carry", [False, True])
@pytest.mark.parametrize("rounds", [1, 3])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_plain_rounds_read_and_drain_as_the_rule_says(name, rounds, carry):
    g = GRAPHS[name]
    rnd = random.Random(f"batches-{name}-{rounds}-{carry}")
    ids = list(g.nodes)
    nbrs = neighbors_fn(g)
    feed = NeighborFeed(nbrs, InMemoryMessageBus(carry_previous_step=carry))
    everything: list[Message] = []
    undrained: list[Message] = []
    kept: list[Message] = []
    for step in range(1, 5):
        for r in range(rounds):
            for look in (r, r + 1):
                readers = rnd.sample(ids, rnd.randint(0, len(ids)))
                want = {a: brute_visible(everything, a, nbrs(a), step, look, carry) for a in readers}
                if look == r and rnd.random() < 0.5:    # sometimes the per-author index is built, sometimes not
                    assert [feed.local_for(a, step, look) for a in readers] == [want[a] for a in readers]
                assert feed.contents(readers, step, look, "x") == [[m.content["x"] for m in want[a]] for a in readers]
                assert feed.latest(readers, step, look, "x") == \
                    [brute_latest(everything, a, nbrs(a), step, look, carry, "x") for a in readers]
            plain_round(rnd, feed, ids, step, r, everything, undrained)
        # the store's drain (columns) at odd steps; at even ones a study's own, which the store still gets
        if step % 2:
            columns = feed.bus.drain_columns()
            assert columns == {f: [getattr(m, f) for m in kept + undrained] for f in FIELDS}
            kept = []
        else:
            drained = feed.bus.drain()
            assert drained == undrained and all(a is b for a, b in zip(drained, undrained))
            kept += undrained
        undrained = []
    assert feed.bus.drain() == [] and feed.bus.drain_columns() == {f: [getattr(m, f) for m in kept] for f in FIELDS}
    assert feed.bus.drain_columns() == {f: [] for f in FIELDS}


def test_readers_share_the_posted_messages_and_a_mixed_round_routes_payloads():
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: ["a", "b", "c"], bus)
    posted = feed.ingest([Action("a", 1, "post", {"x": 1}), Action("b", 1, "reply", {"x": 2})], 1, 0)
    seen = feed.local_for("z", 1, 1)
    assert seen == list(posted) and all(m is p for m, p in zip(seen, posted))
    assert posted == [Message("a", 1, 0, {"x": 1}), Message("b", 1, 0, {"x": 2}, kind="reply")]
    assert posted[1].kind == "reply" and len(posted) == 2 and posted != [posted[0]]
    # one routed payload in the round: every post still keeps its own kind, channel and content
    feed.ingest([Action("a", 1, "post", {"x": 3}), Action("b", 1, "move", {"x": 0}),
                 Action("c", 1, "post", {"content": "hi", "channel": "dm"})], 1, 1)
    columns = bus.drain_columns()
    assert columns["author_id"] == ["a", "b", "a", "c"] and columns["round"] == [0, 0, 1, 1]
    assert columns["channel"] == ["feed", "feed", "feed", "dm"] and columns["content"][3] == "hi"
    assert columns["kind"] == ["post", "reply", "post", "post"]


def test_message_columns_that_json_cannot_hold_name_the_agent():
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: [], bus)
    feed.ingest([Action("a", 2, "post", {"x": 1}), Action("b", 2, "post", {"x": object()})], 2, 1)
    with pytest.raises(FieldError, match="step 2 round 1: agent 'b': message content"):
        message_rows(bus.drain_columns(), 2)
    empty = message_rows(bus.drain_columns(), 3)
    assert empty.num_rows == 0 and "content" in empty.column_names


def test_a_later_round_without_the_field_is_not_hidden_by_what_was_read_before():
    # the step's latest are kept between rounds and brought up to date by each new round's posts:
    # a post without the field must surface as the error, not leave the older value in place
    bus = InMemoryMessageBus()
    feed = NeighborFeed(lambda a: ["a", "b"], bus)
    feed.ingest([Action("a", 1, "post", {"x": 1}), Action("b", 1, "post", {"x": 2})], 1, 0)
    assert feed.latest(["z"], 1, 1, "x") == [[1, 2]]
    feed.ingest([Action("b", 1, "post", {"x": 3})], 1, 1)
    assert feed.latest(["z"], 1, 2, "x") == [[1, 3]]
    feed.ingest([Action("a", 1, "post", {"y": 5})], 1, 2)
    with pytest.raises(KeyError, match="the message of 'a' at step 1 round 2 has no content field 'x'"):
        feed.latest(["z"], 1, 3, "x")
    assert feed.latest(["z"], 1, 3) == [[{"y": 5}, {"x": 3}]]


def test_the_collector_drains_columns_unless_the_bus_drains_its_own_way():
    from desim import EnvironmentProvider

    class Quiet(InMemoryMessageBus):
        def drain(self):                            # a study's own rule for what is stored
            return [m for m in super().drain() if m.channel != "dm"]

    for bus, stored in ((InMemoryMessageBus(), ["a", "b"]), (Quiet(), ["a"])):
        env = EnvironmentProvider()
        env.bus = bus
        NeighborFeed(lambda a: [], bus).ingest([Action("a", 1, "post", {"x": 1}),
                                                Action("b", 1, "post", {"content": 2, "channel": "dm"})], 1, 0)
        table = message_rows(env.drain_messages(), 1)
        assert table.column("author_id").to_pylist() == stored
