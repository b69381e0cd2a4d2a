"""Exporting runs as plain files: Parquet (typed) or CSV, for pandas, polars and R.

``desim export studies/x [--run R] --format parquet|csv --out DIR`` writes the
panel (flat: one column per state field, ``payload_<name>`` per payload field),
the initial states, the metrics (wide: one column per metric), the events, the
messages, the edges, every round's actions and the LLM calls when the runs have any
(``round_actions``, ``llm_calls``), ``runs`` (one row per run, its parameters as typed
``param_<name>`` columns, its ``sweep_id``, ``effect_id`` and ``arm``: join it to
the panel on ``run_id``) and ``runs.json`` with each run's seed, parameters and
resolved configuration. Without ``--run`` every run of the study is exported,
each row carrying its ``run_id``.

Beside them a hidden ``.desim-export`` names the files written (``desim.versions.mark_exported``): an
export into the study folder (``--out analysis``) is then not part of the study's next version, as a
file the study's code reads would be.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from desim.store import StudyData
from desim.versions import mark_exported

FORMATS = ("parquet", "csv")


def _plain_text(table: pa.Table) -> pa.Table:
    """JSON columns as text (CSV has no JSON type)."""
    for i, f in enumerate(table.schema):
        if isinstance(f.type, pa.ExtensionType):
            table = table.set_column(i, f.name, table.column(i).cast(f.type.storage_type))
    return table


def csv_options(table: pa.Table) -> pcsv.WriteOptions:
    """Quote values and column names only where needed (Arrow quotes every name by default)."""
    plain = all(not any(c in name for c in ',"\r\n') for name in table.column_names)
    return pcsv.WriteOptions(quoting_style="needed", quoting_header="none" if plain else "needed")


def export(study: str | Path, out: str | Path, run: str | None = None, fmt: str = "parquet") -> list[Path]:
    """Write the run (or every run) to ``out``; returns the files written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format '{fmt}' (use parquet or csv)")
    data = StudyData(study)
    runs = data.run_ids(run) if run else data.runs().column("run_id").to_pylist()
    if not runs:
        raise LookupError(f"{data.db} holds no runs yet")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    every = data.runs()
    chosen = pc.is_in(every.column("run_id"), value_set=pa.array(runs, pa.string()))
    # the runs as a flat table to join on run_id: parameters one typed column each, roles typed too
    flat_runs = every.filter(chosen).drop_columns([c for c in ("config", "parameters", "overrides")
                                                  if c in every.column_names])
    tables = {"panel": data.panel(runs), "initial_states": data.initial_states(runs),
              "metrics": data.metrics(runs), "events": data.events(runs), "messages": data.messages(runs),
              "edges": data.edges(runs), "runs": flat_runs}
    # what only some studies keep: every round's actions (record_rounds) and the LLM calls, when there are any
    for name, table in (("round_actions", data.round_actions(runs)), ("llm_calls", data.llm_calls(runs))):
        if table.num_rows:
            tables[name] = table
    written = []
    for name, table in tables.items():
        path = out / f"{name}.{fmt}"
        if fmt == "parquet":
            pq.write_table(table, path)
        else:
            pcsv.write_csv(_plain_text(table), path, csv_options(table))
        written.append(path)
    rows = data.run_rows(runs)
    for r in rows:
        for key in ("config", "parameters"):
            if isinstance(r.get(key), str):
                r[key] = json.loads(r[key])
    path = out / "runs.json"
    path.write_text(json.dumps(rows, indent=2, default=str) + "\n", encoding="utf-8")
    written.append(path)
    mark_exported(out, [p.name for p in written])
    return written
