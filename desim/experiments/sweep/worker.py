"""What runs inside a worker: one planned run, written to its own DuckDB file.

DuckDB allows one writing process per file, so a worker never touches the
study's database; the parent merges the worker's file when the run ends.
A run whose study code raises ends ``failed`` inside its file (its completed
steps kept, as for ``desim run``); a worker process that dies returns
nothing, and the executor reports the run as crashed.

For Ray the study travels as a :class:`StudyBundle` (its files, without
``runs/``), because a node of a cluster need not see the driver's disk; the
worker unpacks it once per node and sends its run's file back as bytes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desim.errors import RunFailed
from desim.experiments.branches import branch
from desim.experiments.runs import run_once
from desim.store import StudyLayout
from desim.store.files import pack_run, remove_db
from desim.store.ledger import keep_paid_calls
from desim.store.replies import shared_access
from desim.study.files import load_study, read_json
from desim.study.refs import study_modules_outside
from desim.versions import CONFIG_FILES, POPULATION_FILE, code_files, population_files


@dataclass(frozen=True)
class RunTask:
    """One run for a worker: the study, the run's identity, seed and parameters, and its file."""

    study_root: str
    sweep_id: str
    run_id: str
    seed: int
    parameters: dict[str, Any]
    steps: int | None
    db_path: str
    note: str | None = None
    from_run: str | None = None         # a branch of this run (``desim effect``'s treatments) ...
    at_step: int | None = None          # ... forking at this step,
    parent_file: str | None = None      # read from this extract of the study's database


@dataclass
class RunOutcome:
    """How a run ended, seen from the parent.

    ``status`` is ``completed``, ``failed`` (the study raised; the worker file
    holds the failed run and its completed steps, when it got that far) or
    ``crashed`` (the worker process or its node died; no usable file).
    """

    run_id: str
    status: str
    error: str | None = None
    worker_file: str | None = None
    wall_seconds: float = 0.0
    file_bytes: bytes | None = None


