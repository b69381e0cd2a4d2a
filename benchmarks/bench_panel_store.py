"""What writing a columnar panel to DuckDB costs, and what other layouts would cost (a measurement for the store).

    python benchmarks/bench_panel_store.py [--size 100] [--steps 100]

Runs Schelling (``size`` x ``size``, density 0.8, homophily 0.4) once with
``Store.write_step`` recording the engine's real per-step tables instead of
writing them, then writes those same tables into fresh DuckDB files in
several layouts, one transaction per step each, and reports the CPU per
panel row:

* ``current``: ``Store.write_step`` as it is (state and payload as JSON, the
  metrics, ``UPDATE runs``);
* ``typed``: the same transaction, but state and payload stored as typed
  columns (the struct fields unnested) instead of JSON;
* ``typed, int ids``: typed, and the agent as its position (INTEGER) instead
  of its id string (ids kept once per run in a side table);
* ``panel only``: the current JSON panel insert alone, one transaction per
  step, without metrics and ``UPDATE runs`` (the per-step fixed cost).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa

import desim
from desim.engine import Engine
from desim.store import Store
from desim_probe import fresh_copy


def capture(size: int, steps: int) -> list[tuple]:
    """The engine's per-step write_step arguments for one run (nothing written)."""
    root = fresh_copy("schelling", "panel_store")
    spec = desim.load_study(root, seed=1, steps=steps,
                            params={"width": size, "height": size, "density": 0.8, "homophily": 0.4})
    records = []
    original = Store.write_step
    Store.write_step = lambda self, run_id, step, panel, metrics, *rest, **kw: records.append((step, panel, metrics))
    try:
        Engine(spec).run()
    finally:
        Store.write_step = original
    return records


def flat(panel: pa.Table, int_ids: bool) -> pa.Table:
    """The panel with its struct columns unnested into typed columns."""
    cols = {"agent": pa.array(range(panel.num_rows), pa.int32()) if int_ids else panel["agent_id"]}
    for name in ("state", "action_payload"):
        col = panel[name].combine_chunks()
        for field in col.type:
            cols[f"{name}_{field.name}"] = col.field(field.name)
    cols["action_kind"] = panel["action_kind"]
    cols["action_source"] = panel["action_source"]
    return pa.table(cols)


def timed(label: str, records: list[tuple], write) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "panel.duckdb")
        store.start_run(run_id="r", study_id="schelling", kind="run", seed=1, n_steps=len(records), rounds=1,
                        time_unit="step", config={}, parameters={})
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for step, panel, metrics in records:
            write(store, step, panel, metrics)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        rows = sum(p.num_rows for _, p, _ in records)
        store.close()
        print(f"| {label} | {cpu / rows * 1e6:.2f} | {rows / cpu:,.0f} | {wall / len(records) * 1e3:.1f} |", flush=True)


def typed_writer(int_ids: bool):
    def write(store: Store, step: int, panel: pa.Table, metrics: dict) -> None:
        table = flat(panel, int_ids)
        con = store.con
        con.begin()
        con.register("src", table)
        con.execute("CREATE TABLE IF NOT EXISTS panel_typed AS SELECT 'r' AS run_id, 0 AS step, * FROM src LIMIT 0")
        con.execute("INSERT INTO panel_typed SELECT 'r', ?, * FROM src", [step])
        con.unregister("src")
        store._write_rows("r", step, metrics, [], [])
        con.execute("UPDATE runs SET last_step = ? WHERE run_id = 'r'", [step])
        con.commit()
    return write


def panel_only(store: Store, step: int, panel: pa.Table, metrics: dict) -> None:
    store.con.begin()
    store._insert("panel", panel, "SELECT 'r', ?, agent_id, to_json(state), action_kind, to_json(action_payload), "
                                  "action_source, action_rationale FROM {src}", [step])
    store.con.commit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    records = capture(args.size, args.steps)
    print(f"Schelling {args.size}x{args.size}, {args.steps} steps, {records[0][1].num_rows:,} rows per step; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| layout | CPU µs per row | rows/s (CPU) | wall ms per step |")
    print("|---|---|---|---|")
    timed("current (`Store.write_step`, JSON)", records,
          lambda s, step, p, m: s.write_step("r", step, p, m, [], []))
    timed("typed columns", records, typed_writer(False))
    timed("typed columns, int agent ids", records, typed_writer(True))
    timed("JSON panel insert alone (no metrics, no UPDATE)", records, panel_only)


if __name__ == "__main__":
    main()
