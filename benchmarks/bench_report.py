"""Report and diffusion player for the 100,000-agent opinion study: time and peak memory.

Usage: python benchmarks/bench_report.py [--agents 100000] [--json PATH]
       python benchmarks/bench_report.py --agents 200   # smoke run (a test runs it)

The study runs in its own processes (``desim run --set n_agents=...``, twice:
the study as shipped and a control with ``campaign_weight=0``), so their
memory does not count. Each rendering then runs in a fresh process that
reports its wall time and peak resident memory (``ru_maxrss``), next to the
same process's resident memory after importing desim (the baseline).
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonout

ROOT = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(study: str, what: str, run: str, compare: str | None) -> None:
    """Child process: render one thing and print its figures as JSON."""
    import desim.report as report
    base = rss_mb()
    t0 = time.perf_counter()
    if what == "report":
        paths = report.write_report(study, run_id=run, compare=compare)
        size = paths["html"].stat().st_size
    else:
        # lays the network out (stored), then the report draws
        from desim.report.network_picture import diffusion_player
        paths = diffusion_player(study, "opinion", run_id=run)
        size = paths["html"].stat().st_size
    print(json.dumps({"seconds": round(time.perf_counter() - t0, 2), "peak_rss_mb": round(rss_mb(), 1),
                      "baseline_rss_mb": round(base, 1), "html_kb": round(size / 1024, 1)}))


def desim_run(study: Path, *sets: str) -> tuple[str, float]:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "desim.cli", "run", str(study)] + [a for s in sets for a in ("--set", s)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    run_id = out.split()[1].rstrip(":")
    return run_id, time.perf_counter() - t0


def child(study: Path, what: str, run: str, compare: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--measure", str(study), what, run] + ([compare] if compare else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=100_000)
    p.add_argument("--measure", nargs="+", help=argparse.SUPPRESS)
    jsonout.add_option(p)
    args = p.parse_args()
    if args.measure:
        study, what, run, *rest = args.measure
        measure(study, what, run, rest[0] if rest else None)
        return
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "opinion_diffusion"
        shutil.copytree(ROOT / "studies" / "opinion_diffusion", study,
                        ignore=shutil.ignore_patterns("runs", "__pycache__"))
        treat, t_run = desim_run(study, f"n_agents={args.agents}")
        control, _ = desim_run(study, f"n_agents={args.agents}", "campaign_weight=0")
        rows = (12 + 1) * args.agents
        print(f"opinion_diffusion, {args.agents:,} agents, 12 steps ({rows:,} panel + initial rows per run); "
              f"one run took {t_run:.1f} s")
        figures = {"agents": args.agents, "steps": 12, "rows_per_run": rows, "run_s": t_run, "renders": []}
        for label, what, compare in (("report, one run", "report", None),
                                     ("report, run vs control (paired per agent)", "report", control),
                                     ("diffusion player, sampled view", "diffusion", None)):
            r = child(study, what, treat, compare)
            figures["renders"].append({"render": label, "what": what, "compared": compare is not None, **r})
            print(f"{label:45s} {r['seconds']:6.2f} s   peak RSS {r['peak_rss_mb']:7.1f} MB "
                  f"(baseline after import {r['baseline_rss_mb']:.1f} MB)   html {r['html_kb']:.0f} kB")
    jsonout.write(args.json, figures)


if __name__ == "__main__":
    main()
