"""opinion_diffusion on desim's per-agent path against the same model in Mesa 3.5.1 or 3.3.1 (issues 13, 30).

    python benchmarks/bench_peragent_mesa.py [--agents 20000] [--steps 12] [--repeat 3] [--mesa-version 3.5.1]
                                             [--profile] [--json PATH]
    python benchmarks/bench_peragent_mesa.py --agents 200 --steps 2 --repeat 1 --no-mesa   # smoke

desim runs ``studies/opinion_diffusion`` as it stands (``observe_batch`` ->
``Observation`` -> ``decide_batch`` -> ``Action`` -> ``apply``, posts through
``InMemoryMessageBus`` + ``NeighborFeed``, one round per step), with the full
panel, the messages and the metrics of every step stored. Mesa runs
``benchmarks/mesa_opinion.py`` (the same rule, on ``discrete_space.Network``
and on plain neighbour lists) in a virtual environment of its own per Mesa
version, ``benchmarks/.venv-mesa-VERSION`` (git-ignored; created on first use
with Mesa and desim's networkx: Mesa is a benchmark-only dependency, never a
desim one). The default is Mesa 3.5.1 on Python 3.12 (found in pyenv's
versions folder or as ``python3.12`` on PATH, as ``bench_schelling_mesa.py``
does it, with which this script shares that code); ``--mesa-version 3.3.1``
keeps the earlier comparison, Mesa 3.3.1 on the running interpreter. On Mesa
3.5 the ``Network`` is built with ``layout=None``: by default it would compute a
spring layout of the whole graph, 691 s at 20,000 nodes, for positions the
rule never reads (see ``mesa_opinion.py``).

Both sides run the same agents: the first desim run exports its initial
states and its edges (from the store), its media trust (a persona attribute)
and the order in which its feed lists each agent's neighbours to a JSON file
that the Mesa runs read; the final metrics of the two must agree, and the
summary says whether they are identical or how far apart. The runs are interleaved (desim, Mesa on the
network, Mesa on lists, desim, ...), each in a fresh process, so all see the
same machine load.

Timings: desim's whole run (load the study, build the population and the
network, every step, the store), desim's step loop (steps 2..n, each written
to its Parquet folder, scaled to n steps, as ``desim_probe.run_timed`` does),
Mesa's step loop (set-up excluded) and Mesa's whole run (building the model,
its ``Network`` and its agents from the exported population, then the steps;
reading the JSON file excluded). Like for like: desim's step loop against
Mesa's, desim's whole run against Mesa's. Agent-steps/s = agents x steps /
seconds, on wall time and on the process's CPU time (the machine is shared;
CPU time is the steadier figure).

The engine's share is everything but the study's own methods: the study's
``observe_batch``, ``decide_batch``, ``apply`` and ``collect`` are timed
through a wrapper (one call per round, so the wrapper costs nothing worth
counting), ``agent_state`` (one call per agent per step, where a per-call
timer would cost as much as the call) is timed by calling it for every agent
``steps`` times over after the run, and the rest of the CPU time is the
engine's (panel rows, memory, action checks, SimPy, the store), reported in
µs per agent-round. Note that desim's library code called from inside the
study's methods (``NeighborFeed``, the bus, building ``Observation`` and
``Action`` records) counts as the study's here; ``--profile`` shows a
cProfile of one more desim run, grouped by where the time goes.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonout
from bench_schelling_mesa import add_mesa_option, mesa_python

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STUDY_METHODS = (("OpinionEnvironment", "observe_batch"), ("BoundedConfidence", "decide_batch"),
                 ("OpinionEnvironment", "apply"), ("OpinionMetrics", "collect"))
SETUP_METHODS = (("Population", "personas"), ("OpinionEnvironment", "reset"))
VARIANTS = ("network", "lists")
METRICS = ("mean_opinion", "opinion_sd", "support_share", "extreme_share")


# --- one desim run, in its own process ---------------------------------------------------------
def timed_methods(model, spent: dict[str, float]) -> None:
    """Wrap the study's per-round methods so their CPU seconds add up in ``spent``."""
    for cls_name, name in STUDY_METHODS + SETUP_METHODS:
        owner = getattr(model, cls_name)
        original = getattr(owner, name)
        label = name if (cls_name, name) in STUDY_METHODS else "set-up"

        def timed(*args, _original=original, _label=label, **kwargs):
            t0 = time.process_time()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_label] = spent.get(_label, 0.0) + time.process_time() - t0
        setattr(owner, name, timed)


