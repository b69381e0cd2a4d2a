"""SIR on a Barabási–Albert graph: desim.diffusion against NDlib and EoN, side by side in one run.

The same graph (networkx ``barabasi_albert_graph(n, m, seed=1)``) for all three, the same model:
discrete-time SIR, synchronous, per-edge transmission probability ``beta``, recovery probability
``gamma`` per step (``gamma = 1``: every case infectious for exactly one step, which is EoN's
``basic_discrete_SIR``), ``round(seed_fraction * n)`` random initial infecteds per replicate.

* desim runs through its real store: a study folder written to a temp dir (no ``model.py``:
  ``desim.diffusion:Nodes``, the graph as an edge-list file beside ``population.json``,
  ``desim.diffusion:NetworkState``, ``desim.diffusion:SIR``, ``desim.diffusion:Prevalence``, and
  ``stop_when`` ``count_I <= 0``, so a run ends with its epidemic as NDlib's and EoN's do),
  ``desim.run_study(desim.load_study(folder, seed=r))`` once per replicate in one process, each run
  storing its full panel (one row per node per step: state, since, infected_by, the action) in
  DuckDB/Parquet. Everything a run does counts: reading the study, the population, the graph (the
  file is parsed by the first replicate and kept for the others, as in any sweep), every step, the merge.
* NDlib 6.0.1 ``SIRModel`` and EoN 2.0 ``basic_discrete_SIR`` run in ``benchmarks/.venv-diffusion``
  (``diffusion_reference.py``); their graph is built once and not counted (each replicate's
  simulation is), and NDlib stops as soon as nobody is infected. EoN is timed twice: counts only
  (its default) and ``return_full_data=True`` (every node's history, what desim's panel holds).

Beside the sides, a floor: what storing a replicate's panel costs by itself (``storage_floor``: the CPU
seconds to encode the last replicates' own stored panels again, as Parquet the way the store writes them
and as the journal's Arrow stream), printed beside the wall time per replicate that the bar of 5x NDlib
leaves. No faster simulation makes a replicate cheaper than writing what it keeps.

Then a run of ``--big`` nodes (default 1,000,000; a BA(n, m) graph drawn by igraph into an edge-list
file, not counted, like the references' graphs; desim reads the file, which counts), panel stored,
timed whole in a fresh process (nothing cached).

    python benchmarks/bench_diffusion.py                       # the full comparison (about 15 minutes)
    python benchmarks/bench_diffusion.py --smoke --json out.json   # tiny, desim only unless the venv exists

Prints Markdown (for RESULTS.md) and, with ``--json``, the figures.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import diffusion_reference as reference  # noqa: E402


def write_json(path: Path | None, figures: dict) -> None:
    """``--json PATH``: the figures measured, as one JSON object (NaN is not used)."""
    if path is not None:
        Path(path).write_text(json.dumps(figures, indent=1, default=float) + "\n", encoding="utf-8")


def ba_edges(n: int, m: int, seed: int = 1) -> list[tuple[int, int]]:
    import networkx as nx
    return [(int(u), int(v)) for u, v in nx.barabasi_albert_graph(n, m, seed=seed).edges()]


def node_ids(n: int) -> list[str]:
    width = len(str(n - 1))
    return [f"n{i:0{width}d}" for i in range(n)]


def write_edge_list(path: Path, n: int, edges) -> None:
    ids = node_ids(n)
    with path.open("w", encoding="utf-8") as f:
        f.writelines(f"{ids[u]} {ids[v]}\n" for u, v in edges)


def write_study(root: Path, n: int, edges, args: argparse.Namespace) -> Path:
    """The benchmark's study folder: SIR on ``edges``, given as an edge-list file."""
    for sub in ("simulation", "population", "environment"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    write_edge_list(root / "population" / "contacts.txt", n, edges)
    interaction = {"kind": "file", "path": "contacts.txt"}
    files = {
        "study.json": {"id": root.name, "title": "SIR on a Barabasi-Albert graph (benchmark)"},
        "simulation/simulation.json": {
            "n_steps": args.steps, "seed": 1, "memory_window": 0, "agent_processes": False,
            "decision": {"ref": "desim.diffusion:SIR", "args": {"beta": "$beta", "gamma": "$gamma"}},
            "collector": {"ref": "desim.diffusion:Prevalence"},
            "stop_when": [{"metric": "count_I", "op": "<=", "value": 0}],
            "parameters": {"beta": args.beta, "gamma": args.gamma}},
        "population/population.json": {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
                                       "interaction": interaction},
        "environment/environment.json": {"provider": {"ref": "desim.diffusion:NetworkState",
                                                      "args": {"seed_fraction": args.seed_fraction}}},
    }
    for rel, data in files.items():
        (root / rel).write_text(json.dumps(data), encoding="utf-8")
    return root


def desim_replicates(root: Path, replicates: int) -> dict:
    """Each replicate a full ``run_study``; wall and CPU per replicate, plus the phases of each."""
    import desim
    walls, cpus, finals, durations, rows, phases, run_ids = [], [], [], [], 0, [], []
    for r in range(1, replicates + 1):
        wall, cpu = time.perf_counter(), time.process_time()
        spec = desim.load_study(root, seed=r)
        loaded = time.perf_counter()
        result = desim.run_study(spec)
        done = time.perf_counter()
        walls.append(done - wall)
        cpus.append(time.process_time() - cpu)
        phases.append({"load": loaded - wall, "run": done - loaded, "steps": result.steps_done})
        assert result.status == "completed", result.error
        rows += result.rows_written
        run_ids.append(result.run_id)
        m = result.metrics().to_pydict()
        finals.append(m["share_R"][-1] + m["share_I"][-1])
        infected = [s for s, c in zip(m["step"], m["count_I"]) if c > 0]
        durations.append(max(infected) if infected else 0)
        if m["count_I"][-1] > 0 and result.steps_done == spec.simulation.n_steps:
            print(f"warning: replicate {r} still has {m['count_I'][-1]} infectious nodes at the last step",
                  file=sys.stderr)
    return {"wall": walls, "cpu": cpus, "final_share": finals, "duration": durations, "rows": rows,
            "phases": phases, "run_ids": run_ids}


def storage_floor(root: Path, run_ids: list[str], sample: int = 3) -> dict:
    """What storing a replicate's panel costs by itself, whatever the code around it: the CPU seconds
    to encode the panel a run stored (its own merged file, read back) as the store writes it, one row
    group per step with ``parquet_options``, and to append it step by step to an Arrow stream as the
    journal does. Averaged over the last ``sample`` replicates. Against the bars this is a floor: no
    faster simulation makes a replicate cheaper than writing what it keeps."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from desim.store.files import parquet_options
    from desim.store.layout import layout_of
    parquet, stream, rows = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench_diffusion_floor_") as tmp:
        for run_id in run_ids[-sample:]:
            stored = pq.ParquetFile(layout_of(root).run_dir(run_id) / "panel.parquet")
            steps = [stored.read_row_group(i) for i in range(stored.num_row_groups)]
            schema = stored.schema_arrow
            cpu = time.process_time()
            with pq.ParquetWriter(Path(tmp) / "panel.parquet", schema, **parquet_options(schema)) as writer:
                for step in steps:
                    writer.write_table(step, row_group_size=step.num_rows)
            parquet.append(time.process_time() - cpu)
            cpu = time.process_time()
            with pa.OSFile(str(Path(tmp) / "panel.arrows"), "wb") as sink, pa.ipc.new_stream(sink, schema) as w:
                for step in steps:
                    w.write_table(step)
            stream.append(time.process_time() - cpu)
            rows.append(stored.metadata.num_rows)
    return {"parquet_cpu": statistics.fmean(parquet), "journal_cpu": statistics.fmean(stream),
            "rows": statistics.fmean(rows), "sample": len(parquet)}


def profile_one(root: Path) -> str:
    """Where one replicate's time goes: the top of a cProfile of ``run_study`` (cumulative)."""
    import desim
    prof = cProfile.Profile()
    prof.enable()
    desim.run_study(desim.load_study(root, seed=99))
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def reference_side(n: int, edges, args: argparse.Namespace, work: Path) -> dict:
    common = {"n": n, "edges": edges, "replicates": args.replicates, "steps": args.steps, "seed": 7,
              "initial": {"fraction": args.seed_fraction}}
    out = {}
    jobs = {"ndlib": {"tool": "ndlib", "model": "SIR", "params": {"beta": args.beta, "gamma": args.gamma},
                      "until_quiet": "I"}}
    if args.gamma == 1.0:
        jobs["eon"] = {"tool": "eon", "model": "SIR", "params": {"p": args.beta}}
        jobs["eon_full"] = {"tool": "eon_full", "model": "SIR", "params": {"p": args.beta}}
    for name, job in jobs.items():
        if name == "ndlib" and args.no_ndlib:
            continue
        answer = reference.run_job({**common, **job}, work)
        finals = [(c[-1]["R"] + c[-1]["I"]) / n for c in answer["curves"]]
        durations = [max([t for t, c in enumerate(curve) if c["I"] > 0] or [0]) for curve in answer["curves"]]
        out[name] = {"wall": answer["wall"], "cpu": answer["cpu"], "final_share": finals, "duration": durations,
                     "graph_seconds": answer["graph_seconds"], "versions": answer["versions"]}
    return out


def summary(side: dict) -> dict:
    return {"wall_total": sum(side["wall"]), "cpu_total": sum(side["cpu"]),
            "wall_median": statistics.median(side["wall"]), "final_share_mean": statistics.fmean(side["final_share"]),
            "duration_max": max(side["duration"])}


def igraph_ba_edges(n: int, m: int, seed: int = 1) -> list[tuple[int, int]]:
    """A BA(n, m) graph drawn by igraph (networkx needs minutes at a million nodes)."""
    import random

    import igraph
    random.seed(seed)
    igraph.set_random_number_generator(random)
    return igraph.Graph.Barabasi(n, m).get_edgelist()


BIG_CHILD = """
import json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
import desim
spec = desim.load_study(sys.argv[1], seed=1)
built = time.perf_counter()
result = desim.run_study(spec)
done = time.perf_counter()
mt = result.metrics().to_pydict()
print(json.dumps({"wall": done - wall, "cpu": time.process_time() - cpu, "build": built - wall,
                  "run": done - built, "rows": result.rows_written, "status": result.status,
                  "steps_done": result.steps_done, "final_share": mt["share_R"][-1] + mt["share_I"][-1]}))
"""


def big_run(n: int, m: int, args: argparse.Namespace, work: Path) -> dict:
    """One run of ``n`` nodes in a fresh process: import, study, graph file, population, every step, the store."""
    import subprocess
    root = write_study(work / "sir_big", n, igraph_ba_edges(n, m), args)
    done = subprocess.run([sys.executable, "-c", BIG_CHILD, str(root)], capture_output=True, text=True, check=True)
    return {"n": n, "steps": args.steps, **json.loads(done.stdout.strip().splitlines()[-1])}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--m", type=int, default=3)
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--gamma", type=float, default=1.0)
    ap.add_argument("--seed-fraction", type=float, default=0.001)
    ap.add_argument("--steps", type=int, default=40, help="desim's n_steps (and the references' cap)")
    ap.add_argument("--big", type=int, default=1_000_000, help="nodes of the large desim run (0: none)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; the references only if their venv exists")
    ap.add_argument("--no-reference", action="store_true", help="desim only")
    ap.add_argument("--no-ndlib", action="store_true", help="skip NDlib (the slowest side)")
    ap.add_argument("--profile", action="store_true", help="print where one desim replicate's time goes")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the figures measured as JSON to PATH")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.replicates, args.big, args.seed_fraction = 2000, 3, 20_000, 0.01
    with_reference = not args.no_reference and (not args.smoke or reference.have_venv())
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench_diffusion_") as tmp:
        work = Path(tmp)
        edges = ba_edges(args.n, args.m)
        root = write_study(work / "sir", args.n, edges, args)
        sides = {"desim": desim_replicates(root, args.replicates)}
        floor = storage_floor(root, sides["desim"]["run_ids"])
        profile = profile_one(root) if args.profile else None
        if with_reference:
            sides.update(reference_side(args.n, edges, args, work / "reference"))
        big = big_run(args.big, args.m, args, work) if args.big else None
    figures = {"config": {"n": args.n, "m": args.m, "replicates": args.replicates, "beta": args.beta,
                          "gamma": args.gamma, "seed_fraction": args.seed_fraction, "steps": args.steps,
                          "smoke": args.smoke},
               "sides": {k: {**v, "summary": summary(v)} for k, v in sides.items()}, "big": big,
               "storage_floor": floor}
    d = figures["sides"]["desim"]["summary"]
    ratios = {}
    for name in ("ndlib", "eon", "eon_full"):
        if name in figures["sides"]:
            s = figures["sides"][name]["summary"]
            ratios[name] = {"wall": s["wall_total"] / d["wall_total"], "cpu": s["cpu_total"] / d["cpu_total"]}
    figures["ratios"] = ratios          # > 1: desim is faster
    figures["seconds"] = time.time() - started
    print_markdown(figures, profile)
    write_json(args.json, figures)
    return figures


def print_markdown(f: dict, profile: str | None) -> None:
    c = f["config"]
    print(f"SIR on BA(n={c['n']:,}, m={c['m']}), beta={c['beta']}, gamma={c['gamma']}, "
          f"{c['seed_fraction']:g} of the nodes seeded, {c['replicates']} replicates, desim n_steps={c['steps']}\n")
    print("| side | wall total (s) | CPU total (s) | wall per replicate, median (s) | mean final size | "
          "longest epidemic (steps) |")
    print("|---|---:|---:|---:|---:|---:|")
    names = {"desim": "desim (panel stored)", "ndlib": "NDlib SIRModel", "eon": "EoN basic_discrete_SIR",
             "eon_full": "EoN basic_discrete_SIR, return_full_data"}
    for name, side in f["sides"].items():
        s = side["summary"]
        print(f"| {names[name]} | {s['wall_total']:.2f} | {s['cpu_total']:.2f} | {s['wall_median']:.3f} | "
              f"{s['final_share_mean']:.4f} | {s['duration_max']} |")
    for name, r in f["ratios"].items():
        print(f"\n{names[name]} / desim: wall {r['wall']:.2f}x, CPU {r['cpu']:.2f}x (above 1: desim faster)")
    ph = f["sides"]["desim"]["phases"]
    print(f"\ndesim per replicate, median: load_study {statistics.median(p['load'] for p in ph):.3f} s, "
          f"run (population, graph, CSR, initial state, edges table, steps, merge) "
          f"{statistics.median(p['run'] for p in ph):.3f} s, {statistics.median(p['steps'] for p in ph)} steps; "
          f"{f['sides']['desim']['rows']:,} panel rows in all")
    fl = f["storage_floor"]
    print(f"\nStoring a replicate's panel by itself ({fl['rows']:,.0f} rows, the mean of {fl['sample']} replicates' "
          f"own files): Parquet encoding as the store writes it {fl['parquet_cpu']:.3f} s CPU, the journal's "
          f"Arrow stream {fl['journal_cpu']:.3f} s CPU; desim's whole replicate "
          f"{f['sides']['desim']['summary']['cpu_total'] / c['replicates']:.3f} s CPU "
          f"({f['sides']['desim']['summary']['wall_total'] / c['replicates']:.3f} s wall)")
    if "ndlib" in f["sides"]:
        budget = f["sides"]["ndlib"]["summary"]["wall_total"] / c["replicates"] / 5
        print(f"The bar of 5x NDlib leaves {budget:.3f} s of wall time a replicate; with every core of this "
              f"machine ({os.cpu_count()}) busy, storing the panel alone needs "
              f"{(fl['parquet_cpu'] + fl['journal_cpu']) / os.cpu_count():.3f} s of it")
    if f["big"]:
        b = f["big"]
        print(f"\nLarge run: {b['n']:,} nodes, at most {b['steps']} steps, panel stored ({b['rows']:,} rows): "
              f"{b['wall']:.1f} s wall ({b['build']:.1f} s import and study files, "
              f"{b['run']:.1f} s run: graph file, population, steps, store), {b['cpu']:.1f} s CPU, final size {b['final_share']:.4f}, status {b['status']} "
              f"after {b['steps_done']} steps")
    if profile:
        print("\n```\n" + profile + "```")


if __name__ == "__main__":
    main()
