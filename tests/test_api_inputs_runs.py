"""``run_study``'s arguments from Python: a ``run_id`` is refused before anything is written when it could
not name a run's folder or is taken; ``db_path=":memory:"`` keeps nothing and reading it back says so;
``RunResult.warnings`` holds what ``desim run`` warns about the configuration."""
from __future__ import annotations

import duckdb
import pytest

import desim
from desim.errors import DesimError
from desim.experiments.branches import branch
from desim.store.reader import DbPathRefused, NoSuchRun, RunIdRefused
from walk_study import write_walk_study

AGENTS, STEPS = 6, 3        # write_walk_study(n_agents=6, n_steps=3): 6 rows at each of steps 1..3


@pytest.fixture
def walk(tmp_path):
    return write_walk_study(tmp_path / "studies" / "walk", n_steps=STEPS, lockdown_day=2)


def runs_in(root):
    with duckdb.connect(str(root / "runs" / "desim.duckdb"), read_only=True) as con:
        return [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]


@pytest.mark.parametrize("run_id", ["exp/1", "../../../escaped", "..", "_", "", "a=b", "a b", "run%2F1", "é1",
                                    "-lead", "x" * 101, 7])
def test_a_run_id_that_cannot_name_a_folder_is_refused_before_anything_is_written(walk, tmp_path, run_id):
    with pytest.raises(RunIdRefused) as caught:
        desim.run_study(desim.load_study(walk), run_id=run_id)
    message = str(caught.value)
    assert message.startswith(f"run_id {run_id!r} cannot name a run: a run id is 1 to 100 letters (a-z, A-Z), "
                              "digits, '-' or '_', starting with a letter or a digit")
    assert isinstance(caught.value, DesimError)
    assert not (walk / "runs").exists()                     # no store, no data folder, no live file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["studies"]        # nothing escaped beside it


def test_a_run_id_of_the_allowed_form_names_the_run_and_reads_back(walk):
    result = desim.run_study(desim.load_study(walk), run_id="exp-1_B2")
    assert result.run_id == "exp-1_B2" and result.status == "completed"
    assert runs_in(walk) == ["exp-1_B2"]
    assert desim.open(walk).panel(run="exp-1_B2").num_rows == AGENTS * STEPS
    assert (walk / "runs" / "data" / "run_id=exp-1_B2").is_dir()


def test_a_taken_run_id_is_a_desim_error_naming_the_run_and_leaves_it_as_it_was(walk):
    desim.run_study(desim.load_study(walk), run_id="dup")
    before = desim.open(walk).panel(run="dup")
    with pytest.raises(RunIdRefused) as caught:
        desim.run_study(desim.load_study(walk, seed=99), run_id="dup")
    message = str(caught.value)
    assert message.startswith(f"run_id 'dup' is taken: {walk / 'runs' / 'desim.duckdb'} already holds run dup "
                              "(run, completed, started ")
    assert message.endswith("give another run_id, or none for a new one (desim runs lists them)")
    assert runs_in(walk) == ["dup"]
    assert desim.open(walk).panel(run="dup").equals(before)         # the seed-99 run wrote nothing over it


def test_a_branch_checks_its_run_id_as_a_run_does(walk):
    parent = desim.run_study(desim.load_study(walk), run_id="parent")
    with pytest.raises(RunIdRefused, match=r"^run_id 'b/1' cannot name a run"):
        branch(walk, parent.run_id, 2, run_id="b/1")
    with pytest.raises(RunIdRefused, match=r"^run_id 'parent' is taken"):
        branch(walk, parent.run_id, 2, run_id="parent")
    assert runs_in(walk) == ["parent"]
    assert branch(walk, parent.run_id, 2, run_id="child").run_id == "child"
    assert runs_in(walk) == ["child", "parent"]


def test_a_run_kept_nowhere_runs_and_reading_it_back_says_why_there_is_nothing(walk):
    heard = []
    result = desim.run_study(desim.load_study(walk), db_path=":memory:", on_step=lambda step, m: heard.append(step))
    assert result.status == "completed" and heard == [1, 2, 3]
    assert not (walk / "runs").exists()
    for read in (result.panel, result.metrics, lambda: desim.open(":memory:")):
        with pytest.raises(NoSuchRun) as caught:
            read()
        message = str(caught.value)
        assert message.startswith("':memory:' is no store: a run made with db_path=':memory:' keeps nothing")
        assert "run it with db_path=None (the study's store, <study>/runs/) or a path to a .duckdb file" in message
        assert "does not exist" not in message


def test_a_db_path_that_is_no_duckdb_file_is_refused_saying_what_to_give(walk, tmp_path):
    """Kept in a DuckDB file named ``store``, the run was then read back as a study folder ``store/``."""
    for db_path in (tmp_path / "store", str(tmp_path / "store.db")):
        with pytest.raises(DbPathRefused) as caught:
            desim.run_study(desim.load_study(walk), db_path=db_path)
        assert str(caught.value) == (f"db_path '{db_path}' is no DuckDB file: give a path ending in .duckdb (its "
                                     "data files go beside it, in <name>-data/), ':memory:' to keep nothing, or "
                                     "None for the study's store (<study>/runs/)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["studies"] and not (walk / "runs").exists()
    kept = desim.run_study(desim.load_study(walk), db_path=tmp_path / "store.duckdb")
    assert kept.panel().num_rows == AGENTS * STEPS
    assert (tmp_path / "store.duckdb").is_file() and (tmp_path / "store-data" / f"run_id={kept.run_id}").is_dir()


def test_an_intervention_after_the_last_step_is_in_the_result_warnings(walk):
    """The line ``desim run`` prints (tests/test_counterfactuals.py), here for a lockdown at day 5 of 3."""
    late = desim.run_study(desim.load_study(walk, params={"lockdown_day": "5"}))
    assert late.warnings == [
        "environment/environment.json: scheduled_events[0].at_step: scheduled event 'lockdown' is at step 5 "
        "(parameter 'lockdown_day'), after the last step (3): it never fires"]
    assert desim.open(walk).events(late.run_id).num_rows == 0                       # it did not fire
    on_time = desim.run_study(desim.load_study(walk))                               # day 2 of 3
    assert on_time.warnings == []
    assert desim.open(walk).events(on_time.run_id).column("name").to_pylist() == ["lockdown"]
