"""The paid LLM calls a run has not written to its ``llm_calls`` yet, kept in a small file of the run.

A step that never closes is not written, nor are its ``llm_calls`` rows, though its replies were paid
for. The LLM decision model keeps those rows here (``StudyLayout.llm_unrecorded``) after every round
that paid, and the run's next invocation writes them with that step as ``abandoned`` rows
(``desim.llm.accounting``), so a paid call is never lost from the accounting.

A sweep's or an effect's run is written to a worker's own store; when the process running it is killed
(SIGKILL, a lost node), nobody merges that store, and the next ``--resume`` runs the run again from step
0 (taking the replies from the cache, free). The steps the killed attempt had closed hold paid rows
too: :func:`keep_paid_calls` adds them to this file before the leftover store is removed, so the
attempt that runs again writes them, and the usual query of paid rows still gives the run's whole cost.

Until then these rows are in no table: :func:`unrecorded_calls` reads them for the spend summaries
(``queries.llm_by_run`` and ``queries.llm_spend``), which count them with the run's ``llm_calls`` rows.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from desim.errors import DesimNotice, StoreError
from desim.store import journal
from desim.store.files import LLM_CALLS_READ, paid_as_abandoned
from desim.store.layout import StudyLayout, layout_of


def load_ledger(path: Path) -> list[dict[str, Any]]:
    """The rows kept by an earlier invocation of the run (none if it kept none); a file that is not such a list
    (damaged: it is replaced whole, so only a disk or a hand can do it) is a :class:`StoreError` naming it."""
    try:
        rows = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except ValueError as e:
        rows = e
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise StoreError(f"{path} is damaged ({rows if isinstance(rows, Exception) else 'not a list of rows'}): it "
                         "keeps the paid LLM calls of a step its run never closed; move it aside to go on without "
                         "them (the replies stay in the reply cache)")
    return rows


def save_ledger(path: Path, rows: list[dict[str, Any]]) -> None:
    """Keep ``rows`` (replacing what was kept), or remove the file when there is nothing to keep."""
    if not rows:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(rows))
    os.replace(tmp, path)          # a reader sees the old rows or the new, never half a file


UNRECORDED_SCHEMA = pa.schema([pa.field("run_id", pa.string())] + [
    LLM_CALLS_READ.field(name) for name in ("step", "round", "model", "cached", "outcome", "tokens_in", "tokens_out")])
"""What the spend summaries read of the kept rows: the ``llm_calls`` columns that say whether and what a row cost,
typed as the ``llm_calls`` view reads them (the summaries count both together)."""


def unrecorded_calls(study: "str | Path | StudyLayout", run_ids: list[str] | None = None) -> pa.Table:
    """The rows the runs ``run_ids`` (every run, by default) keep in their ledgers, with their run id, in
    :data:`UNRECORDED_SCHEMA`: for ``queries.llm_by_run``, which counts those of steps not written yet."""
    layout = layout_of(study)
    files = (layout.llm_unrecorded_files() if run_ids is None
             else {run_id: layout.llm_unrecorded(run_id) for run_id in dict.fromkeys(run_ids)})
    columns: dict[str, list[Any]] = {name: [] for name in UNRECORDED_SCHEMA.names}
    for run_id, path in files.items():
        try:
            kept = load_ledger(path)
        except StoreError as e:     # a summary goes on without it, and says so
            warnings.warn(DesimNotice(f"{e}; left out of what the runs paid for"), stacklevel=2)
            continue
        for row in kept:
            columns["run_id"].append(run_id)
            for name in UNRECORDED_SCHEMA.names[1:]:
                columns[name].append(row.get(name))
    return pa.table(columns, schema=UNRECORDED_SCHEMA)


def _left_calls(folder: Path) -> pa.Table | None:
    """The ``llm_calls`` rows a run's folder holds: merged, or the journal's committed steps."""
    merged = folder / "llm_calls.parquet"
    if merged.exists():
        return pq.read_table(merged)
    _, logged = journal.read(folder / "journal")
    batches = logged.get("llm_calls", [])
    if not batches:
        return None
    schema = journal.unified(batches)
    return pa.Table.from_batches([journal.conform(b, schema) for b in batches], schema)


def keep_paid_calls(worker_file: str | Path, run_id: str, study_root: str | Path) -> int:
    """Before a worker's leftover store of ``run_id`` (a killed attempt) is removed, add the paid calls of
    the steps it closed to the run's ledger in the study, for the next attempt to write. Returns how many."""
    calls = _left_calls(StudyLayout.at(worker_file).run_dir(run_id))
    if calls is None or not calls.num_rows:
        return 0
    rows = paid_as_abandoned(calls).to_pylist()
    if not rows:
        return 0
    path = StudyLayout(Path(study_root)).llm_unrecorded(run_id)
    kept = load_ledger(path)
    new = [r for r in rows if r not in kept]        # a crash before the leftover went: not kept twice
    save_ledger(path, kept + new)
    return len(new)
