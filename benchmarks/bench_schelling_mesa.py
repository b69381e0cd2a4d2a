"""Schelling 100x100 in desim and in Mesa 3.5.1 (or 3.3.1), same parameters, same script run.

    python benchmarks/bench_schelling_mesa.py [--seeds 5] [--steps 100] [--size 100] [--mesa-version 3.5.1]
                                              [--no-mesa] [--json PATH]
    python benchmarks/bench_schelling_mesa.py --seeds 1 --steps 3 --size 10 --no-mesa   # smoke (a test runs it)

Parameters: 100x100 bounded grid (Mesa's default), density 0.8, minority 0.5,
homophily 0.4, 100 steps, rule ``classic`` in both (happiness evaluated at
the start of the step, the unhappy move in random order to random empty
cells). Mesa runs in a virtual environment of its own per version,
``benchmarks/.venv-mesa-VERSION`` (git-ignored), created on first use with
``pip install mesa==VERSION networkx==<desim's networkx>``: Mesa is a
benchmark-only dependency, never a desim one. The default, Mesa 3.5.1, needs
Python 3.12: its venv is made with a Python 3.12 found in pyenv's versions
folder or as ``python3.12`` on PATH (the script stops with one line saying
what to install if there is none). ``--mesa-version 3.3.1`` keeps the earlier
comparison, Mesa 3.3.1 on the running interpreter. Mesa 3.5.1 imports
networkx on ``import mesa`` without requiring it, hence networkx in the venv.

Timing, per seed, the two models interleaved so both see the same machine load:

* Mesa: the step loop only (set-up excluded), no data collection; and
  again with a ``DataCollector`` recording every agent every step (in memory);
* desim: the whole run (load the study, build the population, every step,
  the full typed panel of 8,000 rows per step and the metrics written step by
  step, each step durable when it closes, and the merge of the step files at
  the end);
* desim's step loop alone (from the first written step to the last, so
  set-up is excluded as it is for Mesa, but every step's write counts);
* desim with ``agent_processes: false`` (no SimPy process per agent), whose
  panel must hash identically to the default run's.

Agent-steps per second are agents x steps / seconds, on wall time and on the
run's own CPU time (the machine is shared; CPU time is the steadier figure).
A breakdown of one desim run's CPU time by part follows.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonout
from desim_probe import breakdown, fresh_copy, metric, panel_hash, run_timed

HERE = Path(__file__).resolve().parent
# The Mesa versions compared and the Python each needs: Mesa 3.5 requires Python >= 3.12; 3.3.1 installs
# on the running interpreter (3.11), as the earlier comparisons did. bench_peragent_mesa.py uses these too.
MESA_PYTHON = {"3.5.1": (3, 12), "3.3.1": None}
DEFAULT_MESA = "3.5.1"
PARAMS = {"width": 100, "height": 100, "density": 0.8, "minority_share": 0.5, "homophily": 0.4,
          "torus": False, "rule": "classic"}


def add_mesa_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--mesa-version", choices=list(MESA_PYTHON), default=DEFAULT_MESA,
                    help=f"the Mesa to compare against (default {DEFAULT_MESA}, on Python 3.12; 3.3.1 runs on "
                    "the running interpreter)")


def find_python(mesa: str) -> str:
    """An interpreter of the Python version ``mesa`` needs: the running one if it is that version (or Mesa
    needs none in particular), else the newest of that minor version in pyenv's versions folder, else
    ``pythonX.Y`` on PATH. Stops with one line saying what to install if there is none."""
    want = MESA_PYTHON[mesa]
    if want is None or sys.version_info[:2] == want:
        return sys.executable
    minor = "%d.%d" % want
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    # plain releases only (3.12.1, 3.12.10, not 3.12-dev or 3.12.1t), newest patch first
    releases = [d for d in pyenv.glob(f"{minor}.*") if re.fullmatch(rf"{re.escape(minor)}\.\d+", d.name)]
    candidates = [str(d / "bin" / f"python{minor}")
                  for d in sorted(releases, key=lambda d: int(d.name.rsplit(".", 1)[1]), reverse=True)]
    candidates += [shutil.which(f"python{minor}")] if shutil.which(f"python{minor}") else []
    for candidate in candidates:
        # ask each one its version: a pyenv shim on PATH exists but fails unless that version is selected
        probe = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == minor:
            return candidate
    raise SystemExit(f"Mesa {mesa} needs Python {minor}, not found in {pyenv} or on PATH: install it "
                     f"(e.g. `pyenv install {minor}`) or run with --mesa-version 3.3.1")


def mesa_python(mesa: str) -> Path:
    """The interpreter of Mesa ``mesa``'s venv (``benchmarks/.venv-mesa-VERSION``), creating the venv and
    installing Mesa and networkx (desim's version) into it on first use."""
    import networkx  # the version desim builds its graphs with
    venv = HERE / f".venv-mesa-{mesa}"
    python = venv / "bin" / "python"
    want = [mesa, networkx.__version__]
    # what the venv holds, read from package metadata (``import mesa`` 3.5.1 fails without networkx)
    probe = ("import importlib.metadata as m\n"
             "for p in ('mesa', 'networkx'):\n"
             "    try: print(m.version(p))\n"
             "    except m.PackageNotFoundError: print('-')")
    holds = lambda: subprocess.run([str(python), "-c", probe], check=True, capture_output=True,  # noqa: E731
                                   text=True).stdout.split()
    if not python.exists():
        subprocess.run([find_python(mesa), "-m", "venv", str(venv)], check=True)
    if holds() != want:
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"mesa=={mesa}", f"networkx=={want[1]}"],
                       check=True)
        if holds() != want:
            raise SystemExit(f"{venv} holds mesa, networkx {holds()}, expected {want}; delete it to rebuild")
    return python


