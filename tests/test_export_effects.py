"""An effect can be rebuilt from an export, and ``select_runs(effect=E)`` gives all of E's runs: a control reused
by a second effect is labelled in ``runs`` with one effect only (its ``effect_id``/``arm``), so the pairs are
read from ``effect_pairs``, which the export now writes with the ``effects`` and ``sweeps`` rows of its runs."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import desim
from desim.cli import main
from desim.experiments.effects import run_effect
from desim.store.export import export


@pytest.fixture(scope="module")
def two_effects(tmp_path_factory):
    """opinion_diffusion with a one-point sweep and two effects of one fork step sharing their two controls (the
    second reuses the first's), from a copy of the study made here (module scope: study_copy is per test)."""
    import shutil

    from conftest import STUDIES
    root = tmp_path_factory.mktemp("effects") / "opinion_diffusion"
    shutil.copytree(STUDIES / "opinion_diffusion", root, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    assert main(["sweep", str(root), "--set", "n_agents=8", "--steps", "2", "--replicates", "1",
                 "--workers", "1", "--quiet"]) == 0
    first = run_effect(root, 1, {"campaign_week": 1}, replicates=2, control={"n_agents": 10}, steps=3,
                       workers=1).effect_id
    second = run_effect(root, 1, {"campaign_week": 3}, replicates=2, control={"n_agents": 10}, steps=3,
                        workers=1).effect_id
    return root, first, second


def pairs_of(data, effect: str) -> list[tuple[str, str]]:
    return [(r["control_run_id"], r["treatment_run_id"]) for r in
            data.sql("SELECT * FROM effect_pairs WHERE effect_id = ? ORDER BY replicate", [effect]).to_pylist()]


def test_select_runs_of_an_effect_gives_its_reused_controls_too(two_effects):
    root, first, second = two_effects
    data = desim.open(root)
    pairs = pairs_of(data, second)
    controls = [c for c, _ in pairs]
    assert controls == [c for c, _ in pairs_of(data, first)]        # reused: labelled with one effect only
    labels = {r["run_id"]: r["effect_id"] for r in data.runs().to_pylist()}
    assert {labels[c] for c in controls} == {min(first, second)}
    order = data.runs().column("run_id").to_pylist()
    for effect in (first, second):
        runs = {run for pair in pairs_of(data, effect) for run in pair}
        assert data.select_runs(effect=effect) == sorted(runs, key=order.index)
    assert data.select_runs(effect=second, arm="control") == controls


def test_the_export_holds_the_pairs_effects_and_sweeps_of_its_runs(two_effects, tmp_path):
    root, first, second = two_effects
    data = desim.open(root)
    out = tmp_path / "all"
    export(root, out)
    pairs = pq.read_table(out / "effect_pairs.parquet")
    assert pairs.to_pylist() == data.sql("SELECT * FROM effect_pairs ORDER BY effect_id, replicate").to_pylist()
    assert sorted(pq.read_table(out / "effects.parquet").column("effect_id").to_pylist()) == sorted([first, second])
    sweeps = pq.read_table(out / "sweeps.parquet").to_pylist()
    assert [s["sweep_id"] for s in sweeps] == data.sql("SELECT sweep_id FROM sweeps").column("sweep_id").to_pylist()
    assert sweeps[0]["replicates"] == 1 and "n_agents" in sweeps[0]["grid"]
    # the rebuild: every pair of the second effect, its controls among the exported runs
    exported = set(pq.read_table(out / "runs.parquet").column("run_id").to_pylist())
    mine = [r for r in pairs.to_pylist() if r["effect_id"] == second]
    assert len(mine) == 2 and all(r["control_run_id"] in exported and r["treatment_run_id"] in exported for r in mine)

    # one treatment of the second effect: its pair and its effect only, no sweep
    treatment = mine[0]["treatment_run_id"]
    one = tmp_path / "one"
    export(root, one, run=treatment, fmt="csv")
    assert (one / "effect_pairs.csv").read_text().count("\n") == 2            # its header and its one pair
    assert second in (one / "effects.csv").read_text() and first not in (one / "effects.csv").read_text()
    assert not (one / "sweeps.csv").exists()
    # a plain run made by hand belongs to none: no such files
    plain = desim.run_study(desim.load_study(root, steps=1, params={"n_agents": 5})).run_id
    export(root, tmp_path / "plain", run=plain)
    assert not any((tmp_path / "plain" / f"{t}.parquet").exists() for t in ("effect_pairs", "effects", "sweeps"))