def export_population(engine, result, path: Path) -> None:
    """The run's agents for the Mesa side: initial states and edges from the store, media trust
    (a persona attribute, not a state, so not in the store) from the run's personas."""
    data = result.data()
    initial = data.initial_states(result.run_id).to_pydict()
    opinion = dict(zip(initial["agent_id"], initial["opinion"]))
    edges = data.edges(result.run_id).to_pydict()
    position = {a: i for i, a in enumerate(engine.ids)}
    trust = {p.agent_id: p.attributes["media_trust"] for p in engine.personas}
    stored_edges = {frozenset(e) for e in zip(edges["source"], edges["target"])}
    if stored_edges != {frozenset(e) for e in engine.graph.edges()}:
        raise SystemExit("the stored edges are not the run's network")
    # the order in which the study's feed hands each agent its neighbours' posts (neighbors_fn over the
    # run's graph): the mean of the close ones is a float sum, so the order decides its last bit. Given
    # the same order, the Mesa side reproduces desim bit for bit.
    neighbours = [[position[b] for b in engine.graph.adj[a]] for a in engine.ids]
    if {frozenset((i, j)) for i, nbrs in enumerate(neighbours) for j in nbrs} != \
            {frozenset((position[s], position[t])) for s, t in stored_edges}:
        raise SystemExit("the run's neighbour lists are not its stored edges")
    env = engine.spec.environment
    event, broadcast = env.scheduled_events[0], env.broadcasts[0]
    if event.at_step != broadcast.at_step or event.target != "campaign_position":
        raise SystemExit("mesa_opinion.py models one campaign: an event setting campaign_position and a "
                         "broadcast starting the same week")
    params = engine.spec.simulation.parameters
    path.write_text(json.dumps({
        "n_steps": engine.n_steps, "agent_ids": engine.ids,
        "opinion": [opinion[a] for a in engine.ids], "media_trust": [trust[a] for a in engine.ids],
        "edges": [[position[s], position[t]] for s, t in zip(edges["source"], edges["target"])],
        "neighbours": neighbours,
        "parameters": {k: params[k] for k in ("epsilon", "mu", "campaign_weight")},
        "campaign": {"week": broadcast.at_step, "ttl": broadcast.ttl, "position": event.value,
                     "position_before": env.layers["campaign_position"]}}))


def warm_imports() -> None:
    """Import what a run imports lazily (DuckDB, pandas through DuckDB's Arrow scans), so a timed run
    excludes imports, as Mesa's does (``import mesa`` happens before its clock starts)."""
    import importlib.util

    import duckdb
    import desim.experiments.runs  # noqa: F401
    if importlib.util.find_spec("pandas"):
        import pandas  # noqa: F401
    duckdb.connect().execute("SELECT 1").fetchall()


