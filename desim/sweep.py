"""``desim.sweep``, as documented before the sweeps moved to ``desim.experiments.sweep``: the same names."""
from desim.experiments.sweep import (Executor, InProcessExecutor, LocalExecutor, PlannedRun,  # noqa: F401
                                     RayExecutor, RunsInProcessWarning, SweepError, SweepPlan, SweepResult,
                                     describe, make_executor, make_plan, merge_run, parse_grid, run_sweep,
                                     seed_for, sweep_table)
from desim.experiments.sweep import __all__  # noqa: F401
