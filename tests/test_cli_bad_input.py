"""Bad input a reviewer found that ended in silence, a traceback or lost data, each now one `desim: error:` line.

* ``sys.exit(n)`` in a study's ``model.py`` at import ended ``desim run``/``validate`` with status ``n`` and no
  word (0 passed a CI job);
* ``desim dashboard --port 99999`` was an ``OverflowError`` traceback;
* ``desim new --dir`` naming a file, or a folder that cannot be made, was a ``NotADirectoryError`` /
  ``FileNotFoundError`` traceback;
* ``desim export --out`` replaced files silently: the store's own Parquet files (the run then read back
  doubled) and a user's ``panel.csv``;
* ``desim runs`` on a folder that is not there said "no runs yet" with status 0.
"""
from __future__ import annotations

import json
import sys

import pyarrow.parquet as pq
import pytest

import desim
from desim.cli import main
from storeq import sql
from walk_study import write_walk_study


def err_line(capsys) -> str:
    """The one stderr line of a refused command (a second ``desim:`` line may point at ``--traceback``)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[0].startswith("desim: error: "), err
    assert all(line.startswith("desim: ") for line in err), err
    return err[0]


def walk(tmp_path, name="walk", n_steps=3):
    root = tmp_path / name
    root.mkdir()
    return write_walk_study(root, n_steps=n_steps, lockdown_day=2)


# --- 1. sys.exit at import ------------------------------------------------------------------------

@pytest.mark.parametrize("exit_line, shown", [("sys.exit(0)", "0"), ("raise SystemExit(3)", "3"),
                                              ("sys.exit('bye')", "'bye'")])
def test_sys_exit_while_model_py_is_imported_is_an_error_naming_the_line(tmp_path, capsys, exit_line, shown):
    root = walk(tmp_path)
    model = root / "model.py"
    model.write_text("import sys\n\n" + exit_line + "\n" + model.read_text())
    for command in (["run", str(root)], ["validate", str(root)]):
        assert main(command) == 2, command
        assert err_line(capsys) == (f"desim: error: {model}:3: study code called sys.exit({shown}) "
                                    "while being imported")
    assert not (root / "runs").exists()         # refused before anything was written


def test_sys_exit_in_a_module_model_py_imports_names_that_module(tmp_path, capsys, monkeypatch):
    root = walk(tmp_path)
    (root / "helpers.py").write_text("import sys\nsys.exit(0)\n")
    (root / "model.py").write_text("import helpers\n" + (root / "model.py").read_text())
    monkeypatch.syspath_prepend(str(root))      # a plain `import helpers` needs the folder on sys.path
    monkeypatch.delitem(sys.modules, "helpers", raising=False)
    assert main(["run", str(root)]) == 2
    assert err_line(capsys) == (f"desim: error: {root / 'helpers.py'}:2: study code called sys.exit(0) "
                                "while being imported")
    assert not (root / "runs").exists()


def test_sys_exit_at_import_from_python_is_a_study_error(tmp_path):
    root = walk(tmp_path)
    (root / "model.py").write_text("import sys\nsys.exit(0)\n" + (root / "model.py").read_text())
    with pytest.raises(desim.errors.StudyError, match=r"model\.py:2: study code called sys\.exit\(0\) while"):
        desim.run_study(desim.load_study(root))
    assert not (root / "runs").exists()


# --- 2. dashboard --port out of range ---------------------------------------------------------------

@pytest.mark.parametrize("port", ["99999", "65536", "-1", "http"])
def test_dashboard_port_out_of_range_is_refused_when_the_arguments_are_read(tmp_path, capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["dashboard", str(tmp_path), "--port", port])
    assert exit_.value.code == 2
    shown = repr(port) if port == "http" else port
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"desim dashboard: error: argument --port: {shown} is not a port number (0 to 65535; 0 picks a free one)")


# --- 3. desim new --dir -------------------------------------------------------------------------------

def test_new_dir_that_is_a_file_or_cannot_be_made_is_one_line(tmp_path, capsys):
    a_file = tmp_path / "h.py"
    a_file.write_text("x = 1\n")
    assert main(["new", "x3", "--dir", str(a_file)]) == 2
    assert err_line(capsys) == f"desim: error: --dir {a_file} is a file, not a folder"
    assert main(["new", "x3", "--dir", str(a_file / "sub")]) == 2
    assert err_line(capsys) == f"desim: error: --dir {a_file / 'sub'}: {a_file} is a file, not a folder"
    assert main(["new", "x3", "--dir", "/proc/nope"]) == 2       # no folder can be made in /proc
    assert err_line(capsys) == ("desim: error: --dir /proc/nope: no such folder, and it cannot be made "
                                "(No such file or directory)")
    assert a_file.read_text() == "x = 1\n"
    # a --dir not there yet is still made, with its parents
    assert main(["new", "x3", "--dir", str(tmp_path / "new" / "sub")]) == 0
    assert json.loads((tmp_path / "new" / "sub" / "x3" / "study.json").read_text())["id"] == "x3"


# --- 4. desim export --out over files it does not own ------------------------------------------------------

@pytest.fixture
def exported(tmp_path):
    """A walk study with one run; returns its folder and the run's id."""
    root = walk(tmp_path, "exst")
    run = desim.run_study(desim.load_study(root))
    return root, run.run_id


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_into_the_store_is_refused_and_the_store_kept(exported, capsys):
    root, run_id = exported
    store = desim.store.StudyLayout(root)
    rows = sql(root, "SELECT count(*) FROM panel")
    before = _files(store.runs)
    for out in (store.run_dir(run_id), store.data, store.runs, store.reports / "mine"):
        assert main(["export", str(root), "--out", str(out)]) == 2, out
        where = "is" if out == store.runs else "is inside"
        assert err_line(capsys) == (
            f"desim: error: cannot export into {out}: it {where} {store.runs}, the study's store, whose files are "
            f"its runs' data; export to a folder outside it (e.g. {root / 'analysis'})")
    assert _files(store.runs) == before
    assert not store.reports.exists()
    assert sql(root, "SELECT count(*) FROM panel") == rows == [(3 * 6,)]


