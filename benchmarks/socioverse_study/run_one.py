"""Run one SocioVerse2 configuration in this process and print its figures as JSON.

Called by benchmarks/bench_socioverse.py with the benchmark venv's interpreter,
one fresh process per configuration so its peak memory is its own:

    benchmarks/.venv-socioverse/bin/python benchmarks/socioverse_study/run_one.py \
        '{"model": "ring", "n": 2000, "k": 3, "out": "/tmp/x"}'

``model`` is ``ring`` (optional ``initial``: a JSON file of starting opinions;
optional ``final``: where to write the step-12 opinions read back from the
store) or ``feed`` (``edges``: a JSON file of id pairs). The study is assembled
from SocioVerse2 bundles by its own ``build_simulator``, with its DuckDB store
(``<out>/trajectory/study.duckdb``, plus its per-step JSONL streams and
Parquet export, as the published loop does).
"""
from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import model  # noqa: E402  (registers the study's components)
from socioverse.engine.builder import build_simulator  # noqa: E402
from socioverse.io.duckdb_store import open_readonly  # noqa: E402
from socioverse.schemas import EnvironmentBundle, PopulationBundle, SimulationConfig  # noqa: E402
from socioverse.schemas.population import InteractionStructure  # noqa: E402

N_STEPS = 12


def bundles(cfg: dict):
    n, kind = cfg["n"], cfg["model"]
    if kind == "ring":
        ids = model.agent_ids(n, "b")
        edges = [(ids[i], ids[(i + 1) % n]) for i in range(n)]
        env = EnvironmentBundle(study_id="bench_ring", provider_ref="bench.ring",
                                provider_args={"n": n, "initial": cfg.get("initial")})
        pop = PopulationBundle(study_id="bench_ring", provider_ref="bench.crowd",
                               provider_args={"n": n, "prefix": "b"}, propagation="contagion",
                               interaction=InteractionStructure(kind="explicit_network", edges=edges))
        sim = SimulationConfig(study_id="bench_ring", n_steps=N_STEPS, seed=cfg.get("seed", 7),
                               interaction_rounds=cfg["k"], decision_ref="bench.bounded_confidence",
                               decision_args={"epsilon": 0.3, "mu": 0.5},
                               collector_ref="bench.opinion_moments", engine_args={"memory_window": 0})
    else:
        edges = [tuple(e) for e in json.loads(Path(cfg["edges"]).read_text())]
        env = EnvironmentBundle(study_id="bench_feed", provider_ref="bench.feed",
                                provider_args={"n": n, "edges": cfg["edges"]})
        pop = PopulationBundle(study_id="bench_feed", provider_ref="bench.crowd",
                               provider_args={"n": n, "prefix": "a"}, propagation="contagion",
                               interaction=InteractionStructure(kind="explicit_network", edges=edges))
        sim = SimulationConfig(study_id="bench_feed", n_steps=N_STEPS, seed=cfg.get("seed", 7),
                               interaction_rounds=cfg["k"], decision_ref="bench.half_way",
                               collector_ref="bench.message_log", engine_args={"memory_window": 0})
    return env, pop, sim


def timed(fn, totals: dict, key: str):
    """Wrap a store method so the time spent inside it is added to ``totals[key]``."""
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - t0
    return wrapper


def main() -> None:
    cfg = json.loads(sys.argv[1])
    t0 = time.perf_counter()
    env_b, pop_b, sim_b = bundles(cfg)
    db = Path(cfg["out"]) / "trajectory" / "study.duckdb"
    sim = build_simulator(env_bundle=env_b, pop_bundle=pop_b, sim_config=sim_b, store_path=db)
    totals = {"panel_insert_s": 0.0, "message_insert_s": 0.0, "finalize_s": 0.0}
    sim.store.record = timed(sim.store.record, totals, "panel_insert_s")
    sim.store.record_messages = timed(sim.store.record_messages, totals, "message_insert_s")
    sim.store.finalize = timed(sim.store.finalize, totals, "finalize_s")
    if cfg["model"] == "feed":
        sim.collector.store = sim.store
    t_run = time.perf_counter()
    history = sim.run()
    t_end = time.perf_counter()
    last = history.rows[-1]
    out = {"wall_s": t_end - t0, "run_s": t_end - t_run, **totals,
           "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    con = open_readonly(db)
    out["panel_rows"] = con.execute("SELECT count(*) FROM panel WHERE step >= 1").fetchone()[0]
    if cfg["model"] == "ring":
        out["final_mean"], out["final_sd"] = last["mean_opinion"], last["opinion_sd"]
        if cfg.get("final"):
            rows = con.execute("SELECT state.opinion FROM panel "
                               "WHERE step = ? ORDER BY agent_id", [N_STEPS]).fetchall()
            Path(cfg["final"]).write_text(json.dumps([r[0] for r in rows]))
    else:
        env = sim.env
        out["messages_stored"] = con.execute("SELECT count(*) FROM messages").fetchone()[0]
        out["agent_rounds"] = env.agent_rounds
        out["observe_us_per_agent_round"] = 1e6 * env.observe_seconds / env.agent_rounds
        out["feed_us_per_agent_round"] = 1e6 * env.feed_seconds / env.agent_rounds
        out["feed_s"] = env.feed_seconds
        out["final_mean"] = last["mean_v"]
    con.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
