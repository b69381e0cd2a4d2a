"""The LLM reply cache: every reply the server gave, keyed by a hash of the request.

The key is the sha256 of (model, messages, sampling parameters, sampling
seed) as canonical JSON. Anything that changes what the server would be
asked changes the key; nothing else does (in particular not the API key or
the server URL, so a cache filled against one server replays against
another). A re-run, a branch or a resumed run that renders the same prompts
makes no calls.

The cache is a DuckDB file (``StudyLayout.llm_cache``: ``<study>/runs/llm_cache.duckdb`` by default),
separate from the panel store so it can be copied, shared between people or
merged (``INSERT OR IGNORE INTO llm_cache SELECT * FROM other.llm_cache``).
Look-ups and inserts are one bulk query per round. Replies are handed to
the cache when a round ends, whether it ended well or not, and written by a
thread of their own while the next round runs (an insert costs 10-30 ms of
DuckDB work and commit, a good part of a round against a fast server);
look-ups see the replies still being written, and closing the cache waits
for them, so a stop or a failed run loses no reply that was paid for.

DuckDB lets one process at a time open a file. A run holds its cache open (a look-up then costs no
opening); the runs of a sweep, in processes side by side, share the study's cache by opening it for each
look-up and each write only (``shared``, about 20 ms each), waiting their turn while another holds it.
"""
from __future__ import annotations

import hashlib
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from desim.store.connection import StoreError

SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key VARCHAR PRIMARY KEY, model VARCHAR NOT NULL, content VARCHAR,
    tokens_in INTEGER, tokens_out INTEGER, created_at TIMESTAMP DEFAULT current_timestamp
)
"""


def request_key(model: str, messages: list[dict[str, str]], params: dict[str, Any], seed: int | None) -> str:
    """The cache key of one request (also stored as ``prompt_hash`` in ``llm_calls``)."""
    blob = orjson.dumps({"model": model, "messages": messages, "params": params, "seed": seed},
                        option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


SHARED_ACCESS = False
"""Whether caches opened in this process are ``shared`` (opened for each use): set by :func:`shared_access`
around a sweep worker's run, whose cache other processes use at the same time."""


@contextmanager
def shared_access():
    """Inside it, reply caches are opened for each look-up and write, not held: for the runs of a sweep."""
    global SHARED_ACCESS
    before, SHARED_ACCESS = SHARED_ACCESS, True
    try:
        yield
    finally:
        SHARED_ACCESS = before


class ReplyCacheError(StoreError):
    """The reply cache cannot be opened or written."""


@dataclass(frozen=True)
class CachedReply:
    content: str
    tokens_in: int
    tokens_out: int


