"""``desim sweep``: a grid of parameter values x replicates, on a local process pool or Ray."""
from __future__ import annotations

from desim.commands.core import add_study_arg, parse_sets, print_llm_spend, print_table
from desim.commands.progress import Progress, RunsProgress, add_quiet_arg
from desim.errors import shell_arg


class SweepProgress(RunsProgress):
    """The sweep's runs as they finish: the commands' progress over runs (a bar with the time left on a
    terminal, timestamped lines elsewhere), with a line of its own for a run that failed."""

    def __init__(self, label: str, study: str, backend: str, workers: int | None, quiet: bool = False):
        self.label, self.study, self.backend, self.workers, self.quiet = label, study, backend, workers, quiet
        self.bar: Progress | None = None
        self.sweep_id: str | None = None      # once the plan is recorded: what --resume takes

    def start(self, plan, n_to_run: int) -> None:
        self.sweep_id = plan.sweep_id
        self.bar = Progress(n_to_run, self.label, unit="run", quiet=self.quiet)
        sizes = (" x ".join(str(len(v)) for v in plan.grid.values()) + " combinations" if plan.grid
                 else "the study's values")
        workers = f", {self.workers} worker{'s' if self.workers != 1 else ''}" if self.workers else ""
        self.bar.note(f"sweep {plan.sweep_id}: {sizes} x {plan.replicates} replicates, "
                      f"{n_to_run} runs to go on {self.backend}{workers} "
                      f"(if interrupted: desim sweep {shell_arg(self.study)} --resume {shell_arg(plan.sweep_id)})")

    def __call__(self, outcome, done: int, total: int) -> None:
        self.run_done(outcome, done, f"{outcome.run_id} failed")


def outside_the_run_of_grid(study: str, grid: dict[str, list], steps: int | None) -> list[str]:
    """For each combination of ``grid`` (its parameters resolved as its runs will have them), the
    interventions after the last step, each line saying which combination."""
    from itertools import product

    from desim.errors import StudyConfigError
    from desim.lint import outside_the_run
    from desim.study.files import load_study
    out = []
    names = list(grid)
    for values in product(*(grid[n] for n in names)):
        combo = dict(zip(names, values))
        try:
            spec = load_study(study, steps=steps, params=combo)
        except StudyConfigError:
            return []               # the sweep itself refuses the grid, with its own words
        for warning in outside_the_run(spec):
            out.append(", ".join(f"{k}={v}" for k, v in combo.items()) + f": {warning}")
    return out


def unread_in_grid(study: str, grid: dict[str, list]) -> list[str]:
    """For each parameter of ``grid`` that nothing in the study reads, why it seems so."""
    from desim.errors import StudyConfigError
    from desim.study.files import load_study
    from desim.study.params import unread_parameters
    try:
        unread = unread_parameters(load_study(study))
    except StudyConfigError:
        return []                   # the sweep itself refuses the study, with its own words
    return [unread[name] for name in grid if name in unread]


def sets_once(items: list[str] | None, option: str = "--set", grid: bool = False) -> dict[str, str]:
    """``parse_sets`` for ``option``; a sweep's message says how to give several values (one option:
    ``epsilon=0.2,0.3``)."""
    return parse_sets(items, option, " (several values: NAME=V1,V2)" if grid else "")


def interrupted(command: str, study: str, resume_id: str | None) -> int:
    """Ctrl-C: one line saying what is kept and how to go on; exit status 130, as the README's table says."""
    import sys
    if resume_id is None:           # nothing recorded yet
        raise KeyboardInterrupt
    print(f"desim: interrupted; the completed runs are kept: desim {command} {shell_arg(study)} --resume {shell_arg(resume_id)} "
          "runs the rest", file=sys.stderr)
    return 130


CLIP_FLAGS = ("ci_clipped", "ci_low_clipped", "ci_high_clipped")     # shown as a mark on the end, not as columns


def rounded(row: dict) -> dict:
    """A summary row as printed: mean, sd and interval to the digits the interval supports, an end clipped at
    the metric's bounds marked (the store and the table desim.experiments.sweep returns keep every digit)."""
    from desim.report.numbers import row_cells
    if "mean" not in row:
        return row
    return {**row, **dict(zip(("mean", "sd", "ci_low", "ci_high"), row_cells(row)))}


