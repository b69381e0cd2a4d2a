"""Exporting runs as plain files: Parquet (typed) or CSV, for pandas, polars and R.

``desim export studies/x [--run R] --format parquet|csv --out DIR`` writes the
panel (flat: one column per state field, ``payload_<name>`` per payload field),
the initial states, the metrics (wide: one column per metric), the events, the
messages, the edges, every round's actions and the LLM calls when the runs have any
(``round_actions``, ``llm_calls``), ``runs`` (one row per run, its parameters as typed
``param_<name>`` columns, its ``sweep_id``, ``effect_id`` and ``arm``: join it to
the panel on ``run_id``) and ``runs.json`` with each run's seed, parameters and
resolved configuration. When the runs belong to effects or sweeps, the catalogue's rows
of them too: ``effect_pairs`` (every pair a run is the control or the treatment of: a
control reused by several effects is in each), ``effects`` and ``sweeps``. Without
``--run`` every run of the study is exported, each row carrying its ``run_id``. Each
file's columns and types: docs/export.md.

Beside them a hidden ``.desim-export`` names the files written (``desim.versions.mark_exported``): an
export into the study folder (``--out analysis``) is then not part of the study's next version, as a
file the study's code reads would be. The same marker says which files an export may replace: exporting
again into a folder an export made replaces its files, but a file of the user's own of the same name
(``panel.csv`` from elsewhere) is refused, and so is any folder inside the study's store (``runs/``),
whose Parquet files are the study's data.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from desim.errors import DesimNotice
from desim.store import StudyData
from desim.store.layout import StudyLayout
from desim.versions import exported_files, mark_exported

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


def _store_folder(layout: StudyLayout) -> Path:
    """The folder whose files are the store's: a study's whole ``runs/`` (its database, run data, live files,
    reports); for a store kept in a ``.duckdb`` file elsewhere, its data folder beside that file."""
    return layout.runs if layout.db.parent == layout.runs else layout.data


def check_out(layout: StudyLayout, out: Path, names: list[str]) -> None:
    """Refuse an export to ``out`` that would overwrite what it does not own: a ``ValueError`` when ``out`` is
    inside the store (an export there replaced a run's own Parquet files, and the run read back doubled), a
    ``FileExistsError`` naming the first of ``names`` in ``out`` that no earlier export wrote (its marker)."""
    store = _store_folder(layout)
    if out.resolve().is_relative_to(store.resolve()):
        where = "is" if out.resolve() == store.resolve() else "is inside"
        raise ValueError(f"cannot export into {out}: it {where} {store}, the study's store, whose files are its "
                         f"runs' data; export to a folder outside it (e.g. {layout.root / 'analysis'})")
    ours = exported_files(out)
    theirs = [n for n in names if n not in ours and ((out / n).exists() or (out / n).is_symlink())]
    if theirs:
        more = f" (and {len(theirs) - 1} more: {', '.join(theirs[1:])})" if len(theirs) > 1 else ""
        raise FileExistsError(f"cannot export into {out}: {out / theirs[0]} exists and no earlier desim export "
                              f"wrote it{more}; export to another folder, or remove {'them' if more else 'it'} first")


def _make_folder(out: Path) -> None:
    """Create ``out``; a folder the system will not make (a file in its way, no permission, a read-only or
    virtual file system such as ``/proc``) is a ``ValueError`` naming it, like the other refusals of ``out``,
    rather than the ``OSError`` of whichever parent failed."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        at = f" ({e.filename})" if e.filename and str(e.filename) != str(out) else ""
        raise ValueError(f"cannot export into {out}: the folder cannot be made{at}: {e.strerror or e}") from None


def export(study: str | Path, out: str | Path, run: str | None = None, fmt: str = "parquet") -> list[Path]:
    """Write the run (or every run) to ``out``; returns the files written. Refused, before anything is written,
    when ``out`` is inside the store or holds a file of the same name that an earlier export did not write
    (:func:`check_out`).

    A run still going is exported up to the last step it had stored when the export began (every table of it
    cut at that one step, :func:`_cut`): each table is read by a query of its own, and the run would otherwise
    have added steps between them (a panel to step 1130 beside metrics to step 1797). A
    :class:`~desim.errors.DesimNotice` says so, and its ``status`` (``running``) and ``last_step`` in ``runs``
    and ``runs.json`` say how far it was exported."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format '{fmt}' (use parquet or csv)")
    if run is not None and not run.strip():
        # an empty id is a mistake (an unset shell variable: --run "$RUN"), not "every run"
        raise ValueError(f"--run {run!r} names no run: give a run id (desim runs lists them), or leave --run out "
                         "to export every run")
    data = StudyData(study)
    # read once, before any table: a running run's status and the last step it has stored, where its tables
    # are cut; runs() corrects the catalogue's row (a killed run is 'stale', last_step its last stored step)
    every = data.runs()
    runs = data.run_ids(run) if run is not None else every.column("run_id").to_pylist()
    if not runs:
        raise LookupError(f"{data.db} holds no runs yet")
    out = Path(out)
    chosen = pc.is_in(every.column("run_id"), value_set=pa.array(runs, pa.string()))
    # the runs as a flat table to join on run_id: parameters one typed column each, roles typed too; what a
    # run changed by hand (overrides: --set, --steps, a branch's --set) and its code's hashes as JSON text
    flat_runs = every.filter(chosen).drop_columns([c for c in ("config", "parameters") if c in every.column_names])
    cuts = {r["run_id"]: r["last_step"] for r in flat_runs.select(["run_id", "status", "last_step"]).to_pylist()
            if r["status"] in UNFINISHED}
    tables = {"panel": data.panel(runs), "initial_states": data.initial_states(runs),
              "metrics": data.metrics(runs), "events": data.events(runs), "messages": data.messages(runs),
              "edges": data.edges(runs)}
    # what only some studies keep: every round's actions (record_rounds) and the LLM calls, when there are any
    for name, table in (("round_actions", data.round_actions(runs)), ("llm_calls", data.llm_calls(runs))):
        if table.num_rows:
            tables[name] = table
    tables = {name: _cut(table, cuts) for name, table in tables.items()}
    tables["runs"] = flat_runs
    # what the runs belong to, as the catalogue holds it, for an effect or a sweep to be rebuilt from the files:
    # runs' effect_id and arm give each run one label, and a control several effects reused names one of them
    for name, table in (("effect_pairs", data.effect_pairs(runs)), ("effects", data.effects(runs)),
                        ("sweeps", data.sweeps(runs))):
        if table.num_rows:
            tables[name] = table
    names = [f"{name}.{fmt}" for name in tables] + ["runs.json"]
    check_out(data.layout, out, names)
    _make_folder(out)
    # the marker first: an export stopped half-way leaves files it owns, which the next export may replace
    earlier = exported_files(out)
    mark_exported(out, names)
    written = []
    for name, table in tables.items():
        path = out / f"{name}.{fmt}"
        if fmt == "parquet":
            pq.write_table(table, path)
        else:
            pcsv.write_csv(_plain_text(table), path, csv_options(table))
        written.append(path)
    # the catalogue's rows, with the status and last step runs() gave (the same as in the runs table): the
    # row of a run going, or killed, says 'running' and -1 until the run ends
    corrected = {r["run_id"]: r for r in flat_runs.select(["run_id", "status", "last_step"]).to_pylist()}
    rows = data.run_rows(runs)
    for r in rows:
        r["status"], r["last_step"] = corrected[r["run_id"]]["status"], corrected[r["run_id"]]["last_step"]
        for key in ("config", "parameters", "overrides", "code"):     # JSON columns as values, not text
            if isinstance(r.get(key), str):
                r[key] = json.loads(r[key])
    path = out / "runs.json"
    path.write_text(json.dumps(rows, indent=2, default=str) + "\n", encoding="utf-8")
    written.append(path)
    # the folder holds this export alone: a table an earlier export wrote and this one has not (its
    # round_actions, another format's files) would be read beside it as if it were this run's
    for name in sorted(earlier - set(names)):
        (out / name).unlink(missing_ok=True)
    mark_exported(out, names, replace=True)
    for run_id, last in cuts.items():
        if corrected[run_id]["status"] == "running":
            warnings.warn(DesimNotice(
                f"run {run_id} was still running when the export began: every table of it is exported up to step "
                f"{last}, the last step it had stored then (runs.json and runs say status 'running', last_step "
                f"{last}); export it again once it has ended for the rest"), stacklevel=2)
    return written


UNFINISHED = ("running", "stale")
"""The statuses ``StudyData.runs`` gives a run whose catalogue row still says ``running``: one going, and one
whose process is gone (killed) that may still be resumed. Their tables are cut at ``last_step``."""


def _cut(table: pa.Table, cuts: dict[str, int]) -> pa.Table:
    """``table`` without the rows of a run of ``cuts`` (run id -> its last step) past that step: a run going adds
    steps while the export reads table after table, and each table must stop where the others do. A table
    without steps (``initial_states``, ``edges``: written with step 0) keeps a run's rows once step 0 is stored."""
    if not cuts or not table.num_rows:
        return table
    past = None
    for run_id, last in cuts.items():
        later = pc.greater(table.column("step"), last) if "step" in table.column_names else pa.scalar(last < 0)
        drop = pc.and_(pc.equal(table.column("run_id"), run_id), later)
        past = drop if past is None else pc.or_(past, drop)
    return table.filter(pc.invert(past))
