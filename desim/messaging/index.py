"""Where each reader's neighbours sit among a batch read's authors: how ``NeighborFeed`` turns a
bus's answer by author (:class:`desim.messaging.batches.ByAuthor`) into each reader's list.

Why positions: in the usual run every step's read has the same authors in the same order (each
agent posts once a round, in population order), so each reader's neighbours are found among
them once, and every later read is one C call a reader (an ``itemgetter`` over the contents
list), with no look-up by id.
"""
from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Callable, Iterable

chain_from = chain.from_iterable


def _nothing(contents: list) -> tuple:
    return ()


def _one(position: int) -> Callable[[list], tuple]:
    return lambda contents: (contents[position],)


class ReadIndex:
    """Each reader's neighbours' positions among one list of authors, as a getter a reader.

    The one rule that keeps it right: an index serves only a read whose authors equal the list it
    was made for (``fits``, compared by value, in C, against its own copy); any other read gets a
    new index. Nothing else can make it stale: a post changes either the authors a bus answers
    for, or only the contents read at their positions; the network is fixed for a run.
    """

    __slots__ = ("authors", "_position", "_neighbours", "_rows", "_readers", "_readers_rows")

    def __init__(self, authors: list, neighbours: Callable[[str], tuple[str, ...]]):
        self.authors = list(authors)
        self._position = {a: i for i, a in enumerate(self.authors)}     # an author listed twice: its last
        self._neighbours = neighbours
        self._rows: dict[str, Callable[[list], tuple]] = {}             # reader -> its getter
        self._readers: list | None = None       # the readers of the last gather (its own copy) ...
        self._readers_rows: list = []           # ... and their getters, for a round read by the same readers

    def fits(self, authors: list) -> bool:
        return authors == self.authors

    def gather(self, readers: list, contents: list, chained: bool) -> list[list]:
        """Each reader's neighbours' contents, in neighbour order: ``contents[i]`` is the value of
        ``authors[i]``, one content (``chained`` false) or a list of them."""
        rows = self._rows_of(readers)
        if chained:
            return [list(chain_from(get(contents))) for get in rows]
        return [list(get(contents)) for get in rows]

    def _rows_of(self, readers: list) -> list:
        if readers == self._readers:        # the same readers as the last round: compared by value, in C
            return self._readers_rows
        rows = self._rows
        found = [rows[a] if a in rows else self._row(a) for a in readers]
        self._readers, self._readers_rows = list(readers), found
        return found

    def _row(self, reader: str) -> Callable[[list], tuple]:
        position = self._position
        at = [position[n] for n in self._neighbours(reader) if n in position]
        row = itemgetter(*at) if len(at) > 1 else _one(at[0]) if at else _nothing
        self._rows[reader] = row
        return row


def unique_neighbours(readers: Iterable[str], neighbours: Callable[[str], tuple[str, ...]]):
    """The readers' neighbours, each once, in order of first appearance; a generator, so a bus
    that answers for every author and never reads it costs nothing."""
    yield from dict.fromkeys(chain_from(map(neighbours, readers)))
