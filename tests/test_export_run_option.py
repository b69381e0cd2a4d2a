"""``desim export --run`` given an empty id is an error, not every run of the study."""
from __future__ import annotations

import pytest

import desim
from desim.cli import main
from desim.store.export import export


@pytest.fixture
def two_runs(study_copy):
    root = study_copy("opinion_diffusion")
    for seed in (1, 2):
        desim.run_study(desim.load_study(root, steps=1, seed=seed, params={"n_agents": 5}))
    return root


def test_an_empty_run_id_is_an_error_naming_run(two_runs, tmp_path, capsys):
    """``--run "$RUN"`` with RUN unset exported both runs without a word (``if run else`` every run)."""
    out = tmp_path / "out"
    assert main(["export", str(two_runs), "--run", "", "--out", str(out)]) == 2
    assert "--run ''" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ValueError, match="--run ' ' names no run"):
        export(two_runs, out, run=" ")
