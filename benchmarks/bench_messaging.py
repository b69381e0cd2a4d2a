"""Message delivery at scale: every agent posts every round.

Watts-Strogatz network (k = 10, p = 0.1), interaction_rounds = 3, 12 steps,
N = 2,000 ... 1,000,000. Each agent reads what its neighbours posted earlier
in the step, moves half-way to their mean, and posts the result, so round 2
delivers about 2 * k messages per agent. The question is whether the time to
observe (read the feed) per agent-round stays flat as N grows, and whether the
1M-agent run, messages table included, fits in 3 minutes and 8 GiB.

Two paths, each N in its own process (so peak memory is that run's):

* ``objects``: the per-agent path, ``InMemoryMessageBus`` + ``NeighborFeed``
  (one ``Message`` object per post, ``local_for`` per agent);
* ``columnar``: ``ColumnarFeed`` over a CSR adjacency on the engine's columnar
  path.

Messages reach the engine through ``environment.drain_messages()``: a list of
``Message`` objects, turned into rows one at a time (``--messages objects``),
or an Arrow table from ``ColumnarFeed.drain()``, inserted in bulk
(``--messages arrow``).

    python benchmarks/bench_messaging.py --path columnar --messages arrow --n 2000 20000 200000 1000000
    python benchmarks/bench_messaging.py --path objects --n 2000 20000 200000
    python benchmarks/bench_messaging.py --path objects --n 200                        # smoke (a test runs it)
    python benchmarks/bench_messaging.py --path columnar --messages arrow --n 200 400   # smoke, columnar path

Each N prints one JSON line (or ``{"n": ..., "error": [...]}`` if its run failed); ``--json PATH``
also writes them all as one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonout

MODEL = '''
import time

import numpy as np

from desim import (ActionColumns, Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus,
                   NeighborFeed, Observation, Persona, PopulationProvider, neighbors_fn)
from desim.messaging.columnar import ColumnarFeed


class Crowd(PopulationProvider):
    def __init__(self, n):
        self.n = int(n)

    def personas(self, rng):
        w = len(str(self.n - 1))
        return [Persona.model_construct(agent_id=f"a{i:0{w}d}", attributes={}, description="")
                for i in range(self.n)]


class Timed:
    drain_seconds = 0.0
    observe_seconds = 0.0
    feed_seconds = 0.0
    agent_rounds = 0


class ObjectsEnv(Timed, EnvironmentProvider):
    def reset(self, seed):
        rng = self.ctx.streams.numpy("values")
        self.value = dict(zip(self.ctx.agent_ids, rng.random(len(self.ctx.agent_ids)).tolist()))
        self.bus = InMemoryMessageBus(carry_previous_step=False)
        self.feed = NeighborFeed(neighbors_fn(self.ctx.graph), self.bus)

    def observe_batch(self, ids, t, r):
        start = time.perf_counter()
        local_for, value, out = self.feed.local_for, self.value, []
        feed_time = 0.0
        for a in ids:
            f0 = time.perf_counter()
            seen = local_for(a, t, r)
            feed_time += time.perf_counter() - f0
            mean = sum(m.content["v"] for m in seen) / len(seen) if seen else None
            out.append(Observation.model_construct(agent_id=a, step=t, round_idx=r, macro_physical={},
                       macro_information={}, local_physical={"v": value[a]},
                       local_information={"seen_mean": mean}, text=None))
        self.observe_seconds += time.perf_counter() - start
        self.feed_seconds += feed_time
        self.agent_rounds += len(ids)
        return out

    def apply(self, actions):
        for a in actions:
            self.value[a.agent_id] = a.payload["content"]["v"]
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {"v": self.value[agent_id]}


class ObjectsDecide(DecisionModel):
    def decide_batch(self, observations, memories):
        noise = self.ctx.rng("decide").normal(0.0, 0.01, len(observations)).tolist()
        out = []
        for o, e in zip(observations, noise):
            v, seen = o.local_physical["v"], o.local_information["seen_mean"]
            new = (v if seen is None else 0.5 * v + 0.5 * seen) + e
            out.append(Action.model_construct(agent_id=o.agent_id, step=o.step, kind="post",
                                              payload={"content": {"v": new}}, rationale="", source="rule"))
        return out


class ColumnarEnv(Timed, EnvironmentProvider):
    def __init__(self, messages="objects"):
        self.messages = messages

    def reset(self, seed):
        n = len(self.ctx.agent_ids)
        self.v = self.ctx.streams.numpy("values").random(n)
        self.feed = ColumnarFeed.from_network(self.ctx.network)

    def observe_columns(self, idx, t, r):
        start = time.perf_counter()
        count, total = self.feed.neighbour_sum(idx, t, r, "v")
        self.feed_seconds += time.perf_counter() - start
        mean = total / np.maximum(count, 1)
        self.observe_seconds += time.perf_counter() - start
        self.agent_rounds += len(idx)
        return {"v": self.v[idx], "seen_mean": mean, "seen": count}

    def apply_columns(self, idx, actions):
        self.v[idx] = actions.payload["v"]
        self.feed.post(idx, self.ctx.step, self.ctx.round_idx, {"v": actions.payload["v"]})

    def state_columns(self):
        return {"v": self.v}

    def drain_messages(self):
        start = time.perf_counter()
        out = self.feed.drain() if self.messages == "arrow" else self.feed.drain_messages()
        self.drain_seconds += time.perf_counter() - start
        return out


class ColumnarDecide(DecisionModel):
    def decide_columns(self, obs, idx, t, r):
        noise = self.ctx.rng("decide").normal(0.0, 0.01, len(idx))
        v, seen = obs["v"], obs["seen_mean"]
        new = np.where(obs["seen"] > 0, 0.5 * v + 0.5 * seen, v) + noise
        return ActionColumns(kind="post", payload={"v": new})
'''


def write_study(root: Path, n: int, path: str, messages: str) -> None:
    for sub in ("environment", "population", "simulation"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "model.py").write_text(MODEL)
    (root / "study.json").write_text(json.dumps({"id": "bench_messaging"}))
    env = {"ref": "model:ObjectsEnv"} if path == "objects" else \
        {"ref": "model:ColumnarEnv", "args": {"messages": messages}}
    decide = "model:ObjectsDecide" if path == "objects" else "model:ColumnarDecide"
    (root / "environment" / "environment.json").write_text(json.dumps({"provider": env}))
    (root / "population" / "population.json").write_text(json.dumps({
        "provider": {"ref": "model:Crowd", "args": {"n": n}},
        "interaction": {"kind": "watts_strogatz", "k": 10, "p": 0.1}, "propagation": "contagion"}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": 12, "time_unit": "week", "interaction_rounds": 3, "seed": 1,
        "decision": {"ref": decide}, "memory_window": 0}))


def peak_memory_gib() -> tuple[float, float]:
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20      # KiB -> GiB
    hwm = 0.0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 2**20
    return maxrss, hwm


def one(n: int, path: str, messages: str) -> dict:
    """One run in this process; prints its figures as JSON."""
    t0 = time.perf_counter()
    import duckdb

    from desim import load_study
    from desim.experiments.recording import record, sink_for
    from desim.run.assemble import assemble
    with tempfile.TemporaryDirectory(prefix="bench_messaging_") as tmp:
        root = Path(tmp) / "study"
        write_study(root, n, path, messages)
        spec = load_study(root)
        t_build = time.perf_counter()
        engine = assemble(spec)
        t_run = time.perf_counter()
        result = record(engine, sink_for(spec, Path(tmp) / "bench.duckdb"))
        t_end = time.perf_counter()
        env = engine.environment
        con = duckdb.connect(str(Path(tmp) / "bench.duckdb"), read_only=True)
        stored = con.execute("SELECT count(*), count(DISTINCT step), count(DISTINCT round) FROM messages").fetchone()
        panel = con.execute("SELECT count(*) FROM panel").fetchone()[0]
        con.close()
    maxrss, hwm = peak_memory_gib()
    return {
        "n": n, "path": path, "messages_mode": messages, "status": result.status,
        "wall_s": round(t_end - t0, 2), "engine_build_s": round(t_run - t_build, 2),
        "run_s": round(t_end - t_run, 2),
        "agent_rounds": env.agent_rounds,
        "observe_us_per_agent_round": round(1e6 * env.observe_seconds / env.agent_rounds, 3),
        "feed_us_per_agent_round": round(1e6 * env.feed_seconds / env.agent_rounds, 3),
        "observe_s": round(env.observe_seconds, 2), "drain_s": round(env.drain_seconds, 2),
        "messages_stored": stored[0], "message_steps": stored[1], "message_rounds": stored[2],
        "panel_rows": panel, "edges": engine.network.number_of_edges(),
        "peak_rss_gib": round(maxrss, 2), "vm_hwm_gib": round(hwm, 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[2000, 20000, 200000, 1000000])
    p.add_argument("--path", choices=["objects", "columnar"], default="columnar")
    p.add_argument("--messages", choices=["objects", "arrow"], default="objects",
                   help="how drained messages reach the store (arrow: one Arrow table per step)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    jsonout.add_option(p)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.n[0], args.path, args.messages)))
        return 0
    runs = []
    for n in args.n:
        cmd = [sys.executable, __file__, "--one", "--n", str(n), "--path", args.path, "--messages", args.messages]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        if proc.returncode != 0:
            runs.append({"n": n, "path": args.path, "error": proc.stderr.strip().splitlines()[-1:]})
            print(json.dumps(runs[-1]))
            continue
        line = proc.stdout.strip().splitlines()[-1]
        runs.append(json.loads(line))
        print(line, flush=True)
    jsonout.write(args.json, {"path": args.path, "messages": args.messages, "n": args.n, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
