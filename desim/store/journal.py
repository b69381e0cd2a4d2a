"""A run's journal: each table's rows appended to one Arrow stream file as the steps close.

While a run goes, ``run_id=<R>/journal/`` holds, per table, one or more *segments*
(``panel.0.arrows``, ``panel.1.arrows`` ...: Arrow IPC streams, a new segment when the table's
schema changes, say a payload field that first appears at step 9) and ``commit.log``, one line per
closed step::

    {"step": 7, "sizes": {"panel.0.arrows": 1843920, "metrics.0.arrows": 5120, ...}}

A step is written as one record batch per table, appended to the table's open segment (no file is
created, encoded or compressed per step: about 0.03 ms a table), and then committed by appending
its line to the log with the size of every segment after it. What a reader may see is exactly
what the last complete line names, so a reader never sees half a step and a crash (the process
killed between two writes, or in the middle of one) loses at most the step in flight: the bytes
past the committed sizes are ignored, and cut off when the run is resumed.

Durability against a power loss is a matter of ``fsync`` (:data:`FSYNC`): by default the journal
is left to the operating system's write-back while the run goes (a process crash loses nothing
committed; a power loss may lose the last ~30 s of steps) and every file of the merged run is
synced when it ends; ``DESIM_FSYNC=step`` syncs each step as it is committed (1.1-8.6 ms of wall
time for a step of 8,000 panel rows here, quiet disk to busy, against 0.3-0.6 ms without: docs/performance.md).

When the run ends the journal is merged into one Parquet file per table (``files.RunFiles.merge``),
reading it batch by batch, so memory stays about one step's worth however long the run.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from desim.errors import StoreError

LOG = "commit.log"
FSYNC = os.environ.get("DESIM_FSYNC", "end")
"""``end`` (the default): sync the merged files when a run ends; ``step``: also every step as it
commits; ``never``: leave everything to the operating system."""
FSYNC_MODES = ("end", "step", "never")


def check_fsync() -> None:
    """Refuse, before a run is recorded, a ``DESIM_FSYNC`` that is none of :data:`FSYNC_MODES`: read as
    ``end``, a mistyped ``steps`` would have given a run less durability than its author asked for."""
    if FSYNC not in FSYNC_MODES:
        raise StoreError(f"DESIM_FSYNC={FSYNC!r} is not one of {', '.join(FSYNC_MODES)} (end, the default: sync "
                         "when the run ends; step: also every step; never: leave it to the operating system)")


class Journal:
    """The journal of one run, open for appending (see the module docstring)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.sizes: dict[str, int] = {}                     # segment file -> committed size
        self._open: dict[str, tuple[str, pa.NativeFile, pa.ipc.RecordBatchStreamWriter, pa.Schema]] = {}
        self._log = None

    def start(self) -> None:
        """Open for appending, after whatever a previous process committed (a resumed run): its
        uncommitted bytes are cut off and its segments closed, so new writes go to new segments."""
        self.folder.mkdir(parents=True, exist_ok=True)
        last = last_commit(self.folder)
        logged = commits(self.folder)
        if logged and logged[-1] != last:           # lines of steps that are not whole (a power loss): gone
            cut_after(self.folder, last["step"] if last else -1)
        self.sizes = dict(last["sizes"]) if last else {}
        for path in self.folder.glob("*.arrows"):
            if path.name not in self.sizes:
                path.unlink()
            elif path.stat().st_size != self.sizes[path.name]:
                os.truncate(path, self.sizes[path.name])
        log = self.folder / LOG
        if log.exists():                            # a line torn by a crash would spoil the next one
            whole = log.read_bytes()
            if whole and not whole.endswith(b"\n"):
                os.truncate(log, whole.rfind(b"\n") + 1)
        self._log = open(log, "ab", buffering=0)

    def append(self, step: int, tables: dict[str, pa.Table]) -> None:
        """One closed step: a batch per table, then the step's commit line."""
        for name, table in tables.items():
            segment, sink, writer, _ = self._segment(name, table.schema)
            writer.write_table(table)
            self.sizes[segment] = sink.tell()
        if FSYNC == "step":
            for _, sink, _, _ in self._open.values():
                os.fsync(sink.fileno())
        self._log.write((json.dumps({"step": step, "sizes": self.sizes}) + "\n").encode())
        if FSYNC == "step":
            os.fsync(self._log.fileno())

    def _segment(self, name: str, schema: pa.Schema):
        current = self._open.get(name)
        if current is not None and current[3].equals(schema):
            return current
        if current is not None:
            current[1].close()          # the old segment keeps its committed bytes; no end marker needed
        n = sum(1 for s in self.sizes if s.startswith(f"{name}."))
        segment = f"{name}.{n}.arrows"
        sink = pa.OSFile(str(self.folder / segment), "wb")
        writer = pa.ipc.new_stream(sink, schema)
        self.sizes[segment] = sink.tell()
        self._open[name] = (segment, sink, writer, schema)
        return self._open[name]

    def close(self) -> None:
        for _, sink, _, _ in self._open.values():
            sink.close()
        self._open = {}
        if self._log is not None:
            self._log.close()
            self._log = None


