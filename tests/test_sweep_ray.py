"""Sweeps on Ray: the same sweep gives the same panels as the local pool, and a
Ray worker that dies fails its run only. One local Ray instance for the module
(starting Ray takes seconds)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from storeq import store_path
from desim.experiments.sweep import run_sweep
from sweep_study import panels_by_slot, write_crashy_study

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray():
    """One local Ray instance for the module (starting Ray takes seconds)."""
    try:
        import ray
    except ImportError:
        pytest.fail("Ray is not installed: pip install -e '.[ray]', or leave these tests out with -m 'not ray'",
                    pytrace=False)
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


def test_ray_sweep_gives_the_local_pool_s_panels(ray, tmp_path):
    root = tmp_path / "opinion_diffusion"
    shutil.copytree(ROOT / "studies" / "opinion_diffusion", root, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    grid = {"epsilon": ["0.2", "0.4"], "campaign_weight": ["0.1", "0.8"]}
    local = run_sweep(root, grid, replicates=2, workers=2, backend="local")
    on_ray = run_sweep(root, grid, replicates=2, backend="ray")
    assert ray.is_initialized()                      # the sweep used the test's Ray and left it running
    assert local.completed == on_ray.completed == 8
    for table in ("panel", "metrics", "initial_states"):
        a, b = panels_by_slot(root, local.sweep_id, table), panels_by_slot(root, on_ray.sweep_id, table)
        assert a == b and len(a) > 0
    assert [r["mean"] for r in local.table] == [r["mean"] for r in on_ray.table]
    assert not (root / "runs" / "sweeps" / on_ray.sweep_id).exists()


def test_a_dead_ray_worker_fails_its_run_and_resume_completes_it(ray, tmp_path):
    root = write_crashy_study(tmp_path / "crashy")
    result = run_sweep(root, {"mood": ["1", "3"]}, replicates=1, backend="ray")
    con = duckdb.connect(str(store_path(root)), read_only=True)
    rows = {json.loads(p)["mood"]: (s, e) for p, s, e in con.execute("SELECT parameters, status, error FROM runs").fetchall()}
    con.close()
    assert rows[1] == ("completed", None)
    assert rows[3][0] == "failed" and "WorkerCrashedError" in rows[3][1]
    (root / "healed").touch()                         # travels to the workers with the study's files
    resumed = run_sweep(root, backend="ray", resume=result.sweep_id)
    assert resumed.ran == [f"{result.sweep_id}-1-0"] and resumed.failed == []
