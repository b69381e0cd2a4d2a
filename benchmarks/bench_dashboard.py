"""Dashboard API latency on a large study, and while a run locks the store.

Usage: python benchmarks/bench_dashboard.py [--agents 20000] [--steps 40] [--repeat 5] [--json PATH]
       python benchmarks/bench_dashboard.py --agents 200 --steps 3 --repeat 1   # smoke run (a test runs it)

Runs ``opinion_diffusion`` once with ``--set n_agents=<agents>`` (a panel of
agents x steps rows) in a temporary folder, serves the dashboard on an
ephemeral port in this process, and reports the median wall time of each API
request over ``--repeat`` calls. Then another process takes the store's write
lock (as ``desim run`` does) and the same study page is timed again: the
answer then comes from the last good copy and the live files.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from desim.dashboard.app import create_app
from desim.store import StudyLayout

import jsonout

ROOT = Path(__file__).resolve().parent.parent


def serve(studies: Path) -> tuple[str, uvicorn.Server]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(studies), log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server


def timed(client: httpx.Client, url: str, repeat: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = client.get(url)
        times.append(time.perf_counter() - t0)
        res.raise_for_status()
        size = len(res.content)
    return statistics.median(times) * 1000, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    jsonout.add_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        studies = Path(tmp) / "studies"
        study = studies / "opinion_diffusion"
        shutil.copytree(ROOT / "studies" / "opinion_diffusion", study,
                        ignore=shutil.ignore_patterns("runs", "__pycache__"))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "desim.cli", "run", str(study), "--steps", str(args.steps),
                        "--set", f"n_agents={args.agents}"], check=True, capture_output=True)
        run_s = time.perf_counter() - t0
        print(f"run: {args.agents} agents x {args.steps} steps in {run_s:.1f} s")
        figures = {"agents": args.agents, "steps": args.steps, "repeat": args.repeat, "run_s": run_s, "requests": []}
        base, server = serve(studies)
        with httpx.Client(base_url=base, timeout=120) as client:
            rid = client.get("/api/studies").json()["studies"][0]["last_run"]["run_id"]
            s = "/api/studies/opinion_diffusion"
            last = f"a{args.agents - 1:0{len(str(args.agents - 1))}d}"
            urls = {
                "study list": "/api/studies",
                "study page": s,
                "live files": f"{s}/live",
                "metrics (1 run)": f"{s}/metrics?run={rid}",
                "panel page 0": f"{s}/panel?run={rid}",
                "panel last page": f"{s}/panel?run={rid}&page={args.agents * args.steps // 50 - 1}",
                "panel step+kind filter": f"{s}/panel?run={rid}&step={args.steps // 2}&action_kind=post",
                "agent trajectory": f"{s}/agent?run={rid}&agent_id={last}",
                "messages of a step": f"{s}/messages?run={rid}&step={args.steps // 2}",
                f"network ({min(args.agents, 10_000)} nodes)": f"{s}/network?run={rid}&state=opinion",
                "display state (bands)": f"{s}/states?run={rid}&state=opinion",
            }
            print(f"{'request':28s} {'median ms':>10s} {'bytes':>10s}")
            for name, url in urls.items():
                ms, size = timed(client, url, args.repeat)
                figures["requests"].append({"request": name, "median_ms": ms, "bytes": size})
                print(f"{name:28s} {ms:10.1f} {size:10d}")
            code = ("import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('locked', flush=True); "
                    "sys.stdin.read()")
            lock = subprocess.Popen([sys.executable, "-c", code, str(StudyLayout(study).db)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            assert lock.stdout.readline().strip() == "locked"
            try:
                ms, _ = timed(client, s, args.repeat)
                busy = client.get(s).json()["busy"]
                print(f"{'study page, store locked':28s} {ms:10.1f}  (busy={busy})")
                live_ms, _ = timed(client, f"{s}/live", args.repeat)
                print(f"{'live files, store locked':28s} {live_ms:10.1f}")
                figures["store_locked"] = {"study_page_median_ms": ms, "busy": busy, "live_files_median_ms": live_ms}
            finally:
                lock.stdin.close()
                lock.wait()
        server.should_exit = True
    jsonout.write(args.json, figures)


if __name__ == "__main__":
    main()
