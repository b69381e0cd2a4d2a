"""Executors: where a sweep's runs execute. One interface, two back-ends.

``Executor.run(tasks)`` yields one :class:`RunOutcome` per task, as each run
ends, in completion order, so the parent can merge finished runs while
others are still going. A worker that dies yields a ``crashed`` outcome for
its run only; the others carry on.

* :class:`LocalExecutor`: a process pool on this machine. It is ``W`` lanes,
  each a one-worker ``ProcessPoolExecutor``: when a worker process is killed
  its pool breaks, and with one run per pool the broken pool names exactly
  the run that crashed (a shared pool would fail every run in flight). Lanes
  use the ``forkserver`` start method where it exists (``spawn`` elsewhere):
  never plain ``fork``, which is unsafe with DuckDB's threads in the parent.
  Each worker ignores Ctrl-C (the parent stops the lanes) and watches the
  parent's pid: when the sweep's process dies the workers exit, and the
  forkserver with them, so a killed sweep leaves no process behind.
* :class:`RayExecutor`: Ray tasks on an existing cluster (``address``) or on
  a Ray instance started here. Tasks are not retried by Ray, so a dead
  worker or node makes its run ``failed`` and ``--resume`` reruns it.
* :class:`InProcessExecutor`: the runs one after another in this process,
  what the local back-end does when no worker process could run them (see
  :func:`worker_obstacle`): a study whose classes a notebook defined, or a
  program Python read from standard input.
"""
from __future__ import annotations

import ast
import multiprocessing
import os
import re
import sys
import warnings
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Iterable, Iterator

from desim.experiments.sweep.plan import SweepError
from desim.experiments.sweep.worker import (
    RunOutcome,
    RunTask,
    StudyBundle,
    execute_bundled,
    execute_run,
    process_start,
    worker_init,
)
from desim.store.files import remove_db, unpack_run
from desim.store.ledger import keep_paid_calls
from desim.study.files import FILES, read_json

BACKENDS = ("local", "ray")


class Executor:
    """Runs tasks and yields their outcomes as they finish."""

    name = "executor"

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor started (processes, a Ray instance)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _mp_context():
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # workers fork from a server that has already imported the engine: a fresh lane starts in ms
        ctx.set_forkserver_preload(["desim.run.engine", "desim.experiments.sweep.worker"])
    return ctx


def _start_forkserver() -> None:
    """Start the forkserver without the current folder on its ``sys.path``. It runs as ``python -c``, which
    puts the folder first, and (up to Python 3.11 at least) preloads desim before taking the parent's path:
    a folder named ``desim`` where the command runs (a clone of desim's repository) then shadowed the
    installed package, and every run failed with "cannot import name ... from 'desim' (unknown location)".
    ``PYTHONSAFEPATH`` (Python 3.11 on) keeps the folder off; the workers' own path is the parent's."""
    from multiprocessing import forkserver
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        forkserver.ensure_running()
    finally:
        if before is None:
            del os.environ["PYTHONSAFEPATH"]
        else:
            os.environ["PYTHONSAFEPATH"] = before


class LocalExecutor(Executor):
    """``workers`` one-process pools on this machine (default: the number of CPUs)."""

    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._ctx = _mp_context()
        self._lanes: list[ProcessPoolExecutor | None] = [None] * self.workers
        # the environment as it is now: the forkserver kept the one it started with, and a notebook that set
        # DESIM_LLM_BASE_URL (or a proxy) since must have its workers see the new value
        self._me = (os.getpid(), process_start(os.getpid()), 0.5, dict(os.environ))

    def _lane(self, i: int) -> ProcessPoolExecutor:
        if self._lanes[i] is None:
            if self._ctx.get_start_method() == "forkserver":
                _start_forkserver()
            self._lanes[i] = ProcessPoolExecutor(max_workers=1, mp_context=self._ctx, initializer=worker_init,
                                                 initargs=self._me)
        return self._lanes[i]

    def _drop_lane(self, i: int) -> None:
        """Shut a lane down; a worker still running (the sweep was interrupted) is terminated."""
        pool, self._lanes[i] = self._lanes[i], None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())  # no public handle before 3.14
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            if proc.is_alive():
                proc.terminate()
                proc.join()

    def _fill(self, queue: deque, free: list[int], running: dict) -> None:
        """Give every free lane its next task."""
        while queue and free:
            lane = free.pop()
            task = queue.popleft()
            running[self._lane(lane).submit(execute_run, task)] = (lane, task)

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        queue = deque(tasks)
        running: dict[Future, tuple[int, RunTask]] = {}
        free = list(range(self.workers))
        self._fill(queue, free, running)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            finished = []
            for fut in done:
                lane, task = running.pop(fut)
                free.append(lane)
                try:
                    finished.append(fut.result())
                except BrokenProcessPool:
                    self._drop_lane(lane)
                    finished.append(RunOutcome(task.run_id, "crashed", "the worker process died while "
                                               "running it (killed, out of memory, or a crash in native code)"))
            self._fill(queue, free, running)   # keep the lanes busy while the parent merges
            yield from finished

    def close(self) -> None:
        for i in range(self.workers):
            self._drop_lane(i)


