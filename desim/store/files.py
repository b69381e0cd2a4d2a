"""A run's data on disk: a journal while it goes, one Parquet file per table once it has ended.

Layout, in the store's data folder (``StudyLayout.data``: ``studies/<id>/runs/data/``)::

    run_id=<R>/types.json              the run's state and payload field types
    run_id=<R>/journal/                while the run goes: each table's rows as they were appended,
                                       step by step, and the commit log (``desim.store.journal``)
    run_id=<R>/panel.parquet, ...      the tables merged, once the run has ended
    run_id=_/<table>.parquet           empty files that give every view its base columns

Why not DuckDB inserts: appending a step's Arrow batches to the journal costs a few hundredths
of a millisecond a table, nothing per step touches the database, and readers can query a run
while it goes (DuckDB lets one process write a database file, and while it writes no other
process can open it): a reader's connection adds each running run's committed journal to the
views (``connection.define_views``).

A step is durable when it closes (its commit line is written after its batches), a reader never
sees half a step, and a crash loses at most the step in flight. When a run ends (completed,
failed or interrupted) the journal is merged into one file per table, each step one row group
with statistics on ``step`` (a query for some steps skips the others), and swapped in with an
atomic exchange of folders (``renameat2``). Stores written by desim before the journal kept one
folder of Parquet files per step (``run_id=<R>/steps/000007/``); such a run is still read, merged
and resumed.
"""
from __future__ import annotations

import ctypes
import io
import json
import os
import shutil
import tarfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from desim.errors import StoreError
from desim.store import journal
from desim.store.layout import StudyLayout
from desim.store.schema import VIEWS
from desim.store.stream import StepStream

TABLES = tuple(VIEWS.values())     # a run's data files, one per view (schema.VIEWS names them)

LLM_CALLS_WRITTEN = pa.schema([
    ("step", pa.int32()), ("round", pa.int32()), ("agent_id", pa.string()), ("model", pa.string()),
    ("prompt_hash", pa.string()), ("tokens_in", pa.int32()), ("tokens_out", pa.int32()),
    ("latency_ms", pa.float64()), ("cached", pa.bool_()), ("outcome", pa.string()), ("attempts", pa.int32()),
    ("endpoint", pa.string()),
])
"""The ``llm_calls`` columns as a run writes them (``desim.llm.accounting`` makes its rows in this schema).
The counts are int32 in a run's files, as every store written so far has them."""

LLM_CALLS_READ = pa.schema([f.with_type(pa.int64()) if f.name in ("tokens_in", "tokens_out", "attempts") else f
                            for f in LLM_CALLS_WRITTEN])
"""The same columns as readers see them: the counts widened to int64. The anchor file (``BASE_COLUMNS``)
declares them so, and the view unites it with the runs' int32 files as BIGINT: the type the ``llm_calls``
view, ``StudyData.llm_calls`` and the exports have always given. Written narrow, read wide: changing either
would change the bytes of existing stores or what their readers see."""


def paid_as_abandoned(calls: pa.Table) -> pa.Table:
    """The rows of ``calls`` that a server's reply was paid for (not cached, not scripted, not unanswered: the
    rule ``queries.PAID_CALL`` says in SQL), marked ``abandoned``: the attempt that paid them will not write them
    itself."""
    import pyarrow.compute as pc    # here, not on top: a tenth of a second that only a run of LLM calls pays
    paid = calls.filter(pc.and_(pc.and_(pc.invert(calls["cached"]), pc.not_equal(calls["model"], "scripted")),
                                pc.not_equal(calls["outcome"], "unavailable")))
    return paid.set_column(paid.schema.get_field_index("outcome"), "outcome",
                           pa.array(["abandoned"] * paid.num_rows, pa.string()))


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
    "llm_calls": list(zip(LLM_CALLS_READ.names, LLM_CALLS_READ.types)),
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


DICTIONARY = ("action_kind", "action_source", "name", "kind", "channel")   # few distinct values: encoded


