"""Start-up time of the ``desim`` command line against ``import mesa``, in one run.

    python benchmarks/bench_startup.py [--repeat 7] [--no-mesa] [--json PATH]
    python benchmarks/bench_startup.py --repeat 1 --no-mesa   # smoke (a test runs it)

Times, as fresh processes interleaved so that all see the same machine load:

* ``desim --help`` (argument parsing only: no engine, no matplotlib, no web server);
* ``desim run`` of a small study (``opinion_diffusion``: 12 agents, 12 steps, a full
  DuckDB panel written), which imports the engine and its libraries;
* ``python -c "import mesa"`` in Mesa 3.3.1's own virtual environment
  (``benchmarks/.venv-mesa``, created on first use as in ``bench_schelling_mesa.py``);
* ``python -c "pass"`` in each interpreter, the floor any command pays.

Prints the median and the fastest wall time of each, and which heavy modules
``desim --help`` and ``desim run`` import (from ``python -X importtime``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonout

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HEAVY = ("matplotlib", "uvicorn", "starlette", "duckdb", "numpy", "networkx", "pyarrow", "pandas", "pydantic")


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def imported(cmd: list[str]) -> list[str]:
    """The heavy top-level packages a command imports."""
    err = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], check=True, capture_output=True, text=True).stderr
    names = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in err.splitlines() if "|" in line}
    return sorted(n for n in HEAVY if n in names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-mesa", action="store_true", help="skip Mesa (the smoke test: no venv to build)")
    jsonout.add_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "opinion_diffusion"
        shutil.copytree(ROOT / "studies" / "opinion_diffusion", study, ignore=shutil.ignore_patterns("runs", "__pycache__"))
        py = sys.executable
        cmds = {
            "python -c pass": [py, "-c", "pass"],
            "desim --help": [py, "-m", "desim.cli", "--help"],
            "desim run (12 agents x 12 steps)": [py, "-m", "desim.cli", "run", str(study)],
        }
        if not args.no_mesa:
            sys.path.insert(0, str(HERE))
            from bench_schelling_mesa import mesa_python
            mesa = str(mesa_python())
            cmds["mesa venv: python -c pass"] = [mesa, "-c", "pass"]
            cmds["mesa venv: import mesa"] = [mesa, "-c", "import mesa"]
        for cmd in cmds.values():          # warm the file cache once
            wall(cmd)
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.repeat):
            for name, cmd in cmds.items():
                times[name].append(wall(cmd))
        load = os.getloadavg()[0]
        print(f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs, load {load:.2f}, "
              f"{args.repeat} interleaved repeats")
        print(f"{'command':36s} {'median s':>9s} {'fastest s':>10s}")
        commands = []
        for name, ts in times.items():
            commands.append({"command": name, "runs": len(ts), "median_s": statistics.median(ts), "fastest_s": min(ts)})
            print(f"{name:36s} {commands[-1]['median_s']:9.3f} {commands[-1]['fastest_s']:10.3f}")
        to_mesa = {}
        if not args.no_mesa:
            ref = statistics.median(times["mesa venv: import mesa"])
            for name in ("desim --help", "desim run (12 agents x 12 steps)"):
                to_mesa[name] = statistics.median(times[name]) / ref
                print(f"{name} / import mesa: {to_mesa[name]:.2f}")
        heavy_help = imported(cmds["desim --help"])
        heavy_run = imported(cmds["desim run (12 agents x 12 steps)"])
        print("heavy imports of desim --help:", ", ".join(heavy_help) or "none")
        print("heavy imports of desim run:", ", ".join(heavy_run))
    jsonout.write(args.json, {
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "load_average": load, "repeat": args.repeat,
        "mesa": not args.no_mesa, "commands": commands, "median_to_import_mesa": to_mesa,
        "heavy_imports": {"desim --help": heavy_help, "desim run": heavy_run}})


if __name__ == "__main__":
    main()
