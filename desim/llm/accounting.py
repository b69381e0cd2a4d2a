"""Counting what the LLM layer did: one row per agent per round, and running totals.

The rows become the store's ``llm_calls`` table (the engine drains them at
each step close and writes them in the step's transaction). ``cached`` rows
cost nothing: their token counts are those of the original reply, for the
record, and only uncached rows add to the counters the budget is checked
against. Scripted rows (``model = 'scripted'``, no server) cost nothing
either: they are counted as ``scripted``, never as ``calls`` or tokens, and
their token counts are estimates, for the record. ``outcome`` is ``ok``,
``fallback`` (the reply was unusable), ``unavailable`` (no reply: the server
failed and the study's ``on_unavailable`` is ``fallback``) or ``abandoned``
(a reply paid for in a step that never closed: below); ``attempts`` is the
number of HTTP attempts the request sent, answered or not, so
``sum(attempts - 1)`` over the uncached rows is the ``retries`` counter;
``endpoint`` is the base URL that answered (none for cached, scripted and
unanswered rows).

A step that never closes (the run failed or was interrupted in it) is not
written, so neither are its rows, though its replies were paid for (and
cached). So that a paid call never vanishes from the accounting, the
decision model keeps those rows in a small file of the run
(:func:`ledger_path`) after every round that paid and when it closes (so
a killed process keeps all but the round in flight); the resumed run loads them
(:meth:`CallLog.carry`) and hands them over with the rows of that step when
it closes again, as ``abandoned`` rows. They were paid by the earlier
invocation, so they add nothing to this invocation's counters or budget.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from desim.store.files import LLM_CALLS_WRITTEN
from desim.store.ledger import load_ledger, save_ledger  # noqa: F401 - the file is the store's; the LLM layer keeps rows in it

CALLS_SCHEMA = LLM_CALLS_WRITTEN
"""The rows' columns: the store's, as a run writes them (the store owns the ``llm_calls`` table's schema)."""


class CallLog:
    """Rows for ``llm_calls`` since the last drain, plus totals for the whole run."""

    def __init__(self) -> None:
        self._rows: dict[str, list[Any]] = {name: [] for name in CALLS_SCHEMA.names}
        self._paid: list[bool] = []        # per buffered row: a server's reply this invocation paid for
        self._carried: list[dict[str, Any]] = []
        self.totals = {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cache_hits": 0, "fallbacks": 0,
                       "retries": 0, "scripted": 0}
        self.outcomes: dict[str, int] = {}      # this invocation's rows by outcome: what a warning is made of

    def add(self, *, step: int, round_idx: int, agent_id: str, model: str, prompt_hash: str,
            tokens_in: int, tokens_out: int, latency_ms: float, cached: bool, outcome: str,
            attempts: int, endpoint: str | None = None, scripted: bool = False) -> None:
        """One row, counted: a cache hit, a scripted reply (free), or a request sent to a server
        (a paid call when it got a reply; its retries either way)."""
        row = (step, round_idx, agent_id, model, prompt_hash, tokens_in, tokens_out, latency_ms, cached,
               outcome, attempts, endpoint)
        self._append(row)
        t = self.totals
        paid = not cached and not scripted and outcome != "unavailable"
        self._paid.append(paid)
        if cached:
            t["cache_hits"] += 1
        elif scripted:
            t["scripted"] += 1
        else:
            t["retries"] += max(attempts - 1, 0)
            if paid:
                t["calls"] += 1
                t["tokens_in"] += tokens_in
                t["tokens_out"] += tokens_out
        if outcome in ("fallback", "unavailable"):
            t["fallbacks"] += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def fallback_warning(self, share: float = 0.1) -> str | None:
        """Said when ``share`` or more of this invocation's decisions fell back to the study's rule: the run
        completed, but its panel is largely the rule's, which a status of ``completed`` alone hides."""
        asked = sum(self.outcomes.values())
        unusable, unanswered = self.outcomes.get("fallback", 0), self.outcomes.get("unavailable", 0)
        fell = unusable + unanswered
        if not fell or fell < share * asked:
            return None
        why = ", ".join(f"{n:,} {what}" for n, what in ((unusable, "unusable replies"),
                                                         (unanswered, "unanswered requests")) if n)
        return (f"{fell:,} of {asked:,} LLM decisions ({100 * fell / asked:.0f} %) fell back to the study's rule "
                f"({why}): the panel holds the rule's actions for them (action_source 'fallback'), and "
                "llm_calls.outcome says which")

    def _append(self, row: tuple) -> None:
        for name, value in zip(CALLS_SCHEMA.names, row):
            self._rows[name].append(value)

    def carry(self, rows: list[dict[str, Any]]) -> None:
        """Rows an earlier invocation of this run paid for in a step it never closed: drained with that
        step (:meth:`drain`), counted in no total (this invocation did not pay for them)."""
        self._carried.extend(rows)

    def unrecorded(self) -> list[dict[str, Any]]:
        """The paid calls not handed to the store yet: rows of the step in flight that got a reply, as
        ``abandoned`` rows, and carried rows whose step this invocation did not reach."""
        rows = [dict(zip(CALLS_SCHEMA.names, values)) for values in zip(*self._rows.values())]
        kept = [{**row, "outcome": "abandoned"} for row, paid in zip(rows, self._paid) if paid]
        return self._carried + kept

    def drain(self, step: int | None = None) -> pa.Table:
        """The rows since the last drain, as an Arrow table in ``CALLS_SCHEMA``; the buffer is cleared.

        ``step`` is the step closing: carried rows of that step (or an earlier one) go with it."""
        if step is not None and self._carried:
            due = [r for r in self._carried if r["step"] <= step]
            self._carried = [r for r in self._carried if r["step"] > step]
            for row in due:
                self._append(tuple(row[name] for name in CALLS_SCHEMA.names))
        table = pa.table(self._rows, schema=CALLS_SCHEMA)
        self._rows = {name: [] for name in CALLS_SCHEMA.names}
        self._paid = []
        return table


def ledger_path(study_root: Path, run_id: str) -> Path:
    """Where a run keeps the paid calls of a step it never closed (the study's layout says)."""
    from desim.store.layout import StudyLayout
    return StudyLayout(study_root).llm_unrecorded(run_id)
