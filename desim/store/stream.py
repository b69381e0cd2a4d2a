"""The end-of-run merge, written while the run goes.

A run's steps are durable in its journal (``desim.store.journal``); when the run ends the journal
becomes one Parquet file per table. Encoding Parquet is most of that merge (0.3 s for a 3,000,000-row
panel), and it need not wait for the end: each step's tables, once committed to the journal, are
handed to a background thread that appends them to the table's Parquet file in a staging folder.
Parquet encoding runs without the GIL, so on a machine with a spare core the run goes on while its
last steps are encoded, and the merge at the end only writes the files' footers.

The journal stays the truth. A table whose stream cannot be trusted (its schema changed during the
run, say a payload field that first appears at step 9, or the thread failed) is dropped from the
stream and merged from the journal at the end as before; a crash leaves a staging folder that a
resume (``RunFiles.drop_after``) removes. The queue holds at most a few steps and at most
``QUEUED_BYTES`` of them (a step of a million agents posting three rounds is 0.3 GB of Arrow), and a
step that fills a row group by itself is written at once, so memory stays bounded when encoding is
slower than the run: the run waits for the encoder instead.
"""
from __future__ import annotations

import queue
import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SMALL_GROUP = 1024          # rows: small tables (metrics, events) gather steps into row groups this big
QUEUED_STEPS = 3            # steps waiting to be encoded before the run waits for the encoder
QUEUED_BYTES = 256 * 2**20  # ... or this much of their tables, whichever comes first (one step always fits)


class StepStream:
    """Each table's rows, as the steps commit, appended to ``folder/<table>.parquet``.

    ``put`` hands over a committed step; ``finish`` returns the files that hold every step of their
    table (the others are to be merged from the journal); ``abandon`` forgets everything."""

    def __init__(self, folder: Path, options_for):
        self.folder = folder
        self.options_for = options_for            # schema -> ParquetWriter keyword arguments
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUED_STEPS)
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._pending: dict[str, list[pa.Table]] = {}
        self._largest: dict[str, int] = {}
        self._broken: set[str] = set()            # tables whose file is not to be trusted
        self._failed = False
        self._room = threading.Condition()       # the queue's bytes, and the run waiting for less of them
        self._queued_bytes = 0
        self._thread = threading.Thread(target=self._run, name="desim-step-stream", daemon=True)
        folder.mkdir(parents=True)
        self._thread.start()

    def put(self, tables: dict[str, pa.Table]) -> None:
        if self._failed:
            return
        size = sum(t.nbytes for t in tables.values())
        with self._room:
            while self._queued_bytes and self._queued_bytes + size > QUEUED_BYTES and not self._failed:
                self._room.wait()
            self._queued_bytes += size
        self._queue.put((tables, size))

    def finish(self) -> dict[str, Path]:
        """Wait for the queued steps, close the files; ``{table: file}`` of the whole tables."""
        self._queue.put(None)
        self._thread.join()
        done: dict[str, Path] = {}
        for name, writer in self._writers.items():
            try:
                if name not in self._broken and not self._failed:
                    self._flush(name)
                writer.close()
            except Exception:          # noqa: BLE001 -- the journal still holds the table
                self._broken.add(name)
            if name not in self._broken and not self._failed:
                done[name] = self.folder / f"{name}.parquet"
        return done

    def abandon(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    # --- the encoding thread ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            tables, size = item
            try:
                if not self._failed:
                    for name, table in tables.items():
                        if name not in self._broken:
                            self._append(name, table)
            except Exception:          # noqa: BLE001 -- the journal still holds every step
                self._failed = True
            finally:
                del tables, item
                with self._room:
                    self._queued_bytes -= size
                    self._room.notify_all()

    def _append(self, name: str, table: pa.Table) -> None:
        writer = self._writers.get(name)
        if writer is None:
            writer = self._writers[name] = pq.ParquetWriter(self.folder / f"{name}.parquet", table.schema,
                                                            **self.options_for(table.schema))
            self._pending[name], self._largest[name] = [], 0
        elif not writer.schema.equals(table.schema):
            self._broken.add(name)     # the merge unifies the schemas from the journal instead
            return
        # each step its own row group, small steps gathered (the merge's rule, from the largest so far)
        pending = self._pending[name]
        self._largest[name] = group = max(self._largest[name], SMALL_GROUP, table.num_rows)
        if pending and sum(t.num_rows for t in pending) + table.num_rows > group:
            self._flush(name)
        self._pending[name].append(table)
        if sum(t.num_rows for t in self._pending[name]) >= group:
            self._flush(name)           # a full row group (a large step alone): written now, not held

    def _flush(self, name: str) -> None:
        pending = self._pending.get(name)
        if pending:
            table = pa.concat_tables(pending)
            self._writers[name].write_table(table, row_group_size=table.num_rows)
            self._pending[name] = []
