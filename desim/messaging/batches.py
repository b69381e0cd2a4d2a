"""How a bus keeps its posts: each ``ingest`` (or direct post) as one batch of parallel lists,
each author's latest content as parallel lists, a batch read's answer (``ByAuthor``), and the
read-only sequence ``ingest`` returns. One step's batches, and what reads gathered from them, are
in :mod:`desim.messaging.steps`; the bus and its visibility rule in :mod:`desim.messaging.bus`.

Why lists and not an object per post: a round of 100,000 posts then costs a few list builds,
and the ``Message`` objects are made only for a read that wants them (``local_for``, ``drain``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat

from desim.records import Message


class Batch:
    """Posts made together, all of one step and round: one ``ingest`` call, or a direct post.

    Kept as parallel lists (authors, contents; kind, channel, audience and reply-to as one value
    when all share it), so a round of posts costs a few list builds, not an object per post.
    The ``Message`` objects are made on the first read that wants them (``visible_to``,
    ``contents``, ``drain``), once, and then shared by every reader."""

    __slots__ = ("step", "round", "authors", "contents", "kinds", "channels", "audiences", "reply_to", "_messages")

    def __init__(self, step: int, round_idx: int, authors: list, contents: list, kinds="post", channels="feed",
                 audiences="neighbors", reply_to=None, messages: list[Message] | None = None):
        self.step, self.round, self.authors, self.contents = step, round_idx, authors, contents
        self.kinds, self.channels, self.audiences, self.reply_to = kinds, channels, audiences, reply_to
        self._messages = messages

    @classmethod
    def of(cls, messages: list[Message]) -> "Batch":
        """Messages posted as they are (same step and round): the same objects are handed out."""
        m = messages[0]
        return cls(m[1], m[2], [m[0] for m in messages], [m[3] for m in messages], [m[5] for m in messages],
                   [m[4] for m in messages], [m[6] for m in messages], [m[7] for m in messages], messages)

    def messages(self) -> list[Message]:
        if self._messages is None:
            n = len(self.authors)
            self._messages = list(map(_new_tuple, repeat(Message), zip(
                self.authors, repeat(self.step, n), repeat(self.round, n), self.contents, each(self.channels, n),
                each(self.kinds, n), each(self.audiences, n), each(self.reply_to, n))))
        return self._messages


def check_posts(authors, contents, kinds, channels, audiences, reply_to) -> None:
    """Refuse, at the line that posts them, posts the store could not hold: ``authors`` a list (or tuple) of
    text, ``contents`` a sequence of as many (a list, an array of opinions, a range); ``kinds``, ``channels`` and ``audiences`` each one
    text for every post or a list of one per author (``reply_to`` the same, None allowed). A
    ``TypeError`` or ``ValueError`` naming the argument, the entry and its author.

    Each list is checked in one pass in C (``str.join`` stops at the first entry that is not text);
    only a list that fails, or a ``reply_to`` list holding None, is walked in Python."""
    if not isinstance(authors, (list, tuple)):
        raise TypeError(f"post_batch: authors is {type(authors).__name__} {shown(authors)}; give a list, one "
                        "author per post")
    if isinstance(contents, (str, bytes, dict)) or not hasattr(contents, "__len__"):
        raise TypeError(f"post_batch: contents is {type(contents).__name__} {shown(contents)}; give a list (or "
                        "an array), one content per post")
    if len(contents) != len(authors):
        raise ValueError(f"post_batch: {len(authors)} authors but {len(contents)} contents (one content per "
                         "author, in the same order)")
    if not _all_text(authors):
        i = _first_not_text(authors, False)
        raise TypeError(f"post_batch: authors[{i}] is {authors[i]!r:.60} ({type(authors[i]).__name__}), not text "
                        "(an agent id)")
    for name, value in (("kinds", kinds), ("channels", channels), ("audiences", audiences),
                        ("reply_to", reply_to)):
        none_ok = name == "reply_to"
        if type(value) is list:
            if len(value) != len(authors):
                raise ValueError(f"post_batch: {name} has {len(value)} entries for {len(authors)} authors (one "
                                 "per author, or one value for all)")
            if not _all_text(value, none_ok):
                i = _first_not_text(value, none_ok)
                raise TypeError(f"post_batch: {name}[{i}] (the post by {authors[i]!r:.40}) is {value[i]!r:.60} "
                                f"({type(value[i]).__name__}), not text")
        elif not (isinstance(value, str) or (none_ok and value is None)):
            raise TypeError(f"post_batch: {name} is {type(value).__name__} {shown(value)}; give one text for "
                            f"every post{' (or None)' if none_ok else ''}, or a list of one per author")


def _all_text(values: list, none_ok: bool = False) -> bool:
    """Every entry is text (None too with ``none_ok``): ``str.join`` checks the usual list in C."""
    try:
        "".join(values)
        return True
    except TypeError:
        return none_ok and all(v is None or isinstance(v, str) for v in values)


def _first_not_text(values: list, none_ok: bool) -> int:
    return next(i for i, v in enumerate(values) if not (isinstance(v, str) or (none_ok and v is None)))


def shown(value) -> str:
    """``value`` in an error message, cut to a line's worth."""
    text = " ".join(repr(value).split())
    return f"{text[:60]}..." if len(text) > 60 else text