def parquet_options(schema: pa.Schema) -> dict:
    """How a run's merged files are written (the merge and the step stream alike): each step a row
    group with statistics on ``step``, the few-valued columns dictionary-encoded."""
    return dict(compression="snappy", use_dictionary=[c for c in DICTIONARY if c in schema.names],
                write_statistics=["step"] if "step" in schema.names else False)


class RunFiles:
    """The data folder of one run; ``None`` root keeps nothing (an in-memory probe run)."""

    def __init__(self, data: Path | None, run_id: str):
        self.data, self.run_id = data, run_id
        self.dir = data / f"run_id={run_id}" if data else None
        self.journal = journal.Journal(self.dir / "journal") if self.dir else None
        self.stream: StepStream | None = None       # the merge written as the run goes (desim.store.stream)

    @property
    def on_disk(self) -> bool:
        return self.dir is not None

    def start(self) -> None:
        if not self.on_disk:
            return
        ensure_anchors(self.data)
        fresh = journal.last_commit(self.dir / "journal") is None and not self.step_folders() and \
            not any((self.dir / f"{t}.parquet").exists() for t in TABLES)
        self.journal.start()
        if fresh:       # a resumed run merges what it had with what it adds, from the files, at the end
            (self.data / ".incoming").mkdir(exist_ok=True)
            self.stream = StepStream(self.data / ".incoming" / f"{self.run_id}-stream-{uuid.uuid4().hex[:6]}",
                                     parquet_options)

    # --- writing ------------------------------------------------------------------
    def write_step(self, step: int, tables: dict[str, pa.Table | None]) -> None:
        """Every table of one step, committed at once."""
        if not self.on_disk:
            return
        kept = {name: table for name, table in tables.items()
                if table is not None and (table.num_rows or name in ("panel", "initial"))}
        self.journal.append(step, kept)
        if self.stream is not None:     # committed: now it may be encoded beside the run
            self.stream.put(kept)

    def save_types(self, types: dict) -> None:
        if not self.on_disk:
            return
        tmp = self.dir / "types.json.tmp"
        tmp.write_text(json.dumps(types), encoding="utf-8")   # field order is column order
        os.replace(tmp, self.dir / "types.json")

    def load_types(self) -> dict | None:
        path = self.dir / "types.json" if self.on_disk else None
        return json.loads(path.read_text(encoding="utf-8")) if path and path.exists() else None

    def merged_file(self, view: str) -> Path | None:
        """The run's merged file of ``view`` (``schema.VIEWS``: ``panel``, ``initial_states``, ...) once the run
        has ended and been merged (no journal or step folders left), else None."""
        if not self.on_disk or (self.dir / "journal").exists() or self.step_folders():
            return None
        path = self.dir / f"{VIEWS[view]}.parquet"
        return path if path.is_file() else None

    # --- reading the progress ---------------------------------------------------------
    def step_folders(self) -> list[int]:
        """Steps in per-step folders (stores written before the journal)."""
        steps = self.dir / "steps" if self.on_disk else None
        if not steps or not steps.is_dir():
            return []
        return sorted(int(p.name) for p in steps.iterdir() if p.name.isdigit())

    def last_step(self) -> int:
        """The last step on disk (journal, merged or step folders); -1 when not even step 0 is."""
        if not self.on_disk:
            return -1
        return self._last_step(journal.last_commit(self.dir / "journal"))

    def _last_step(self, committed: dict | None) -> int:
        last = max([committed["step"] if committed else -1, *self.step_folders()])
        merged = self.dir / "metrics.parquet"
        if merged.exists() and pq.ParquetFile(merged).metadata.num_rows:
            steps = pq.read_table(merged, columns=["step"]).column("step")
            last = max(last, pa.compute.max(steps).as_py())
        if last < 0 and (self.dir / "initial.parquet").exists():
            last = 0
        return last

    def damaged_past(self) -> tuple[int, str] | None:
        """``(the last step the journal still reads, what is damaged past it)`` when bytes its log names are
        garbled (a power loss), else None: a resume goes on from that step instead of failing at its merge."""
        folder = self.dir / "journal" if self.on_disk else None
        if folder is None or not folder.is_dir():
            return None
        try:
            journal.read(folder)
        except StoreError as e:
            return self._last_step(journal.readable_commit(folder)), str(e)
        return None

    def drop_after(self, step: int) -> None:
        """Before a resume: forget what is on disk past ``step`` (and what never committed)."""
        if not self.on_disk:
            return
        for s in self.step_folders():
            if s > step:
                shutil.rmtree(self.dir / "steps" / f"{s:06d}")
        if (self.dir / "journal").is_dir():
            journal.cut_after(self.dir / "journal", step)
        for p in (self.data / ".incoming").glob(f"{self.run_id}-*"):
            shutil.rmtree(p, ignore_errors=True)

    # --- merging at the end of a run ------------------------------------------------------
    def merge(self) -> None:
        """One file per table for the whole run, swapped in atomically.

        Each table is read batch by batch (what an earlier merge left, for a resumed run; the step
        folders of an older store; the journal) and written as it is read, so memory stays about a
        step's worth. Arrow unifies the parts' schemas (a payload field that first appeared at step
        9 is null before it)."""
        if not self.on_disk:
            return
        self.journal.close()
        streamed = self.stream.finish() if self.stream is not None else {}
        try:
            if not (self.dir / "journal").is_dir():     # made when the run started: someone took it away
                raise StoreError(f"{self.dir / 'journal'} was removed while the run went: the steps it held are "
                                 "lost with it")
            _, logged = journal.read(self.dir / "journal")
            steps = self.step_folders()
            if not logged and not steps:
                return
            (self.data / ".incoming").mkdir(exist_ok=True)
            staged = self.data / ".incoming" / f"{self.run_id}-merge-{uuid.uuid4().hex[:6]}"
            staged.mkdir()
            # what the stream wrote whole is the table's file; the rest is merged from the journal, two
            # tables at a time (Parquet encoding runs without the GIL: they share the machine's cores)
            for table, path in streamed.items():
                if table in logged:
                    os.replace(path, staged / f"{table}.parquet")
            with ThreadPoolExecutor(max_workers=2) as pool:
                for done in [pool.submit(self._merge_table, table, steps, logged.get(table, []), staged)
                             for table in TABLES if not (staged / f"{table}.parquet").exists()]:
                    done.result()
        finally:
            if self.stream is not None:
                self.stream.abandon()
                self.stream = None
        if (self.dir / "types.json").exists():
            shutil.copy2(self.dir / "types.json", staged / "types.json")
        if journal.FSYNC != "never":
            _sync_folder(staged)
        exchange(staged, self.dir)
        shutil.rmtree(staged, ignore_errors=True)   # the old folder, now at the staged path
        if journal.FSYNC != "never":
            _sync(self.data)

    def _merge_table(self, table: str, steps: list[int], logged: list[pa.RecordBatch], staged: Path) -> None:
        """One table's parts as one file in ``staged``: each step a row group (small tables: 1,024 rows)."""
        earlier = self.dir / f"{table}.parquet"
        new = [pq.ParquetFile(f) for f in (self.dir / "steps" / f"{s:06d}" / f"{table}.parquet" for s in steps)
               if f.exists()]
        if not new and not logged:
            if earlier.exists():                    # a resume added nothing to this table: keep what it had
                shutil.copy2(earlier, staged / f"{table}.parquet")
            return
        files = ([pq.ParquetFile(earlier)] if earlier.exists() else []) + new
        schemas = [f.schema_arrow for f in files] + [b.schema for b in logged]
        schema = schemas[0] if len(schemas) == 1 else pa.unify_schemas(schemas, promote_options="permissive")
        sizes = [f.metadata.row_group(i).num_rows for f in files for i in range(f.num_row_groups)]
        group = max(1024, *sizes, *(b.num_rows for b in logged))
        with pq.ParquetWriter(staged / f"{table}.parquet", schema, **parquet_options(schema)) as writer:
            pending: list[pa.RecordBatch] = []
            rows = 0

            def flush() -> None:
                nonlocal pending, rows
                if pending:
                    writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=rows)
                pending, rows = [], 0

            def parts():
                for f in files:
                    for i in range(f.num_row_groups):
                        yield from f.read_row_group(i).to_batches()
                yield from logged

            for batch in parts():
                batch = journal.conform(batch, schema)
                if rows and rows + batch.num_rows > group:
                    flush()
                pending.append(batch)
                rows += batch.num_rows
            flush()


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Every file of ``folder`` and the folder itself on disk (a power loss after this loses none of it)."""
    for f in folder.iterdir():
        if f.is_file():
            _sync(f)
    _sync(folder)


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


def carry_paid_calls(earlier: Path, new: Path) -> int:
    """Before a run's folder ``earlier`` is replaced by ``new``, another attempt at the same run (a sweep's or an
    effect's ``--resume`` runs a failed run again from step 0): the LLM replies the earlier attempt paid for
    are added to the new attempt's ``llm_calls`` as ``abandoned`` rows, as a resumed run adds those of a step it
    lost. The new attempt took them from the reply cache, free, so each paid reply stays one row, and the
    cost over all attempts is the usual query of paid rows. Returns how many rows were carried."""
    old = earlier / "llm_calls.parquet"
    if not old.exists():
        return 0
    paid = paid_as_abandoned(pq.read_table(old))
    if not paid.num_rows:
        return 0
    target = new / "llm_calls.parquet"
    if target.exists():     # rows the new attempt wrote already (a killed attempt's, kept in the run's ledger)
        names = paid.column_names
        have = {tuple(r[c] for c in names) for r in pq.read_table(target).to_pylist() if r["outcome"] == "abandoned"}
        fresh = [tuple(r[c] for c in names) not in have for r in paid.to_pylist()]
        paid = paid.filter(pa.array(fresh, pa.bool_()))
        if not paid.num_rows:
            return 0
    parts = ([pq.read_table(target)] if target.exists() else []) + [paid]
    table = pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else paid
    tmp = new / f".llm_calls-{uuid.uuid4().hex[:6]}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, target)
    return paid.num_rows


def remove_run_data(layout, run_id: str) -> None:
    """Delete a run's data folder (``layout`` a ``StudyLayout``)."""
    shutil.rmtree(layout.run_dir(run_id), ignore_errors=True)


