"""A branch against a full run (issue 5's benchmark).

    python benchmarks/bench_branch.py [--n 100000] [--write] [--json PATH]
    python benchmarks/bench_branch.py --n 200   # smoke run (a test runs it; without --write, RESULTS.md is left alone)

Runs a study for 12 steps, then branches it at step 10 (steps 1-9 replayed
from the parent's stored actions through advance_to and apply only, steps
10-12 decided), on the per-agent path (opinion_diffusion) and on the columnar
path (benchmarks/studies/ring_bc). Both in one process, one after the other;
the ratio branch / full run is the figure that counts on a shared machine.
"""
from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from pathlib import Path

import desim
from desim.experiments.branches import branch

import jsonout

ROOT = Path(__file__).resolve().parent.parent


def measure(study: str, n: int, tmp: Path) -> dict:
    root = tmp / Path(study).name
    shutil.copytree(ROOT / study, root, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    spec = desim.load_study(root, params={"n_agents": n}, steps=12, rounds=1)
    t0 = time.perf_counter()
    parent = desim.run_study(spec)
    full = time.perf_counter() - t0
    t0 = time.perf_counter()
    child = branch(root, parent.run_id, 10, spec=desim.load_study(root, params={"n_agents": n}, steps=12, rounds=1))
    fork = time.perf_counter() - t0
    assert child.status == "completed"
    return {"study": Path(study).name, "n": n, "full": full, "branch": fork}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--write", action="store_true")
    jsonout.add_option(p)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="desim-branch-"))
    rows = [measure(s, args.n, tmp) for s in ("studies/opinion_diffusion", "benchmarks/studies/ring_bc")]
    shutil.rmtree(tmp, ignore_errors=True)
    lines = ["| study (path) | N | full run, 12 steps | branch at step 10 | branch / full |", "|---|---|---|---|---|"]
    for r in rows:
        r["path"] = "per-agent" if r["study"] == "opinion_diffusion" else "columnar"
        r["ratio"] = r["branch"] / r["full"]
        lines.append(f"| {r['study']} ({r['path']}) | {r['n']:,} | {r['full']:.1f} s | {r['branch']:.1f} s | "
                     f"{r['ratio']:.2f} |")
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    section = (f"\n## Branch at step 10 against the full 12-step run (issue 5)\n\n"
               f"Machine: {cpu}, 2 cores, shared. Command: `python benchmarks/bench_branch.py --n {args.n} --write`. "
               "Both timings include loading the study and building the population and network; the branch "
               "also reads the parent's actions for steps 1-9 from the store.\n\n" + "\n".join(lines) + "\n")
    print(section)
    if args.write:
        with open(ROOT / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write(section)
    jsonout.write(args.json, {"n": args.n, "steps": 12, "branch_step": 10, "written": args.write,
                              "rows": [{"study": r["study"], "path": r["path"], "n": r["n"], "full_s": r["full"],
                                        "branch_s": r["branch"], "ratio": r["ratio"]} for r in rows]})


if __name__ == "__main__":
    main()
