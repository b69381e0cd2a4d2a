"""A NeighborFeed reads each agent's neighbours through the neighbors_fn it was given (the seed's rule): a
function of the study's own, whose answer changes when agents move, is asked at every read; a snapshot of the
run's fixed network (desim.neighbors_fn, ctx.neighbors) is kept."""
from __future__ import annotations

import networkx as nx

from desim import InMemoryMessageBus, Message, NeighborFeed
from desim.study.network import neighbors_fn


def post(bus, author, step, opinion):
    bus.post(Message(author_id=author, step=step, round=0, content={"opinion": opinion}))


def test_agents_who_change_rooms_read_their_new_roommates():
    room = {"a": "X", "b": "X", "c": "Y"}
    same_room = lambda agent: [x for x in room if room[x] == room[agent] and x != agent]   # noqa: E731
    bus = InMemoryMessageBus()          # a round sees its step's earlier rounds only
    feed = NeighborFeed(same_room, bus)
    assert feed.fixed is False
    post(bus, "b", 1, 0.2)
    post(bus, "c", 1, 0.9)
    assert [m.author_id for m in feed.local_for("a", 1, 1)] == ["b"]
    assert feed.contents(["a", "c"], 1, 1, "opinion") == [[0.2], []]
    room["a"] = "Y"                                     # a moves in with c
    post(bus, "b", 2, 0.3)
    post(bus, "c", 2, 0.8)
    assert [m.author_id for m in feed.local_for("a", 2, 1)] == ["c"]
    assert feed.contents(["a", "b"], 2, 1, "opinion") == [[0.8], []]
    assert feed.latest(["a", "c"], 2, 1, "opinion") == [[0.8], []]


def test_a_snapshot_of_the_network_is_kept_and_a_study_may_declare_its_own_fixed():
    g = nx.path_graph(["a", "b", "c"])
    assert NeighborFeed(neighbors_fn(g), InMemoryMessageBus()).fixed is True
    calls = []

    def counted(agent):
        calls.append(agent)
        return list(g.neighbors(agent))
    feed = NeighborFeed(counted, InMemoryMessageBus(), fixed=True)
    feed.bus.post(Message(author_id="a", step=1, round=0, content={"opinion": 0.1}))
    for _ in range(3):
        assert feed.contents(["b"], 1, 1, "opinion") == [[0.1]]
    assert calls.count("b") == 1                        # asked once, then kept