def whole_process(argv: list[str]) -> tuple[str, float, float]:
    """Run ``argv`` to its end: its output, wall seconds and CPU seconds (user + system, from the
    children's resource usage), imports and all."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_mesa(python: Path, seed: int, steps: int, panel: bool = False) -> dict:
    p = PARAMS
    argv = [str(python), str(HERE / "mesa_models.py"), str(p["width"]), str(p["height"]), str(p["density"]),
            str(p["minority_share"]), str(p["homophily"]), str(steps), str(seed), "1" if p["torus"] else "0"]
    argv += ["panel"] if panel else []
    out, wall, cpu = whole_process(argv)
    return {**json.loads(out.strip().splitlines()[-1]), "process_s": wall, "process_cpu_s": cpu}


def compile_desim() -> None:
    """Both sides start from bytecode caches, as any installed package does: pip compiled Mesa's at install,
    but an editable desim on a machine with ``PYTHONDONTWRITEBYTECODE`` set (this one) would recompile its
    modules (about 0.1 s) in every process. Compiled once here, as Python itself does on a first import."""
    import compileall
    import desim
    compileall.compile_dir(str(Path(desim.__file__).parent), quiet=1)


def run_desim_process(root: Path, seed: int, steps: int) -> dict:
    """``desim run`` as a user types it, in a process of its own: imports, the study files, the run, the
    store, the merge."""
    argv = [sys.executable, "-m", "desim.cli", "run", str(root), "--seed", str(seed), "--steps", str(steps),
            "--quiet"] + [a for k, v in PARAMS.items() for a in ("--set", f"{k}={v if isinstance(v, str) else json.dumps(v)}")]
    _, wall, cpu = whole_process(argv)
    return {"process_s": wall, "process_cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--size", type=int, default=100, help="grid side (smoke: 10)")
    ap.add_argument("--no-mesa", action="store_true", help="desim only, no Mesa venv (the smoke test)")
    add_mesa_option(ap)
    jsonout.add_option(ap)
    args = ap.parse_args()
    steps, mesa = args.steps, args.mesa_version
    PARAMS.update(width=args.size, height=args.size)
    python = None if args.no_mesa else mesa_python(mesa)
    root = fresh_copy("schelling", "mesa_compare")
    compile_desim()
    rows = []
    nothing = {"python": None, "agents": 1, "steps_s": float("nan"), "steps_cpu_s": float("nan"),
               "mean_same_share": float("nan"), "share_happy": float("nan")}
    for seed in range(1, args.seeds + 1):
        m = nothing if args.no_mesa else run_mesa(python, seed, steps)
        mp = nothing if args.no_mesa else run_mesa(python, seed, steps, panel=True)
        d = run_timed(root, seed=seed, steps=steps, params=PARAMS)
        o = run_timed(root, seed=seed, steps=steps, params=PARAMS, agent_processes=False)
        dp = run_desim_process(root, seed, steps)
        n = d["rows"] // steps
        rows.append({
            "seed": seed, "mesa_agents": m["agents"], "desim_agents": n,
            "mesa_wall": m["steps_s"], "mesa_cpu": m["steps_cpu_s"],
            "mesa_panel_wall": mp["steps_s"], "mesa_panel_cpu": mp["steps_cpu_s"],
            "mesa_process_wall": m.get("process_s", float("nan")), "mesa_process_cpu": m.get("process_cpu_s", float("nan")),
            "desim_process_wall": dp["process_s"], "desim_process_cpu": dp["process_cpu_s"],
            "desim_wall": d["wall_s"], "desim_cpu": d["cpu_s"], "optout_wall": o["wall_s"], "optout_cpu": o["cpu_s"],
            "desim_steps_wall": d["steps_wall_s"], "desim_steps_cpu": d["steps_cpu_s"],
            "optout_steps_wall": o["steps_wall_s"], "optout_steps_cpu": o["steps_cpu_s"],
            "mesa_share": m["mean_same_share"], "desim_share": metric(d["db"], d["run_id"], "mean_same_share", steps),
            "mesa_happy": m["share_happy"], "desim_happy": metric(d["db"], d["run_id"], "share_happy", steps),
            "identical_panel": panel_hash(d["db"], d["run_id"]) == panel_hash(o["db"], o["run_id"])})
        print(json.dumps(rows[-1]), flush=True)
    mesa_py = m["python"]          # the Python the Mesa side ran on (None under --no-mesa)

    with breakdown(root, "Grid", "Relocation", "SegregationMetrics") as spent:
        b = run_timed(root, seed=1, steps=steps, params=PARAMS)

    def rate(agents_key, time_key):
        return sum(r[agents_key] * steps for r in rows) / sum(r[time_key] for r in rows)

    mean = lambda key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    same_panel = all(r["identical_panel"] for r in rows)
    # the table's rows: key, label, the keys of its agents, wall and CPU seconds, whose model figures it shows
    models = [("mesa_process", f"Mesa {mesa}, whole process (python mesa_models.py: imports, set-up, steps)",
               "mesa_agents", "mesa_process_wall", "mesa_process_cpu", None),
              ("desim_process", "desim, whole process (`desim run`: imports, study files, steps, store, merge)",
               "desim_agents", "desim_process_wall", "desim_process_cpu", None),
              ("mesa", f"Mesa {mesa} (steps only, no data collection)", "mesa_agents", "mesa_wall", "mesa_cpu",
               "mesa"),
              ("mesa_panel", f"Mesa {mesa} with a DataCollector agent panel (x, y, type, happy; in memory)",
               "mesa_agents", "mesa_panel_wall", "mesa_panel_cpu", None),
              ("desim", "desim, whole run, full typed panel (Parquet, durable per step)", "desim_agents",
               "desim_wall", "desim_cpu", "desim"),
              ("desim_steps", "desim, step loop only (each step written; set-up and end-of-run merge excluded as "
               "for Mesa)", "desim_agents", "desim_steps_wall", "desim_steps_cpu", None),
              ("optout", "desim, agent_processes: false", "desim_agents", "optout_wall", "optout_cpu", None),
              ("optout_steps", "desim, agent_processes: false, step loop only", "desim_agents", "optout_steps_wall",
               "optout_steps_cpu", None)]
    table = []
    for key, label, agents, wall, cpu, side in models:
        table.append({"model": key, "label": label, "agent_steps_per_s_wall": rate(agents, wall),
                      "agent_steps_per_s_cpu": rate(agents, cpu),
                      "mean_same_share": mean(f"{side}_share") if side else None,
                      "share_happy": mean(f"{side}_happy") if side else None})
    by = {t["model"]: t for t in table}
    print()
    mesa_side = "" if args.no_mesa else f", Mesa {mesa} on Python {mesa_py}"
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"{args.seeds} seeds, {steps} steps, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"desim on Python {platform.python_version()}{mesa_side}")
    print("| model | agent-steps/s (wall) | agent-steps/s (CPU) | mean same-type share | share happy |")
    print("|---|---|---|---|---|")
    for t in table:
        if t["mean_same_share"] is not None:
            cells = f"{t['mean_same_share']:.4f} | {t['share_happy']:.3f} |"
        elif t["model"] == "optout":
            cells = f"same panel: {same_panel} | |"
        else:
            cells = "| |"
        print(f"| {t['label']} | {t['agent_steps_per_s_wall']:,.0f} | {t['agent_steps_per_s_cpu']:,.0f} | {cells}")
    print()
    ratio = {f"{d}_to_mesa_{clock}": by[d][f"agent_steps_per_s_{clock}"] / by["mesa"][f"agent_steps_per_s_{clock}"]
             for d in ("desim", "optout", "desim_steps", "optout_steps") for clock in ("wall", "cpu")}
    for clock in ("wall", "cpu"):
        ratio[f"process_{clock}"] = by["desim_process"][f"agent_steps_per_s_{clock}"] / \
            by["mesa_process"][f"agent_steps_per_s_{clock}"]
    print(f"whole process against whole process (the issue's measure): {ratio['process_wall']:.2f}x wall, "
          f"{ratio['process_cpu']:.2f}x CPU")
    print(f"ratio desim / Mesa: {ratio['desim_to_mesa_wall']:.2f}x wall, {ratio['desim_to_mesa_cpu']:.2f}x CPU; "
          f"without agent processes {ratio['optout_to_mesa_wall']:.2f}x wall, {ratio['optout_to_mesa_cpu']:.2f}x CPU")
    print(f"step loops only: {ratio['desim_steps_to_mesa_wall']:.2f}x wall, {ratio['desim_steps_to_mesa_cpu']:.2f}x "
          f"CPU; without agent processes {ratio['optout_steps_to_mesa_wall']:.2f}x wall, "
          f"{ratio['optout_steps_to_mesa_cpu']:.2f}x CPU")
    share_difference = mean('desim_share') - mean('mesa_share')
    print(f"mean same-type share difference desim - Mesa: {share_difference:+.4f}")
    print("per seed (desim, Mesa): " + ", ".join(f"{r['desim_share']:.4f}/{r['mesa_share']:.4f}" for r in rows))
    print()
    print(f"desim CPU breakdown, seed 1 ({b['cpu_s']:.2f} s CPU, {b['wall_s']:.2f} s wall in all):")
    for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {label}: {seconds:.2f} s")
    rest = b['cpu_s'] - sum(spent.values())
    print(f"  everything else (set-up, SimPy agent processes and loop, metrics rows, live file): {rest:.2f} s")
    store = spent["store: write step (Parquet folder)"]
    merge = spent["store: merge step files at the end"]
    store_us, merge_us = store / b['rows'] * 1e6, merge / b['rows'] * 1e6
    without_store = b['rows'] / (b['cpu_s'] - store - merge)
    print(f"  store per panel row: {store_us:.3f} us writing steps, {merge_us:.3f} us "
          f"merging at the end; without the store the same run would do {without_store:,.0f} agent-steps/s CPU")
    jsonout.write(args.json, {
        "seeds": args.seeds, "steps": steps, "size": args.size, "mesa": not args.no_mesa, "mesa_version": mesa,
        "python": platform.python_version(), "mesa_python": mesa_py,
        "per_seed": rows, "table": table, "same_panel": same_panel, "ratios": ratio,
        "mean_same_share_difference": share_difference,
        "breakdown": {"seed": 1, "rows": b["rows"], "cpu_s": b["cpu_s"], "wall_s": b["wall_s"],
                      "parts_cpu_s": dict(spent),
                      "everything_else_cpu_s": rest, "store_us_per_row_writing": store_us,
                      "store_us_per_row_merging": merge_us, "agent_steps_per_s_cpu_without_store": without_store}})


if __name__ == "__main__":
    main()
