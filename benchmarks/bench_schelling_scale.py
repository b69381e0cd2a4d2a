"""Schelling 1000x1000 (800,000 agents), 20 steps, the full panel in DuckDB: wall time and peak memory.

    python benchmarks/bench_schelling_scale.py [--size 1000] [--steps 20] [--workdir DIR] [--json PATH]
    python benchmarks/bench_schelling_scale.py --size 20 --steps 2 --workdir /tmp/scale-smoke   # smoke (a test runs it)

Targets: under 2 minutes and under 8 GiB. Each variant runs in a fresh child
process so its peak resident memory (``ru_maxrss``) is its own: the default
engine (one SimPy process per agent) and ``agent_processes: false``. Each
child reports the set-up (study load, 800,000 personas, the engine) and the
run (initial states, every step written to DuckDB) separately; the store is
deleted afterwards (16 million panel rows). The study is copied to
``benchmarks/out/scale_<variant>`` unless ``--workdir`` names another folder
(the smoke test passes a temporary one, so it never touches benchmarks/out).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import jsonout

HERE = os.path.dirname(os.path.abspath(__file__))


def child(size: int, steps: int, agent_processes: bool, workdir: str | None = None) -> None:
    import duckdb

    import desim
    from desim.experiments.recording import record, sink_for
    from desim.run.assemble import assemble
    from desim_probe import ROOT, fresh_copy

    tag = f"scale_{'procs' if agent_processes else 'noprocs'}"
    if workdir is None:
        root = fresh_copy("schelling", tag)
    else:
        root = os.path.join(os.path.abspath(workdir), tag, "schelling")
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(ROOT / "studies" / "schelling", root, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    spec = desim.load_study(root, seed=1, steps=steps,
                            params={"width": size, "height": size, "density": 0.8, "homophily": 0.4})
    spec.simulation.agent_processes = agent_processes
    engine = assemble(spec)
    built = time.perf_counter()
    result = record(engine, sink_for(spec))
    done = time.perf_counter()
    con = duckdb.connect(str(result.store_path), read_only=True)
    rows = con.execute("SELECT count(*) FROM panel WHERE run_id=?", [result.run_id]).fetchone()[0]
    metrics = dict(con.execute("SELECT name, value FROM metrics WHERE run_id=? AND step=?",
                               [result.run_id, steps]).fetchall())
    moves1 = con.execute("SELECT value FROM metrics WHERE run_id=? AND step=1 AND name='moves'",
                         [result.run_id]).fetchone()[0]
    con.close()
    size_mb = os.path.getsize(result.store_path) / 2**20
    os.remove(result.store_path)
    print(json.dumps({"agent_processes": agent_processes, "agents": rows // steps, "panel_rows": rows,
                      "setup_s": built - wall0, "run_s": done - built, "wall_s": done - wall0,
                      "cpu_s": time.process_time() - cpu0, "db_mb": size_mb, "moves_step1": moves1,
                      "final": metrics, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workdir", help="copy the study here instead of benchmarks/out (smoke: a temporary folder)")
    ap.add_argument("--child", choices=["procs", "noprocs"])
    jsonout.add_option(ap)
    args = ap.parse_args()
    if args.child:
        child(args.size, args.steps, args.child == "procs", args.workdir)
        return
    variants = []
    for variant in ("procs", "noprocs"):
        where = ["--workdir", os.path.abspath(args.workdir)] if args.workdir else []
        out = subprocess.run([sys.executable, __file__, "--size", str(args.size), "--steps", str(args.steps),
                              "--child", variant, *where], check=True, capture_output=True, text=True,
                             cwd=HERE).stdout
        r = json.loads(out.strip().splitlines()[-1])
        label = "one SimPy process per agent" if r["agent_processes"] else "agent_processes: false"
        variants.append({"variant": variant, "label": label, **r})
        print(f"{label}: {r['agents']:,} agents x {args.steps} steps = {r['panel_rows']:,} panel rows; "
              f"wall {r['wall_s']:.1f} s (set-up {r['setup_s']:.1f} s, run {r['run_s']:.1f} s), "
              f"CPU {r['cpu_s']:.1f} s, peak RSS {r['peak_rss_gib']:.2f} GiB, store {r['db_mb']:.0f} MiB; "
              f"moves at step 1 {r['moves_step1']:,.0f}; final mean same-type share "
              f"{r['final']['mean_same_share']:.4f}, share happy {r['final']['share_happy']:.4f}", flush=True)
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.1f} on {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    jsonout.write(args.json, {"size": args.size, "steps": args.steps, "variants": variants,
                              "load_average": load, "cores": os.cpu_count()})


if __name__ == "__main__":
    main()
