"""A reader's open of a study's store as its runs pile up: what every `desim sql`, report and dashboard
request pays before its query.

    python benchmarks/bench_store_open.py                        # 200 runs (about a minute to make them)
    python benchmarks/bench_store_open.py --runs 3 --json PATH    # smoke (a test runs it)
    PYTHONPATH=<another checkout> python benchmarks/bench_store_open.py --store DIR   # that code, same store

In a temporary folder (or ``--store DIR``, kept, to time two checkouts on one store), the tests' walk study
(6 agents, 3 steps) gets ``--runs`` runs from one sweep; the store is opened once for writing, then a
reader opens it and counts ``metrics`` ``--repeat`` times. Reported: the minimum and median seconds of an
open and a query, and the open alone.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def make_store(folder: Path, runs: int) -> Path:
    """The walk study with ``runs`` runs of one sweep (made once: a kept ``--store`` is reused)."""
    from walk_study import write_walk_study
    study = folder / "walk"
    if (study / "runs").is_dir():
        return study
    write_walk_study(study, n_steps=3)
    subprocess.run([sys.executable, "-m", "desim.cli", "sweep", str(study), "--replicates", str(runs), "-q"],
                   check=True, stdout=subprocess.DEVNULL, env={**os.environ, "DESIM_PROGRESS": "off"})
    return study


def time_opens(study: Path, repeat: int) -> dict:
    from desim.store.connection import open_store
    with open_store(study, read_only=False):
        pass                                    # a writer brings the stored views up to date
    opened, total = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        with open_store(study) as con:
            t1 = time.perf_counter()
            n = con.execute("SELECT count(*) FROM metrics").fetchone()[0]
        total.append(time.perf_counter() - t0)
        opened.append(t1 - t0)
    return {"open_min": min(opened), "open_median": statistics.median(opened), "min": min(total),
            "median": statistics.median(total), "metric_rows": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--store", type=Path, help="a folder to make (or reuse) the study in, kept afterwards")
    jsonout.add_option(ap)
    args = ap.parse_args()
    folder = args.store or Path(tempfile.mkdtemp(prefix="desim_open_"))
    try:
        study = make_store(folder, args.runs)
        figures = {"runs": args.runs, "repeat": args.repeat, **time_opens(study, args.repeat)}
    finally:
        if args.store is None:
            shutil.rmtree(folder, ignore_errors=True)
    print("| runs stored | open, min / median (s) | open + count(*) of metrics, min / median (s) |")
    print("|---:|---:|---:|")
    print(f"| {args.runs} | {figures['open_min']:.3f} / {figures['open_median']:.3f} | "
          f"{figures['min']:.3f} / {figures['median']:.3f} |")
    jsonout.write(args.json, figures)


if __name__ == "__main__":
    main()
