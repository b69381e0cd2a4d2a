"""Engine + DuckDB store on a ring bounded-confidence study (issue 2's benchmark).

Each configuration runs in a fresh interpreter so its peak memory is its own:

    python benchmarks/bench_engine.py            # prints a Markdown table
    python benchmarks/bench_engine.py --write    # and appends it to benchmarks/RESULTS.md
    python benchmarks/bench_engine.py --smoke    # N = 200 only, seconds (a test runs it)
    python benchmarks/bench_engine.py --json PATH   # the figures also as one JSON object at PATH

Configurations: N = 2,000 and 100,000 agents, 12 steps, K = 1 and 3 rounds, on
* the columnar path (benchmarks/studies/ring_bc), with and without agent
  processes and with and without desim's GC management;
* the per-agent path (studies/opinion_diffusion rewired to a ring).
Decisions per second = agents x steps x rounds / wall time of the run.

Before the table, a machine check: the seed page's own measure of a round
barrier (one shared SimPy event a round, 100,000 agent processes waiting at
it, the cyclic GC frozen), which it gives as about 0.2-0.5 us per agent-round
on the machine the targets were set on. It says how fast the machine is
today, so that a wall time can be read against the targets.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonout

ROOT = Path(__file__).resolve().parent.parent


def prepare(kind: str, tmp: Path, agent_processes: bool) -> Path:
    src = ROOT / ("benchmarks/studies/ring_bc" if kind == "columnar" else "studies/opinion_diffusion")
    dest = tmp / f"{kind}-{agent_processes}"
    if not dest.exists():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
        pop = dest / "population" / "population.json"
        data = json.loads(pop.read_text())
        data["interaction"] = {"kind": "ring", "k": 2}
        pop.write_text(json.dumps(data))
        sim = dest / "simulation" / "simulation.json"
        data = json.loads(sim.read_text())
        data["agent_processes"] = agent_processes
        sim.write_text(json.dumps(data))
    return dest


def one(cfg: dict) -> dict:
    import desim
    from desim import run_study
    spec = desim.load_study(cfg["study"], params={"n_agents": cfg["n"]}, rounds=cfg["k"])
    t0 = time.perf_counter()
    result = run_study(spec, manage_gc=cfg["gc"])
    wall = time.perf_counter() - t0
    return {"wall": wall, "rows": result.rows_written,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def barrier(n: int, rounds: int = 36, repeat: int = 3) -> float:
    """The seed page's barrier measure: us per agent-round of ``n`` SimPy processes waiting at one
    shared event a round (the best of ``repeat``), the cyclic GC frozen as the engine does."""
    import gc
    import simpy
    best = float("inf")
    for _ in range(repeat):
        env = simpy.Environment()
        state = {"gate": env.event(), "present": []}

        def agent(i):
            while True:
                yield state["gate"]
                state["present"].append(i)

        def rounds_of():
            for _ in range(rounds):
                gate, state["gate"] = state["gate"], env.event()
                state["present"] = []
                gate.succeed()
                yield env.timeout(0)
                state["present"].sort()

        for i in range(n):
            env.process(agent(i))
        driver = env.process(rounds_of())
        gc.collect()
        gc.freeze()
        gc.disable()
        t0 = time.process_time()
        env.run(until=driver)
        best = min(best, time.process_time() - t0)
        gc.enable()
        gc.unfreeze()
    return best / (n * rounds) * 1e6


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(json.dumps(one(json.loads(sys.argv[2]))))
        return
    if len(sys.argv) > 2 and sys.argv[1] == "--barrier":
        print(json.dumps({"us": barrier(int(sys.argv[2]))}))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="N = 200 only, seconds (a test runs it)")
    ap.add_argument("--write", action="store_true", help="append the table to benchmarks/RESULTS.md")
    jsonout.add_option(ap)
    args = ap.parse_args()
    smoke = args.smoke
    big = 200 if smoke else 100_000
    tmp = Path(tempfile.mkdtemp(prefix="desim-bench-"))
    check = subprocess.run([sys.executable, __file__, "--barrier", str(big)], capture_output=True, text=True)
    if check.returncode:
        print(check.stderr, file=sys.stderr)
        raise SystemExit(1)
    us = json.loads(check.stdout.strip().splitlines()[-1])["us"]
    machine = (f"Machine check (the seed page's round barrier, {big:,} agent processes, one shared event a "
               f"round): {us:.2f} us per agent-round; the seed page measured about 0.2-0.5 on the machine "
               "the targets were set on.")
    print(machine, flush=True)
    configs = []
    for n in ((200,) if smoke else (2000, 100_000)):
        for k in (1, 3):
            configs.append(("columnar", n, k, True, True))
    configs += [("columnar", big, 3, False, True), ("columnar", big, 3, True, False)]
    for n, k in (((200, 1), (200, 3)) if smoke else ((2000, 1), (2000, 3), (100_000, 1), (100_000, 3))):
        configs.append(("per-agent", n, k, True, True))
    configs.append(("per-agent", big, 1, True, False))
    lines = ["| path | N | K | agent processes | GC managed | wall s | decisions/s | panel rows | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for kind, n, k, procs, gc in configs:
        study = prepare(kind, tmp, procs)
        cfg = {"study": str(study), "n": n, "k": k, "gc": gc}
        out = subprocess.run([sys.executable, __file__, "--one", json.dumps(cfg)], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            raise SystemExit(1)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append({"path": kind, "n": n, "k": k, "agent_processes": procs, "gc_managed": gc, "wall_s": r["wall"],
                     "decisions_per_s": n * 12 * k / r["wall"], "panel_rows": r["rows"], "peak_mib": r["peak_mib"]})
        line = (f"| {kind} | {n:,} | {k} | {'yes' if procs else 'no'} | {'yes' if gc else 'no'} | "
                f"{r['wall']:.2f} | {rows[-1]['decisions_per_s']:,.0f} | {r['rows']:,} | {r['peak_mib']:.0f} |")
        print(line, flush=True)
        lines.append(line)
    shutil.rmtree(tmp, ignore_errors=True)
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    section = (f"\n## Engine + store, ring bounded confidence (issue 2)\n\n"
               f"Machine: {cpu}, 2 cores, Python {platform.python_version()}; shared and noisy.\n"
               f"Command: `python benchmarks/bench_engine.py --write`; 12 steps; each row a fresh process.\n"
               f"{machine}\n\n"
               + "\n".join(lines) + "\n")
    written = args.write and not smoke
    if written:
        with open(ROOT / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write(section)
    print(section)
    jsonout.write(args.json, {"smoke": smoke, "steps": 12, "written": written,
                              "machine_check": {"agent_processes": big, "rounds": 36, "us_per_agent_round": us},
                              "rows": rows})


if __name__ == "__main__":
    main()
