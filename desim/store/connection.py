"""Opening a study's store: the one way in, ``with open_store(layout) as con:``.

The database file is opened for writing only at the start and the end of a run (and for a
merge), for milliseconds, or seconds when a resumed run merges a long panel; in between, any process
can read, including the run's own data so far. DuckDB lets one process write a file, and while it
writes no other process can open it, so readers and writers wait by one rule (:func:`_connect`):
quietly at first, then a note naming the process that holds the file, then on as long as it holds it.

The views hold the data folder's absolute path; readers define them afresh for each connection
(as temporary views), so a study folder that was moved still reads. A writer brings the catalogue
up to date (``desim.store.schema.MIGRATIONS``) and stores the views, so that a plain
``duckdb.connect(...)`` by a user sees them too.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import socket
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import duckdb
import pyarrow as pa

from desim.errors import DesimNotice, StoreError
from desim.store import journal
from desim.store.files import ensure_anchors
from desim.store.health import note_missing_data
from desim.store.layout import StorePathError, StudyLayout, layout_of
from desim.store.live import live_runs
from desim.store.schema import MIGRATIONS, VIEWS, file_pattern, paired_sql, view_sql


class StoreBusyError(StoreError):
    """The database is locked by another process (or by a connection this process holds)."""


class StoreLayoutError(StoreError):
    """The database was written by a desim that stored the panel as JSON text."""


class StoreMissing(StoreError, LookupError):
    """The study has no database yet (never run), or the file is not a DuckDB database."""


class StoreBroken(StoreError, ValueError):
    """The database exists but cannot be read (damaged or truncated)."""


WaitFn = Callable[[str], None]

READER_ATTEMPTS = 100
"""How many times (50 ms apart: 5 s, as long as a run tries before its note) a reader tries a file another
process holds for writing before it says it waits. A run holds it for a moment at its start and end, but
a resumed run merges its whole panel under that hold (4 s at 12,000 agents and 240 steps), and a reader
that gave up after one second failed with DuckDB's lock text while the README promised "a moment"."""

SLOW_TRY_S = 0.25
"""Seconds between two tries once the note is said: a failed open costs a few milliseconds, and a wait
that lasts as long as a notebook keeps its connection should not spend a core on it."""

_stop_request: Callable[[], BaseException | None] | None = None
"""Installed by ``desim run`` (``desim.run.execute.stop_request``): the exception that ends a run's wait for
the store to record its start (a SIGTERM or a Ctrl-C came before the run was recorded), or None. Without it
a signal changed nothing until the holder let go, and then the run was recorded and ran a step."""


def stop_waits_on(check: Callable[[], BaseException | None] | None) -> Callable[[], BaseException | None] | None:
    """Install ``check`` as the stop request an open-ended wait in the main thread asks before each try
    (None: none); returns the one it replaces, for the caller to put back."""
    global _stop_request
    previous, _stop_request = _stop_request, check
    return previous


def _quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """DuckDB draws a progress bar on stdout for a query that runs over two seconds: not in a command's
    output or a notebook's cells (a per-connection setting: DuckDB refuses it as a global option)."""
    con.execute("SET enable_progress_bar = false")
    return con


