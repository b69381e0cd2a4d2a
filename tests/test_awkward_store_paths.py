"""A study's store on awkward paths: folder names DuckDB reads as something else (glob characters, '?', '\\',
'key=value'), symlinks to nothing, a store that is a folder, a study that cannot be written. Each reads its own
runs, or is refused with its true cause before anything is written; never another study's rows, and never
"damaged, move runs/ aside" for a store that is only read-only or unmounted."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import duckdb
import pytest

from desim import load_study, run_study
from desim.cli import main
from desim.errors import DesimNotice
from desim.store.connection import _unopenable, open_store
from desim.store.layout import StorePathError, StudyLayout
from storeq import sql, sql_desim
from walk_study import write_walk_study
from waits import HANG_S

N_AGENTS = 6        # write_walk_study's default: a run's panel has one row per agent and step
CAPS = "-dac_override,-dac_read_search,-fowner,-chown"


def make(root: Path, n_steps: int = 2) -> Path:
    """A walk study at ``root`` (its folder name is its id: an odd name goes in a folder above it)."""
    return write_walk_study(root, n_steps=n_steps, lockdown_day=1)


def run(root: Path, seed: int, n_steps: int = 2) -> str:
    make(root, n_steps)
    return run_study(load_study(root, seed=seed)).run_id


def desim(capsys, *args: str) -> tuple[int, str]:
    """``desim ARGS`` in this process: its exit status and its stderr."""
    code = main(list(args))
    return code, capsys.readouterr().err


def as_user(*args: str) -> subprocess.CompletedProcess:
    """``desim ARGS`` in a child that file permissions apply to: the tests run as root, which ignores them, so
    the child drops the capabilities that let root read and write any file (as an ordinary user has none)."""
    prefix = ["setpriv", "--bounding-set", CAPS, "--inh-caps", CAPS] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-m", "desim.cli", *args], capture_output=True, text=True,
                          timeout=HANG_S, env={**os.environ, "DESIM_PROGRESS": "off"})


# --- 1. glob characters: escaped, so a study reads its own runs ------------------------------------------

@pytest.mark.parametrize("odd, sibling", [("trial[1]", "trial1"), ("star*x", "starYx"), ("q[!x]", "qy")])
def test_a_folder_name_with_glob_characters_reads_its_own_runs_not_a_siblings(tmp_path, odd, sibling):
    theirs = run(tmp_path / sibling / "walk", seed=1)
    mine = run(tmp_path / odd / "walk", seed=2)
    for read in (sql, sql_desim):       # the stored views (a plain duckdb.connect), and a reader's own
        assert read(tmp_path / odd / "walk", "SELECT run_id, count(*) FROM panel GROUP BY run_id") == \
            [(mine, N_AGENTS * 2)]
        assert read(tmp_path / sibling / "walk", "SELECT DISTINCT run_id FROM panel") == [(theirs,)]


def test_a_study_under_a_folder_with_brackets_runs_and_reads(tmp_path):
    root = tmp_path / "thesis [2024]" / "walk"
    mine = run(root, seed=3, n_steps=3)         # the run's own views bound no file: it failed before
    assert sql_desim(root, "SELECT run_id, count(*) FROM panel GROUP BY run_id") == [(mine, N_AGENTS * 3)]


# --- 2. '?', '\' and '=' in the path: refused up front, nothing written ---------------------------------------

@pytest.mark.parametrize("folder, char", [("back\\slash", "\\"), ("q?m#h", "?"), ("step=3", "=")])
def test_a_folder_name_duckdb_misreads_is_refused_before_anything_is_written(tmp_path, capsys, folder, char):
    root = make(tmp_path / folder / "walk", n_steps=2)
    code, err = desim(capsys, "run", str(root))
    assert code == 2
    assert err.startswith(f"desim: error: {tmp_path / folder}: the folder name has '{char}': ")
    assert f"rename the folder, or move the study to a path without '{char}'" in err
    assert not (root / "runs").exists()


def test_a_backslash_in_the_path_does_not_write_into_the_study_it_reads_as(tmp_path, capsys):
    other = tmp_path / "back" / "slash" / "walk"
    theirs = run(other, seed=1)
    root = make(tmp_path / "back\\slash" / "walk", n_steps=2)
    code, err = desim(capsys, "run", str(root), "--seed", "3")
    assert code == 2 and "the folder name has '\\'" in err
    assert sql(other, "SELECT run_id FROM runs") == [(theirs,)]


def test_a_store_under_a_key_value_folder_is_refused_not_misread(tmp_path):
    """DuckDB reads a folder 'step=3' above the run data as a column: every step read as 3."""
    plain = tmp_path / "plain"
    run(plain, seed=1, n_steps=2)
    moved = tmp_path / "step=3" / "walk"
    shutil.copytree(plain, moved)               # a study moved under such a folder after its runs
    with pytest.raises(StorePathError, match=r"step=3: the folder name has '='"):
        with open_store(moved) as con:
            con.execute("SELECT DISTINCT step FROM panel").fetchall()


def test_a_store_under_a_question_mark_folder_is_refused_for_reading_too(tmp_path):
    plain = tmp_path / "plain"
    run(plain, seed=1)
    moved = tmp_path / "q?m" / "walk"
    shutil.copytree(plain, moved)
    with pytest.raises(StorePathError, match=r"q\?m: the folder name has '\?'"):
        with open_store(moved):
            pass
    assert sorted(p.name for p in (moved / "runs").iterdir()) == sorted(p.name for p in (plain / "runs").iterdir())


# --- 3. the true cause: a folder, a symlink to nothing, permissions ------------------------------------------

def test_a_store_that_is_a_folder_is_said_to_be_one(tmp_path, capsys):
    root = make(tmp_path / "walk", n_steps=2)
    StudyLayout(root).db.mkdir(parents=True)
    for args in (["run", str(root)], ["sql", str(root), "SELECT 1"]):
        code, err = desim(capsys, *args)
        assert code == 2 and f"{StudyLayout(root).db} is a folder, but the study's store is a DuckDB file" in err
        assert "damaged" not in err and "move the study's runs/" not in err


def test_a_store_that_is_a_symlink_to_nothing_is_said_to_be_one(tmp_path, capsys):
    root = make(tmp_path / "walk", n_steps=2)
    db = StudyLayout(root).db
    db.parent.mkdir()
    db.symlink_to(tmp_path / "unmounted" / "desim.duckdb")
    said = f"{db} is a symlink to {tmp_path / 'unmounted' / 'desim.duckdb'}, which does not exist"
    for args in (["run", str(root)], ["sql", str(root), "SELECT 1"]):
        code, err = desim(capsys, *args)
        assert code == 2 and said in err and "damaged" not in err and "run the study first" not in err
    assert not (tmp_path / "unmounted").exists()


def test_a_runs_folder_that_is_a_symlink_to_nothing_is_said_to_be_one(tmp_path, capsys):
    root = make(tmp_path / "walk", n_steps=2)
    (root / "runs").symlink_to(tmp_path / "unmounted" / "runs")
    code, err = desim(capsys, "run", str(root))
    assert code == 2
    assert f"{root / 'runs'} is a symlink to {tmp_path / 'unmounted' / 'runs'}, which does not exist" in err


def test_a_store_linked_to_a_file_not_made_yet_is_made_there(tmp_path):
    """A store put on another disk before its first run: the link's folder is there, so the run makes it."""
    root = make(tmp_path / "walk", n_steps=2)
    db = StudyLayout(root).db
    db.parent.mkdir()
    (tmp_path / "scratch").mkdir()
    db.symlink_to(tmp_path / "scratch" / "desim.duckdb")
    mine = run_study(load_study(root, seed=1)).run_id
    assert (tmp_path / "scratch" / "desim.duckdb").is_file() and sql(root, "SELECT run_id FROM runs") == [(mine,)]