def test_export_into_the_store_through_a_link_is_refused(exported, tmp_path, capsys):
    root, run_id = exported
    link = tmp_path / "link"
    link.symlink_to(root / "runs")
    assert main(["export", str(root), "--out", str(link / "x")]) == 2
    assert f"cannot export into {link / 'x'}: it is inside {root / 'runs'}" in err_line(capsys)


def test_export_refuses_to_replace_a_users_own_files(exported, tmp_path, capsys):
    root, _ = exported
    out = tmp_path / "user"
    out.mkdir()
    (out / "panel.csv").write_text("mine\n")
    assert main(["export", str(root), "--format", "csv", "--out", str(out)]) == 2
    assert err_line(capsys) == (f"desim: error: cannot export into {out}: {out / 'panel.csv'} exists and no "
                                "earlier desim export wrote it; export to another folder, or remove it first")
    (out / "metrics.csv").write_text("mine too\n")
    assert main(["export", str(root), "--format", "csv", "--out", str(out)]) == 2
    assert err_line(capsys) == (f"desim: error: cannot export into {out}: {out / 'panel.csv'} exists and no "
                                "earlier desim export wrote it (and 1 more: metrics.csv); export to another "
                                "folder, or remove them first")
    assert _files(out) == {"panel.csv": b"mine\n", "metrics.csv": b"mine too\n"}     # nothing written, no marker
    # the Parquet export writes other names: it goes ahead, beside the user's files
    assert main(["export", str(root), "--out", str(out)]) == 0
    assert (out / "panel.parquet").is_file() and (out / "panel.csv").read_text() == "mine\n"


def test_export_again_into_a_folder_an_export_made_replaces_its_files(exported, capsys):
    root, _ = exported
    out = root / "analysis"
    for fmt in ("csv", "csv", "parquet", "parquet"):
        assert main(["export", str(root), "--format", fmt, "--out", str(out)]) == 0, fmt
    desim.run_study(desim.load_study(root))        # a second run: the files now hold both
    assert main(["export", str(root), "--format", "csv", "--out", str(out)]) == 0
    assert len((out / "panel.csv").read_text().splitlines()) == 1 + 2 * 3 * 6
    # the folder holds this export alone: the Parquet files of the export before it are gone, so a reader
    # globbing the folder never finds another export's table beside this one's
    marker = json.loads((out / ".desim-export").read_text())["files"]
    assert "runs.json" in marker and all(n.endswith(".csv") for n in marker if n != "runs.json")
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(marker)
    assert not list(out.glob("*.parquet"))
    capsys.readouterr()


