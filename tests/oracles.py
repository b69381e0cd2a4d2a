"""Shared test oracles for the message bus: the seed page's visibility rule written the slow,
obvious way, over every message ever posted, and the inputs the bus tests draw on.

The rule: ``visible_to(recipient, neighbors, step, round_idx)`` returns ``m`` iff its author is
one of the recipient's neighbours (never the recipient itself) and ``m.step == step and
m.round < round_idx``, or ``carry_previous_step and m.step == step - 1``. Delivery order:
neighbour by neighbour, each neighbour's messages by (step, round), in posting order within a
round. "Latest": for each such neighbour, the visible message with the greatest (step, round),
the last posted among equals.
"""
from __future__ import annotations

import random

import networkx as nx

from desim import Action, Message, NeighborFeed
from desim.messaging.bus import MessageBus


# --- the rule and its brute-force reads ----------------------------------------------------------------------
def rule(m: Message, step: int, round_idx: int, carry: bool) -> bool:
    return (m.step == step and m.round < round_idx) or (carry and m.step == step - 1)


def brute_visible(everything: list[Message], recipient: str, neighbors, step: int, round_idx: int,
                  carry: bool) -> list[Message]:
    out = []
    for n in dict.fromkeys(neighbors):                    # each neighbour once, in the given order
        if n == recipient:
            continue
        mine = [m for m in everything if m.author_id == n and rule(m, step, round_idx, carry)]
        out += sorted(mine, key=lambda m: (m.step, m.round))     # stable: posting order within a round
    return out


def brute_by_author(everything: list[Message], step: int, round_idx: int, carry: bool, field=None) -> dict:
    out: dict[str, list] = {}
    for m in sorted(everything, key=lambda m: (m.step, m.round)):
        if rule(m, step, round_idx, carry):
            out.setdefault(m.author_id, []).append(m.content if field is None else m.content[field])
    return out


def brute_latest(everything, recipient, neighbors, step, round_idx, carry, field=None) -> list:
    out = []
    for n in dict.fromkeys(neighbors):
        if n == recipient:
            continue
        mine = [m for m in everything if m.author_id == n and rule(m, step, round_idx, carry)]
        if mine:
            last = sorted(mine, key=lambda m: (m.step, m.round))[-1]     # stable: the last posted among equals
            out.append(last.content if field is None else last.content[field])
    return out


# --- graphs -------------------------------------------------------------------------------
def named(g: nx.Graph) -> nx.Graph:
    return nx.relabel_nodes(g, {n: f"x{n}" for n in g.nodes})


def graphs():
    gnp = named(nx.gnp_random_graph(40, 0.12, seed=11))
    ws = named(nx.watts_strogatz_graph(30, 4, 0.3, seed=12))
    directed = named(nx.gnp_random_graph(30, 0.1, seed=13, directed=True))
    lonely = named(nx.gnp_random_graph(25, 0.15, seed=14))
    lonely.add_nodes_from(["iso1", "iso2", "iso3"])
    lonely.add_edge("x3", "x3")                  # a self-loop added to the graph directly
    lonely.add_edge("x4", "x4")
    return {"gnp": gnp, "watts_strogatz": ws, "directed": directed, "isolated_and_self_loop": lonely}


GRAPHS = graphs()


class Poster:
    """Posts a round's messages: 0, 1 or 2 per author, through ingest or bus.post, some stamped
    with a later round (posted before that round's own posts) or an earlier one."""

    def __init__(self, rnd: random.Random, feed: NeighborFeed, ids: list[str], rounds: int):
        self.rnd, self.feed, self.ids, self.rounds = rnd, feed, ids, rounds
        self.everything: list[Message] = []
        self.serial = 0

    def content(self, author, step, r):
        self.serial += 1
        return {"x": [author, step, r, self.serial], "n": self.serial, "note": "a,\"b\"\n"}

    def round(self, step: int, r: int) -> None:
        rnd = self.rnd
        actions = []
        for a in self.ids:
            for _ in range(rnd.choice([0, 0, 1, 1, 1, 2])):
                if rnd.random() < 0.6:
                    kind = rnd.choice(["post", "reply"])
                    actions.append(Action(agent_id=a, step=step, kind=kind,
                                          payload={"content": self.content(a, step, r)}))
                else:                                   # a message stamped with another round
                    stamp = rnd.choice([r, r + 1, r + 2, max(0, r - 1)])
                    m = Message(author_id=a, step=step, round=stamp, content=self.content(a, step, stamp))
                    self.feed.bus.post(m)
                    self.everything.append(m)
            if rnd.random() < 0.1:                      # not a post: never a message
                actions.append(Action(agent_id=a, step=step, kind="move", payload={"x": 0}))
        posted = self.feed.ingest(actions, step, r)
        assert len(posted) == sum(a.kind in ("post", "reply") for a in actions)
        self.everything += posted


# --- another bus, filtering one list by the rule -------------------------------------------
class ListBus(MessageBus):
    """A bus that keeps every message in one list and filters it by the rule."""

    def __init__(self, carry_previous_step: bool = False):
        self.carry = carry_previous_step
        self.messages: list[Message] = []
        self.undrained: list[Message] = []

    def post(self, message: Message) -> None:
        self.messages.append(message)
        self.undrained.append(message)

    def visible_to(self, recipient, neighbors, step, round_idx):
        return brute_visible(self.messages, recipient, neighbors, step, round_idx, self.carry)

    def drain(self):
        out, self.undrained = self.undrained, []
        return out