def test_a_read_only_study_is_said_to_be_read_only_and_still_reads(tmp_path):
    root = tmp_path / "walk"
    mine = run(root, seed=1)
    fresh = make(tmp_path / "fresh", n_steps=2)
    for path in [*root.rglob("*"), root, *fresh.rglob("*"), fresh]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        ran = as_user("run", str(root))
        assert ran.returncode == 2, ran.stderr
        assert ran.stderr.startswith(f"desim: error: permission denied: {root / 'runs'} (and 3 more of the store's")
        assert "is not writable by you" in ran.stderr and "copy the study to a folder you can write" in ran.stderr
        assert "damaged or truncated" not in ran.stderr and "move the study's runs/" not in ran.stderr
        new = as_user("run", str(fresh))
        assert new.returncode == 2 and f"permission denied: {fresh} is not writable by you" in new.stderr
        read = as_user("sql", str(root), "SELECT run_id, count(*) FROM panel GROUP BY run_id", "--csv")
        assert read.returncode == 0, read.stderr
        assert read.stdout.splitlines()[1:] == [f"{mine},{N_AGENTS * 2}"]
    finally:
        for path in [root, *root.rglob("*"), fresh, *fresh.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def test_an_unreadable_store_is_said_to_be_unreadable(tmp_path):
    root = tmp_path / "walk"
    run(root, seed=1)
    db = StudyLayout(root).db
    db.chmod(0)
    try:
        read = as_user("sql", str(root), "SELECT 1")
        assert read.returncode == 2
        assert read.stderr.startswith(f"desim: error: permission denied: {db} is not readable by you")
        assert "damaged" not in read.stderr
    finally:
        db.chmod(0o644)


def test_duckdbs_permission_refusal_is_not_called_damage(tmp_path):
    """The writer's refusal DuckDB gives when the check before it could not tell (an ACL, a mount option)."""
    layout = StudyLayout(make(tmp_path / "walk"))
    refused = duckdb.IOException(f'IO Error: Cannot open file "{layout.db}": Permission denied')
    said = str(_unopenable(layout, False, refused))
    assert said.startswith(f"permission denied: {layout.db} is not writable by you") and "damaged" not in said


# --- 4. a layout that cannot be kept is used all the same ----------------------------------------------------

def test_a_network_picture_of_a_study_that_cannot_keep_its_layout(tmp_path):
    from desim.report.network_picture import picture
    root = tmp_path / "walk"
    run(root, seed=1)
    StudyLayout(root).layouts.write_text("not a folder")       # as root, what a read-only runs/ would refuse
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        pic = picture(root, "x", views=["network", "communities"])
    assert len(pic["network"]["x"]) == N_AGENTS and pic["network"]["layout"]["kept"] is False
    assert len(pic["communities"]["size"]) >= 1
    notes = [str(w.message) for w in said if issubclass(w.category, DesimNotice)]
    assert len(notes) == 1 and notes[0].startswith(f"{StudyLayout(root).layouts} cannot be written")


def test_viz_of_a_read_only_study_draws_with_a_layout_it_cannot_keep(tmp_path):
    root = tmp_path / "walk"
    run(root, seed=1)
    StudyLayout(root).layouts.mkdir()
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    StudyLayout(root).layouts.chmod(0)          # not even searchable: a stored layout cannot be looked for
    try:
        drew = as_user("viz", "diffusion", str(root), "--state", "x", "--out", str(tmp_path / "viz"), "--quiet")
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o700)
    assert drew.returncode == 0, drew.stderr
    assert (tmp_path / "viz" / "diffusion_x.html").is_file()
    notes = [line for line in drew.stderr.splitlines() if line.startswith("desim: note:")]
    assert notes == [f"desim: note: {root / 'runs' / 'layouts'} cannot be written (Permission denied): the network "
                     "pictures' layout and communities are used but not kept, and are computed again next time"]
    # the command's summary, and the picture's own note, say the layout was not kept (not "stored")
    assert "(computed, not kept (runs/layouts cannot be written))" in drew.stdout, drew.stdout
    assert "computed and stored" not in drew.stdout


