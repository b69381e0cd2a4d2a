"""Parameter sweeps and replicates: every combination of a grid of study
parameters times a number of replicates, each a run of the study with its own
derived seed, executed on a local process pool or on Ray and merged into the
study's database.

* :func:`run_sweep` runs (or resumes) a sweep and returns a :class:`SweepResult`,
  warning with :class:`RunsFailedWarning` when some of its runs failed;
* :func:`sweep_table` summarises a recorded sweep (mean, sd, 95 % interval per
  combination and metric) for the CLI and reports;
* :func:`make_plan`, :class:`LocalExecutor`, :class:`RayExecutor`,
  :class:`InProcessExecutor` and :func:`merge_run` are the parts, for callers
  that need them alone.

A study whose classes a notebook defined (``__main__:Env``), or a program
Python read from standard input, cannot be run by worker processes: the local
back-end runs its runs in this process, warning with
:class:`RunsInProcessWarning` when workers were asked for.
"""
from desim.experiments.sweep.executors import (
    Executor,
    InProcessExecutor,
    LocalExecutor,
    RayExecutor,
    RunsInProcessWarning,
    make_executor,
)
from desim.experiments.sweep.merge import merge_run
from desim.experiments.sweep.plan import (
    PlannedRun,
    SweepError,
    SweepPlan,
    make_plan,
    parse_grid,
    seed_for,
)
from desim.experiments.sweep.runner import SweepResult, run_sweep
from desim.experiments.sweep.summary import RunsFailedWarning, describe, sweep_table  # noqa: F401
# RunsFailedWarning is importable from here but not in __all__: desim.sweep (the old name) re-exports __all__
# and would have to import it too

__all__ = [
    "Executor", "InProcessExecutor", "LocalExecutor", "PlannedRun", "RayExecutor", "RunsInProcessWarning",
    "SweepError", "SweepPlan", "SweepResult",
    "describe", "make_executor", "make_plan", "merge_run", "parse_grid", "run_sweep", "seed_for",
    "sweep_table",
]
