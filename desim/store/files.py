"""A run's data on disk: one folder of Parquet files per closed step.

Layout, in the store's data folder (``StudyLayout.data``: ``studies/<id>/runs/data/``)::

    run_id=<R>/types.json              the run's state and payload field types
    run_id=<R>/steps/000000/           step 0: initial.parquet, edges.parquet,
                                       metrics.parquet, events.parquet, messages.parquet
    run_id=<R>/steps/000007/           step 7: panel.parquet, metrics.parquet, and when the
                                       step has them events, messages, round_actions, llm_calls
    run_id=<R>/panel.parquet, ...      the same tables merged, once the run has ended
    run_id=_/<table>.parquet           empty files that give every view its base columns

Why files and not DuckDB inserts: a step's Parquet files cost about a fifth of
the CPU of inserting the same typed rows into DuckDB and committing, and
nothing per step touches the database, so readers can query a run while it
goes (DuckDB lets one process write a database file, and while it writes no
other process can open it).

A step is durable when it closes: its files are written into a folder under
``.incoming/`` and the folder is renamed into ``steps/`` in one
operation, so a reader (which sees only ``run_id=*`` folders) never sees half a
step, and a crash loses at most the step in flight. When a run ends (completed,
failed or interrupted) its step folders are merged into one file per table and
swapped in with an atomic exchange of folders (``renameat2``), so queries over
many runs read a few files per run instead of one per step.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from desim.store.schema import VIEWS

TABLES = tuple(VIEWS.values())     # a run's data files, one per view (schema.VIEWS names them)

# the columns every view has even before any run wrote a row (state and payload are typed per run)
BASE_COLUMNS = {
    "panel": [("step", pa.int32()), ("agent_id", pa.string()), ("state", pa.null()),
              ("action_kind", pa.string()), ("payload", pa.null()), ("action_source", pa.string()),
              ("action_rationale", pa.string()), ("away", pa.bool_())],
    "initial": [("agent_id", pa.string()), ("state", pa.null())],
    "metrics": [("step", pa.int32()), ("name", pa.string()), ("value", pa.float64())],
    "events": [("step", pa.int32()), ("kind", pa.string()), ("name", pa.string()), ("detail", pa.json_())],
    "messages": [("step", pa.int32()), ("round", pa.int32()), ("author_id", pa.string()),
                 ("channel", pa.string()), ("kind", pa.string()), ("content", pa.json_()),
                 ("audience", pa.string()), ("reply_to", pa.string())],
    "edges": [("source", pa.string()), ("target", pa.string())],
    "round_actions": [("step", pa.int32()), ("round", pa.int32()), ("agent_id", pa.string()),
                      ("action_kind", pa.string()), ("payload", pa.null()), ("action_source", pa.string()),
                      ("action_rationale", pa.string())],
    "llm_calls": [("step", pa.int32()), ("round", pa.int32()), ("agent_id", pa.string()),
                  ("model", pa.string()), ("prompt_hash", pa.string()), ("tokens_in", pa.int64()),
                  ("tokens_out", pa.int64()), ("latency_ms", pa.float64()), ("cached", pa.bool_()),
                  ("outcome", pa.string()), ("attempts", pa.int64()), ("endpoint", pa.string())],
}


def ensure_anchors(data: Path) -> None:
    """Empty files with each table's base columns, so views bind before any run."""
    anchor = data / "run_id=_"
    if all((anchor / f"{t}.parquet").exists() for t in TABLES):
        return
    anchor.mkdir(parents=True, exist_ok=True)
    for table, cols in BASE_COLUMNS.items():
        path = anchor / f"{table}.parquet"
        if not path.exists():
            tmp = anchor / f".{table}-{uuid.uuid4().hex[:6]}.tmp"
            _write(pa.schema(cols).empty_table(), tmp)
            os.replace(tmp, path)


def _write(table: pa.Table, path: Path) -> None:
    # plain encoding for everything but the action kind and source (hashing random floats and ids
    # into dictionaries costs more than it saves); statistics off: the files are partitioned by
    # run and step already, and computing min/max of every column is a third of the write
    if table.num_rows < 256:   # a handful of rows (metrics, events): nothing to gain from encoding
        pq.write_table(table, path, use_dictionary=False, write_statistics=False, compression="none")
        return
    dictionary = [c for c in ("action_kind", "action_source", "name", "kind", "channel")
                  if c in table.column_names]
    pq.write_table(table, path, use_dictionary=dictionary, write_statistics=False, compression="snappy")


