"""The dashboard under load while a large run goes (issue 32, item 6): no request fails, the run slows little.

    python benchmarks/bench_dashboard_load.py                  # 50 clients, a 100,000-agent run (a few minutes)
    python benchmarks/bench_dashboard_load.py --agents 500 --steps 3 --clients 4 --json PATH   # smoke (a test runs it)

In a temporary folder, ``opinion_diffusion`` is run once small (2,000 agents: the finished run whose pages
the clients read) and then the large run (``--agents``, ``--steps``) is timed three times through the real
command line, in turns: alone, with ``desim dashboard`` serving ``--clients`` polling clients, alone again.
Each client (its own HTTP connection, in a thread of this process) loops over what a person's open pages ask
for: every run's live progress, the study page, the finished run's metrics, a panel page, its network view,
the running run's metrics as its live file has them, and waits ``--every`` seconds between requests (1 s: a
page polling once a second). Reported: every request's status (a failed one is an error status or no
answer; an answer saying the store is busy is counted apart, as the page shows it), the latency per kind of
request (median, p95, max), and the loaded run's wall and CPU time against the mean of the two runs alone.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

import jsonout

ROOT = Path(__file__).resolve().parent.parent
QUIET = {**os.environ, "DESIM_PROGRESS": "off"}


def timed_run(study: Path, agents: int, steps: int) -> dict:
    """``desim run`` of the large run, its wall and CPU (user + system) seconds."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "desim.cli", "run", str(study), "--set", f"n_agents={agents}",
                    "--steps", str(steps)], check=True, capture_output=True, env=QUIET)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": time.perf_counter() - t0,
            "cpu": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)}


def finished_run(study: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(study), "--set", "n_agents=2000",
                          "--steps", "6"], check=True, capture_output=True, text=True, env=QUIET).stdout
    return out.split()[1].rstrip(":")


def requests_of(sid: str, done: str) -> list[tuple[str, str]]:
    return [("live", "/api/live"),
            ("study live", f"/api/studies/{sid}/live"),
            ("study page", f"/api/studies/{sid}"),
            ("metrics", f"/api/studies/{sid}/metrics?run={done}"),
            ("panel page", f"/api/studies/{sid}/panel?run={done}&step=3"),
            ("network view", f"/api/studies/{sid}/network?run={done}&state=opinion")]


def client(url: str, todo: list[tuple[str, str]], every: float, stop: threading.Event, out: list, seed: int):
    rnd = random.Random(seed)
    with httpx.Client(base_url=url, timeout=120) as http:
        time.sleep(rnd.random() * every)         # the clients do not start in step
        while not stop.is_set():
            kind, path = rnd.choice(todo)
            t0 = time.perf_counter()
            try:
                res = http.get(path)
                status = res.status_code
                busy = status == 200 and res.headers.get("content-type", "").startswith("application/json") \
                    and '"busy":true' in res.text.replace(" ", "")
            except httpx.HTTPError as e:
                status, busy = f"no answer: {type(e).__name__}", False
            out.append((kind, status, busy, time.perf_counter() - t0))
            stop.wait(every)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--every", type=float, default=1.0, help="seconds a client waits between its requests")
    jsonout.add_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="desim_dash_load_") as tmp:
        folder = Path(tmp)
        study = folder / "opinion_diffusion"
        shutil.copytree(ROOT / "studies" / "opinion_diffusion", study, ignore=shutil.ignore_patterns("runs"))
        done = finished_run(study)
        alone = [timed_run(study, args.agents, args.steps)]
        server = subprocess.Popen([sys.executable, "-m", "desim.cli", "dashboard", str(folder), "--port", "0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=QUIET)
        try:
            url = server.stdout.readline().split()[3].rstrip("/")      # printed once it accepts connections
            log: list = []
            stop = threading.Event()
            threads = [threading.Thread(target=client, args=(url, requests_of(study.name, done), args.every, stop,
                                                              log, i), daemon=True) for i in range(args.clients)]
            for t in threads:
                t.start()
            while len(log) < args.clients:          # every client has had an answer: the load is on
                time.sleep(0.01)
            loaded = timed_run(study, args.agents, args.steps)
            stop.set()
            for t in threads:
                t.join()
        finally:
            server.terminate()
            server.wait()
        alone.append(timed_run(study, args.agents, args.steps))
    base = {k: statistics.fmean(a[k] for a in alone) for k in ("wall", "cpu")}
    failed = [r for r in log if r[1] != 200]
    by_kind: dict[str, list[float]] = {}
    for kind, status, busy, seconds in log:
        if status == 200:
            by_kind.setdefault(kind, []).append(seconds * 1000)
    rows = []
    for kind, ms in sorted(by_kind.items()):
        ms.sort()
        rows.append({"request": kind, "n": len(ms), "median_ms": statistics.median(ms),
                     "p95_ms": ms[min(len(ms) - 1, int(0.95 * len(ms)))], "max_ms": ms[-1]})
    slowdown = {k: loaded[k] / base[k] - 1 for k in ("wall", "cpu")}
    print(f"dashboard under load: {args.clients} clients, one request each every {args.every} s, during a run of "
          f"{args.agents:,} agents x {args.steps} steps; machine: {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}")
    print()
    print("| request | answers | median ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['request']} | {r['n']:,} | {r['median_ms']:.0f} | {r['p95_ms']:.0f} | {r['max_ms']:.0f} |")
    print()
    print(f"requests: {len(log):,}, failed: {len(failed)}, answered 'store busy': {sum(r[2] for r in log)}")
    print(f"the run alone: {alone[0]['wall']:.2f} / {alone[1]['wall']:.2f} s wall, {alone[0]['cpu']:.2f} / "
          f"{alone[1]['cpu']:.2f} s CPU; under load: {loaded['wall']:.2f} s wall ({slowdown['wall']:+.1%}), "
          f"{loaded['cpu']:.2f} s CPU ({slowdown['cpu']:+.1%})")
    for kind, status, _, _ in failed[:10]:
        print(f"  failed: {kind}: {status}")
    jsonout.write(args.json, {"clients": args.clients, "agents": args.agents, "steps": args.steps,
                              "requests": len(log), "failed": len(failed), "busy": sum(r[2] for r in log),
                              "latency": rows, "alone": alone, "loaded": loaded, "slowdown": slowdown})


if __name__ == "__main__":
    main()
