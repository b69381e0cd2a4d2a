"""The message bus: how agents hear each other within and across steps (the
reader's side, ``NeighborFeed``, is in :mod:`desim.messaging.feed`).

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

Posts are kept by step as batches (one ``ingest`` call each: parallel lists
of authors and contents, no object per post; see :mod:`desim.messaging.batches`); ``Message`` objects are made
only for a read that asks for them (``local_for``, ``drain``), and the
collector drains plain columns. Delivery is indexed by step and author, so a
reader costs its neighbours' look-ups plus the messages it receives, never a
scan of the whole bus. Steps older than ``step - 1`` can never be seen again
and are dropped.

Large rule-based studies on the columnar path use
:class:`desim.messaging.columnar.ColumnarFeed` instead: the same rule over numpy arrays.
"""
from __future__ import annotations

from itertools import repeat
from typing import Iterable

from desim.messaging.batches import Batch, Latest, Posted, each, fold
from desim.records import Message

POST_KINDS = ("post", "reply")


class MessageBus:
    """Where messages are posted and from which each agent reads its visible share."""

    def post(self, message: Message) -> None:
        raise NotImplementedError

    def visible_to(self, recipient: str, neighbors: Iterable[str], step: int, round_idx: int) -> list[Message]:
        raise NotImplementedError

    def drain(self) -> list[Message]:
        raise NotImplementedError

    def drain_columns(self) -> dict[str, list] | list[Message]:
        """What :meth:`drain` gives, for the ``messages`` table: a bus that can give plain columns by
        field without a ``Message`` per post overrides this; the default is :meth:`drain` itself."""
        return self.drain()


