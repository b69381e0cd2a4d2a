"""A run whose end-of-run merge fails is not recorded ``completed``: it was, with no data where a reader looks
(and ``--resume`` refused it as completed). It is recorded failed with the cause, and a resume merges it or runs
again what was lost."""
from __future__ import annotations

import pytest

import desim
from desim.errors import StoreError
from desim.experiments.branches import resume
from storeq import sql
from walk_study import write_walk_study

TAKE_JOURNAL = '''
    def end_step(self, t):                      # at the last step, once: the run's journal is taken away
        import pathlib, shutil
        marker = pathlib.Path(__file__).parent / "taken.marker"
        if t == 6 and not marker.exists():
            marker.write_text("taken")
            shutil.rmtree(pathlib.Path(self.ctx.root) / "runs" / "data" / f"run_id={self.ctx.run_id}" / "journal")

    def agent_state(self, agent_id):'''


def panel(root, run_id):
    return sql(root, "SELECT step, agent_id, state::VARCHAR FROM panel WHERE run_id = ? ORDER BY ALL", [run_id])


def test_a_journal_removed_while_the_run_went_fails_the_run_and_a_resume_runs_it_again(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=6, lockdown_day=2)      # no new table after step 2
    reference = desim.run_study(desim.load_study(root))
    model = root / "model.py"
    model.write_text(model.read_text().replace("\n    def agent_state(self, agent_id):", TAKE_JOURNAL, 1))
    with pytest.raises(StoreError, match=r"journal was removed while the run went"):
        desim.run_study(desim.load_study(root))
    (run_id, status, error), = sql(root, "SELECT run_id, status, error FROM runs WHERE run_id <> ?",
                                   [reference.run_id])
    assert status == "failed" and "recorded failed, not completed" in error and "--resume" in error
    assert resume(root, run_id).status == "completed"
    assert panel(root, run_id) == panel(root, reference.run_id)


def test_a_merge_the_file_system_refuses_is_not_recorded_completed(tmp_path, monkeypatch):
    import desim.store.files as files
    root = write_walk_study(tmp_path / "walk", n_steps=6)
    reference = desim.run_study(desim.load_study(root))

    def refused(staged, folder):
        raise PermissionError(13, "Operation not permitted", str(folder))

    with monkeypatch.context() as m:
        m.setattr(files, "exchange", refused)
        with pytest.raises(StoreError, match="Operation not permitted"):
            desim.run_study(desim.load_study(root))
    (run_id, status), = sql(root, "SELECT run_id, status FROM runs WHERE run_id <> ?", [reference.run_id])
    assert status == "failed"
    assert resume(root, run_id).status == "completed"          # the cause put right: the journal is merged
    assert panel(root, run_id) == panel(root, reference.run_id)
