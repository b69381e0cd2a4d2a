"""`--backend ray` without Ray is refused before anything is recorded: a sweep used to record its plan (a row
of the `sweeps` table) and only then fail with "the ray backend needs Ray", so `desim runs` listed an
unfinished sweep that no `--resume` could finish, one more at every try; an effect checks the same
(docs/sweep.md: "Before anything is recorded the sweep checks its input and refuses...").

Ray is installed where the full suite runs (the `ray` extra), so its absence is simulated: `None` in
`sys.modules` makes `import ray` raise ImportError, as it does where Ray is not installed."""
from __future__ import annotations

import sys

import duckdb
import pytest

from desim.cli import main
from desim.experiments.sweep import SweepError, run_sweep
from storeq import store_path

NEEDS_RAY = "the ray backend needs Ray: pip install 'desim[ray]'"


@pytest.fixture
def no_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)


def recorded(root, table: str) -> int:
    """Rows of ``table`` in the study's store (0 when there is no store, or no such table yet)."""
    db = store_path(root)
    if not db.exists():
        return 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except duckdb.CatalogException:
        return 0
    finally:
        con.close()


def test_a_ray_sweep_without_ray_records_no_sweep(study_copy, capsys, no_ray):
    root = study_copy("schelling")
    for _ in range(2):          # each try used to add an unfinished sweep
        assert main(["sweep", str(root), "--set", "homophily=0.3,0.4,0.5", "--replicates", "2", "--steps", "2",
                     "--backend", "ray"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("desim: error: ") and NEEDS_RAY in err, err
    assert recorded(root, "sweeps") == 0
    assert recorded(root, "runs") == 0
    assert not (root / "runs" / "sweeps").exists()
    assert main(["runs", str(root)]) == 0
    assert capsys.readouterr().out.startswith("no runs yet")     # no unfinished sweep listed


def test_run_sweep_without_ray_raises_before_recording(study_copy, no_ray):
    root = study_copy("schelling")
    with pytest.raises(SweepError, match="needs Ray"):
        run_sweep(root, {"homophily": [0.3, 0.4]}, replicates=2, steps=2, backend="ray")
    assert recorded(root, "sweeps") == 0


def test_a_ray_effect_without_ray_records_no_effect(study_copy, capsys, no_ray):
    root = study_copy("opinion_diffusion")
    assert main(["effect", str(root), "--at-step", "2", "--set", "campaign_week=3", "--steps", "3",
                 "--replicates", "2", "--backend", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("desim: error: ") and NEEDS_RAY in err, err
    assert recorded(root, "effects") == 0
    assert recorded(root, "runs") == 0