def test_an_export_of_another_study_into_the_folder_leaves_none_of_the_first_ones_tables(tmp_path):
    """The first study records every round's actions, the second does not: the second export must not leave
    the first one's round_actions.parquet beside its own panel (a reader globbing the folder mixed them)."""
    first = walk(tmp_path, "rounds")
    sim = first / "simulation" / "simulation.json"
    sim.write_text(json.dumps({**json.loads(sim.read_text()), "record_rounds": True}))
    desim.run_study(desim.load_study(first))
    second = walk(tmp_path, "plain")
    desim.run_study(desim.load_study(second))
    out = tmp_path / "mix"
    assert main(["export", str(first), "--out", str(out)]) == 0
    assert (out / "round_actions.parquet").exists()
    (out / "notes.txt").write_text("mine")          # not an export's: kept
    assert main(["export", str(second), "--out", str(out)]) == 0
    assert not (out / "round_actions.parquet").exists() and (out / "notes.txt").read_text() == "mine"
    runs = set(desim.open(second).runs().column("run_id").to_pylist())
    for path in out.glob("*.parquet"):
        if path.name != "runs.parquet" and pq.read_metadata(path).num_rows:
            assert set(pq.read_table(path, columns=["run_id"]).column("run_id").to_pylist()) == runs, path.name


# --- 5. desim runs on a folder that is not there -------------------------------------------------------------

def test_runs_of_a_missing_folder_is_an_error_and_of_a_study_never_run_is_not(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["runs", str(missing)]) == 2
    assert err_line(capsys) == f"desim: error: {missing} is not a folder: no study there"
    root = walk(tmp_path)
    assert main(["runs", str(root)]) == 0
    assert capsys.readouterr().out.strip() == f"no runs yet ({root / 'runs' / 'desim.duckdb'} does not exist)"


def test_environment_variables_with_values_desim_cannot_read_are_said(tmp_path):
    """DESIM_FSYNC=steps was read as the default (less durability than asked, without a word) and
    DESIM_PROGRESS_EVERY=abc as 10 s silently: a mistyped fsync mode refuses the run before it is recorded,
    a progress interval that is no number is said once and the run goes on."""
    import os
    import subprocess

    from waits import HANG_S
    root = write_walk_study(tmp_path / "walk", n_steps=3, lockdown_day=2)

    def run(**env):
        return subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root)], capture_output=True, text=True,
                              timeout=HANG_S, env={**os.environ, **env})
    refused = run(DESIM_FSYNC="steps")
    assert refused.returncode == 2
    assert refused.stderr.startswith("desim: error: DESIM_FSYNC='steps' is not one of end, step, never")
    assert not (root / "runs" / "desim.duckdb").exists()
    done = run(DESIM_PROGRESS="lines", DESIM_PROGRESS_EVERY="abc")
    assert done.returncode == 0
    assert done.stderr.count("desim: DESIM_PROGRESS_EVERY='abc' is not a number of seconds; using 10") == 1
    assert run(DESIM_FSYNC="step").returncode == 0


@pytest.mark.parametrize("ref, says", [
    ("__main__:People", "'People' was defined in the notebook or script that made the study, and lives only in "
                        "that Python process: run it from there (desim.run_study), or move the class into the "
                        "study's model.py and name it 'model:People'"),
    ("made_beside_xyz:People", "cannot import module 'made_beside_xyz': No module named 'made_beside_xyz' (a module "
                               "beside the notebook or script that made the study is found only from there"),
])
def test_a_ref_to_code_of_the_process_that_made_the_study_says_where_that_code_is(tmp_path, capsys, ref, says):
    """``desim run`` of a study a script made with ``desim.Study``: its classes are ``__main__:Name`` or a module
    beside the script, which the command cannot see; the error said only that the name was missing."""
    root = walk(tmp_path)
    env = root / "environment" / "environment.json"
    data = json.loads(env.read_text())
    data["provider"]["ref"] = ref
    env.write_text(json.dumps(data))
    assert main(["run", str(root)]) == 2
    assert says in err_line(capsys)