class InMemoryMessageBus(MessageBus):
    """A bus held in memory: each step's posts as batches in round order (posting order within a
    round), indexed by author only when a reader needs per-author lists.

    ``latest_by_author`` folds the batches of the visible steps into each author's latest
    (parallel lists, see ``Latest``), without a ``Message`` per post; ``visible_to`` and
    ``contents_by_author`` read ``_authors(step)``, each author's messages of the step in round
    order, built on first use and extended as posts arrive. A reader then looks up each
    neighbour once per visible step and stops at the first message of a round it may not see yet.
    """

    def __init__(self, carry_previous_step: bool = False):
        self.carry_previous_step = carry_previous_step
        self._steps: dict[int, list[Batch]] = {}               # step -> its batches, in round order
        self._by_author: dict[int, dict[str, list[Message]]] = {}   # step -> author -> messages (on demand)
        self._latest: int | None = None
        self._rounds: dict[int, int] = {}       # step -> the latest round posted in it
        self._step_cache: dict[tuple, object] = {}    # (step, field[, "latest"]) -> _step_contents, _step_latest
        self._covering: set[int] = set()        # steps whose authors include every author of the step before
        self._undrained: list[Batch] = []

    def post(self, message: Message) -> None:
        self.post_many((message,))

    def post_many(self, messages: Iterable[Message]) -> None:
        """Post several messages, in order."""
        run: list[Message] = []
        for m in messages:
            if run and (m[1] != run[0][1] or m[2] != run[0][2]):
                self._post(Batch.of(run))
                run = []
            run.append(m)
        if run:
            self._post(Batch.of(run))

    def post_batch(self, step: int, round_idx: int, authors: list, contents: list, kinds="post",
                   channels="feed", audiences="neighbors", reply_to=None) -> "Posted":
        """Post one batch of messages of ``step``, ``round_idx`` given as parallel lists (or, for
        ``kinds``, ``channels``, ``audiences`` and ``reply_to``, one value shared by all), as
        ``NeighborFeed.ingest`` does: no ``Message`` is made until a read wants it."""
        batch = Batch(step, round_idx, authors, contents, kinds, channels, audiences, reply_to)
        if authors:
            self._post(batch)
        return Posted(batch)

    def _post(self, batch: Batch) -> None:
        """File a batch under its step, after every batch of an earlier or the same round."""
        step = batch.step
        if self._latest is None or step > self._latest:
            self._new_step(step)
        batches = self._steps.setdefault(step, [])
        self._covering.discard(step + 1)        # the next step's authors may no longer cover this one's
        in_order = not batches or batches[-1].round <= batch.round
        self._forget(step, batch if in_order else None)
        if in_order:
            batches.append(batch)
        else:       # an earlier round than posted before: keep the batches sorted by round (stable)
            batches.insert(next(i for i, b in enumerate(batches) if b.round > batch.round), batch)
        if batch.round > self._rounds.get(step, -1):
            self._rounds[step] = batch.round
        by_author = self._by_author.get(step)
        if by_author is not None:
            if in_order:
                add = by_author.setdefault
                for m in batch.messages():
                    add(m[0], []).append(m)
            else:
                del self._by_author[step]
        self._undrained.append(batch)

    def _new_step(self, step: int) -> None:
        """``step`` is the latest: steps before ``step - 1`` can never be seen again."""
        self._latest = step
        for old in [s for s in self._steps if s < step - 1]:
            del self._steps[old]
            self._by_author.pop(old, None)
            self._rounds.pop(old, None)
            self._covering.discard(old)
            self._forget(old)

    def _forget(self, step: int, after: Batch | None = None) -> None:
        """Drop what was gathered from ``step``'s messages: it has a new one. A batch posted
        ``after`` all of the step's others brings each author's latest contents up to date
        instead (so a step's latest are folded once, batch by batch, not again every round)."""
        if self._step_cache:
            for key in [k for k in self._step_cache if k[0] == step]:
                if after is not None and len(key) == 3:
                    try:
                        fold((after,), key[1], self._step_cache[key])
                        continue
                    except (KeyError, TypeError, IndexError):   # some content lacks the field
                        pass
                del self._step_cache[key]

    def _authors(self, step: int) -> dict[str, list[Message]] | None:
        """Each author's messages of ``step`` in round order (posting order within a round);
        ``None`` when the step has none."""
        found = self._by_author.get(step)
        if found is None:
            batches = self._steps.get(step)
            if not batches:
                return None
            found = self._by_author[step] = {}
            add = found.setdefault
            for b in batches:
                for m in b.messages():
                    add(m[0], []).append(m)
        return found

    def _steps_for(self, step: int, round_idx: int):
        """(this step's messages by author if any round before ``round_idx`` exists, last step's if carried)."""
        now = self._authors(step) if round_idx > 0 else None
        before = self._authors(step - 1) if self.carry_previous_step else None
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
            raise missing_field(read, field) from None
        return out

    def _step_contents(self, step: int, field: str | None) -> dict[str, list]:
        """Every author's contents of a whole step (every round), kept while nothing is posted to
        it: the previous step, read again in every round of this one."""
        key = (step, field)
        found = self._step_cache.get(key)
        if found is None:
            posts = self._authors(step) or {}
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
        return self._latest_by_author(step, round_idx, field).as_dict()

    def _latest_by_author(self, step: int, round_idx: int, field: str | None) -> Latest:
        """:meth:`latest_by_author` as parallel lists, maybe ones the bus keeps for the next
        reader: read them, never change them."""
        now = self._steps.get(step) if round_idx > 0 else None
        before = self._steps.get(step - 1) if self.carry_previous_step else None
        whole = not now or self._rounds[step] < round_idx     # every round of this step is visible
        try:
            latest_now = (self._step_latest(step, field) if whole else
                          fold([b for b in now if b.round < round_idx], field)) if now else Latest()
            latest_before = self._step_latest(step - 1, field) if before else Latest()
        except (KeyError, TypeError, IndexError):
            now_by, before_by = self._steps_for(step, round_idx)
            last = _latest_one_by_one(now_by, before_by, round_idx, field)
            return Latest(list(last), list(last.values()))
        if not latest_now.authors or not latest_before.authors:
            return latest_now if latest_now.authors else latest_before
        if whole and (step in self._covering or latest_now.covers(latest_before)):
            self._covering.add(step)            # authors are only ever added to a step: it stays so
            return latest_now                   # everyone of last step has spoken since
        out = Latest(latest_before.authors, latest_before.contents)
        out.add(latest_now.authors, latest_now.contents)
        return out

    def _step_latest(self, step: int, field: str | None) -> Latest:
        """Every author's latest content of a whole step, kept while nothing is posted to it."""
        key = (step, field, "latest")
        found = self._step_cache.get(key)
        if found is None:
            found = self._step_cache[key] = fold(self._steps.get(step, ()), field)
        return found

    def drain(self) -> list[Message]:
        """The messages posted since the last drain, in posting order; the buffer is cleared."""
        batches, self._undrained = self._undrained, []
        return [m for b in batches for m in b.messages()]

    def drain_columns(self) -> dict[str, list]:
        """What :meth:`drain` gives, as plain lists by field (``author_id``, ``step``, ``round``,
        ``content``, ``channel``, ``kind``, ``audience``, ``reply_to``), without a ``Message``
        per post: the collector's way to fill the ``messages`` table. A subclass with a ``drain`` of
        its own (one that filters what is stored, say) keeps its rule: its ``drain`` is used."""
        if type(self).drain is not InMemoryMessageBus.drain:
            return self.drain()
        batches, self._undrained = self._undrained, []
        out: dict[str, list] = {name: [] for name in Message._fields}
        for b in batches:
            n = len(b.authors)
            out["author_id"] += b.authors
            out["step"] += repeat(b.step, n)
            out["round"] += repeat(b.round, n)
            out["content"] += b.contents
            out["channel"] += each(b.channels, n)
            out["kind"] += each(b.kinds, n)
            out["audience"] += each(b.audiences, n)
            out["reply_to"] += each(b.reply_to, n)
        return out

    def stored_steps(self) -> list[int]:
        """The steps still held for reading (at most the latest two)."""
        return sorted(self._steps)


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
        raise missing_field(list(last.values()), field) from None


def missing_field(read: list[Message], field: str) -> KeyError:
    """The error for the first message read whose content has no ``field``."""
    bad = next((m for m in read if not isinstance(m[3], dict) or field not in m[3]), None)
    if bad is None:
        return KeyError(field)
    return KeyError(f"the message of '{bad[0]}' at step {bad[1]} round {bad[2]} has no content "
                    f"field '{field}' (content: {bad[3]!r:.80})")