@contextmanager
def open_store(study: "str | Path | StudyLayout", read_only: bool = True, *, attempts: int | None = None,
               wait: float = 0.05, forever: bool | None = None, on_wait: WaitFn | None = None,
               must_exist: bool = True, give_up_after: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the study's store, closed when the block ends.

    ``read_only`` (the default) never blocks a run; a writer (``read_only=False``) creates the
    store if needed and brings its catalogue up to date. While another process holds the file, both wait
    by one rule (:func:`_connect`): ``attempts`` tries ``wait`` s apart (default: 100 for a reader that
    waits, 20 for one that gives up, 40 for a writer), then, with ``forever``, a note (``on_wait`` hears why,
    once; by default a ``DesimNotice`` naming the holder) and on as long as the holder keeps the file,
    ``give_up_after`` seconds at most (then ``StoreBusyError``). By default a reader in the main thread
    waits so (a command or a notebook's cell reading while a run merges waits for the merge, as the run
    waits for readers: someone is there to read the note, and Ctrl-C stops the wait), and a reader in
    another thread gives up after its tries (a server's request, the dashboard's, must answer: it says the
    store is busy); a writer waits only when asked (a run, a sweep).
    """
    layout = layout_of(study)
    layout.check_paths()        # a folder name DuckDB misreads, a symlink to nothing: refused first
    if read_only:
        if must_exist and not layout.db.exists():
            raise StoreMissing(layout.missing_store())
        if forever is None:
            forever = threading.current_thread() is threading.main_thread()
        if attempts is None:        # before the note, for a reader that waits; in all, for one that gives up
            attempts = READER_ATTEMPTS if forever else 20
        con = _reader(layout, attempts, wait, forever=forever, on_wait=on_wait, give_up_after=give_up_after)
    else:
        con = _writer(layout, 40 if attempts is None else attempts, wait, forever=bool(forever), on_wait=on_wait,
                      give_up_after=give_up_after)
    try:
        yield con
    except (duckdb.InvalidInputException, duckdb.IOException) as e:
        if named_file(e, layout.data) is None:
            raise
        raise damaged_file(layout.data, e) from None        # a query met a damaged data file: name it and its run
    finally:
        try:
            con.close()
        except duckdb.Error:
            pass


def _connect(layout: StudyLayout, read_only: bool, attempts: int, wait: float, forever: bool = False,
             on_wait: WaitFn | None = None, give_up_after: float | None = None) -> duckdb.DuckDBPyConnection:
    """DuckDB's connection to the store, waiting while another process holds the file: the one rule for
    readers and writers.

    ``attempts`` tries ``wait`` s apart; then a bounded caller (the dashboard, which must never hang) gets
    :class:`StoreBusyError` saying who holds the file and what to do, and a ``forever`` one says once that it
    waits (``on_wait`` with that text, else a ``DesimNotice``) and goes on trying as long as the holder keeps
    the file: the lock is the operating system's, gone with its process, so a file still held has a live
    holder (a run merging, a notebook's connection), and a wait ends when it closes or ends, or after
    ``give_up_after`` seconds. A connection in this process is said at once (no wait frees it). An open-ended
    wait in the main thread asks the stop request (:func:`stop_waits_on`) before each try."""
    path = layout.db
    began = time.monotonic()
    told = False
    tries = 0
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.ConnectionException as e:
            raise _held_here(path, read_only, e) from None
        except duckdb.IOException as e:
            if not _is_lock(e):     # damaged, truncated, unreadable, a folder: no wait makes it readable
                raise _unopenable(layout, read_only, e) from None
            held = e
        except duckdb.Error as e:   # a block whose checksum fails, and DuckDB's other refusals of the file
            raise _broken(path, e) from None
        tries += 1
        if tries < attempts:
            _stop_if_asked(give_up_after)
            time.sleep(wait)
            continue
        if not forever or (give_up_after is not None and time.monotonic() - began > give_up_after):
            raise StoreBusyError(_busy(path, read_only, _holder(layout, held)))
        if not told:
            holder = _holder(layout, held)
            if on_wait is not None:
                on_wait(_busy(path, read_only, holder))
            else:
                warnings.warn(DesimNotice(f"{path} is locked {'for writing ' if read_only else ''}by {holder}; "
                                          "desim waits for it and goes on when it is free (a desim run holds it "
                                          "at its start and its end; a notebook's connection holds it until "
                                          "closed); Ctrl-C stops the wait"), stacklevel=4)
            told = True
        _stop_if_asked(give_up_after)
        time.sleep(max(wait, SLOW_TRY_S))


def _stop_if_asked(give_up_after: float | None) -> None:
    """Raise what the stop request returns, in an open-ended wait of the main thread. A wait with a bound
    records what already happened (a run's end, a run that could not start): a signal must not cut it short."""
    if _stop_request is None or give_up_after is not None or threading.current_thread() is not threading.main_thread():
        return
    stop = _stop_request()
    if stop is not None:
        raise stop


def _held_here(path: Path, read_only: bool, error: Exception) -> StoreBusyError:
    """DuckDB refuses a second kind of connection to a file this process holds: no wait frees it."""
    if read_only:
        return StoreBusyError(f"cannot open {path} read-only: this Python process holds a writing connection to "
                              f"it ({error}); close it first")
    return StoreBusyError(f"cannot open {path} for writing: this Python process holds a connection to it ({error}). "
                          "Close that connection (con.close()) first; desim.open(...) reads without keeping one open.")


def _busy(path: Path, read_only: bool, holder: str) -> str:
    """Why a file another process holds cannot be opened, and what to do, in words (not DuckDB's text)."""
    if read_only:
        return (f"cannot read {path}: it is locked for writing by {holder}. A desim run holds it at its start "
                "and its end (seconds while a long run merges its data); a connection opened for writing (a "
                "notebook's duckdb.connect without read_only=True) holds it until closed. Try again when it is "
                "done, or close that connection.")
    return (f"cannot open {path} for writing: it is locked by {holder}. Another process holds it: a desim run "
            "writing to it, or a reader that keeps a connection open (a notebook's duckdb.connect); wait for it, "
            "close that connection, or use another study copy.")


def _holder(layout: StudyLayout, error: Exception) -> str:
    """Who holds the file, in words: the run of this study whose progress file names the process DuckDB names
    (and whether it is storing its data), else that process and its program, else "another process"."""
    found = re.search(r"lock is held in (.+?) \(PID (\d+)\)", str(error))
    if found is None:
        return "another process"
    program, pid = Path(found.group(1)).name, int(found.group(2))
    for live in live_runs(layout.live):
        if live.get("pid") == pid and live.get("host") == socket.gethostname() and live.get("status") == "running":
            doing = ", which is storing its data" if live.get("phase") == "finishing" else ""
            return f"run {live['run_id']} (process {pid}){doing}"
    return f"process {pid} ({program})"


def _reader(layout: StudyLayout, attempts: int, wait: float, *, forever: bool = False, on_wait: WaitFn | None = None,
            give_up_after: float | None = None) -> duckdb.DuckDBPyConnection:
    path = layout.db
    con = _connect(layout, True, attempts, wait, forever, on_wait, give_up_after)
    try:
        _quiet(con)
        # each Parquet footer read once for the connection's life: a merged run of 20,000 steps has 10,000
        # row groups (a 10 MB footer, 0.6 s to read), which every query of that run would read again
        con.execute("SET parquet_metadata_cache = true")
        check_layout(con, path)
        if (layout.data / "run_id=_").is_dir():
            define_views(con, layout.data, temp=True)
        if not has_table(con, "panel"):     # its rows in tables of its own (an effect's extract of a parent
            note_missing_data(layout, run_ends(con))     # run), not in data folders: none can be missing
    except BaseException:
        con.close()
        raise
    return con


def run_ends(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, int]]:
    """``(run_id, status, last_step)`` of every run, oldest first (for ``health.note_missing_data``); none when
    the catalogue cannot be read (a truncated file): the query that reads it then says so, as what it is."""
    try:
        if not has_table(con, "runs"):
            return []
        return con.execute("SELECT run_id, status, last_step FROM runs ORDER BY started_at, run_id").fetchall()
    except duckdb.Error:
        return []


def _broken(path: Path, error: Exception) -> StoreBroken:
    return StoreBroken(f"{path} cannot be opened (damaged or truncated?): {' '.join(str(error).split())}. "
                       "Restore it from a copy, or move the study's runs/ folder aside to start a new store")


def _unopenable(layout: StudyLayout, read_only: bool, error: Exception) -> StoreBroken:
    """Why DuckDB could not open the store's file, as what it is. Only a file that is there and readable but
    not a whole database is damaged: the advice for damage (move runs/ aside, start a new store) would
    orphan every run of a store that is only read-only, a folder, or a symlink to a disk not mounted."""
    path = layout.db
    text = " ".join(str(error).split())
    dangling = layout.dangling_link()
    if dangling is not None:
        return StoreBroken(dangling)
    if path.is_dir():
        return StoreBroken(f"{path} is a folder, but the study's store is a DuckDB file there; move the folder "
                           "aside (or remove it) and run again")
    if "permission denied" in text.lower():
        return StoreBroken(_permission_denied(path, read_only))
    if read_only:
        return StoreBroken(f"{path} cannot be opened (damaged or truncated?): {text}")
    return _broken(path, error)


def _permission_denied(path: Path, read_only: bool) -> str:
    """DuckDB's "Permission denied" for the store's file, in words: what is not readable, or not writable."""
    if read_only:
        return f"permission denied: {path} is not readable by you; fix its permissions, or ask its owner for a copy"
    unwritable = [p for p in (path.parent, path) if p.exists() and not os.access(p, os.W_OK)]
    return _not_writable(unwritable or [path], path.exists())


def _not_writable(paths: list[Path], stored: bool) -> str:
    """Why a writer cannot use the store: ``paths`` (the first named, the outermost) are not writable. The
    runs are intact (``stored``: there is a store), so the way on is to read the store as it is, copy the
    study, or fix the permissions, never to start a new store."""
    more = f" (and {len(paths) - 1} more of the store's files and folders)" if len(paths) > 1 else ""
    intact = (" The store is not damaged: desim sql, desim runs, and export or report with --out elsewhere read "
              "it as it is") if stored else ""
    return (f"permission denied: {paths[0]}{more} is not writable by you, and a run records itself there; copy the "
            f"study to a folder you can write, or fix its permissions.{intact}")


def check_writable(layout: StudyLayout) -> None:
    """Refuse, before a writer opens the store, a store it cannot write: ``runs/`` (where DuckDB writes the
    database's journal: with a read-only folder the connection opened and its first write failed mid-run),
    the database, the run data, the progress files, or the folder ``runs/`` would be made in."""
    existing = [p for p in (layout.db.parent, layout.db, layout.data, layout.live) if p.exists()]
    if not layout.db.parent.exists():        # runs/ is made in the nearest folder that is there
        existing.insert(0, next(p for p in layout.db.parent.parents if p.exists()))
    unwritable = [p for p in existing if not os.access(p, os.W_OK)]
    if unwritable:
        raise StoreError(_not_writable(unwritable, layout.db.exists()))


def _is_lock(error: Exception) -> bool:
    """Whether DuckDB refused a file because another process holds it ("Could not set lock on file")."""
    return "lock" in str(error).lower()


def _writer(layout: StudyLayout, attempts: int, wait: float, *, forever: bool = False, on_wait: WaitFn | None = None,
            give_up_after: float | None = None) -> duckdb.DuckDBPyConnection:
    path = layout.db
    check_folders(layout)
    check_writable(layout)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = _connect(layout, False, attempts, wait, forever, on_wait, give_up_after)
    try:
        _quiet(con)
        check_layout(con, path)
        # a new database, told while holding its lock: another command that created it a moment ago (and
        # whose run folder is already there) has made its catalogue
        fresh = not has_table(con, "runs")
        for statement in MIGRATIONS:
            con.execute(statement)
        if fresh:
            set_aside_orphans(layout)
        ensure_anchors(layout.data)
        # a writer records runs; it never reads a running run's rows, so it does not register the live
        # journals (which would bind every view again, reading every run's file footers)
        define_views(con, layout.data, temp=False, with_live=False)
    except BaseException:
        con.close()
        raise
    return con


def check_folders(layout: StudyLayout) -> None:
    """Refuse a store whose own folders (``runs/``, its run data, its live progress files) are files: a writer
    opens before a run records anything, so the run stops here, naming the file, rather than with an
    ``OSError`` once its row is written (a run left ``running`` with no step, then ``stale``)."""
    for folder in (layout.db.parent, layout.data, layout.live):
        if folder.exists() and not folder.is_dir():
            raise StoreError(f"{folder} is a file, but the study's store keeps a folder there; move the file "
                             "aside (or remove it) and run again")


def set_aside_orphans(layout: StudyLayout) -> Path | None:
    """Move the run folders a new database finds beside it to ``runs/orphaned-<time>/``, and say so.

    They belong to a database that was deleted: the views read every run folder, so without this a
    deleted store's runs came back in ``panel`` and ``edges`` as runs with no row in ``runs`` (counted
    twice in any query over all runs, shown by the dashboard as runs it could not open). Moved, not
    deleted: their Parquet files can still be read by hand."""
    found = layout.run_dirs()
    if not found:
        return None
    import warnings
    from datetime import datetime, timezone

    from desim.errors import DesimNotice
    aside = layout.orphaned(datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S"))
    aside.mkdir(parents=True, exist_ok=True)
    for folder in found:
        folder.rename(aside / folder.name)
        live = layout.live_file(folder.name.removeprefix("run_id="))   # its progress file: not a run of this one
        if live.exists():
            live.rename(aside / live.name)
    warnings.warn(DesimNotice(
        f"{layout.db} is new, but {len(found)} run folder{'s' if len(found) != 1 else ''} of an earlier store "
        f"{'were' if len(found) != 1 else 'was'} beside it (its database was deleted): moved to {aside}, so "
        "that they are not read as runs of this one"), stacklevel=2)
    return aside


def define_views(con: duckdb.DuckDBPyConnection, data: Path, temp: bool, attempts: int = 5,
                 with_live: bool = True) -> None:
    """(Re)define the views over the data folder, where the stored ones will not do. Defining a view
    binds it, which reads every run's file footers (a third of a second at 200 runs, on every
    connection), so nothing is defined when the stored views and macros already read this folder
    with this desim's text and no run is going; DuckDB plans a view anew at each query, so the files
    of runs stored since are read all the same.

    A reader (``temp``) that cannot use them (a run going, whose journal it adds; a study moved; a
    store last written by another desim) defines its own for the connection's life. A writer
    redefines the stored ones. A run merging its step files can remove one under us: try again."""
    live = live_journals(con, data) if with_live else {}
    if live and not temp:           # the stored views stay as they are; this connection also sees the live runs
        define_views(con, data, temp=False, attempts=attempts, with_live=False)
        temp = True
    if not live and _stored_current(con, data):
        return
    for sql in view_sql(data, temp, live).values():
        for attempt in range(attempts):
            try:
                con.execute(sql)
                break
            except duckdb.InvalidInputException as e:      # a file that is no Parquet file: no retry mends it
                raise damaged_file(data, e) from None
            except duckdb.IOException as e:
                if attempt == attempts - 1:
                    raise damaged_file(data, e) from None
                time.sleep(0.02)
    for sql in paired_sql(temp, effects=has_table(con, "effect_pairs") if temp else True):
        con.execute(sql)
    if not temp:
        con.execute(f"COMMENT ON VIEW states IS '{definitions_mark()}'")


@functools.cache
def definitions_mark() -> str:
    """The text of desim's views and macros, hashed: kept in the stored ``states`` view's comment, it
    says whether a store's were defined by this desim (a view reading the right folder may still be
    an older definition)."""
    texts = list(view_sql(Path("/"), False).values()) + paired_sql(False)
    return "desim views " + hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]


def _stored_current(con: duckdb.DuckDBPyConnection, data: Path) -> bool:
    """Whether the stored views and macros read ``data`` and were defined with this desim's text."""
    rows = con.execute("SELECT view_name, sql, comment FROM duckdb_views() WHERE database_name = "
                       "current_database() AND schema_name = 'main'").fetchall()
    stored = {view: sql for view, sql, _ in rows}
    if next((comment for view, _, comment in rows if view == "states"), None) != definitions_mark():
        return False
    return all(view in stored and file_pattern(data, view) in stored[view] for view in (*VIEWS, "states"))


def damaged_file(data: Path, error: Exception) -> StoreBroken:
    """The error for a data file the views cannot read, naming it and its run: the file DuckDB names, or the
    first of the folder that is no whole Parquet file. A view reads every run's files, so one damaged file
    (a disk that filled, a copy cut short) stops every query of its table."""
    import pyarrow.parquet as pq
    named = named_file(error)
    for path in [named] if named is not None else sorted(data.glob("run_id=*/*.parquet")):
        try:
            pq.read_metadata(path)
        except (OSError, pa.ArrowException):
            run = path.parent.name.removeprefix("run_id=")
            return StoreBroken(f"{path} cannot be read (damaged or truncated?), and every view reads it: it is the "
                               f"{path.stem} table of run {run}. Restore it from a copy, or move {path.parent} "
                               "out of the store to read the other runs")
    return StoreBroken(f"the run data under {data} cannot be read: {error}")


def named_file(error: Exception, data: Path | None = None) -> Path | None:
    """The Parquet file a DuckDB error about reading one names, if it is such an error (and, with ``data``, a
    file of that data folder: a file of the user's own that a query reads is no damage to the store)."""
    if not isinstance(error, (duckdb.InvalidInputException, duckdb.IOException)):
        return None
    found = re.search(r"'([^']+\.parquet)'", str(error))
    if found is None:
        return None
    path = Path(found.group(1))
    if data is not None and not path.resolve().is_relative_to(data.resolve()):
        return None
    return path


def live_journals(con: duckdb.DuckDBPyConnection, data: Path) -> dict[str, list[tuple[str, str, bool]]]:
    """Register the committed journal of every run still going (or killed before its merge) on
    ``con``: ``{file name: [(run id, relation, whether the run had a merged file)]}`` for ``view_sql``."""
    out: dict[str, list[tuple[str, str, bool]]] = {}
    for n, log in enumerate(sorted(data.glob(f"run_id=*/journal/{journal.LOG}"))):
        run_dir = log.parent.parent
        run_id = run_dir.name.removeprefix("run_id=")
        try:
            _, tables = journal.read(log.parent)
        except StoreError as e:     # one damaged run is left out, not every query of the study refused
            import warnings

            from desim.errors import DesimNotice
            warnings.warn(DesimNotice(f"run {run_id} is left out of the views: {e}"), stacklevel=2)
            continue
        for name, batches in tables.items():
            if not batches:
                continue
            relation = f"desim_journal_{n}_{name}"
            schema = journal.unified(batches)
            con.register(relation, pa.Table.from_batches([journal.conform(b, schema) for b in batches], schema))
            out.setdefault(name, []).append((run_id, relation, (run_dir / f"{name}.parquet").exists()))
    return out


def check_layout(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a store of the JSON-text layout instead of misreading it."""
    row = con.execute("SELECT c.data_type FROM information_schema.tables t JOIN information_schema.columns c "
                      "USING (table_catalog, table_schema, table_name) WHERE t.table_catalog = current_database() "
                      "AND t.table_schema = 'main' AND t.table_name = 'panel' AND t.table_type = 'BASE TABLE' "
                      "AND c.column_name = 'state'").fetchone()
    if row and row[0] == "JSON":
        raise StoreLayoutError(
            f"{path} was written by an earlier desim that stored the panel as JSON text; this desim stores "
            "typed Parquet files and does not read that layout. Move the file aside (e.g. "
            f"mv {path} {path}.json-layout) and run the study again; the old file still opens in DuckDB.")


@contextmanager
def reading_checked(layout: StudyLayout, relative_to: Path, attempts: int = 4) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection for a server that must never hang and must name files as its users see them:
    few retries, every failure one of :class:`StoreMissing` (no store, or not a DuckDB file),
    :class:`StoreBusyError` (a writer holds it) or :class:`StoreBroken` (it cannot be read), with paths
    shown relative to ``relative_to``."""
    db = layout.db
    rel = db.relative_to(relative_to) if db.is_relative_to(relative_to) else db

    def shown(error: Exception) -> str:
        return str(error).replace(str(relative_to.resolve()) + "/", "").replace(str(relative_to) + "/", "")

    try:
        dangling = layout.dangling()
        if dangling is not None:     # its target is left out: often an absolute path, which stays on the server
            shown_link = dangling.relative_to(relative_to) if dangling.is_relative_to(relative_to) else dangling
            raise StoreBroken(f"{shown_link} is a symlink to something that does not exist (a disk not mounted, a "
                              "folder moved?); mount or restore it, or fix the link")
        layout.check_paths()
        if not db.is_file():
            raise StoreMissing(f"no store: {rel} does not exist (the study has not run yet, or the file was moved "
                               "or deleted)")
        if not is_duckdb_file(db):
            raise StoreMissing(f"{rel} cannot be opened: it is not a DuckDB database")
    except StorePathError as e:
        raise StoreBroken(shown(e)) from None
    except PermissionError:     # a folder or file of the study's the server's user cannot read
        raise StoreBroken(f"permission denied: {rel} (or a folder above it) is not readable by the dashboard's "
                          "user; fix its permissions") from None
    try:
        con = _reader(layout, attempts, 0.05)
    except StoreBroken as e:
        raise StoreBroken(shown(e).replace(str(db), str(rel))) from None
    except duckdb.Error as e:
        raise StoreBroken(f"{rel} cannot be opened as a DuckDB database: {shown(e)}") from None
    except StoreLayoutError as e:
        raise StoreBroken(shown(e)) from None
    try:
        yield con
    except duckdb.Error as e:
        raise StoreBroken(f"{rel} cannot be read (damaged or truncated?): {shown(e)}") from None
    finally:
        con.close()


def is_duckdb_file(path: Path) -> bool:
    """Whether ``path`` starts like a DuckDB database (DuckDB reports a foreign file as a lock)."""
    with path.open("rb") as fh:
        return fh.read(12)[8:12] == b"DUCK"


def fetch_dicts(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the catalogue has table ``name`` (a store read before any writer of this desim opened it
    may lack the newer ones)."""
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                            "AND table_name = ?", [name]).fetchone()[0])


def field(column: str, name: str) -> str:
    """SQL for one field of a struct column (``state``, ``payload``), quoted: ``t.state."opinion"``."""
    return f'{column}."' + str(name).replace('"', '""') + '"'


__all__ = ["StoreBroken", "StoreBusyError", "StoreError", "StoreLayoutError", "StoreMissing", "VIEWS",
           "check_layout", "define_views", "fetch_dicts", "field", "has_table", "is_duckdb_file", "open_store",
           "stop_waits_on"]
