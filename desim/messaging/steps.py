"""One step's posts on an ``InMemoryMessageBus``, and what reads gathered from them.

Why a class per step: what a read gathers from a step (each author's messages, its contents,
its latest) stays true until the next post to that step, so it is kept here and brought up to
date in one place, :meth:`StepPosts.add`, rather than in caches keyed by step across the bus.
A read that combines two steps keys what it keeps on their ``version``s, which only ``add``
changes: nothing else has to remember to forget it.
"""
from __future__ import annotations

from itertools import count

from desim.messaging.batches import Batch, Latest, fold
from desim.records import Message

FIELD_ERRORS = (KeyError, TypeError, IndexError)     # a content without the field read
_versions = count(1)        # shared by every StepPosts: a version names one state of one step


class StepPosts:
    """A step's batches in round order (posting order within a round), and per-author views of
    them built on first use: ``by_author`` for ``visible_to``, the whole step's contents and
    latest by field for the batch reads (the previous step is read whole in every round of this
    one, so it is gathered once)."""

    __slots__ = ("step", "batches", "last_round", "version", "covered", "_by_author", "_contents", "_latest")

    def __init__(self, step: int):
        self.step = step
        self.batches: list[Batch] = []
        self.last_round = -1
        self.version = next(_versions)      # a new one at every add
        self.covered = 0            # the previous step's version when this step's authors were found to cover its own
        self._by_author: dict[str, list[Message]] | None = None
        self._contents: dict = {}   # field -> every author's contents of the whole step
        self._latest: dict = {}     # field -> every author's latest over the whole step (a Latest)

    def add(self, batch: Batch) -> None:
        """File ``batch`` after every batch of an earlier or the same round, and bring what was
        gathered up to date: a batch of the latest round extends the per-author lists and folds
        into each kept latest (a round's latest is then one fold, not a fold of every round
        again); one of an earlier round drops them, to be built again in round order."""
        self.version = next(_versions)
        self._contents.clear()
        batches = self.batches
        if not batches or batches[-1].round <= batch.round:
            batches.append(batch)
            if self._by_author is not None:
                add = self._by_author.setdefault
                for m in batch.messages():
                    add(m[0], []).append(m)
            for field, latest in list(self._latest.items()):
                try:
                    fold((batch,), field, latest)
                except FIELD_ERRORS:        # some new content lacks the field: the read says which
                    del self._latest[field]
        else:
            batches.insert(next(i for i, b in enumerate(batches) if b.round > batch.round), batch)
            self._by_author = None
            self._latest.clear()
        self.last_round = max(self.last_round, batch.round)

    def seen_before(self, below: float) -> bool:
        """Some batch of a round before ``below`` exists."""
        return bool(self.batches) and self.batches[0].round < below

    def whole(self, below: float) -> bool:
        """Every round of the step is before ``below``."""
        return self.last_round < below

    def by_author(self) -> dict[str, list[Message]]:
        """Each author's messages of the step, in round order (posting order within a round)."""
        found = self._by_author
        if found is None:
            found = self._by_author = {}
            add = found.setdefault
            for b in self.batches:
                for m in b.messages():
                    add(m[0], []).append(m)
        return found

    def messages(self, below: float) -> list[Message]:
        """The step's messages of rounds before ``below``, author by author (what a read saw)."""
        return [m for ms in self.by_author().values() for m in ms if m[2] < below]

    def contents(self, field: str | None, below: float) -> dict[str, list]:
        """Each author's contents (or their ``field``) of rounds before ``below``, in round order;
        the whole step's are kept for the next read. Do not change what it returns."""
        if self.whole(below):
            found = self._contents.get(field)
            if found is None:
                found = self._contents[field] = _contents(self.by_author(), field, below)
            return found
        return _contents(self.by_author(), field, below)

    def latest(self, field: str | None, below: float) -> Latest:
        """Each author's latest content (or its ``field``) of rounds before ``below``; the whole
        step's is kept (and folded forward by ``add``). Raises when any content read lacks the
        field. Do not change what it returns."""
        if self.whole(below):
            found = self._latest.get(field)
            if found is None:
                found = self._latest[field] = fold(self.batches, field)
            return found
        return fold([b for b in self.batches if b.round < below], field)


def _contents(by_author: dict[str, list[Message]], field: str | None, below: float) -> dict[str, list]:
    out = {}
    for a, ms in by_author.items():
        if ms[-1][2] >= below:
            ms = [m for m in ms if m[2] < below]        # sorted by round: the visible prefix
            if not ms:
                continue
        out[a] = [m[3] for m in ms] if field is None else [m[3][field] for m in ms]
    return out
