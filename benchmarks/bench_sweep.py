"""Sweep throughput: one grid x replicates on the local pool (1 and 2 workers)
and on a local Ray instance, against the same runs done in-process.

    python benchmarks/bench_sweep.py                       # Schelling 50x50, 5 x 20 x 200 steps
    python benchmarks/bench_sweep.py --replicates 4        # a quicker look
    python benchmarks/bench_sweep.py --json PATH           # and the figures as one JSON object
    python benchmarks/bench_sweep.py --set homophily=0.3,0.6 --replicates 2 --steps 3 --baseline-runs 1 --configs local1,local2
                                                           # smoke (a test runs it; Ray left out, its start-up is slow)

Each configuration sweeps a fresh copy of the study (its own database). The
baseline is ``--baseline-runs`` runs of the same study done one after the other
in this process with ``run_study`` (their own store file each, as a worker does);
the overhead per run is ``wall x workers / runs`` minus that baseline: process
start-up, shipping, merging into the study's database and waiting, per run
and per core used. The baseline is measured before and after the sweeps (the
machine may be shared) and the load average is printed with each line.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from desim.study.files import load_study
from desim import run_study
from desim.experiments.sweep import make_plan, parse_grid, run_sweep

import jsonout

ROOT = Path(__file__).resolve().parent.parent


def fresh_copy(study: Path, where: Path, name: str) -> Path:
    dest = where / name / study.name
    shutil.copytree(study, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    return dest


def baseline(study: Path, grid: dict, replicates: int, steps: int | None, n: int, where: Path) -> float:
    """Mean wall time of ``n`` planned runs done in this process, each into its own file."""
    plan = make_plan(study, grid, replicates, steps=steps)
    picks = plan.runs[:: max(1, len(plan.runs) // n)][:n]
    times = []
    where = Path(tempfile.mkdtemp(dir=where))
    for run in picks:
        spec = load_study(study, steps=steps, seed=run.seed, params=run.parameters)
        t0 = time.perf_counter()
        run_study(spec, db_path=where / f"{run.run_id}.duckdb", run_id=run.run_id)
        times.append(time.perf_counter() - t0)
    return statistics.fmean(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study", default=str(ROOT / "studies" / "schelling"))
    ap.add_argument("--set", default="homophily=0.3,0.4,0.5,0.6,0.7")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--steps", type=int, help="override n_steps (default: the study's)")
    ap.add_argument("--baseline-runs", type=int, default=3)
    ap.add_argument("--configs", default="local1,local2,ray2", help="local<W> and ray<W>, comma-separated")
    ap.add_argument("--metric", default="mean_same_share")
    jsonout.add_option(ap)
    args = ap.parse_args()
    study = Path(args.study)
    name, _, values = args.set.partition("=")
    grid = parse_grid({name: values})
    n_runs = len(grid[name]) * args.replicates
    work = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        base = baseline(study, grid, args.replicates, args.steps, args.baseline_runs, work)
        steps = args.steps or load_study(study).simulation.n_steps
        load = os.getloadavg()[0]
        print(f"study {study.name}: {n_runs} runs ({name} x {len(grid[name])} values x {args.replicates} "
              f"replicates), steps {steps}")
        print(f"baseline: one run in-process {base:.2f} s (mean of {args.baseline_runs}), "
              f"load average {load:.1f}")
        figures = {"study": study.name, "parameter": name, "values": grid[name], "replicates": args.replicates,
                   "runs": n_runs, "steps": steps, "baseline_runs": args.baseline_runs, "baseline_s": base,
                   "baseline_load_average": load, "configs": []}
        print(f"{'config':8} {'wall s':>8} {'runs/s':>7} {'s/run/core':>11} {'overhead/run':>13} "
              f"{'in-worker s':>12}")
        for config in args.configs.split(","):
            backend, workers = ("ray", int(config[3:])) if config.startswith("ray") else ("local", int(config[5:]))
            root = fresh_copy(study, work, config)
            started_ray = 0.0
            if backend == "ray":
                import ray
                t0 = time.perf_counter()
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
                started_ray = time.perf_counter() - t0
            in_worker: list[float] = []
            try:
                result = run_sweep(root, grid, args.replicates, workers, backend, steps=args.steps,
                                   metrics=[args.metric], on_run=lambda o, d, t: in_worker.append(o.wall_seconds))
            finally:
                if backend == "ray":
                    ray.shutdown()
            wall = result.wall_seconds
            per_core = wall * workers / n_runs
            row = {"config": config, "backend": backend, "workers": workers, "wall_s": wall,
                   "runs_per_s": n_runs / wall, "s_per_run_per_core": per_core, "overhead_per_run_s": per_core - base,
                   "in_worker_s": statistics.fmean(in_worker), "runs_timed_in_worker": len(in_worker),
                   "ray_init_s": started_ray if backend == "ray" else None, "completed": result.completed,
                   "failed": n_runs - result.completed, "load_average": os.getloadavg()[0]}
            figures["configs"].append(row)
            print(f"{config:8} {wall:8.1f} {row['runs_per_s']:7.2f} {per_core:11.2f} {row['overhead_per_run_s']:13.2f} "
                  f"{row['in_worker_s']:12.2f}"
                  + (f"   (ray.init {started_ray:.1f} s, not in wall)" if started_ray else "")
                  + ("" if result.completed == n_runs else f"   {row['failed']} runs FAILED")
                  + f"   load {row['load_average']:.1f}")
            shutil.rmtree(root.parent, ignore_errors=True)
        after = baseline(study, grid, args.replicates, args.steps, args.baseline_runs, work)
        load = os.getloadavg()[0]
        print(f"baseline after the sweeps: {after:.2f} s, load average {load:.1f}")
        means = ", ".join(f"{r[name]}: {r['mean']:.3f}" + (f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
                                                            if r["n"] > 1 else "") for r in result.table)
        print(f"{args.metric} by {name} (last sweep, mean [95% CI]): {means}")
        figures.update(baseline_after_s=after, baseline_after_load_average=load, metric=args.metric,
                       means=[{"value": r[name], "mean": r["mean"], "sd": r["sd"], "ci_low": r["ci_low"],
                               "ci_high": r["ci_high"], "n": r["n"]} for r in result.table])
        jsonout.write(args.json, figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
