"""What a Ray worker receives of a study: what a run reads, as the study's version counts it (its four files,
its code, the data its code and population read), not a venv, notebooks, figures or what .desimignore lists
(a venv in the study folder was shipped whole to every node)."""
from __future__ import annotations

import os

from desim import load_study, run_study
from desim.experiments.sweep.worker import StudyBundle
from walk_study import write_walk_study


def test_the_bundle_holds_what_a_run_reads_and_runs_the_same(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    (root / "helpers.py").write_text("SCALE = 1.0\n")
    (root / "data").mkdir()
    (root / "data" / "prices.csv").write_text("step,price\n1,2.0\n")
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "big.so").write_bytes(b"\0" * 100_000)
    (root / "scratch").mkdir()
    (root / "scratch" / "dump.bin").write_bytes(b"\0" * 1000)
    (root / ".desimignore").write_text("scratch/\n")
    (root / "README.md").write_text("# the study\n")
    (root / "figure.png").write_bytes(b"\x89PNG")
    here = run_study(load_study(root, seed=4))          # leaves runs/ behind, which stays out too
    bundle = StudyBundle.from_folder(root)
    assert sorted(bundle.files) == ["data/prices.csv", "environment/environment.json", "helpers.py", "model.py",
                                    "population/population.json", "simulation/simulation.json", "study.json"]
    unpacked = bundle.unpack()
    # in a folder of this user's own: another user's copy of the same study, left in the shared temporary
    # folder, was not readable, and every Ray run failed with "Permission denied"
    assert unpacked.parent.parent.name == f"desim-sweep-studies-{os.getuid()}"
    there = run_study(load_study(unpacked, seed=4))
    assert there.panel().drop(["run_id"]).equals(here.panel().drop(["run_id"]))
