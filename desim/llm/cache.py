"""The reply cache: every reply the server gave, keyed by a hash of the request.

The key is the sha256 of (model, messages, sampling parameters, sampling
seed) as canonical JSON. Anything that changes what the server would be
asked changes the key; nothing else does (in particular not the API key or
the server URL, so a cache filled against one server replays against
another). A re-run, a branch or a resumed run that renders the same prompts
makes no calls.

The cache is a DuckDB file (``<study>/runs/llm_cache.duckdb`` by default),
separate from the panel store so it can be copied, shared between people or
merged (``INSERT OR IGNORE INTO llm_cache SELECT * FROM other.llm_cache``).
Look-ups and inserts are one bulk query per round. Replies are written when
a round ends, whether it ended well or not, so a crash or a stop loses no
reply that was paid for.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from .errors import LLMError

SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key VARCHAR PRIMARY KEY, model VARCHAR NOT NULL, content VARCHAR,
    tokens_in INTEGER, tokens_out INTEGER, created_at TIMESTAMP DEFAULT current_timestamp
)
"""


def request_key(model: str, messages: list[dict[str, str]], params: dict[str, Any], seed: int | None) -> str:
    """The cache key of one request (also stored as ``prompt_hash`` in ``llm_calls``)."""
    blob = json.dumps({"model": model, "messages": messages, "params": params, "seed": seed},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    content: str
    tokens_in: int
    tokens_out: int


class ReplyCache:
    """A read-write connection to one cache file, held for a run."""

    def __init__(self, path: str | Path, attempts: int = 40, wait_s: float = 0.25):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(attempts):
            try:
                self.con = duckdb.connect(str(self.path))
                break
            except duckdb.IOException as e:
                if attempt == attempts - 1:
                    raise LLMError(f"cannot open the LLM reply cache {self.path}: {e}. Another run is "
                                   "using it; wait for it, or give this run its own llm.cache_path") from None
                time.sleep(wait_s)
        self.con.execute(SCHEMA)

    def get_many(self, keys: list[str]) -> dict[str, CachedReply]:
        if not keys:
            return {}
        wanted = pa.table({"key": pa.array(keys, pa.string())})
        self.con.register("_wanted", wanted)
        try:
            rows = self.con.execute("SELECT c.key, c.content, c.tokens_in, c.tokens_out FROM llm_cache c "
                                    "JOIN _wanted w ON c.key = w.key").fetchall()
        finally:
            self.con.unregister("_wanted")
        return {k: CachedReply(content, tin or 0, tout or 0) for k, content, tin, tout in rows}

    def put_many(self, rows: list[tuple[str, str, str, int, int]]) -> None:
        """Store ``(key, model, content, tokens_in, tokens_out)`` rows; known keys are kept as they are."""
        if not rows:
            return
        table = pa.table({
            "key": pa.array([r[0] for r in rows], pa.string()),
            "model": pa.array([r[1] for r in rows], pa.string()),
            "content": pa.array([r[2] for r in rows], pa.string()),
            "tokens_in": pa.array([r[3] for r in rows], pa.int32()),
            "tokens_out": pa.array([r[4] for r in rows], pa.int32())})
        self.con.register("_new", table)
        try:
            self.con.execute("INSERT OR IGNORE INTO llm_cache (key, model, content, tokens_in, tokens_out) "
                             "SELECT DISTINCT ON (key) key, model, content, tokens_in, tokens_out FROM _new")
        finally:
            self.con.unregister("_new")

    def close(self) -> None:
        try:
            self.con.close()
        except duckdb.Error:
            pass
