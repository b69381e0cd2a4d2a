"""A Ray cluster that cannot be joined (``--address auto`` with none running) is refused as one
``desim: error:`` line before a sweep or an effect is recorded: it printed Ray's traceback, exited 1, and
left a sweep of 0 runs (or an effect of 0 pairs) in the store for ``--resume`` to finish."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from desim.cli import main
from storeq import sql

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.ray


@pytest.mark.parametrize("command", [
    ["sweep", "--set", "epsilon=0.1,0.2"],
    ["effect", "--at-step", "3", "--set", "campaign_week=3", "--control-set", "campaign_week=10", "--replicates", "2"]])
def test_a_cluster_that_cannot_be_joined_is_refused_before_anything_is_recorded(tmp_path, capsys, monkeypatch,
                                                                                 command):
    import ray
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert not ray.is_initialized()
    root = tmp_path / "opinion_diffusion"
    shutil.copytree(ROOT / "studies" / "opinion_diffusion", root, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    assert main(["run", str(root), "--steps", "4", "--quiet"]) == 0
    capsys.readouterr()
    name, *rest = command
    assert main([name, str(root), *rest, "--backend", "ray", "--address", "auto", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("desim: error: cannot join the Ray cluster at --address auto: ")
    assert "ray start --head" in err[0]
    assert not ray.is_initialized()
    assert sql(root, "SELECT count(*) FROM sweeps") == [(0,)]
    assert sql(root, "SELECT count(*) FROM effects") == [(0,)]
    assert sql(root, "SELECT count(*) FROM runs") == [(1,)]