def last_commit(folder: Path) -> dict | None:
    """The last complete line of the commit log whose segments hold every byte it names (``None``:
    nothing committed). After a power loss the log may have reached the disk and a segment's last
    writes not (nothing was synced while the run went): that step is not whole, and the one before is."""
    try:
        with open(folder / LOG, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            f.seek(max(0, end - 65536))
            tail = f.read()
    except FileNotFoundError:
        return None
    lines = tail.split(b"\n")[:-1]          # the part after the last newline is a line in flight
    for line in reversed(lines):
        try:
            commit = json.loads(line)
        except ValueError:                  # the cut first line of the tail
            continue
        if _whole(folder, commit):
            return commit
        return next((c for c in reversed(commits(folder)) if _whole(folder, c)), None)   # the rare path
    return None


def _whole(folder: Path, commit: dict) -> bool:
    """Every segment ``commit`` names is on disk with at least the bytes it names."""
    for segment, size in commit["sizes"].items():
        try:
            if (folder / segment).stat().st_size < size:
                return False
        except FileNotFoundError:
            return False
    return True


def commits(folder: Path) -> list[dict]:
    """Every complete commit line, in order (for a resume that goes back to an earlier step)."""
    try:
        data = (folder / LOG).read_bytes()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


def cut_after(folder: Path, step: int) -> None:
    """Forget the steps after ``step`` (a resume from an earlier step): the log and the segments
    are cut back to that step's commit."""
    kept = [c for c in commits(folder) if c["step"] <= step]
    sizes = kept[-1]["sizes"] if kept else {}
    for path in folder.glob("*.arrows"):
        if path.name not in sizes:
            path.unlink()
        else:
            os.truncate(path, sizes[path.name])
    tmp = folder / (LOG + ".tmp")
    tmp.write_bytes(b"".join((json.dumps(c) + "\n").encode() for c in kept))
    os.replace(tmp, folder / LOG)


def read(folder: Path) -> tuple[int, dict[str, list[pa.RecordBatch]]]:
    """``(last committed step, {table: its committed batches, segment by segment})``; ``(-1, {})``
    when nothing is committed or the journal is gone (the run merged it meanwhile)."""
    last = last_commit(folder)
    if last is None:
        return -1, {}
    try:
        return last["step"], _batches(folder, last)
    except FileNotFoundError:
        return -1, {}
    except (OSError, pa.ArrowInvalid) as e:     # bytes the log names, but not what was written
        raise StoreError(f"{folder / _damaged_segment(folder, last)} is damaged ({' '.join(str(e).split())[:120]}): "
                         f"the run's steps up to {last['step']} cannot be read from it") from None


def _batches(folder: Path, commit: dict) -> dict[str, list[pa.RecordBatch]]:
    """The batches of each segment up to the size ``commit`` names. Every byte of it must belong to a
    batch: blocks a power loss never wrote read back as zeros, which Arrow takes for the end of the
    stream, so a segment that ends early is as damaged as one that does not parse."""
    out: dict[str, list[pa.RecordBatch]] = {}
    for segment in sorted(commit["sizes"], key=lambda s: (s.split(".")[0], int(s.split(".")[1]))):
        size = commit["sizes"][segment]
        with pa.memory_map(str(folder / segment)) as mm:
            buffer = mm.read_buffer(size)
        reader = pa.BufferReader(buffer)
        out.setdefault(segment.split(".")[0], []).extend(pa.ipc.open_stream(reader))
        if reader.tell() != size:
            raise pa.ArrowInvalid(f"the stream ends at byte {reader.tell()} of the {size} the commit log names")
    return out


def _reads(folder: Path, commit: dict) -> bool:
    try:
        _batches(folder, commit)
    except (OSError, pa.ArrowInvalid):
        return False
    return True


def _damaged_segment(folder: Path, commit: dict) -> str:
    for segment, size in commit["sizes"].items():
        if not _reads(folder, {"sizes": {segment: size}}):
            return segment
    return LOG


def readable_commit(folder: Path) -> dict | None:
    """The last whole commit whose bytes all read back as Arrow: a resume goes on from it when bytes past it
    are garbled (a power loss can leave a segment its full length with blocks never written). The commits
    that read form a prefix of the log (a step's bytes follow the earlier steps'), so a bisection finds it."""
    last = last_commit(folder)
    if last is None or _reads(folder, last):
        return last
    logged = [c for c in commits(folder) if c["step"] < last["step"]]
    lo, hi = 0, len(logged)                 # logged[:lo] read; logged[hi:] do not
    while lo < hi:
        mid = (lo + hi) // 2
        if _reads(folder, logged[mid]):
            lo = mid + 1
        else:
            hi = mid
    return logged[lo - 1] if lo else None


def unified(batches: list[pa.RecordBatch]) -> pa.Schema:
    """One schema for batches whose schemas differ (fields that appear later, nulls that became typed)."""
    schemas = list({id(b.schema): b.schema for b in batches}.values())
    return schemas[0] if len(schemas) == 1 else pa.unify_schemas(schemas, promote_options="permissive")


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns: missing columns, and missing fields of struct columns
    (``state``, ``payload``), as nulls; the others cast where the type widened."""
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([_conformed(batch.column(f.name) if f.name in batch.schema.names else None,
                                                  f.type, batch.num_rows) for f in schema], schema=schema)


def _conformed(column: pa.Array | None, target: pa.DataType, n: int) -> pa.Array:
    if column is None:
        return pa.nulls(n, target)
    if column.type.equals(target):
        return column
    if pa.types.is_struct(target) and pa.types.is_struct(column.type):
        names = [column.type.field(i).name for i in range(column.type.num_fields)]
        children = [_conformed(column.field(target.field(i).name) if target.field(i).name in names else None,
                               target.field(i).type, n) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=column.is_null())
    return column.cast(target)