def import_ray(error: type[Exception] = SweepError):
    """The ``ray`` module, or ``error`` saying how to install it. :func:`check_executor` calls it before a sweep
    or an effect records anything, so a missing Ray leaves no recorded sweep that no ``--resume`` can finish."""
    try:
        import ray
    except ImportError:
        raise error("the ray backend needs Ray: pip install 'desim[ray]' (or pip install 'ray>=2.9')") from None
    return ray


class RayExecutor(Executor):
    """Ray tasks, one CPU each: on the Ray this process already joined, else on the
    cluster at ``address``, else on a Ray instance started here (and shut down by ``close``).

    The study's files travel with the tasks (a :class:`StudyBundle`) and each
    run's DuckDB file comes back as bytes, written to ``Path(task.db_path)``
    here, so the cluster needs no shared disk; the nodes need desim (and the
    study's own dependencies) installed.
    """

    name = "ray"

    def __init__(self, study_root: str | Path, workers: int | None = None, address: str | None = None):
        ray = import_ray()
        self.ray = ray
        self.started_here = not ray.is_initialized()
        if self.started_here and address:
            ray.init(address=address)
        elif self.started_here:
            ray.init(num_cpus=workers, include_dashboard=False)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.in_flight = max(1, workers or cpus)
        self._remote = ray.remote(num_cpus=1, max_retries=0)(execute_bundled)
        self._bundle = ray.put(StudyBundle.from_folder(study_root))

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        ray = self.ray
        queue = deque(tasks)
        running: dict = {}

        def fill() -> None:
            while queue and len(running) < self.in_flight:
                task = queue.popleft()
                parent = Path(task.parent_file).read_bytes() if task.parent_file else None
                running[self._remote.remote(self._bundle, task, parent)] = task

        fill()
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            finished = [(running.pop(ref), ref) for ref in done]
            fill()   # keep the cluster busy while the parent merges
            for task, ref in finished:
                yield self._outcome(task, ref)

    def _outcome(self, task: RunTask, ref) -> RunOutcome:
        """The task's outcome, its file written where the parent merges from; a dead worker is a crash."""
        try:
            outcome: RunOutcome = self.ray.get(ref)
        except self.ray.exceptions.RayError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return RunOutcome(task.run_id, "crashed", f"{type(e).__name__}: {first}")
        if outcome.file_bytes is not None:
            unpack_run(outcome.file_bytes, task.db_path)
            outcome.file_bytes, outcome.worker_file = None, task.db_path
        return outcome

    def close(self) -> None:
        if self.started_here:
            self.ray.shutdown()
            self.started_here = False


class InProcessExecutor(Executor):
    """The runs one after another in this process, each written to its own file as a worker's would be
    (the same code, :func:`execute_run`, so the same panels): for a study no worker process can run
    (:func:`worker_obstacle`). A run that is interrupted leaves no file behind; ``--resume`` reruns it."""

    name = "in-process"

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        for task in tasks:
            try:
                outcome = execute_run(task)
            except BaseException:       # Ctrl-C: nobody will merge this run's partial file
                keep_paid_calls(task.db_path, task.run_id, task.study_root)
                remove_db(task.db_path, task.run_id)
                raise
            yield outcome