class RunFiles:
    """The data folder of one run; ``None`` root keeps nothing (an in-memory probe run)."""

    # step tables kept in memory for the merge at the end, up to this many bytes (past it the
    # merge reads the step files back, which costs about as much again as writing them)
    KEEP_BYTES = 512 * 2**20

    def __init__(self, data: Path | None, run_id: str):
        self.data, self.run_id = data, run_id
        self.dir = data / f"run_id={run_id}" if data else None
        self._kept: dict[int, dict[str, pa.Table]] | None = {}
        self._kept_bytes = 0

    @property
    def on_disk(self) -> bool:
        return self.dir is not None

    def start(self) -> None:
        if not self.on_disk:
            return
        ensure_anchors(self.data)
        (self.dir / "steps").mkdir(parents=True, exist_ok=True)
        (self.data / ".incoming").mkdir(exist_ok=True)

    # --- writing ------------------------------------------------------------------
    def write_step(self, step: int, tables: dict[str, pa.Table | None]) -> None:
        """Every table of one step, made visible at once."""
        if not self.on_disk:
            return
        tmp = self.data / ".incoming" / f"{self.run_id}-{step:06d}-{uuid.uuid4().hex[:6]}"
        tmp.mkdir()
        written = {}
        for name, table in tables.items():
            if table is not None and (table.num_rows or name in ("panel", "initial")):
                _write(table, tmp / f"{name}.parquet")
                written[name] = table
        os.rename(tmp, self.dir / "steps" / f"{step:06d}")
        if self._kept is not None:
            self._kept_bytes += sum(t.nbytes for t in written.values())
            self._kept = None if self._kept_bytes > self.KEEP_BYTES else self._kept
        if self._kept is not None:
            self._kept[step] = written

    def save_types(self, types: dict) -> None:
        if not self.on_disk:
            return
        tmp = self.dir / "types.json.tmp"
        tmp.write_text(json.dumps(types), encoding="utf-8")   # field order is column order
        os.replace(tmp, self.dir / "types.json")

    def load_types(self) -> dict | None:
        path = self.dir / "types.json" if self.on_disk else None
        return json.loads(path.read_text(encoding="utf-8")) if path and path.exists() else None

    # --- reading the progress ---------------------------------------------------------
    def step_folders(self) -> list[int]:
        steps = self.dir / "steps" if self.on_disk else None
        if not steps or not steps.is_dir():
            return []
        return sorted(int(p.name) for p in steps.iterdir() if p.name.isdigit())

    def last_step(self) -> int:
        """The last step on disk (merged or in step folders); -1 when not even step 0 is."""
        last = max(self.step_folders(), default=-1)
        merged = self.dir / "metrics.parquet" if self.on_disk else None
        if merged and merged.exists() and pq.ParquetFile(merged).metadata.num_rows:
            steps = pq.read_table(merged, columns=["step"]).column("step")
            last = max(last, pa.compute.max(steps).as_py())
        merged_initial = self.dir / "initial.parquet" if self.on_disk else None
        if last < 0 and merged_initial and merged_initial.exists():
            last = 0
        return last

    def drop_after(self, step: int) -> None:
        """Before a resume: forget step folders past ``step`` and any step that never closed."""
        if not self.on_disk:
            return
        for s in self.step_folders():
            if s > step:
                shutil.rmtree(self.dir / "steps" / f"{s:06d}")
        for p in (self.data / ".incoming").glob(f"{self.run_id}-*"):
            shutil.rmtree(p, ignore_errors=True)

    # --- merging at the end of a run ------------------------------------------------------
    def merge(self) -> None:
        """One file per table for the whole run, swapped in atomically.

        Arrow unifies the step files' schemas (a payload field that first appeared at
        step 9 is null before it); each step stays one row group, with statistics on
        ``step`` only, so a query for some steps skips the others."""
        if not self.on_disk or not self.step_folders():
            return
        staged = self.data / ".incoming" / f"{self.run_id}-merge-{uuid.uuid4().hex[:6]}"
        staged.mkdir()
        steps = self.step_folders()
        # the tables are written two at a time: Parquet encoding runs without the GIL, and the
        # panel and the messages, most of the bytes, then share the machine's cores
        with ThreadPoolExecutor(max_workers=2) as pool:
            for done in [pool.submit(self._merge_table, table, steps, staged) for table in TABLES]:
                done.result()
        for extra in ("types.json",):
            if (self.dir / extra).exists():
                shutil.copy2(self.dir / extra, staged / extra)
        (staged / "steps").mkdir()
        exchange(staged, self.dir)
        shutil.rmtree(staged, ignore_errors=True)   # the old folder, now at the staged path

    def _merge_table(self, table: str, steps: list[int], staged: Path) -> None:
        """One table's step files (or the tables kept of them) as one file in ``staged``."""
        kept = self._kept or {}
        earlier = [self.dir / f"{table}.parquet"] if (self.dir / f"{table}.parquet").exists() else []
        parts = []
        for step in steps:
            if step in kept:
                if table in kept[step]:
                    parts.append(kept[step][table])
            elif (self.dir / "steps" / f"{step:06d}" / f"{table}.parquet").exists():
                parts.append(pq.ParquetFile(self.dir / "steps" / f"{step:06d}" / f"{table}.parquet").read())
        if not parts and not earlier:       # nothing new, nothing merged before a resume
            return
        if not parts:                       # a resume added nothing to this table: keep what it had
            shutil.copy2(earlier[0], staged / f"{table}.parquet")
            return
        per_step = max(1024, max(p.num_rows for p in parts))
        merged = pa.concat_tables([pq.ParquetFile(f).read() for f in earlier] + parts,
                                  promote_options="permissive")
        dictionary = [c for c in ("action_kind", "action_source", "name", "kind", "channel")
                      if c in merged.column_names]
        pq.write_table(merged, staged / f"{table}.parquet", compression="snappy", use_dictionary=dictionary,
                       write_statistics=["step"] if "step" in merged.column_names else False,
                       row_group_size=per_step)


_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    """Swap two folders in one step (Linux ``renameat2``); elsewhere two renames."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        fn = None
    if fn is not None:
        at_fdcwd = -100
        if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
    aside = a.with_name(a.name + ".old")     # beside ``a``, outside the folders readers glob
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def replace_folder(source: Path, target: Path) -> None:
    """Put ``source`` at ``target`` (same file system), replacing what is there in one step."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        exchange(source, target)
        shutil.rmtree(source, ignore_errors=True)
    else:
        source.rename(target)


def remove_run_data(layout, run_id: str) -> None:
    """Delete a run's data folder (``layout`` a ``StudyLayout``)."""
    shutil.rmtree(layout.run_dir(run_id), ignore_errors=True)
