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

Large rule-based studies on the columnar path use
:class:`desim.columnar_feed.ColumnarFeed` instead: the same rule over numpy arrays.
"""
from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Callable, Iterable

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
        self._step_cache: dict[tuple, dict] = {}    # (step, field[, "latest"]) -> _step_contents, _step_latest
        self._covering: set[int] = set()        # steps whose authors include every author of the step before
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
            self._covering.discard(old)
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
            if now and self._rounds.get(step, -1) < round_idx:     # all of this step's posts are visible
                for a, got in self._step_contents(step, field).items():
                    out[a] = out[a] + got if a in out else got
                now = None
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

    def latest_by_author(self, step: int, round_idx: int, field: str | None = None) -> dict:
        """For every author with a message a reader may see at ``step``, ``round_idx``, the content
        (``content[field]`` with ``field``) of its latest one: the last of this step's visible
        rounds, else the last of the previous step's (when carried). Authors with none are absent.

        What a state-sharing model reads (an opinion, a price): each neighbour's current value,
        not every value it stated. With one round a step it is every visible message.
        """
        return dict(self._latest_by_author(step, round_idx, field))

    def _latest_by_author(self, step: int, round_idx: int, field: str | None) -> dict:
        """:meth:`latest_by_author`, maybe a dict the bus keeps for the next reader: read it, never change it."""
        now, before = self._steps_for(step, round_idx)
        if now and self._rounds.get(step, -1) >= round_idx:   # only some of this step's rounds visible yet
            return _latest_one_by_one(now, before, round_idx, field)
        try:
            latest_now = self._step_latest(step, field) if now else {}
            latest_before = self._step_latest(step - 1, field) if before else {}
        except (KeyError, TypeError, IndexError):
            return _latest_one_by_one(now, before, round_idx, field)
        if not latest_now or not latest_before:
            return latest_now or latest_before
        if step in self._covering or now.keys() >= before.keys():
            self._covering.add(step)            # authors are only ever added to a step: it stays so
            return latest_now                   # everyone of last step has spoken since
        out = dict(latest_before)
        out.update(latest_now)
        return out

    def _step_latest(self, step: int, field: str | None) -> dict:
        """Every author's latest content of a whole step, kept while nothing is posted to it."""
        key = (step, field, "latest")
        found = self._step_cache.get(key)
        if found is None:
            posts = self._by_step.get(step, {})
            if field is None:
                found = {a: ms[-1][3] for a, ms in posts.items()}
            else:
                found = {a: ms[-1][3][field] for a, ms in posts.items()}
            self._step_cache[key] = found
        return found

    def drain(self) -> list[Message]:
        """The messages posted since the last drain, in posting order; the buffer is cleared."""
        out, self._undrained = self._undrained, []
        return out

    def stored_steps(self) -> list[int]:
        """The steps still held for reading (at most the latest two)."""
        return sorted(self._by_step)


def _latest_one_by_one(now: dict | None, before: dict | None, round_idx: int, field: str | None) -> dict:
    """``latest_by_author`` message by message: when only some of this step's rounds are visible,
    or some content has no ``field`` (only each author's latest visible message must have it, and
    the error names the first that does not)."""
    last = {a: ms[-1] for a, ms in (before or {}).items()}
    for a, ms in (now or {}).items():
        seen = [m for m in ms if m[2] < round_idx]
        if seen:
            last[a] = seen[-1]
    try:
        return {a: m[3] if field is None else m[3][field] for a, m in last.items()}
    except (KeyError, TypeError, IndexError):
        raise _missing(list(last.values()), field) from None


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
            return self._gather(ids, single, True) if single else [[] for _ in ids]
        by_author = bus.contents_by_author(t, round_idx, field)
        return self._gather(ids, by_author, False) if by_author else [[] for _ in ids]

    def latest(self, ids: Iterable[str], t: int, round_idx: int, field: str | None = None) -> list[list]:
        """For each of ``ids``, the latest visible content (or its ``field``) of each neighbour that
        has one, in neighbour order: each neighbour's current opinion, price or state, once.

        The latest is the one posted in the latest step and round, the last posted among equals:
        for ``ids[i]``, the last of each author's messages in ``local_for(ids[i], t, r)``.
        """
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
                    raise _missing(list(last.values()), field) from None
            return out
        by_author = bus._latest_by_author(t, round_idx, field)
        return self._gather(ids, by_author, True) if by_author else [[] for _ in ids]

    def _gather(self, ids: Iterable[str], by_author: dict, single: bool) -> list[list]:
        """Each reader's neighbours' contents, in neighbour order: ``by_author`` holds one content per
        author (``single``) or a list. A cached ``itemgetter`` per reader makes it one C call a
        reader when all its neighbours have something to show."""
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
        if last is not None and (ids is last[0] or ids == last[0]):
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