class RunsInProcessWarning(UserWarning):
    """A sweep or an effect asked for worker processes runs its runs one at a time in this process, because
    no worker process could run them; the message says why and how to get the workers back."""


MAIN_REF = re.compile(r"^__main__:([A-Za-z_]\w*)$")


def _main_refs(data, where: str) -> Iterator[tuple[str, str]]:
    """Every ``"__main__:Name"`` in a study file's data, with the field it is in (``provider.ref``)."""
    if isinstance(data, str) and MAIN_REF.match(data):
        yield where, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _main_refs(value, f"{where}.{key}" if where else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _main_refs(value, f"{where}[{i}]")


def main_refs(study_root: str | Path) -> list[tuple[str, str]]:
    """The refs into ``__main__`` the study's files hold, as ``("environment/environment.json: provider.ref",
    "__main__:Env")``: the classes of a ``desim.Study`` made in a notebook or a script."""
    out = []
    for rel, _ in FILES.values():
        path = Path(study_root) / rel
        if path.is_file():
            out += [(f"{rel}: {field}", ref) for field, ref in _main_refs(read_json(path), "")]
    return out


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
            and isinstance(node.test.ops[0], ast.Eq)):
        return False
    sides = [node.test.left, *node.test.comparators]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _names_a_worker_defines(body: list[ast.stmt]) -> set[str]:
    """The names a script binds at its top level outside ``if __name__ == "__main__":``, the names a worker
    process has: it runs the script again as ``__mp_main__``, where that block does not run."""
    names: set[str] = set()
    for node in body:
        if _is_main_guard(node):
            names |= _names_a_worker_defines(node.orelse)
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        else:                           # if / try / with / for at the top level: what their blocks bind
            inner = [*getattr(node, "body", []), *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                     *(x for h in getattr(node, "handlers", []) for x in h.body)]
            names |= _names_a_worker_defines([x for x in inner if isinstance(x, ast.stmt)])
    return names


def _main_file() -> tuple[str | None, bool]:
    """The file a worker process runs again to make its ``__main__`` (as multiprocessing finds it), and
    whether it can: none for a notebook, ``python -c`` or the REPL; ``<stdin>`` for ``python -``, which a
    worker cannot run (it dies at its start)."""
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    if file is None:
        return None, False
    if getattr(getattr(main, "__spec__", None), "name", None):         # python -m package.module
        return file, True
    path = file if os.path.isabs(file) else os.path.join(multiprocessing.process.ORIGINAL_DIR or "", file)
    return file, os.path.isfile(path)


def worker_obstacle(study_root: str | Path, backend: str = "local") -> tuple[str, str] | None:
    """Why no worker process of ``backend`` can run the study's runs, and the fix, in words naming what is at
    fault (None: workers can run them).

    A worker builds the study from its files, so a class they name as ``__main__:Env`` (a ``desim.Study`` made
    from the classes of a notebook or a script) must exist in the worker's ``__main__``. A local worker makes
    its ``__main__`` by running the main script again, without its ``if __name__ == "__main__":`` block, so a
    class a notebook, ``python -c`` or the REPL defined is not there, nor one defined inside that block; a Ray
    worker never has the driver's. And a program Python read from standard input (``python - < file``) has no
    file a local worker could run again, so no local worker can start at all. A ref this process cannot
    resolve either is left to the study's checks, which refuse it by name."""
    main = sys.modules.get("__main__")
    file, runnable = _main_file()
    if backend == "local" and file is not None and not runnable:
        return (f"Python read this program from standard input ({file}), and a worker process starts by running "
                "the program's file again: there is none, so no worker could start",
                "run the program from a file (python script.py)")
    refs = [(where, ref) for where, ref in main_refs(study_root) if hasattr(main, ref.split(":", 1)[1])]
    if refs and backend == "local" and file is not None:
        try:
            defined = _names_a_worker_defines(ast.parse(Path(file).read_bytes(), file).body)
        except (OSError, SyntaxError, ValueError):
            defined = set()
        refs = [(where, ref) for where, ref in refs if ref.split(":", 1)[1] not in defined]
    if not refs:
        return None
    names = list(dict.fromkeys(ref.split(":", 1)[1] for _, ref in refs))
    said = " and ".join(f"{where} is {ref}" for where, ref in refs)
    one = len(names) == 1
    classes, them = ("the class", "it") if one else ("the classes", "them")
    if backend != "local":
        return (f"{said}, which a {backend} worker cannot import (its __main__ is another program)",
                f"move {classes} into the study folder's model.py (the study refers to {them} as "
                f"{', '.join(f'model:{n}' for n in names)}), whose files travel with the runs, or use "
                "backend='local', which runs such a study in this process")
    # not model.py: a ref "model:Name" is the study folder's model.py, which a folder elsewhere does not have
    move = (f"move {classes} into a module file beside the notebook or script (e.g. my_classes.py, then "
            f"from my_classes import {', '.join(names)}) and make the study from there")
    if file is None:
        return (f"{said}, {'a class' if one else 'classes'} defined in this notebook (or interactive session), "
                "which a worker process cannot import", move)
    return (f"{said}, defined in {file} inside if __name__ == \"__main__\": (or not at its top level), which a "
            "worker process does not run", move)