class ReplyCache:
    """A read-write connection to one cache file, held for a run (or opened for each use: ``shared``), with one
    writer thread."""

    def __init__(self, path: str | Path, attempts: int = 40, wait_s: float = 0.25, shared: bool | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.attempts, self.wait_s = attempts, wait_s
        self._one_at_a_time = threading.Lock()
        self.shared = SHARED_ACCESS if shared is None else shared
        con = self._open()
        con.execute(SCHEMA)
        if self.shared:
            con.close()
            self.con = self._writer_con = None
        else:
            self.con = con
            self._writer_con = self.con.cursor()          # its own connection to the same database
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="desim-llm-cache")
        self._writing: dict[str, CachedReply] = {}    # handed over, not yet committed
        self._lock = threading.Lock()
        self._error: Exception | None = None

    def _open(self) -> duckdb.DuckDBPyConnection:
        """A connection to the file, waiting (``attempts`` x ``wait_s``) while another process holds it."""
        for attempt in range(self.attempts):
            try:
                return duckdb.connect(str(self.path))
            except duckdb.IOException as e:
                if "lock" not in str(e).lower():      # not a busy file: a broken one, said at once
                    raise ReplyCacheError(f"cannot open the LLM reply cache {self.path}: {e} Move the file aside "
                                          "(a run starts a new cache) or point llm.cache_path elsewhere") from None
                if attempt == self.attempts - 1:
                    raise ReplyCacheError(
                        f"cannot open the LLM reply cache {self.path}: another process has held it for "
                        f"{self.attempts * self.wait_s:g} s ({e}). A run holds its cache while it runs: wait for it, "
                        "or give this run its own llm.cache_path") from None
                time.sleep(self.wait_s)
        raise AssertionError("unreachable")

    @contextmanager
    def _connection(self, writer: bool = False):
        """The held connection (the writer thread's own cursor for writes), or one opened for this use."""
        if not self.shared:
            yield self._writer_con if writer else self.con
            return
        with self._one_at_a_time:       # one connection in this process at a time: a look-up and the writer
            con = self._open()          # thread each opening the file at once confuse DuckDB's shared instance
            try:
                yield con
            finally:
                con.close()

    def get_many(self, keys: list[str]) -> dict[str, CachedReply]:
        if not keys:
            return {}
        with self._lock:
            found = {k: self._writing[k] for k in keys if k in self._writing}
        wanted = pa.table({"key": pa.array([k for k in keys if k not in found], pa.string())})
        with self._connection() as con:
            con.register("_wanted", wanted)
            try:
                rows = con.execute("SELECT c.key, c.content, c.tokens_in, c.tokens_out FROM llm_cache c "
                                   "JOIN _wanted w ON c.key = w.key").fetchall()
            finally:
                con.unregister("_wanted")
        found.update({k: CachedReply(content, tin or 0, tout or 0) for k, content, tin, tout in rows})
        return found

    def put_many(self, rows: list[tuple[str, str, str, int, int]]) -> None:
        """Store ``(key, model, content, tokens_in, tokens_out)`` rows (known keys are kept as they are);
        the write happens on the writer thread, and its error, if any, is raised by the next call."""
        self._check()
        if not rows:
            return
        with self._lock:
            for key, _, content, tin, tout in rows:
                self._writing.setdefault(key, CachedReply(content, tin, tout))
        self._writer.submit(self._write, rows)

    def _write(self, rows: list[tuple[str, str, str, int, int]]) -> None:
        try:
            self._insert(rows)
        except Exception as e:  # noqa: BLE001 - reported by the next put_many or flush
            self._error = self._error or e
            return                       # the rows stay in _writing: this run still finds them
        with self._lock:                 # committed: look-ups find these rows in the table now
            for r in rows:
                self._writing.pop(r[0], None)

    def _insert(self, rows: list[tuple[str, str, str, int, int]]) -> None:
        table = pa.table({
            "key": pa.array([r[0] for r in rows], pa.string()),
            "model": pa.array([r[1] for r in rows], pa.string()),
            "content": pa.array([r[2] for r in rows], pa.string()),
            "tokens_in": pa.array([r[3] for r in rows], pa.int32()),
            "tokens_out": pa.array([r[4] for r in rows], pa.int32())})
        with self._connection(writer=True) as con:
            con.register("_new", table)
            try:
                con.execute("INSERT OR IGNORE INTO llm_cache (key, model, content, tokens_in, tokens_out) "
                            "SELECT DISTINCT ON (key) key, model, content, tokens_in, tokens_out FROM _new")
            finally:
                con.unregister("_new")

    def _check(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise ReplyCacheError(f"cannot write the LLM reply cache {self.path}: {error}")

    def flush(self) -> None:
        """Wait until every reply handed over is written; raise if a write failed."""
        self._writer.submit(lambda: None).result()
        self._check()

    def close(self) -> None:
        """Write what is pending and close. A failed last write is a warning here, not an error: the
        run's panel is complete, only a re-run would pay for those replies again."""
        try:
            self.flush()
        except ReplyCacheError as e:
            warnings.warn(str(e), RuntimeWarning, stacklevel=2)
        finally:
            self._writer.shutdown(wait=True)
            for con in (self._writer_con, self.con):
                try:
                    if con is not None:
                        con.close()
                except duckdb.Error:
                    pass