def one_desim(cfg: dict) -> dict:
    import desim
    from desim.experiments.recording import record, sink_for
    from desim.run.assemble import assemble
    from desim.study.refs import study_module

    warm_imports()

    root, steps, n = Path(cfg["study"]), cfg["steps"], cfg["agents"]
    spent: dict[str, float] = {}
    timed_methods(study_module(root), spent)
    marks = []      # (wall, cpu, study seconds so far) when each step has been written
    on_step = lambda t, m: marks.append((time.perf_counter(), time.process_time(), sum(spent.values())))  # noqa: E731
    wall0, cpu0 = time.perf_counter(), time.process_time()
    spec = desim.load_study(root, steps=steps, params={"n_agents": n})
    engine = assemble(spec)
    result = record(engine, sink_for(spec), on_step=on_step)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    rounds = engine.rounds
    # agent_state: the engine calls it once per agent at step 0 and after every step
    env, ids = engine.environment, engine.ids
    t0 = time.process_time()
    for _ in range(steps + 1):
        for a in ids:
            env.agent_state(a)
    spent["agent_state"] = time.process_time() - t0
    per_state_step = spent["agent_state"] / (steps + 1)
    loop = steps - 1 if steps > 1 else None          # steps 2..n are the timed loop
    scale = steps / loop if loop else None
    out = {"side": "desim", "run_id": result.run_id, "agents": len(ids), "steps": steps, "rounds": rounds,
           "rows": result.rows_written, "messages": result.counters["messages"],
           "wall_s": wall, "cpu_s": cpu, "study_s": dict(spent),
           "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "steps_wall_s": (marks[-1][0] - marks[0][0]) * scale if loop else None,
           "steps_cpu_s": (marks[-1][1] - marks[0][1]) * scale if loop else None}
    agent_rounds = len(ids) * steps * rounds
    study_all = sum(spent.values())
    out["engine_us_per_agent_round"] = (cpu - study_all) / agent_rounds * 1e6
    out["study_us_per_agent_round"] = (study_all - spent.get("set-up", 0.0)) / agent_rounds * 1e6
    if loop:
        study_loop = marks[-1][2] - marks[0][2] + per_state_step * loop
        out["loop_engine_us_per_agent_round"] = ((marks[-1][1] - marks[0][1]) - study_loop) / (
            len(ids) * loop * rounds) * 1e6
    final = result.metrics().to_pydict()
    out["metrics"] = {k: final[k][-1] for k in METRICS}
    if cfg.get("export"):
        export_population(engine, result, Path(cfg["export"]))
    return out


def profile_desim(cfg: dict) -> str:
    """A cProfile of one desim run: CPU seconds (own time) by where the code lives, then the top functions."""
    import cProfile
    import io
    import pstats

    import desim

    warm_imports()
    spec = desim.load_study(Path(cfg["study"]), steps=cfg["steps"], params={"n_agents": cfg["agents"]})
    prof = cProfile.Profile()
    prof.enable()
    desim.run_study(spec)
    prof.disable()
    stats = pstats.Stats(prof)
    groups: dict[str, float] = {}
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():
        groups[where(filename)] = groups.get(where(filename), 0.0) + tottime
    total = sum(groups.values())
    lines = [f"cProfile of one desim run, own time by where the code lives ({total:.2f} s profiled):"]
    lines += [f"  {k}: {v:.2f} s ({v / total:.0%})" for k, v in sorted(groups.items(), key=lambda kv: -kv[1])
              if v >= 0.005 * total]
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
    lines.append("top functions by own time:")
    lines += ["  " + ln for ln in buf.getvalue().splitlines() if ln.strip()][-26:]
    return "\n".join(lines)


