"""Counting what the LLM layer did: one row per agent per round, and running totals.

The rows become the store's ``llm_calls`` table (the engine drains them at
each step close and writes them in the step's transaction). ``cached`` rows
cost nothing: their token counts are those of the original reply, for the
record, and only uncached rows add to the counters the budget is checked
against. ``outcome`` is ``ok``, ``fallback`` (the reply was unusable) or
``unavailable`` (no reply: the server failed and the study's
``on_unavailable`` is ``fallback``); ``endpoint`` is the base URL that
answered (none for cached, scripted and unanswered rows).
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

CALLS_SCHEMA = pa.schema([
    ("step", pa.int32()), ("round", pa.int32()), ("agent_id", pa.string()), ("model", pa.string()),
    ("prompt_hash", pa.string()), ("tokens_in", pa.int32()), ("tokens_out", pa.int32()),
    ("latency_ms", pa.float64()), ("cached", pa.bool_()), ("outcome", pa.string()), ("attempts", pa.int32()),
    ("endpoint", pa.string()),
])


class CallLog:
    """Rows for ``llm_calls`` since the last drain, plus totals for the whole run."""

    def __init__(self) -> None:
        self._rows: dict[str, list[Any]] = {name: [] for name in CALLS_SCHEMA.names}
        self.totals = {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cache_hits": 0, "fallbacks": 0,
                       "retries": 0}

    def add(self, *, step: int, round_idx: int, agent_id: str, model: str, prompt_hash: str,
            tokens_in: int, tokens_out: int, latency_ms: float, cached: bool, outcome: str,
            attempts: int, endpoint: str | None = None) -> None:
        row = (step, round_idx, agent_id, model, prompt_hash, tokens_in, tokens_out, latency_ms, cached,
               outcome, attempts, endpoint)
        for name, value in zip(CALLS_SCHEMA.names, row):
            self._rows[name].append(value)
        t = self.totals
        if cached:
            t["cache_hits"] += 1
        elif outcome != "unavailable":
            t["calls"] += 1
            t["tokens_in"] += tokens_in
            t["tokens_out"] += tokens_out
        if outcome != "ok":
            t["fallbacks"] += 1

    def drain(self) -> pa.Table:
        """The rows since the last drain, as an Arrow table in ``CALLS_SCHEMA``; the buffer is cleared."""
        table = pa.table(self._rows, schema=CALLS_SCHEMA)
        self._rows = {name: [] for name in CALLS_SCHEMA.names}
        return table