def test_the_dashboards_reading_says_what_is_wrong_without_absolute_paths(tmp_path):
    from desim.store.connection import StoreBroken, reading_checked
    studies = tmp_path / "studies"
    linked = make(studies / "linked")
    StudyLayout(linked).runs.symlink_to(tmp_path / "unmounted")
    odd = make(studies / "walk")
    run(odd, seed=1)
    odd = odd.rename(studies / "q?m")
    for root, said in [(linked, "linked/runs is a symlink to something that does not exist"),
                       (odd, "q?m: the folder name has '?'")]:
        with pytest.raises(StoreBroken) as refused:
            with reading_checked(StudyLayout(root), studies):
                pass
        assert str(refused.value).startswith(said) and str(tmp_path) not in str(refused.value)


# --- 5. the hint's command is one the shell runs ---------------------------------------------------------------

def test_the_run_first_hint_quotes_the_study_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, word in [("sp ace", "'sp ace'"), ("it's", '"it\'s"'), ("-dash", "./-dash"), ("plain", "plain")]:
        Path(name).mkdir()
        assert StudyLayout(name).missing_store().endswith(f"(desim run {word})")


def test_a_study_folder_whose_name_is_not_utf8_is_refused_before_anything_is_written(tmp_path):
    """A Latin-1 folder name (``café`` written by an old tool): DuckDB cannot open a store under it (it failed
    with ``std::bad_cast``); the error names the folder, its byte escaped, and nothing is made."""
    study = Path(os.fsdecode(bytes(tmp_path) + b"/stud\xe9"))
    write_walk_study(tmp_path / "stud").rename(study)
    proc = subprocess.run([sys.executable, "-m", "desim.cli", "run", os.fsencode(study), "--steps", "1", "-q"],
                          capture_output=True, timeout=HANG_S)
    err = proc.stderr.decode("utf-8", "backslashreplace")
    assert proc.returncode == 2, err
    assert "stud\\xe9" in err and "not UTF-8" in err and "rename the folder" in err, err
    assert not (study / "runs").exists()