def process_start(pid: int) -> str | None:
    """A process's start time as the kernel counts it (Linux), so a reused pid is not mistaken for it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _parent_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return start is None or process_start(pid) in (None, start)


def _watch_parent(pid: int, start: str | None, every: float) -> None:
    while True:
        time.sleep(every)
        if not _parent_alive(pid, start):
            os._exit(1)     # the sweep is gone: nobody will merge this run; --resume reruns it


def worker_init(parent_pid: int, parent_start: str | None, every: float = 0.5,
                environ: dict[str, str] | None = None) -> None:
    """Set up a local worker process: Ctrl-C is the parent's to handle (it stops the lanes), and
    a watchdog ends the worker when the sweep's process dies, so a killed sweep leaves no
    process behind (the forkserver exits once its workers have). ``environ`` is the sweep's
    environment when it started: a worker forked from a forkserver started earlier would otherwise run
    with that earlier one (an old ``DESIM_LLM_BASE_URL``)."""
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent_pid, parent_start, every), daemon=True,
                     name="desim-sweep-watchdog").start()


def execute_run(task: RunTask) -> RunOutcome:
    """Run one planned run into ``task.db_path`` (replacing any leftover from a crashed attempt, whose paid
    LLM calls are kept for this attempt to record)."""
    started = time.perf_counter()
    if Path(task.db_path).exists():
        keep_paid_calls(task.db_path, task.run_id, task.study_root)
    remove_db(task.db_path, task.run_id)
    try:
        with shared_access():       # the other workers' runs use the study's LLM reply cache too
            return _execute(task, started)
    except RunFailed as e:
        return RunOutcome(task.run_id, "failed", e.error, task.db_path, time.perf_counter() - started)
    except Exception as e:  # the study could not even be built: no run row in the file
        remove_db(task.db_path, task.run_id)
        return RunOutcome(task.run_id, "failed", f"{type(e).__name__}: {e}", None,
                          time.perf_counter() - started)


def _execute(task: RunTask, started: float) -> RunOutcome:
    """The run itself: a branch of a stored run (an effect's treatment) or a run from step 0."""
    if task.from_run:
        result = branch(task.study_root, task.from_run, task.at_step, params=task.parameters,
                        steps=task.steps, note=task.note, parent_db=task.parent_file, db_path=task.db_path,
                        run_id=task.run_id, sweep_id=task.sweep_id, handle_signals=False)
    else:
        spec = load_study(task.study_root, steps=task.steps, seed=task.seed, params=task.parameters)
        result = run_once(spec, db_path=task.db_path, sweep_id=task.sweep_id, run_id=task.run_id,
                          note=task.note, handle_signals=False)
    if result.status != "completed":    # stopped cleanly (an LLM budget): rerun by --resume
        return RunOutcome(task.run_id, "failed", result.error, task.db_path, time.perf_counter() - started)
    return RunOutcome(task.run_id, "completed", None, task.db_path, time.perf_counter() - started)


@dataclass(frozen=True)
class StudyBundle:
    """A study's files (except its runs) as bytes, named by a digest of their content."""

    name: str
    files: dict[str, bytes]
    digest: str
    outside: dict[str, bytes] = dataclasses.field(default_factory=dict)   # by path from the study's folder

    @classmethod
    def from_folder(cls, root: str | Path) -> "StudyBundle":
        """What a run reads, as the study's version counts it: its four files, its code and its data
        (:func:`desim.versions.code_files`), not its runs, a venv, notebooks or what ``.desimignore`` lists;
        and the study modules its code imports from outside its folder (a sibling study's ``model.py``), at
        the same place relative to it."""
        root = Path(root)
        population = root / POPULATION_FILE
        data = population_files(read_json(population)) if population.is_file() else []
        names = sorted({*(f for f in CONFIG_FILES if (root / f).is_file()), *code_files(root, data)})
        files = {rel: (root / rel).read_bytes() for rel in names}
        outside = {Path(os.path.relpath(file, root.resolve())).as_posix(): file.read_bytes()
                   for file in study_modules_outside(root, load_study(root).resolved())}
        h = hashlib.sha256()
        for rel, data in sorted(files.items()) + sorted(outside.items()):
            h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        return cls(root.resolve().name, files, h.hexdigest()[:16], outside)

    def unpack(self) -> Path:
        """The study folder on this node, written once per content digest (safe under concurrency), in a
        folder of the user's own: another user's unpacked copy of the same study is not theirs to read. The
        study sits as many folders deep as its outside modules are above it, so they land inside too."""
        base = Path(tempfile.gettempdir()) / f"desim-sweep-studies-{os.getuid()}" / self.digest
        ups = max((rel.split("/").count("..") for rel in self.outside), default=0)
        dest = base.joinpath(*["up"] * max(0, ups - 1), self.name)
        if dest.is_dir():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".unpack-"))
        for rel, data in self.outside.items():   # beside the study folder: written whole, then moved in place
            target = Path(os.path.normpath(staging / rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_name(f".{target.name}.{os.getpid()}")
            part.write_bytes(data)
            os.replace(part, target)
        for rel, data in self.files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:
            staging.rename(dest)
        except OSError:  # another worker on this node unpacked it first
            shutil.rmtree(staging, ignore_errors=True)
        return dest


def execute_bundled(bundle: StudyBundle, task: RunTask, parent_bytes: bytes | None = None) -> RunOutcome:
    """Run ``task`` on a node that may not share the driver's disk; the file comes back as bytes
    (a branch's parent extract travels as ``parent_bytes``)."""
    root = bundle.unpack()
    scratch = Path(tempfile.mkdtemp(prefix="desim-run-"))
    try:
        parent_file = None
        if parent_bytes is not None:
            parent_file = str(StudyLayout.parent_extract(scratch, task.run_id))
            Path(parent_file).write_bytes(parent_bytes)
        local = dataclasses.replace(task, study_root=str(root), db_path=str(StudyLayout.worker_store(scratch, task.run_id)),
                                    parent_file=parent_file)
        outcome = execute_run(local)
        if outcome.worker_file is not None:
            outcome.file_bytes = pack_run(outcome.worker_file, task.run_id)
            outcome.worker_file = None
        return outcome
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
