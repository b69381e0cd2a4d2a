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
"""
from __future__ import annotations

import multiprocessing
import os
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
    unpack_run,
    worker_init,
)

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


class LocalExecutor(Executor):
    """``workers`` one-process pools on this machine (default: the number of CPUs)."""

    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._ctx = _mp_context()
        self._lanes: list[ProcessPoolExecutor | None] = [None] * self.workers
        self._me = (os.getpid(), process_start(os.getpid()))

    def _lane(self, i: int) -> ProcessPoolExecutor:
        if self._lanes[i] is None:
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
        try:
            import ray
        except ImportError:
            raise SweepError("the ray backend needs Ray: pip install 'desim[ray]' "
                               "(or pip install 'ray>=2.9')") from None
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
        return LocalExecutor(workers)
    if backend == "ray":
        return RayExecutor(study_root, workers, address)
    raise SweepError(f"unknown backend '{backend}' (choose from {', '.join(BACKENDS)})")
