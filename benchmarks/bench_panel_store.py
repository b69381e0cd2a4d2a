"""What storing a step costs: the run's journal (the store) against the DuckDB layouts it replaced.

    python benchmarks/bench_panel_store.py [--size 100] [--steps 100] [--repeat 3] [--journal-steps 200] [--json PATH]
    DESIM_FSYNC=step python benchmarks/bench_panel_store.py ...             # the same, each step synced
    python benchmarks/bench_panel_store.py --size 12 --steps 3 --repeat 1   # smoke (a test runs it)

Runs Schelling (``size`` x ``size``, density 0.8, homophily 0.4) once with the
engine's step writer recording its real per-step tables instead of writing
them, then writes those same tables again, timing CPU (``process_time``, every
thread of the process):

* ``journal + stream`` (the store): the store's own code, ``RunFiles.write_step`` per step
  (``desim/store/files.py``): each table's batch appended to the run's journal
  (``desim/store/journal.py``: one Arrow stream file per table, one commit line
  per step) and handed to the step stream, whose background thread encodes it as
  Parquet while the run goes (``desim/store/stream.py``); then ``RunFiles.merge``
  at the end (the stream's files finished, the rest merged from the journal, the
  folders exchanged and, with ``DESIM_FSYNC`` other than ``never``, synced). The
  encoder thread's CPU counts in whichever of the two it runs in;
* ``fixed cost``: the same steps with a one-row panel, so what remains is the
  per-step cost that does not grow with the population (the metrics, the
  journal appends, the commit line);
* ``DuckDB JSON text`` (the layout before the typed store): per step one
  transaction inserting state and payload as JSON text, the metrics and ``UPDATE runs``;
* ``DuckDB typed insert``: the same transaction with the typed struct columns.

CPU per panel row = (all steps' CPU - steps x fixed cost) / rows.

Then the wall time (and CPU) of a ``Journal`` appending ``journal-steps`` steps (the
captured steps over again; each step its panel and its metrics, as a run
appends them), under each ``DESIM_FSYNC`` mode: ``end`` (the default: nothing
synced per step), ``step`` (the segments and the commit log synced each step)
and ``never``.
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
from desim.store import journal
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


def time_journal(records, data: Path, one_row: bool = False) -> tuple[float, float]:
    """CPU of writing every step through ``RunFiles.write_step`` (the journal and the step stream), and of
    ``RunFiles.merge`` at the end: the store's own path, as the engine calls it."""
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


def journal_wall(records, folder: Path, steps: int, mode: str) -> tuple[float, float]:
    """Wall and CPU seconds a ``Journal`` takes to append ``steps`` steps (the records over again, each its
    panel and metrics) with ``DESIM_FSYNC`` ``mode``, as a run appends them while it goes."""
    before = journal.FSYNC
    journal.FSYNC = mode            # read at each append
    try:
        j = journal.Journal(folder)
        j.start()
        elapsed = cpu = 0.0
        for k in range(steps):
            _, tables = records[k % len(records)]
            kept = {name: tables[name] for name in ("panel", "metrics") if tables.get(name) is not None}
            t0, c0 = time.perf_counter(), time.process_time()
            j.append(k + 1, kept)
            elapsed += time.perf_counter() - t0
            cpu += time.process_time() - c0
        j.close()
    finally:
        journal.FSYNC = before
    shutil.rmtree(folder)
    return elapsed, cpu


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
    ap.add_argument("--journal-steps", type=int, default=200, help="steps a Journal appends for its wall time")
    jsonout.add_option(ap)
    args = ap.parse_args()
    records = capture(args.size, args.steps)
    rows = sum(t["panel"].num_rows for _, t in records)
    steps = len(records)
    moved = sum(pc.sum(pc.is_valid(t["panel"]["action_kind"])).as_py() for _, t in records)
    print(f"Schelling {args.size}x{args.size}: {steps} steps, {rows:,} panel rows ({rows // steps:,} per step), "
          f"{moved:,} moves")
    print(f"DESIM_FSYNC={journal.FSYNC}")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            written, merged = time_journal(records, Path(tmp) / f"data{rep}")
            fixed, _ = time_journal(records, Path(tmp) / f"fixed{rep}", one_row=True)
            results.setdefault("parquet", []).append(written)
            results.setdefault("merge", []).append(merged)
            results.setdefault("fixed", []).append(fixed)
            results.setdefault("json", []).append(time_duckdb(records, Path(tmp) / f"j{rep}.duckdb", typed=False))
            results.setdefault("typed", []).append(time_duckdb(records, Path(tmp) / f"t{rep}.duckdb", typed=True))
            for mode in journal.FSYNC_MODES:
                wall, cpu = journal_wall(records, Path(tmp) / f"wall-{mode}{rep}", args.journal_steps, mode)
                results.setdefault(f"wall_{mode}", []).append(wall)
                results.setdefault(f"cpu_{mode}", []).append(cpu)
    med = {k: sorted(v)[len(v) // 2] for k, v in results.items()}
    fixed_ms = med["fixed"] / steps * 1e3
    print(f"{'layout':<34} {'CPU s':>8} {'us/row (all)':>13} {'us/row (less fixed)':>20} {'ms/step':>8}")
    layouts = []
    # "parquet" is the store's key in --json (the smoke test and older figures read it): it is the journal
    for key, label in [("parquet", "journal + stream (the store)"), ("json", "DuckDB JSON text (before)"),
                       ("typed", "DuckDB typed insert")]:
        cpu = med[key]
        row = {"layout": key, "label": label, "cpu_s": cpu, "us_per_row": cpu / rows * 1e6,
               "us_per_row_less_fixed": (cpu - med["fixed"]) / rows * 1e6, "ms_per_step": cpu / steps * 1e3}
        layouts.append(row)
        print(f"{label:<34} {cpu:8.3f} {row['us_per_row']:13.3f} {row['us_per_row_less_fixed']:20.3f} "
              f"{row['ms_per_step']:8.2f}")
    merge_us = med["merge"] / rows * 1e6
    ratio = med["json"] / med["parquet"]
    print(f"fixed cost per step (one-row panel, metrics, journal appends, commit line): {fixed_ms:.3f} ms CPU")
    print(f"merge at the end of the run: {med['merge']:.3f} s CPU, {merge_us:.3f} us/row")
    print(f"ratio JSON text / journal (all): {ratio:.2f}x")
    wall = {mode: med[f"wall_{mode}"] / args.journal_steps * 1e3 for mode in journal.FSYNC_MODES}
    cpu = {mode: med[f"cpu_{mode}"] / args.journal_steps * 1e3 for mode in journal.FSYNC_MODES}
    print(f"a Journal appending {args.journal_steps} steps of {rows // steps:,} panel rows and the metrics, per step: "
          + ", ".join(f"DESIM_FSYNC={mode} {wall[mode]:.3f} ms wall ({cpu[mode]:.3f} ms CPU)" for mode in wall))
    jsonout.write(args.json, {
        "size": args.size, "steps": steps, "repeat": args.repeat, "panel_rows": rows, "rows_per_step": rows // steps,
        "moves": moved, "layouts": layouts, "fixed_cpu_s": med["fixed"], "fixed_ms_per_step": fixed_ms,
        "merge_cpu_s": med["merge"], "merge_us_per_row": merge_us, "ratio_json_to_parquet": ratio,
        "fsync": journal.FSYNC, "journal_steps": args.journal_steps, "journal_wall_ms_per_step": wall,
        "journal_cpu_ms_per_step": cpu})


if __name__ == "__main__":
    main()