def check_executor(backend: str, study_root: str | Path, workers: int | None, address: str | None,
                   what: str, error: type[Exception] = SweepError, stacklevel: int = 3) -> bool:
    """Refuse, before anything is recorded, what :func:`make_executor` would refuse only later (an unknown
    backend, ``address`` for the local one, ``workers`` below 1, the ray backend where Ray is not installed)
    and a study no Ray worker can build. Returns
    whether the local back-end will run the runs in this process (:func:`worker_obstacle`), and says so with
    a :class:`RunsInProcessWarning` naming ``what`` (``"desim.effect"``) when ``workers`` asked for workers
    (``workers=1`` asks for one run at a time, which this is: no warning). ``stacklevel`` is
    ``warnings.warn``'s, counted from the caller of this function: the user's line that called ``what``."""
    check_workers(workers)
    if backend not in BACKENDS:
        raise error(f"unknown backend '{backend}' (choose from {', '.join(BACKENDS)})")
    if backend == "local" and address:
        raise error("--address is for the ray backend")
    if backend == "ray":
        reach_ray(import_ray(error), address, error)    # now, not once the sweep or effect is recorded
    obstacle = worker_obstacle(study_root, backend)
    if obstacle is None:
        return False
    why, fix = obstacle
    if backend != "local":
        raise error(f"{why}: {fix}")
    if workers != 1:
        warnings.warn(RunsInProcessWarning(
            f"{what}: {why}; so its runs run one at a time in this process. To run them on several workers, "
            f"{fix}; pass workers=1 to run them here without this warning"), stacklevel=stacklevel + 1)
    return True


def reach_ray(ray, address: str | None, error: type[Exception]) -> None:
    """Refuse a Ray cluster at ``address`` that cannot be joined (``auto`` with none running, a wrong host):
    the sweep or effect would otherwise be recorded, then fail with Ray's traceback. Joining costs about a
    second; the executor joins again for the runs (a process already in Ray is left as it is)."""
    if not address or ray.is_initialized():
        return
    try:
        ray.init(address=address)
    except Exception as e:      # ConnectionError, a timeout, a version mismatch: whatever Ray says
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise error(f"cannot join the Ray cluster at --address {address}: {said} (start one with "
                    "'ray start --head', or leave out --address to start Ray on this machine)") from None
    ray.shutdown()


def check_workers(workers: int | None) -> None:
    """Refuse a worker count below 1 before anything is recorded: ``LocalExecutor`` would read 0 as "the
    CPUs" and -1 as one worker, running something else than what was asked."""
    if workers is not None and workers < 1:
        raise SweepError(f"--workers must be 1 or more (got {workers}); leave it out to use every CPU")


def make_executor(backend: str, study_root: str | Path, workers: int | None = None,
                  address: str | None = None) -> Executor:
    check_workers(workers)
    if backend == "local":
        if address:
            raise SweepError("--address is for the ray backend")
        if worker_obstacle(study_root):
            return InProcessExecutor()
        return LocalExecutor(workers)
    if backend == "ray":
        return RayExecutor(study_root, workers, address)
    raise SweepError(f"unknown backend '{backend}' (choose from {', '.join(BACKENDS)})")
