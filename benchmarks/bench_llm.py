"""LLM throughput: dorm_deliberation_llm against the loopback stub.

200 students x 12 months x 3 rounds = 7,200 chat completions at 100 ms
latency, at several concurrencies, each in a fresh copy of the study (so an
empty reply cache), then the cached re-run of the last copy. Two floors:
``calls x latency / concurrency`` (the issue's) and the one the round
barriers impose, ``steps x rounds x ceil(students / concurrency) x latency``
(round r+1 needs every reply of round r).

    python benchmarks/bench_llm.py [--students 200] [--steps 12] [--latency-ms 100] [--concurrency 8 32 64]

The stub runs in its own process (``desim stub-llm``), as a real server would.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from desim import load_study, run_study
from desim.llm.stub import stub_process

STUDIES = Path(__file__).resolve().parent.parent / "studies"


def fresh_copy(where: Path, concurrency: int) -> Path:
    for name in ("dorm_deliberation", "dorm_deliberation_llm"):
        shutil.copytree(STUDIES / name, where / name, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    path = where / "dorm_deliberation_llm" / "simulation" / "simulation.json"
    data = json.loads(path.read_text())
    data["llm"]["concurrency"] = concurrency
    path.write_text(json.dumps(data))
    return where / "dorm_deliberation_llm"


def timed_run(root: Path, students: int, steps: int):
    spec = load_study(root, steps=steps, params={"n_students": students, "llm_kind": "openai"})
    started = time.perf_counter()
    result = run_study(spec)
    return result, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--students", type=int, default=200)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 64])
    args = ap.parse_args()
    latency, rounds = args.latency_ms / 1000.0, 3
    calls = args.students * args.steps * rounds
    print(f"dorm_deliberation_llm: {args.students} students x {args.steps} steps x {rounds} rounds = {calls} calls, "
          f"stub latency {args.latency_ms:g} ms")
    print("| concurrency | wall s | calls/s | floor s (calls x lat / c) | x floor | barrier floor s | x barrier floor | max in flight |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, stub_process(latency_ms=args.latency_ms) as stub:
        os.environ["DESIM_LLM_BASE_URL"] = stub.base_url
        root = None
        for c in args.concurrency:
            root = fresh_copy(Path(tmp) / f"c{c}", c)
            before = stub.stats()["requests"]
            result, wall = timed_run(root, args.students, args.steps)
            stats = stub.stats()
            assert result.status == "completed" and result.counters["llm"]["calls"] == calls
            assert stats["requests"] - before == calls
            floor = calls * latency / c
            barrier = args.steps * rounds * math.ceil(args.students / c) * latency
            print(f"| {c} | {wall:.1f} | {calls / wall:.0f} | {floor:.1f} | {wall / floor:.2f} | {barrier:.1f} | "
                  f"{wall / barrier:.2f} | {stats['max_in_flight']} |", flush=True)
        before = stub.stats()["requests"]
        result, wall = timed_run(root, args.students, args.steps)
        llm = result.counters["llm"]
        assert llm["calls"] == 0 and stub.stats()["requests"] == before
        print(f"\ncached re-run (c={args.concurrency[-1]}): {wall:.2f} s, {llm['calls']} calls, "
              f"{llm['cache_hits']} cache hits")


if __name__ == "__main__":
    main()