def test_desim_runs_of_a_store_linked_to_nothing_says_so_not_no_runs_yet(tmp_path, capsys):
    """An unmounted scratch disk: the store is a symlink whose target is gone; its runs are not 'none yet'."""
    root = tmp_path / "walk"
    write_walk_study(root)
    StudyLayout(root).runs.mkdir()
    StudyLayout(root).db.symlink_to(tmp_path / "unmounted" / "desim.duckdb")
    assert main(["runs", str(root)]) == 2
    captured = capsys.readouterr()
    assert "no runs yet" not in captured.out and "symlink" in captured.err and "does not exist" in captured.err, captured


def test_a_copied_study_under_a_glob_name_reads_its_own_files_not_its_twins(tmp_path):
    """``cp -r trial1 'trial[1]'``: both folders hold the same run id. A read of that run's exact files (the
    panel a reader and an export take) globbed ``trial[1]`` into ``trial1`` and read the twin's file."""
    import pyarrow.parquet as pq
    from desim import open as open_study
    twin = tmp_path / "trial1" / "walk"
    rid = run(twin, seed=1)
    shutil.copytree(tmp_path / "trial1", tmp_path / "trial[1]")
    mine = tmp_path / "trial[1]" / "walk"
    for path in StudyLayout(twin).run_dir(rid).rglob("panel.parquet"):   # the twin's panel: one row left
        pq.write_table(pq.read_table(path).slice(0, 1), path)
    assert len(open_study(twin).panel(rid)) == 1
    assert len(open_study(mine).panel(rid)) == N_AGENTS * 2