def messages_of(step: int, round_idx: int, authors: list, contents: list, kinds="post", channels="feed",
                audiences="neighbors", reply_to=None) -> list[Message]:
    """The ``Message`` objects of a batch given as :meth:`MessageBus.post_batch` takes it."""
    return Batch(step, round_idx, authors, contents, kinds, channels, audiences, reply_to).messages()


def each(value, n: int):
    """A batch's column: its list, or its one shared value ``n`` times."""
    return value if type(value) is list else repeat(value, n)


class Latest:
    """Each author's latest content over some batches, as two parallel lists: authors in posting
    order and their contents (or ``field``s); an author listed twice (two posts in one batch) has
    its last entry as its latest, as a dict built from the pairs would have.

    Why lists and not a dict: a round is usually posted by the same authors in the same order as
    the one before, and then bringing the latest up to date is taking the new batch's lists, with
    no look-up per author (updating a dict of 100,000 authors costs six times as much); readers
    gather their neighbours by position (``NeighborFeed``). Any other batch goes through a dict."""

    __slots__ = ("authors", "contents")

    def __init__(self, authors: list | None = None, contents: list | None = None):
        self.authors = [] if authors is None else authors
        self.contents = [] if contents is None else contents

    def add(self, authors: list, contents: list) -> None:
        """Posts by ``authors`` (in posting order, parallel to ``contents``) are now the latest."""
        mine = self.authors
        if not mine or mine is authors or mine == authors:
            self.authors, self.contents = authors, contents
        else:
            merged = dict(zip(mine, self.contents))
            merged.update(zip(authors, contents))
            self.authors, self.contents = list(merged), list(merged.values())

    def covers(self, other: "Latest") -> bool:
        """Every author of ``other`` has a latest here too."""
        return self.authors == other.authors or set(self.authors).issuperset(other.authors)


def fold(batches, field: str | None, out: Latest | None = None) -> Latest:
    """Each author's last content (or its ``field``) over ``batches``, taken in order, into ``out``
    (a batch with a content that lacks ``field`` raises before it changes ``out``)."""
    out = Latest() if out is None else out
    for b in batches:
        out.add(b.authors, b.contents if field is None else [c[field] for c in b.contents])
    return out


_new_tuple = tuple.__new__


class ByAuthor(Mapping):
    """A batch read's answer (``MessageBus.contents_by_author``, ``latest_by_author``): each
    author's value, as two parallel lists, ``authors`` and ``contents``; an author listed twice has
    its last entry as its value, as a dict built from the pairs would have.

    Why lists: a bus that keeps each author's latest as lists (``Latest``) hands them out as they
    are, without a dict of 100,000 authors per read, and ``NeighborFeed`` gathers each reader's
    neighbours by position among ``authors``. It reads as a mapping too (``got["b"]``, ``==`` a
    dict), through a dict built on the first look-up. Read-only: the lists may be the bus's own,
    kept for the next reader."""

    __slots__ = ("authors", "contents", "_dict")

    def __init__(self, authors: list, contents: list):
        self.authors, self.contents = authors, contents
        self._dict: dict | None = None

    @classmethod
    def of(cls, values: dict) -> "ByAuthor":
        return cls(list(values), list(values.values()))

    def _as_dict(self) -> dict:
        if self._dict is None:
            self._dict = dict(zip(self.authors, self.contents))
        return self._dict

    def __getitem__(self, author):
        return self._as_dict()[author]

    def __iter__(self):
        return iter(self._as_dict())

    def __len__(self) -> int:
        return len(self._as_dict())

    def __repr__(self) -> str:
        return f"ByAuthor({self._as_dict()!r})"


class Posted(Sequence):
    """The messages one ``post_batch`` put on an ``InMemoryMessageBus``: a read-only sequence
    whose ``Message`` objects are made when it is first read (most callers never read it)."""

    __slots__ = ("_batch",)

    def __init__(self, batch: Batch):
        self._batch = batch

    def __len__(self) -> int:
        return len(self._batch.authors)

    def __getitem__(self, i):
        return self._batch.messages()[i]

    def __iter__(self):
        return iter(self._batch.messages())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Posted({self._batch.messages()!r})"
