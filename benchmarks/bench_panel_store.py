"""What storing a step costs: the typed Parquet step folders against the layouts they replaced.

    python benchmarks/bench_panel_store.py [--size 100] [--steps 100] [--repeat 3] [--json PATH]
    python benchmarks/bench_panel_store.py --size 12 --steps 3 --repeat 1   # smoke (a test runs it)

Runs Schelling (``size`` x ``size``, density 0.8, homophily 0.4) once with the
engine's step writer recording its real per-step tables instead of writing
them, then writes those same tables again, timing CPU (``process_time``):

* ``parquet step folders`` (the store): ``RunFiles.write_step`` per step (panel,
  metrics, events; one folder renamed into place), then the merge at the end;
* ``fixed cost``: the same steps with a one-row panel, so what remains is the
  per-step cost that does not grow with the population (metrics, folder, rename);
* ``DuckDB JSON text`` (the layout before): per step one transaction inserting
  state and payload as JSON text, the metrics and ``UPDATE runs``;
* ``DuckDB typed insert``: the same transaction with the typed struct columns.

CPU per panel row = (all steps' CPU - steps x fixed cost) / rows.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

import desim
from desim.store.files import RunFiles
from desim import run_study
from desim_probe import fresh_copy
import jsonout


def capture(size: int, steps: int) -> list[tuple[int, dict]]:
    """The engine's per-step tables for one run (nothing written)."""
    root = fresh_copy("schelling", "panel_store")
    spec = desim.load_study(root, seed=1, steps=steps,
                            params={"width": size, "height": size, "density": 0.8, "homophily": 0.4})
    records: list[tuple[int, dict]] = []
    original = RunFiles.write_step
    RunFiles.write_step = lambda self, step, tables: records.append((step, tables)) if step > 0 else None
    try:
        run_study(spec, db_path=root / "runs" / "desim.duckdb")
    finally:
        RunFiles.write_step = original
    return records


def time_parquet(records, data: Path, one_row: bool = False) -> tuple[float, float]:
    """CPU of writing every step as a folder, and of merging them at the end."""
    files = RunFiles(data, "rbench")
    files.start()
    t0 = time.process_time()
    for step, tables in records:
        if one_row:
            tables = dict(tables, panel=tables["panel"].slice(0, 1))
        files.write_step(step, tables)
    written = time.process_time() - t0
    t0 = time.process_time()
    files.merge()
    merged = time.process_time() - t0
    shutil.rmtree(data)
    return written, merged


def _json(col: pa.Array) -> pa.Array:
    return pa.array([None if v is None else json.dumps(v, sort_keys=True) for v in col.to_pylist()], pa.string())


def time_duckdb(records, path: Path, typed: bool) -> float:
    """CPU of one DuckDB transaction per step (panel, metrics, UPDATE runs)."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE runs (run_id VARCHAR, last_step INTEGER); INSERT INTO runs VALUES ('rbench', 0)")
    con.execute("CREATE TABLE metrics (run_id VARCHAR, step INTEGER, name VARCHAR, value DOUBLE)")
    first = records[0][1]["panel"]
    if typed:
        con.register("_first", first)
        con.execute("CREATE TABLE panel AS SELECT 'rbench' AS run_id, * FROM _first LIMIT 0")
        con.unregister("_first")
    else:
        con.execute("CREATE TABLE panel (run_id VARCHAR, step INTEGER, agent_id VARCHAR, state JSON, "
                    "action_kind VARCHAR, payload JSON, action_source VARCHAR)")
    tables = []
    for step, t in records:        # JSON text is prepared outside the timing (the old path made it in Python)
        p = t["panel"]
        if not typed:
            p = pa.table({"step": p["step"], "agent_id": p["agent_id"], "state": _json(p["state"]),
                          "action_kind": p["action_kind"], "payload": _json(p["payload"]),
                          "action_source": p["action_source"]})
        tables.append((step, p, t["metrics"]))
    t0 = time.process_time()
    for step, p, m in tables:
        con.begin()
        con.register("_p", p)
        if typed:
            con.execute("INSERT INTO panel SELECT 'rbench', * FROM _p")
        else:
            con.execute("INSERT INTO panel SELECT 'rbench', step, agent_id, CAST(state AS JSON), action_kind, "
                        "CAST(payload AS JSON), action_source FROM _p")
        con.unregister("_p")
        con.execute("INSERT INTO metrics SELECT 'rbench', ?, unnest(?::VARCHAR[]), unnest(?::DOUBLE[])",
                    [step, m["name"].to_pylist(), m["value"].to_pylist()])
        con.execute("UPDATE runs SET last_step = ? WHERE run_id = 'rbench'", [step])
        con.commit()
    cpu = time.process_time() - t0
    con.close()
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repetitions; the median is reported")
    jsonout.add_option(ap)
    args = ap.parse_args()
    records = capture(args.size, args.steps)
    rows = sum(t["panel"].num_rows for _, t in records)
    steps = len(records)
    moved = sum(pc.sum(pc.is_valid(t["panel"]["action_kind"])).as_py() for _, t in records)
    print(f"Schelling {args.size}x{args.size}: {steps} steps, {rows:,} panel rows ({rows // steps:,} per step), "
          f"{moved:,} moves")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            written, merged = time_parquet(records, Path(tmp) / f"data{rep}")
            fixed, _ = time_parquet(records, Path(tmp) / f"fixed{rep}", one_row=True)
            results.setdefault("parquet", []).append(written)
            results.setdefault("merge", []).append(merged)
            results.setdefault("fixed", []).append(fixed)
            results.setdefault("json", []).append(time_duckdb(records, Path(tmp) / f"j{rep}.duckdb", typed=False))
            results.setdefault("typed", []).append(time_duckdb(records, Path(tmp) / f"t{rep}.duckdb", typed=True))
    med = {k: sorted(v)[len(v) // 2] for k, v in results.items()}
    fixed_ms = med["fixed"] / steps * 1e3
    print(f"{'layout':<34} {'CPU s':>8} {'us/row (all)':>13} {'us/row (less fixed)':>20} {'ms/step':>8}")
    layouts = []
    for key, label in [("parquet", "parquet step folders (the store)"), ("json", "DuckDB JSON text (before)"),
                       ("typed", "DuckDB typed insert")]:
        cpu = med[key]
        row = {"layout": key, "label": label, "cpu_s": cpu, "us_per_row": cpu / rows * 1e6,
               "us_per_row_less_fixed": (cpu - med["fixed"]) / rows * 1e6, "ms_per_step": cpu / steps * 1e3}
        layouts.append(row)
        print(f"{label:<34} {cpu:8.3f} {row['us_per_row']:13.3f} {row['us_per_row_less_fixed']:20.3f} "
              f"{row['ms_per_step']:8.2f}")
    merge_us = med["merge"] / rows * 1e6
    ratio = med["json"] / med["parquet"]
    print(f"fixed cost per step (one-row panel, metrics, folder, rename): {fixed_ms:.3f} ms")
    print(f"merge at the end of the run: {med['merge']:.3f} s CPU, {merge_us:.3f} us/row")
    print(f"ratio JSON text / parquet (all): {ratio:.2f}x")
    jsonout.write(args.json, {
        "size": args.size, "steps": steps, "repeat": args.repeat, "panel_rows": rows, "rows_per_step": rows // steps,
        "moves": moved, "layouts": layouts, "fixed_cpu_s": med["fixed"], "fixed_ms_per_step": fixed_ms,
        "merge_cpu_s": med["merge"], "merge_us_per_row": merge_us, "ratio_json_to_parquet": ratio})


if __name__ == "__main__":
    main()
