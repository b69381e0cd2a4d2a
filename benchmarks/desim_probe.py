"""Shared by the columnar benchmarks: timed desim runs and a CPU breakdown by part.

``run_timed`` runs a study copy through the real engine (load, build, every
step, the full panel into DuckDB) and reports wall and CPU time. CPU time is
reported beside wall time because the benchmark machine is shared: wall time
moves with the load, the CPU the run itself burns much less.
``agent_processes=False`` sets the engine's opt-out (``simulation.json``
``agent_processes: false``): no SimPy process per agent, everyone takes part
in every round, the same panel.
"""
from __future__ import annotations

import shutil
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import duckdb

import desim
import desim.store.recorder as recorder_module
from desim import run_study
from desim.study.refs import study_module
from desim.store.files import RunFiles

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"


def fresh_copy(name: str, tag: str) -> Path:
    """A copy of ``studies/<name>`` under benchmarks/out (git-ignored), without runs."""
    dest = OUT / tag / name
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT / "studies" / name, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    return dest


def run_timed(root: Path, *, seed: int, steps: int, params: dict, agent_processes: bool = True) -> dict:
    """One run, start to finish, with its wall and CPU seconds and its run id."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    spec = desim.load_study(root, seed=seed, steps=steps, params=params)
    spec.simulation.agent_processes = agent_processes
    marks = []   # (wall, cpu) when each step has been written
    result = run_study(spec, on_step=lambda t, m: marks.append((time.perf_counter(), time.process_time())))
    # steps 2..n, each written to DuckDB: the step loop alone, comparable with Mesa's timed loop
    per_step = (steps / (steps - 1)) if steps > 1 else 1.0
    return {"run_id": result.run_id, "rows": result.rows_written, "db": result.store_path,
            "wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0,
            "steps_wall_s": (marks[-1][0] - marks[0][0]) * per_step if steps > 1 else None,
            "steps_cpu_s": (marks[-1][1] - marks[0][1]) * per_step if steps > 1 else None}


def metric(db: Path, run_id: str, name: str, step: int) -> float:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT value FROM metrics WHERE run_id=? AND name=? AND step=?",
                           [run_id, name, step]).fetchone()[0]
    finally:
        con.close()


def panel_hash(db: Path, run_id: str) -> str:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT md5(string_agg(concat_ws('|', step, agent_id, state::VARCHAR, action_kind, "
                           "payload::VARCHAR), chr(10) ORDER BY step, agent_id)) FROM panel "
                           "WHERE run_id=?", [run_id]).fetchone()
        return rows[0]
    finally:
        con.close()


@contextmanager
def breakdown(root: Path, env_class: str, decision_class: str, collector_class: str):
    """Accumulate CPU seconds per part of a run: the study's code, the panel build, the DuckDB writes."""
    spent: dict[str, float] = defaultdict(float)
    model = study_module(root)
    targets = [(getattr(model, env_class), "observe_columns", "study: observe"),
               (getattr(model, env_class), "apply_columns", "study: apply"),
               (getattr(model, decision_class), "decide_columns", "study: decide"),
               (getattr(model, collector_class), "collect", "study: metrics"),
               (recorder_module, "columnar_rows", "engine: panel table"),
               (getattr(model, env_class), "state_columns", "study: state"),
               (RunFiles, "write_step", "store: write step (Parquet folder)"),
               (RunFiles, "merge", "store: merge step files at the end")]
    saved = []
    for owner, name, label in targets:
        original = getattr(owner, name)
        saved.append((owner, name, original))

        def timed(*args, _original=original, _label=label, **kwargs):
            t0 = time.process_time()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_label] += time.process_time() - t0
        setattr(owner, name, timed)
    try:
        yield spent
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
