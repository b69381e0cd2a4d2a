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


def test_a_workers_run_comes_back_with_its_files_and_nothing_else(tmp_path):
    """unpack_run writes the worker's database and its run folder's files and folders, and nothing a crafted
    archive could aim elsewhere (a link, a path out of the folder): by hand, since tarfile's data filter is
    missing from Python 3.11 before 3.11.4."""
    import io
    import tarfile

    from desim.store.files import unpack_run
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name, data=b"", kind=tarfile.REGTYPE, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.size, info.linkname = kind, len(data), link
            tar.addfile(info, io.BytesIO(data) if data else None)
        add("worker.duckdb", b"DB")
        add("data/run_id=r1", kind=tarfile.DIRTYPE)
        add("data/run_id=r1/panel.parquet", b"PAR1")
        add("data/run_id=r1/escape", kind=tarfile.SYMTYPE, link="/etc/passwd")
        add("data/run_id=r1/../../outside.txt", b"no")
    db = tmp_path / "w" / "r1.duckdb"
    unpack_run(buf.getvalue(), db)
    assert db.read_bytes() == b"DB"
    folder = tmp_path / "w" / "r1-data" / "run_id=r1"
    assert (folder / "panel.parquet").read_bytes() == b"PAR1"
    assert not (folder / "escape").exists() and not (folder / "escape").is_symlink()
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "w" / "outside.txt").exists()
