"""The message bus: how agents hear each other within and across steps (the
reader's side, ``NeighborFeed``, is in :mod:`desim.messaging.feed`).

The engine never touches it. A study's environment owns a bus (usually made
in ``reset``), turns post-shaped actions into messages with
``NeighborFeed.ingest`` inside ``apply``, hands each agent its feed with
``NeighborFeed.local_for`` inside ``observe_batch``, and the collector
persists what ``drain_columns()`` returns into the ``messages`` table.

The visibility rule (exact, from the seed page): ``visible_to(recipient,
neighbors, step, round_idx)`` returns message ``m`` iff its author is one of
the recipient's neighbours and either ``m.step == step and m.round <
round_idx`` (posted earlier this step) or ``carry_previous_step and m.step ==
step - 1`` (last step's). It is written once, in ``visible_windows``, and
every read of every bus selects through it.
An agent never reads its own posts: the recipient is skipped among its
neighbours, so a self-loop would change nothing, and ``population.json``
refuses one in explicit ``edges`` rather than let it look meaningful.

``MessageBus`` is the protocol: ``post``, ``visible_to`` and ``drain``, which
a bus must implement, and the batch methods ``NeighborFeed`` and the
collector use (``post_batch``, ``contents_by_author``, ``latest_by_author``,
``drain_columns``), with defaults built on the first three.
``InMemoryMessageBus`` overrides them: posts are kept by step as batches (one
``ingest`` call each: parallel lists of authors and contents, no object per
post; see :mod:`desim.messaging.batches` and :mod:`desim.messaging.steps`);
``Message`` objects are made only for a read that asks for them
(``local_for``, ``drain``), and the collector drains plain columns. Delivery
is indexed by step and author, so a reader costs its neighbours' look-ups plus
the messages it receives, never a scan of the whole bus. Steps older than
``step - 1`` can never be seen again and are dropped.

Large rule-based studies on the columnar path use
:class:`desim.messaging.columnar.ColumnarFeed` instead: the same rule over numpy arrays.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Iterable

from desim.jsontext import dumps
from desim.messaging.batches import Batch, ByAuthor, Latest, Posted, check_posts, each, messages_of
from desim.messaging.steps import FIELD_ERRORS, StepPosts
from desim.records import Message

POST_KINDS = ("post", "reply")
EVERY_ROUND = float("inf")


# --- the rule ---------------------------------------------------------------------------------
def visible_windows(step: int, round_idx: int, carry_previous_step: bool) -> tuple[tuple[int, float], ...]:
    """The seed page's rule, the one place it is written: the ``(step, below)`` windows a reader at
    ``step``, ``round_idx`` may see, oldest first; a window holds the messages of its step posted
    in a round before ``below``.

    Every read of every bus here selects what it reads through these windows (``is_visible`` for
    one message, ``InMemoryMessageBus`` by step, ``ColumnarFeed`` by batch), and their order,
    oldest first, is the delivery order within each author."""
    if carry_previous_step:
        return (step - 1, EVERY_ROUND), (step, round_idx)
    return ((step, round_idx),)


def is_visible(message: Message, step: int, round_idx: int, carry_previous_step: bool) -> bool:
    """Whether the rule lets a neighbour of ``message``'s author see it at ``step``, ``round_idx``
    (for a bus that filters the messages it keeps)."""
    return any(message.step == s and message.round < below
               for s, below in visible_windows(step, round_idx, carry_previous_step))


# --- the protocol -------------------------------------------------------------------------------
class MessageBus:
    """Where messages are posted and from which each agent reads its visible share.

    A bus implements three methods: ``post``, ``visible_to`` (the rule, for one recipient, its
    messages neighbour by neighbour, each neighbour's by (step, round), posting order within a
    round) and ``drain``. The batch methods, which ``NeighborFeed`` and the collector use, have
    defaults here built on those three: correct for any bus, and as slow as a call per message
    or a ``visible_to`` per read. A bus that can do better overrides them (``InMemoryMessageBus``).

    The batch reads answer by author, so they assume what the seed page's rule says: what an
    author shows does not depend on who reads it (beyond never reading oneself). A bus whose
    ``visible_to`` depends on the recipient keeps its readers on ``NeighborFeed.local_for``.
    """

    def __init_subclass__(cls, **kwargs):
        """A subclass that redefines one of the three methods and not a batch method built on it
        gets that batch method's default again, built on its own version: a ``drain`` that filters
        what is stored is then what ``drain_columns`` stores, a ``visible_to`` with a rule of its
        own what ``NeighborFeed.contents`` and ``latest`` read."""
        super().__init_subclass__(**kwargs)
        for batch, single in _BUILT_ON.items():
            if single in vars(cls) and batch not in vars(cls):
                setattr(cls, batch, vars(MessageBus)[batch])

    def post(self, message: Message) -> None:
        raise NotImplementedError

    def visible_to(self, recipient: str | None, neighbors: Iterable[str], step: int,
                   round_idx: int) -> list[Message]:
        """The messages ``recipient`` may see among those of ``neighbors`` (each listed once; the
        recipient itself is skipped, ``None`` skips nobody)."""
        raise NotImplementedError

    def drain(self) -> list[Message]:
        """The messages posted since the last drain, in posting order; the buffer is cleared."""
        raise NotImplementedError

    def post_batch(self, step: int, round_idx: int, authors: list, contents: list, kinds="post",
                   channels="feed", audiences="neighbors", reply_to=None) -> Sequence[Message]:
        """Post the messages of ``step``, ``round_idx`` given as parallel lists (``kinds``,
        ``channels``, ``audiences`` and ``reply_to`` as a list or one value shared by all), in
        order, as ``NeighborFeed.ingest`` does; returns them. Lists of different lengths, or an author,
        kind, channel or audience that is not text, are refused here (:func:`check_posts`)."""
        check_posts(authors, contents, kinds, channels, audiences, reply_to)
        posted = messages_of(step, round_idx, authors, contents, kinds, channels, audiences, reply_to)
        for m in posted:
            self.post(m)
        return posted

    def contents_by_author(self, step: int, round_idx: int, field: str | None = None, *,
                           authors: Iterable[str] | None = None) -> ByAuthor:
        """For each author with a message a reader may see at ``step``, ``round_idx``, the
        contents (``content[field]`` with ``field``) of those messages, in ``visible_to``'s order.

        ``authors`` (an iterable, read at most once) are the authors the caller will look up:
        each of them with a visible message is answered; a bus may answer for others too. The
        default reads them all in one ``visible_to``."""
        read = self._visible_of(step, round_idx, authors)
        grouped: dict[str, list] = {}
        try:
            for m in read:
                grouped.setdefault(m.author_id, []).append(m.content if field is None else m.content[field])
        except FIELD_ERRORS:
            raise missing_field(read, field) from None
        return ByAuthor.of(grouped)

    def latest_by_author(self, step: int, round_idx: int, field: str | None = None, *,
                         authors: Iterable[str] | None = None) -> ByAuthor:
        """For each author with a message a reader may see at ``step``, ``round_idx``, the content
        (``content[field]`` with ``field``) of its latest: the one of the latest step and round,
        the last posted among equals. Only that message needs the field.

        What a state-sharing model reads (an opinion, a price): each neighbour's current value,
        not every value it stated. ``authors`` as for :meth:`contents_by_author`."""
        last = {}
        for m in sorted(self._visible_of(step, round_idx, authors), key=_step_round):
            last[m.author_id] = m
        return _field_of(last, field)

    def drain_columns(self) -> dict[str, list]:
        """What :meth:`drain` gives, as plain lists by field (``author_id``, ``step``, ``round``,
        ``content``, ``channel``, ``kind``, ``audience``, ``reply_to``): how the collector fills
        the ``messages`` table."""
        self._storing = True         # the bus's own drain, for the store: not what a study takes (``taken``)
        try:
            drained = self.drain()
        finally:
            self._storing = False
        return {name: [getattr(m, name) for m in drained] for name in Message._fields}

    def _visible_of(self, step: int, round_idx: int, authors: Iterable[str] | None) -> list[Message]:
        if authors is None:
            raise TypeError(f"{type(self).__name__}: a batch read built on visible_to needs authors=, "
                            "the authors it is asked about")
        return self.visible_to(None, authors, step, round_idx)


_BUILT_ON = {"post_batch": "post", "contents_by_author": "visible_to", "latest_by_author": "visible_to",
             "drain_columns": "drain"}       # a batch method: the method its default is built on


def _step_round(m: Message) -> tuple[int, int]:
    return m[1], m[2]


def _field_of(last: dict[str, Message], field: str | None) -> ByAuthor:
    """Each author's ``last`` message's content, or its ``field`` (the error names the first without)."""
    try:
        return ByAuthor(list(last), [m[3] if field is None else m[3][field] for m in last.values()])
    except FIELD_ERRORS:
        raise missing_field(list(last.values()), field) from None


def missing_field(read: list[Message], field: str) -> KeyError:
    """The error for the first message read whose content has no ``field``."""
    bad = next((m for m in read if not isinstance(m[3], dict) or field not in m[3]), None)
    if bad is None:
        return KeyError(field)
    return KeyError(f"the message of '{bad[0]}' at step {bad[1]} round {bad[2]} has no content "
                    f"field '{field}' (content: {bad[3]!r:.80})")


# --- the bus held in memory --------------------------------------------------------------------
class InMemoryMessageBus(MessageBus):
    """A bus held in memory: each step's posts as batches in round order (posting order within a
    round), with what reads gather from them kept per step (:class:`StepPosts`).

    Every read goes through ``_windows``, the rule's windows the bus holds posts for: a reader
    then looks up each neighbour once per visible step and stops at the first message of a round
    it may not see yet, and a batch read folds or gathers the visible steps once for every
    reader of the round, without a ``Message`` per post. Steps older than the previous one of
    the latest posted can never be seen again in a run (it reads its steps in order) and are
    dropped; a read that would need them is refused rather than answered empty.
    """

    def __init__(self, carry_previous_step: bool = False):
        self.carry_previous_step = carry_previous_step
        self._steps: dict[int, StepPosts] = {}
        self._latest_step: int | None = None
        self._undrained: list[Batch] = []
        self._drains = Drains()
        self._storing = False

    @property
    def taken(self) -> int:
        """Messages a study drained before desim stored any: missing from the messages table."""
        return self._drains.taken

    @property
    def taken_at(self) -> str:
        """Where the study drained them ("model.py:88"), for the error that says so."""
        return self._drains.taken_at

    @property
    def latest_step(self) -> int | None:
        """The latest step anything was posted at; None while nothing has been."""
        return self._latest_step

    # --- posting
    def post(self, message: Message) -> None:
        """One message made by study code (in ``apply``, a SimPy process): its content is checked here,
        so that content JSON cannot hold fails at the line that posted it, not at the step's close,
        where only its author is known (a process posting in an agent's name would blame the agent)."""
        try:
            dumps(message.content)
        except TypeError as e:
            raise TypeError(f"message by '{message.author_id}': content {message.content!r:.60} "
                            f"is not JSON ({e})") from None
        self._post(Batch.of([message]))

    def post_batch(self, step: int, round_idx: int, authors: list, contents: list, kinds="post",
                   channels="feed", audiences="neighbors", reply_to=None) -> Posted:
        """:meth:`MessageBus.post_batch`, kept as one batch of the lists given: no ``Message`` is
        made until a read wants it (the sequence returned makes them when first read). The lists are
        checked here (:func:`check_posts`), so that a bad one fails at the line that posted it; the
        contents are checked as the step's messages are stored, where one JSON cannot hold is refused
        naming the step, round and author."""
        check_posts(authors, contents, kinds, channels, audiences, reply_to)
        batch = Batch(step, round_idx, authors, contents, kinds, channels, audiences, reply_to)
        if authors:
            self._post(batch)
        return Posted(batch)

    def _post(self, batch: Batch) -> None:
        step = batch.step
        if self._latest_step is None or step > self._latest_step:
            self._latest_step = step
            self._steps = {s: p for s, p in self._steps.items() if s >= step - 1}
        posts = self._steps.get(step)
        if posts is None:
            posts = self._steps[step] = StepPosts(step)
        posts.add(batch)
        self._undrained.append(batch)

    # --- reading
    def _windows(self, step: int, round_idx: int) -> list[tuple[StepPosts, float]]:
        """The rule's windows (oldest first) that hold a message, with the posts of their step. A read of a
        step whose posts were dropped is refused: an empty answer would say nobody posted."""
        latest = self._latest_step
        if latest is not None and step - self.carry_previous_step < latest - 1:
            raise ValueError(f"the bus no longer holds step {step - self.carry_previous_step}'s posts, which a "
                             f"read at step {step} would see: it keeps the latest step posted to ({latest}) and the "
                             "one before (a run reads its steps in order, and a post is stamped with the step "
                             "it is made in)")
        found = []
        for s, below in visible_windows(step, round_idx, self.carry_previous_step):
            posts = self._steps.get(s)
            if posts is not None and posts.seen_before(below):
                found.append((posts, below))
        return found

    def visible_to(self, recipient: str | None, neighbors: Iterable[str], step: int,
                   round_idx: int) -> list[Message]:
        out: list[Message] = []
        windows = [(posts.by_author(), below) for posts, below in self._windows(step, round_idx)]
        if not windows:
            return out
        for author in neighbors:
            if author == recipient:
                continue
            for by_author, below in windows:
                mine = by_author.get(author)
                if mine:
                    if mine[-1][2] < below:
                        out += mine
                    else:
                        for m in mine:
                            if m[2] >= below:
                                break
                            out.append(m)
        return out

    def contents_by_author(self, step: int, round_idx: int, field: str | None = None, *,
                           authors: Iterable[str] | None = None) -> ByAuthor:
        """:meth:`MessageBus.contents_by_author` for every author (``authors`` is not read): one
        pass over the visible steps' messages, the whole previous step's kept for every round of
        this one, so a round's readers each cost only their neighbours' look-ups."""
        windows = self._windows(step, round_idx)
        try:
            parts = [posts.contents(field, below) for posts, below in windows]
        except FIELD_ERRORS:
            raise missing_field([m for posts, below in windows for m in posts.messages(below)], field) from None
        if not parts:
            return ByAuthor([], [])
        out = parts[0]
        for later in parts[1:]:
            out = dict(out)
            for a, got in later.items():
                out[a] = out[a] + got if a in out else got
        return ByAuthor.of(out)

    def latest_by_author(self, step: int, round_idx: int, field: str | None = None, *,
                         authors: Iterable[str] | None = None) -> ByAuthor:
        """:meth:`MessageBus.latest_by_author` for every author (``authors`` is not read), folded
        from the visible batches without a ``Message`` per post; each whole step's latest is kept.
        When this step's authors include every author of the previous step (everyone spoke again:
        the usual round), this step's latest is the answer as it is, with no merge."""
        windows = self._windows(step, round_idx)
        try:
            parts = [posts.latest(field, below) for posts, below in windows]
        except FIELD_ERRORS:            # only each author's latest must have the field: message by message
            last = {}
            for posts, below in windows:
                for a, ms in posts.by_author().items():
                    seen = ms if ms[-1][2] < below else [m for m in ms if m[2] < below]
                    if seen:
                        last[a] = seen[-1]
            return _field_of(last, field)
        if not parts:
            return ByAuthor([], [])
        if len(parts) == 1 or _covers(windows, parts):
            return ByAuthor(parts[-1].authors, parts[-1].contents)
        out = Latest(parts[0].authors, parts[0].contents)
        out.add(parts[1].authors, parts[1].contents)
        return ByAuthor(out.authors, out.contents)

    def drain(self) -> list[Message]:
        if self._storing:           # desim's drain (a subclass's own drain runs here too)
            batches, self._undrained = self._drains.by_desim(self._undrained), []
            return [m for b in batches for m in b.messages()]
        batches, self._undrained = self._undrained, []
        drained = [m for b in batches for m in b.messages()]
        self._drains.by_the_study(batches, len(drained), _caller())
        return drained

    def drain_columns(self) -> dict[str, list]:
        """:meth:`MessageBus.drain_columns` from the batches' lists, without a ``Message`` per post: what
        the study drained itself since the last call, then the rest, in posting order."""
        batches, self._undrained = self._drains.by_desim(self._undrained), []
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


def _covers(windows: list[tuple[StepPosts, float]], parts: list[Latest]) -> bool:
    """The later window's authors include every author of the earlier one's (two windows: last
    step whole, this step). Remembered on this step while it is read whole, against the version
    of the previous step: authors are only ever added to a step, so it stays so until the
    previous step gets a post."""
    (before, _), (now, below) = windows
    whole = now.whole(below)
    if whole and now.covered == before.version:
        return True
    if not parts[1].covers(parts[0]):
        return False
    if whole:
        now.covered = before.version
    return True


class Drains:
    """Who drained a bus's posts, and so what the messages table gets: desim drains every bus at each
    step's close (``drain_columns``); a study may drain it too (the seed persists messages "via
    ``bus.drain()``"). Once desim has stored the bus's posts (step 0's close), what a study drains is kept
    for desim's next drain as well, so each post is stored once. Before that, or when desim never drains
    the bus (the study's own ``drain_messages`` stores what it drains), nothing is kept: what a study took
    then is counted (``taken``, ``taken_at``), and the run says so."""

    def __init__(self):
        self.for_store = False
        self.kept: list = []
        self.taken = 0
        self.taken_at = ""

    def by_desim(self, undrained: list) -> list:
        """desim's drain: the batches the study drained since the last one, then ``undrained``."""
        self.for_store = True
        out, self.kept = self.kept + undrained, []
        return out

    def by_the_study(self, batches: list, posts: int, where: str) -> None:
        """A study drained ``batches`` (``posts`` messages) at ``where``."""
        if self.for_store:
            self.kept += batches
        else:
            self.taken += posts
            self.taken_at = where


def _caller() -> str:
    """``file:line`` of the code that called the caller (a study calling ``drain()``), for a message."""
    import os
    import sys
    frame = sys._getframe(2)
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
