"""Sugarscape G1 + M, 400 agents, 500 steps: agent-steps per second and the carrying capacity.

    python benchmarks/bench_sugarscape.py [--seeds 10] [--steps 500] [--map sugar-map.txt] [--json PATH]
    python benchmarks/bench_sugarscape.py --seeds 1 --steps 5 --no-breakdown   # smoke run (a test runs it)

Each seed is a whole desim run of ``studies/sugarscape`` on Epstein & Axtell's
sugar map (full panel in DuckDB: 400 rows per step, dead agents included).
Agent-steps count every panel row; living agent-steps count the agents that
took a turn. The carrying capacity is the population at the last step, as a
mean over the seeds with its sample sd and 95 % t-interval (Epstein & Axtell:
about 224-230; Mesa's replication on the same map: 227.6 +- 11.3 at step
500), beside the mean population over steps 200..end; the survivors' mean
vision and metabolism are shown against the founders'.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import duckdb
from scipy import stats

import jsonout
from desim_probe import breakdown, fresh_copy, run_timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--map", default="sugar-map.txt", help="the study's map parameter (a file, or two_peaks)")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the CPU breakdown run")
    jsonout.add_option(ap)
    args = ap.parse_args()
    steps = args.steps
    root = fresh_copy("sugarscape", "sugarscape")
    rows = []
    for seed in range(1, args.seeds + 1):
        r = run_timed(root, seed=seed, steps=steps, params={"map": args.map})
        con = duckdb.connect(str(r["db"]), read_only=True)
        m = {(step, name): value for step, name, value in con.execute(
            "SELECT step, name, value FROM metrics WHERE run_id=?", [r["run_id"]]).fetchall()}
        con.close()
        pop = [m[(t, "population")] for t in range(steps + 1)]
        row = {"seed": seed, "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "rows": r["rows"],
               "living_steps": sum(pop[:-1]), "plateau": sum(pop[min(200, steps):]) / len(pop[min(200, steps):]),
               "pop_end": pop[-1],
               "vision": (m[(0, "mean_vision")], m[(steps, "mean_vision")]),
               "metabolism": (m[(0, "mean_metabolism")], m[(steps, "mean_metabolism")]),
               "gini_end": m[(steps, "gini")]}
        rows.append(row)
        print(row, flush=True)
    total = lambda key: sum(r[key] for r in rows)  # noqa: E731
    mean = lambda key: total(key) / len(rows)  # noqa: E731
    rates = {"agent_steps_per_s_wall": total("rows") / total("wall_s"),
             "agent_steps_per_s_cpu": total("rows") / total("cpu_s"),
             "living_agent_steps_per_s_wall": total("living_steps") / total("wall_s"),
             "living_agent_steps_per_s_cpu": total("living_steps") / total("cpu_s")}
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.seeds} seeds, "
          f"{steps} steps, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"agent-steps/s (panel rows): {rates['agent_steps_per_s_wall']:,.0f} wall, "
          f"{rates['agent_steps_per_s_cpu']:,.0f} CPU; living agent-steps/s: "
          f"{rates['living_agent_steps_per_s_wall']:,.0f} wall, {rates['living_agent_steps_per_s_cpu']:,.0f} CPU")
    print(f"wall per run {mean('wall_s'):.1f} s, CPU per run {mean('cpu_s'):.1f} s")
    ends = [r["pop_end"] for r in rows]
    sd = statistics.stdev(ends) if len(ends) > 1 else float("nan")
    half = stats.t.ppf(0.975, len(ends) - 1) * sd / len(ends) ** 0.5 if len(ends) > 1 else float("nan")
    print(f"map {args.map}: population at step {steps} {mean('pop_end'):.1f} +- {sd:.1f} (sd over {len(ends)} "
          f"seeds; 95 % interval of the mean {mean('pop_end') - half:.1f}-{mean('pop_end') + half:.1f}); "
          f"per seed: {', '.join(f'{v:.0f}' for v in ends)}")
    print(f"mean population over steps {min(200, steps)}-{steps}: {mean('plateau'):.1f}")
    traits = {trait: [sum(r[trait][i] for r in rows) / len(rows) for i in (0, 1)] for trait in ("vision", "metabolism")}
    print(f"mean vision {traits['vision'][0]:.2f} -> {traits['vision'][1]:.2f}; mean metabolism "
          f"{traits['metabolism'][0]:.2f} -> {traits['metabolism'][1]:.2f}; Gini at the end {mean('gini_end'):.3f}")
    figures = {"seeds": args.seeds, "steps": steps, "map": args.map, "per_seed": rows, **rates,
               "wall_per_run_s": mean("wall_s"), "cpu_per_run_s": mean("cpu_s"),
               "population_end": {"mean": mean("pop_end"), "sd": sd, "ci_low": mean("pop_end") - half,
                                  "ci_high": mean("pop_end") + half, "per_seed": ends},
               "plateau_from_step": min(200, steps), "mean_plateau": mean("plateau"),
               "vision": {"founders": traits["vision"][0], "end": traits["vision"][1]},
               "metabolism": {"founders": traits["metabolism"][0], "end": traits["metabolism"][1]},
               "gini_end": mean("gini_end"), "breakdown": None}
    if args.no_breakdown:
        jsonout.write(args.json, figures)
        return
    with breakdown(root, "Landscape", "MovementM", "SugarMetrics") as spent:
        b = run_timed(root, seed=1, steps=steps, params={"map": args.map})
    print(f"CPU breakdown, seed 1 ({b['cpu_s']:.2f} s CPU, {b['wall_s']:.2f} s wall in all):")
    for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {label}: {seconds:.2f} s")
    rest = b['cpu_s'] - sum(spent.values())
    print(f"  everything else (set-up, SimPy agent processes and loop, metrics rows, live file): {rest:.2f} s")
    figures["breakdown"] = {"seed": 1, "cpu_s": b["cpu_s"], "wall_s": b["wall_s"], "parts_cpu_s": dict(spent),
                            "everything_else_cpu_s": rest}
    jsonout.write(args.json, figures)

if __name__ == "__main__":
    main()