def cmd_sweep(args) -> int:
    from warnings import catch_warnings, simplefilter

    from desim.commands import UserError
    from desim.experiments.sweep import RunsFailedWarning, SweepError, parse_grid, run_sweep
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    progress = SweepProgress(args.study.rstrip("/").split("/")[-1], args.study, args.backend, args.workers,
                             quiet=args.quiet)
    try:
        grid = parse_grid(sets_once(args.set, grid=True))
        if not args.resume and not grid and (args.replicates or 1) < 2:
            raise SweepError("give the grid with --set name=v1,v2,..., or --replicates N (N >= 2) for replicates "
                             "of the study's values (or --resume SWEEP_ID)")
        if grid and not args.allow:
            unread = unread_in_grid(args.study, grid)
            if unread:
                raise SweepError("\n  ".join(unread) + "\n  so every value of it would give the same runs "
                                 "(--allow runs the sweep anyway: code outside the study's folder may read it)")
            never = outside_the_run_of_grid(args.study, grid, args.steps)
            if never:
                raise SweepError("in some runs of this grid an intervention falls after the last step, so the "
                                 "sweep would compare runs where it never fires:\n  " + "\n  ".join(never) +
                                 "\n  (--allow runs the sweep anyway)")
        with catch_warnings():     # the failed runs are listed below, and the exit status is 2
            simplefilter("ignore", RunsFailedWarning)
            result = run_sweep(args.study, grid, args.replicates, args.workers, args.backend, args.address,
                               metrics, steps=args.steps, seed=args.seed, resume=args.resume,
                               on_start=progress.start, on_run=progress, on_wait=progress.waiting)
    except SweepError as e:
        raise UserError(str(e)) from None
    except KeyboardInterrupt:
        progress.finish()           # the message below starts on a line of its own
        return interrupted("sweep", args.study, progress.sweep_id)
    finally:
        progress.finish()
    if result.table:
        from desim.report.numbers import clipped_note
        columns = [c for c in result.table[0] if c not in CLIP_FLAGS]
        print_table(columns, [tuple(rounded(row)[c] for c in columns) for row in result.table], limit=10_000)
        if clipped_note(result.table):
            print(f"  {clipped_note(result.table)}")
    failed = result.failed
    print(f"sweep {result.sweep_id}: {result.completed} of {len(result.plan.runs)} runs completed "
          f"({len(result.ran)} executed now), {len(failed)} failed, wall time {result.wall_seconds:.1f} s")
    print("  (mean, sd and 95 % interval of the mean across replicates, at each run's final step)")
    print_llm_spend(args.study, [r.run_id for r in result.plan.runs], "the sweep's")
    from desim.experiments.sweep.summary import capped_note
    capped = capped_note(args.study, result.sweep_id)
    if capped:
        print(f"  note: {capped}")
    if failed:
        print(f"  failed: {', '.join(failed)}")
        print(f"  rerun them: desim sweep {shell_arg(args.study)} --resume {shell_arg(result.sweep_id)}")
        return 2        # a failed run is an error (README, exit status)
    from desim.store.queries import example_for_sweep
    print(f"  try: desim sql {shell_arg(args.study)} {shell_arg(example_for_sweep(result.sweep_id))}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a study over a grid of parameters x replicates (local pool or Ray)")
    add_study_arg(p)
    p.add_argument("--set", action="append", metavar="NAME=V1,V2,...",
                   help="a study parameter and its values (repeat for a grid)")
    p.add_argument("--replicates", type=int, default=1, help="runs per combination, each with its own seed")
    p.add_argument("--workers", type=int, help="parallel runs (default: the CPUs of the machine or cluster)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="where the runs go: local worker processes (default) or Ray")
    p.add_argument("--address", help="a Ray cluster to join (ray backend), e.g. ray://head:10001 or auto")
    p.add_argument("--metrics", help="comma-separated metrics to summarise (default: study.json display_metrics)")
    p.add_argument("--steps", type=int, help="override n_steps for every run")
    p.add_argument("--seed", type=int, help="override the study seed the runs' seeds derive from")
    p.add_argument("--resume", metavar="SWEEP_ID", help="rerun only the missing or failed runs of a sweep")
    p.add_argument("--allow", action="store_true",
                   help="run even when in some combinations an intervention falls after the last step, or a "
                        "swept parameter is read by nothing in the study's folder")
    add_quiet_arg(p)
    p.set_defaults(func=cmd_sweep)