# --- a worker's store (a sweep's or an effect's run, written apart and merged by the parent) -------
def remove_db(path: str | Path, run_id: str | None = None) -> None:
    """Delete a worker's DuckDB file, its write-ahead log, the run's data folder and its progress file (one
    nobody reads: the worker's, beside its file; an interrupted run leaves one), if present."""
    for p in (Path(path), Path(f"{path}.wal")):
        p.unlink(missing_ok=True)
    if run_id:
        layout = StudyLayout.at(path)
        shutil.rmtree(layout.run_dir(run_id), ignore_errors=True)
        if layout.data.name != "data":            # a worker's own data folder: nothing else in it
            shutil.rmtree(layout.data, ignore_errors=True)
            layout.live_file(run_id).unlink(missing_ok=True)    # not its folder: other workers write there


def pack_run(db_path: str | Path, run_id: str) -> bytes:
    """A worker's run as one archive: its DuckDB file and its data folder."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(db_path, arcname="worker.duckdb")
        folder = StudyLayout.at(db_path).run_dir(run_id)
        if folder.is_dir():
            tar.add(folder, arcname=f"data/run_id={run_id}")
    return buf.getvalue()


def unpack_run(archive: bytes, db_path: str | Path) -> None:
    """Undo :func:`pack_run` beside ``db_path`` (the driver's copy of the worker file)."""
    db_path = Path(db_path)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        for member in tar.getmembers():
            if member.name == "worker.duckdb":
                db_path.write_bytes(tar.extractfile(member).read())
            elif member.name.startswith("data/run_id=") and ".." not in member.name:
                # written by hand, files and folders only, each inside the data folder: tarfile's own "data"
                # filter does this too, but Python 3.11 has it only from 3.11.4 (Debian's is 3.11.2)
                target = (db_path.parent / (StudyLayout.at(db_path).data.name + member.name[len("data"):]))
                if not target.resolve().is_relative_to(db_path.parent.resolve()):
                    continue
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.isfile():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(tar.extractfile(member).read())