def where(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "/desim/" in path:
        return "desim: " + path.rsplit("/desim/", 1)[1]
    if path.endswith("/model.py"):
        return "study: model.py"
    for lib in ("simpy", "pyarrow", "duckdb", "networkx", "numpy", "pydantic"):
        if f"/{lib}/" in path:
            return lib
    if path == "<string>":
        return "generated __init__ of dataclasses (Observation, Action, Message, ...)"
    if path.startswith("~") or path.startswith("<"):
        return "builtins (list, dict, round, ...)"
    return "other Python"


# --- the comparison ------------------------------------------------------------------------------
def run_child(argv: list[str]) -> dict:
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(argv[:3])} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def agreement(desim_metrics: dict, mesa_metrics: dict) -> str:
    gaps = {k: abs(desim_metrics[k] - mesa_metrics[k]) for k in METRICS}
    if all(v == 0 for v in gaps.values()):
        return "identical"
    return "differ: " + ", ".join(f"{k} by {v:.3g}" for k, v in gaps.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=20_000)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-mesa", action="store_true", help="desim only (no Mesa venv needed)")
    add_mesa_option(ap)
    ap.add_argument("--profile", action="store_true", help="also profile one desim run with cProfile")
    ap.add_argument("--no-processes-too", action="store_true",
                    help="also run desim with agent_processes false (no standing SimPy process per agent)")
    ap.add_argument("--work", type=Path, default=HERE / "out" / "peragent_mesa",
                    help="where the study copy and the exported population go (default benchmarks/out/...)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--profile-one", help=argparse.SUPPRESS)
    jsonout.add_option(ap)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_desim(json.loads(args.one))))
        return
    if args.profile_one:
        print(profile_desim(json.loads(args.profile_one)))
        return

    mesa = args.mesa_version
    python = None if args.no_mesa else mesa_python(mesa)
    study = args.work / "opinion_diffusion"
    shutil.rmtree(study, ignore_errors=True)
    shutil.copytree(ROOT / "studies" / "opinion_diffusion", study, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    population = args.work / "population.json"
    cfg = {"study": str(study), "steps": args.steps, "agents": args.agents}
    if args.no_processes_too:        # the same study, no standing SimPy process per agent
        lean = args.work / "opinion_diffusion_no_processes"
        shutil.rmtree(lean, ignore_errors=True)
        shutil.copytree(study, lean)
        sim = lean / "simulation" / "simulation.json"
        sim.write_text(json.dumps({**json.loads(sim.read_text()), "agent_processes": False}))
    lean_runs = []
    me = [sys.executable, str(Path(__file__).resolve())]
    desim_runs, mesa_runs = [], {v: [] for v in VARIANTS}
    for i in range(args.repeat):
        d = run_child(me + ["--one", json.dumps({**cfg, "export": str(population) if i == 0 else None})])
        desim_runs.append(d)
        print(json.dumps(d), flush=True)
        if args.no_processes_too:
            d = {**run_child(me + ["--one", json.dumps({**cfg, "study": str(lean)})]), "side": "desim-no-processes"}
            lean_runs.append(d)
            print(json.dumps(d), flush=True)
        if python:
            for v in VARIANTS:
                m = run_child([str(python), str(HERE / "mesa_opinion.py"), str(population), v])
                mesa_runs[v].append(m)
                print(json.dumps({"side": f"mesa-{v}", **m}), flush=True)

    n, steps = desim_runs[0]["agents"], args.steps
    mesa_py = mesa_runs["network"][0]["python"] if python else None     # the Python the Mesa side ran on

    def rate(runs: list[dict], key: str) -> float:
        return sum(n * steps for _ in runs) / sum(r[key] for r in runs)

    def mean(values) -> float:
        values = list(values)
        return sum(values) / len(values)

    print()
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores; "
          f"N = {n:,}, {steps} steps, {desim_runs[0]['rounds']} round per step, {args.repeat} repeats, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; desim on Python {platform.python_version()}"
          + ("" if mesa_py is None else f", Mesa {mesa} on Python {mesa_py}"))
    print("| model | agent-steps/s (wall) | agent-steps/s (CPU) | µs per agent-step (CPU) |")
    print("|---|---|---|---|")
    rows = [("desim", "desim, whole run (full panel, messages and metrics stored)", desim_runs, "wall_s", "cpu_s")]
    if steps > 1:
        rows.append(("desim_steps", "desim, step loop only (each step stored; set-up excluded as for Mesa)",
                     desim_runs, "steps_wall_s", "steps_cpu_s"))
    if lean_runs:
        rows.append(("no_processes", "desim, `agent_processes: false`, whole run", lean_runs, "wall_s", "cpu_s"))
        if steps > 1:
            rows.append(("no_processes_steps", "desim, `agent_processes: false`, step loop only", lean_runs,
                         "steps_wall_s", "steps_cpu_s"))
    if python:
        rows += [("mesa_network_steps", f"Mesa {mesa}, discrete_space.Network (step loop)", mesa_runs["network"],
                  "steps_s", "steps_cpu_s"),
                 ("mesa_lists_steps", f"Mesa {mesa}, plain neighbour lists (step loop)", mesa_runs["lists"],
                  "steps_s", "steps_cpu_s"),
                 ("mesa_network", f"Mesa {mesa}, discrete_space.Network, whole run (model built from the exported "
                  "agents, then the steps)", mesa_runs["network"], "whole_s", "whole_cpu_s")]
    table = []
    for key, label, runs, wall_key, cpu_key in rows:
        cpu_rate = rate(runs, cpu_key)
        table.append({"model": key, "label": label, "runs": len(runs), "agent_steps_per_s_wall": rate(runs, wall_key),
                      "agent_steps_per_s_cpu": cpu_rate, "us_per_agent_step_cpu": 1e6 / cpu_rate})
        print(f"| {label} | {table[-1]['agent_steps_per_s_wall']:,.0f} | {cpu_rate:,.0f} | {1e6 / cpu_rate:.1f} |")
    print()
    ratios = {}
    if python:
        for v in VARIANTS:
            r_w, r_c = (rate(mesa_runs[v], "steps_s"), rate(mesa_runs[v], "steps_cpu_s"))
            ratios[f"desim_to_mesa_{v}_steps_wall"] = rate(desim_runs, 'wall_s') / r_w
            ratios[f"desim_to_mesa_{v}_steps_cpu"] = rate(desim_runs, 'cpu_s') / r_c
            line = (f"ratio desim / Mesa ({v}): whole run {ratios[f'desim_to_mesa_{v}_steps_wall']:.2f}x wall, "
                    f"{ratios[f'desim_to_mesa_{v}_steps_cpu']:.2f}x CPU")
            if steps > 1:
                ratios[f"desim_steps_to_mesa_{v}_steps_wall"] = rate(desim_runs, 'steps_wall_s') / r_w
                ratios[f"desim_steps_to_mesa_{v}_steps_cpu"] = rate(desim_runs, 'steps_cpu_s') / r_c
                line += (f"; step loop {ratios[f'desim_steps_to_mesa_{v}_steps_wall']:.2f}x wall, "
                         f"{ratios[f'desim_steps_to_mesa_{v}_steps_cpu']:.2f}x CPU")
            print(line)
        r_w, r_c = rate(mesa_runs["network"], "whole_s"), rate(mesa_runs["network"], "whole_cpu_s")
        ratios["desim_to_mesa_network_wall"] = rate(desim_runs, 'wall_s') / r_w
        ratios["desim_to_mesa_network_cpu"] = rate(desim_runs, 'cpu_s') / r_c
        print(f"ratio desim whole run / Mesa (network) whole run: {ratios['desim_to_mesa_network_wall']:.2f}x wall, "
              f"{ratios['desim_to_mesa_network_cpu']:.2f}x CPU")
        if lean_runs:
            r_s = rate(mesa_runs["network"], "steps_cpu_s")
            ratios["no_processes_to_mesa_network_cpu"] = rate(lean_runs, 'cpu_s') / r_c
            line = f"ratio with agent_processes false / Mesa (network), CPU: whole run / whole run " \
                   f"{ratios['no_processes_to_mesa_network_cpu']:.2f}x"
            if steps > 1:
                ratios["no_processes_steps_to_mesa_network_steps_cpu"] = rate(lean_runs, 'steps_cpu_s') / r_s
                line += f", step loop / step loop {ratios['no_processes_steps_to_mesa_network_steps_cpu']:.2f}x"
            print(line)
    engine = mean(r["engine_us_per_agent_round"] for r in desim_runs)
    study_us = mean(r["study_us_per_agent_round"] for r in desim_runs)
    loop_engine = mean(r["loop_engine_us_per_agent_round"] for r in desim_runs) if steps > 1 else None
    line = (f"engine share (everything but the study's methods), µs per agent-round (CPU): whole run {engine:.2f}")
    if steps > 1:
        line += f", step loop {loop_engine:.2f}"
    print(line + f"; the study's own methods {study_us:.2f}")
    budgets = None
    if python and steps > 1:
        # issue 30's bars as time: what desim may spend per agent-step to meet them, beside what the study's
        # own methods (observe_batch, decide_batch, apply, collect, agent_state) take by themselves
        budgets = {"whole_us": 1e6 / rate(mesa_runs["network"], "whole_cpu_s") / 1.0,
                   "loop_us": 1e6 / rate(mesa_runs["network"], "steps_cpu_s") / 1.5, "study_us": study_us}
        print(f"the bars as time, µs per agent-step (CPU): 1.0x Mesa's whole run leaves desim "
              f"{budgets['whole_us']:.2f}, 1.5x Mesa's step loop leaves {budgets['loop_us']:.2f}; "
              f"the study's own methods alone take {study_us:.2f}")
    first = desim_runs[0]
    print("study's methods in the first desim run, CPU s: " + ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(first["study_s"].items(), key=lambda kv: -kv[1])) +
        f"; run {first['cpu_s']:.2f} s CPU, {first['wall_s']:.2f} s wall, peak {first['peak_mib']:.0f} MiB, "
        f"{first['rows']:,} panel rows, {first['messages']:,} messages")
    dm = first["metrics"]
    print("final metrics, desim: " + ", ".join(f"{k} {dm[k]!r}" for k in METRICS))
    same = all(r["metrics"] == dm for r in desim_runs)
    print(f"desim repeats give the same metrics: {same}")
    same_lean = all(r["metrics"] == dm for r in lean_runs) if lean_runs else None
    if lean_runs:
        print(f"desim with agent_processes false gives the same metrics: {same_lean}")
    agreements = {}
    if python:
        for v in VARIANTS:
            mm = mesa_runs[v][0]["metrics"]
            agreements[v] = agreement(dm, mm)
            print(f"final metrics, Mesa ({v}): " + ", ".join(f"{k} {mm[k]!r}" for k in METRICS))
            print(f"desim vs Mesa ({v}): {agreements[v]}")
    jsonout.write(args.json, {
        "agents": n, "steps": steps, "rounds": desim_runs[0]["rounds"], "repeat": args.repeat, "mesa": bool(python),
        "mesa_version": mesa, "python": platform.python_version(), "mesa_python": mesa_py,
        "runs": {"desim": desim_runs, "desim_no_processes": lean_runs, **{f"mesa_{v}": mesa_runs[v] for v in VARIANTS}},
        "table": table, "ratios": ratios, "engine_us_per_agent_round": engine,
        "loop_engine_us_per_agent_round": loop_engine, "study_us_per_agent_round": study_us, "budgets": budgets,
        "final_metrics": {"desim": dm, **{f"mesa_{v}": mesa_runs[v][0]["metrics"] for v in VARIANTS if python}},
        "same_metrics_repeats": same, "same_metrics_no_processes": same_lean,
        "desim_vs_mesa": {f"mesa_{v}": {"identical": agreements[v] == "identical", "summary": agreements[v]}
                          for v in agreements},
        "population_file": population})
    if args.profile:
        print()
        out = subprocess.run(me + ["--profile-one", json.dumps(cfg)], capture_output=True, text=True)
        print(out.stdout if out.returncode == 0 else out.stderr[-3000:])


if __name__ == "__main__":
    main()
