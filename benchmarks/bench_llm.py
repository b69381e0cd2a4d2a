"""LLM throughput: dorm_deliberation_llm against the loopback stub, against the round-barrier floor.

200 students x 12 months x 3 rounds = 7,200 chat completions at 100 ms
latency, at several concurrencies, each in a fresh copy of the study (so an
empty reply cache), then the cached re-run of the last copy. Two floors:
``calls x latency / concurrency`` and the one the round barriers impose,
``steps x rounds x ceil(students / concurrency) x latency`` (round r+1 needs
every reply of round r): no client can beat the second.

Wall time on a shared machine follows its load, so each concurrency runs
``--runs`` times (the best wall is reported) and CPU per call is reported
too: of the desim process (engine, prompts, parsing, cache and HTTP client,
all threads) and of the stub process. A second table compares the HTTP
layer alone, client CPU per request for the same requests at the same
concurrency: desim's client (aiohttp), a bare asyncio HTTP/1.1 exchange (the
least any Python client can spend) and httpx (the previous client), when
installed; then whole rounds of the study's size through the HTTP layer
alone, against the barrier floor (what the client and the stub cost before
any prompt is rendered); and a scripted run of the same study gives the CPU
per call of everything but HTTP and the cache.

    python benchmarks/bench_llm.py [--students 200] [--steps 12] [--latency-ms 100] [--concurrency 8 32 64]
    python benchmarks/bench_llm.py --smoke          # seconds: what the test suite runs
    python benchmarks/bench_llm.py --json PATH      # the figures also as one JSON object at PATH

The stub runs in its own process (``desim stub-llm``), as a real server would.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import orjson

from desim import load_study, run_study
from desim.llm.client import ChatClient
from desim.llm.config import LLMConfig
from desim.llm.stub import stub_process

import jsonout

STUDIES = Path(__file__).resolve().parent.parent / "studies"
ROUNDS = 3


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_of(pid: int) -> float:
    """CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def study_table(args, stub, tmp: Path) -> tuple[Path, list[dict]]:
    """The table of runs per concurrency; returns the last study copy (for the cached re-run) and the rows."""
    latency = args.latency_ms / 1000.0
    calls = args.students * args.steps * ROUNDS
    print(f"dorm_deliberation_llm: {args.students} students x {args.steps} steps x {ROUNDS} rounds = {calls} calls, "
          f"stub latency {args.latency_ms:g} ms, best wall of {args.runs} runs (CPU: their median)")
    print("| concurrency | wall s | calls/s | floor s (calls x lat / c) | barrier floor s | x barrier floor "
          "| desim CPU ms/call | stub CPU ms/call | max in flight |")
    print("|---|---|---|---|---|---|---|---|---|")
    root, rows = None, []
    for c in args.concurrency:
        walls, cpus, stub_cpus = [], [], []
        for attempt in range(args.runs):
            root = fresh_copy(tmp / f"c{c}-{attempt}", c)
            before = stub.stats()["requests"]
            cpu0, stub0 = cpu_self(), cpu_of(stub.process.pid)
            result, wall = timed_run(root, args.students, args.steps)
            cpu1, stub1 = cpu_self(), cpu_of(stub.process.pid)
            stats = stub.stats()
            assert result.status == "completed" and result.counters["llm"]["calls"] == calls
            assert stats["requests"] - before == calls
            walls.append(wall)
            cpus.append(1000 * (cpu1 - cpu0) / calls)
            stub_cpus.append(1000 * (stub1 - stub0) / calls)
        wall = min(walls)
        floor = calls * latency / c
        barrier = args.steps * ROUNDS * math.ceil(args.students / c) * latency
        row = {"concurrency": c, "calls": calls, "wall_s": wall, "calls_per_s": calls / wall, "floor_s": floor,
               "barrier_floor_s": barrier, "x_barrier_floor": wall / barrier,
               "desim_cpu_ms_per_call": sorted(cpus)[len(cpus) // 2],
               "stub_cpu_ms_per_call": sorted(stub_cpus)[len(stub_cpus) // 2], "max_in_flight": stats["max_in_flight"]}
        rows.append(row)
        print(f"| {c} | {wall:.2f} | {row['calls_per_s']:.0f} | {floor:.2f} | {barrier:.2f} | "
              f"{row['x_barrier_floor']:.3f} | {row['desim_cpu_ms_per_call']:.3f} | "
              f"{row['stub_cpu_ms_per_call']:.3f} | {row['max_in_flight']} |", flush=True)
    return root, rows


def scripted_row(args, tmp: Path) -> dict:
    """The same study with scripted replies: prompts, parsing and the engine, no HTTP and no cache."""
    root = fresh_copy(tmp / "scripted", 1)
    spec = load_study(root, steps=args.steps, params={"n_students": args.students, "llm_kind": "scripted"})
    calls = args.students * args.steps * ROUNDS
    cpu0, started = cpu_self(), time.perf_counter()
    result = run_study(spec)
    wall, cpu = time.perf_counter() - started, cpu_self() - cpu0
    assert result.status == "completed" and result.counters["llm"]["scripted"] == calls
    print(f"scripted (no server, same prompts and parsing): {wall:.2f} s, {1000 * cpu / calls:.3f} ms CPU per call")
    return {"calls": calls, "wall_s": wall, "cpu_ms_per_call": 1000 * cpu / calls}


BODY = {"model": "stub", "temperature": 0.7, "max_tokens": 200, "messages": [
    {"role": "system", "content": "You are a student deciding where to eat. JSON schema:\n"
                                  '{"properties":{"option":{"enum":["canteen","delivery","cook"]},'
                                  '"reason":{"maxLength":120,"type":"string"}},"type":"object"}'},
    {"role": "user", "content": "Step 1, round 1 of 3.\n\n## You\n- id: s001\n" + "- detail: value\n" * 100}]}


async def desim_client(url: str, n: int, c: int, rounds: int = 1) -> tuple[float, list[float]]:
    """CPU spent and the wall of each round of ``n`` requests (``rounds`` of them, after a warm-up)."""
    client = ChatClient(LLMConfig(base_url=url, concurrency=c), None)
    await client.complete_many([dict(BODY, seed=-i) for i in range(c)], ["warm-up"] * c, "warm-up")
    cpu0, walls = cpu_self(), []
    for r in range(rounds):
        started = time.perf_counter()
        replies, failure = await client.complete_many([dict(BODY, seed=r * n + i) for i in range(n)],
                                                      ["bench"] * n, "bench")
        walls.append(time.perf_counter() - started)
        assert failure is None and len(replies) == n, failure
    spent = cpu_self() - cpu0
    await client.aclose()
    return spent, walls


async def bare_asyncio(url: str, n: int, c: int, rounds: int = 1) -> tuple[float, list[float]]:
    """The least a Python client can do: keep-alive connections, one write, read the head and the body."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    free: asyncio.Queue = asyncio.Queue()
    for _ in range(c):
        free.put_nowait(await asyncio.open_connection(host, int(port)))

    async def one(i: int) -> None:
        reader, writer = await free.get()
        body = orjson.dumps(dict(BODY, seed=i))
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(body), body))
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        orjson.loads(await reader.readexactly(length))
        free.put_nowait((reader, writer))

    await asyncio.gather(*(one(-i) for i in range(1, c + 1)))
    cpu0, walls = cpu_self(), []
    for r in range(rounds):
        started = time.perf_counter()
        await asyncio.gather(*(one(r * n + i) for i in range(n)))
        walls.append(time.perf_counter() - started)
    spent = cpu_self() - cpu0
    while not free.empty():
        free.get_nowait()[1].close()
    return spent, walls


async def httpx_per_slot(url: str, n: int, c: int, rounds: int = 1) -> tuple[float, list[float]] | None:
    """The previous client: one single-connection httpx client per slot."""
    try:
        import httpx
    except ImportError:
        return None
    free: asyncio.Queue = asyncio.Queue()
    for _ in range(c):
        free.put_nowait(httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=1,
                                                                          max_keepalive_connections=1)))

    async def one(i: int) -> None:
        client = await free.get()
        try:
            (await client.post(url, json=dict(BODY, seed=i))).json()
        finally:
            free.put_nowait(client)

    await asyncio.gather(*(one(-i) for i in range(1, c + 1)))
    cpu0 = cpu_self()
    await asyncio.gather(*(one(i) for i in range(n * rounds)))
    spent = cpu_self() - cpu0
    while not free.empty():
        await free.get_nowait().aclose()
    return spent, []


def client_table(args, stub) -> dict:
    """The HTTP layer alone: client CPU per request, then whole rounds against the barrier floor."""
    n, c = args.client_requests, args.concurrency[-1]
    url = stub.base_url + "/chat/completions"
    print(f"\nHTTP layer alone: {n} requests at concurrency {c} against the same stub, client CPU per request "
          f"(median of {args.repeat})")
    print("| client | CPU ms/request |")
    print("|---|---|")
    clients = []
    for name, fn, target in (("desim ChatClient (aiohttp)", desim_client, stub.base_url),
                             ("bare asyncio HTTP/1.1", bare_asyncio, url),
                             ("httpx, one client per slot (before)", httpx_per_slot, url)):
        spent = [asyncio.run(fn(target, n, c)) for _ in range(args.repeat)]
        if None in spent:
            clients.append({"client": name, "installed": False, "cpu_ms_per_request": None})
            print(f"| {name} | (not installed) |")
            continue
        clients.append({"client": name, "installed": True,
                        "cpu_ms_per_request": 1000 * sorted(s for s, _ in spent)[len(spent) // 2] / n})
        print(f"| {name} | {clients[-1]['cpu_ms_per_request']:.3f} |", flush=True)
    rounds, waves = args.round_count, math.ceil(args.students / c)
    floor = waves * args.latency_ms
    print(f"\nHTTP rounds alone: {rounds} rounds of {args.students} requests at concurrency {c} (barrier floor "
          f"{floor:g} ms a round: {waves} waves)")
    print("| client | mean ms/round | best ms/round | x barrier floor (mean) |")
    print("|---|---|---|---|")
    round_rows = []
    for name, fn, target in (("desim ChatClient (aiohttp)", desim_client, stub.base_url),
                             ("bare asyncio HTTP/1.1", bare_asyncio, url)):
        _, walls = asyncio.run(fn(target, args.students, c, rounds))
        mean = 1000 * sum(walls) / len(walls)
        round_rows.append({"client": name, "rounds_timed": len(walls), "mean_ms_per_round": mean,
                           "best_ms_per_round": 1000 * min(walls), "x_barrier_floor": mean / floor})
        print(f"| {name} | {mean:.0f} | {round_rows[-1]['best_ms_per_round']:.0f} | {mean / floor:.3f} |", flush=True)
    return {"requests": n, "concurrency": c, "repeat": args.repeat, "clients": clients,
            "rounds": {"rounds": rounds, "requests_per_round": args.students, "concurrency": c, "waves": waves,
                       "barrier_floor_ms": floor, "clients": round_rows}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--students", type=int, default=200)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 64])
    ap.add_argument("--client-requests", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2, help="runs per concurrency: the best wall is reported")
    ap.add_argument("--round-count", type=int, default=12, help="rounds in the HTTP-only round table")
    ap.add_argument("--smoke", action="store_true", help="a tiny configuration, seconds long")
    jsonout.add_option(ap)
    args = ap.parse_args()
    if args.smoke:
        args.students, args.steps, args.latency_ms, args.concurrency = 20, 1, 20.0, [4, 8]
        args.client_requests, args.repeat, args.runs, args.round_count = 40, 1, 1, 2
    load_start = os.getloadavg()
    print(f"load average {' '.join(f'{x:.1f}' for x in load_start)}")
    with tempfile.TemporaryDirectory() as tmp, stub_process(latency_ms=args.latency_ms) as stub:
        os.environ["DESIM_LLM_BASE_URL"] = stub.base_url
        root, rows = study_table(args, stub, Path(tmp))
        before = stub.stats()["requests"]
        result, wall = timed_run(root, args.students, args.steps)
        llm = result.counters["llm"]
        assert llm["calls"] == 0 and stub.stats()["requests"] == before
        cached = {"concurrency": args.concurrency[-1], "wall_s": wall, "calls": llm["calls"],
                  "cache_hits": llm["cache_hits"], "stub_requests": stub.stats()["requests"] - before}
        print(f"\ncached re-run (c={args.concurrency[-1]}): {wall:.2f} s, {llm['calls']} calls, "
              f"{llm['cache_hits']} cache hits")
        scripted = scripted_row(args, Path(tmp))
        http = client_table(args, stub)
    load_end = os.getloadavg()
    print(f"load average {' '.join(f'{x:.1f}' for x in load_end)}")
    jsonout.write(args.json, {
        "students": args.students, "steps": args.steps, "rounds": ROUNDS, "calls": args.students * args.steps * ROUNDS,
        "latency_ms": args.latency_ms, "runs": args.runs, "concurrency": args.concurrency, "study": rows,
        "cached_rerun": cached, "scripted": scripted, "http": http, "load_average_start": load_start,
        "load_average_end": load_end})


if __name__ == "__main__":
    main()
