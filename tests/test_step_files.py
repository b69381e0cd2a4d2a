"""What a run promises about its steps on disk: a step is reported (``on_step``) only once it is committed
to the run's journal, nothing of the next step is decided while it could still be lost, and a write that fails fails
the run with the steps before it kept. Writing is slowed down here, so that a writer that ran behind
the run (on a thread of its own, say: tried for issue 13, no faster) would fail the first test."""
from __future__ import annotations

import time

import pytest

import desim
from desim.store import journal
from desim import RunFailed
from desim.experiments.recording import record, sink_for
from desim.run.assemble import assemble
from storeq import store_path
from probe_study import write_probe_study
from storeq import query as rows


def slow_writes(monkeypatch, fail_step: int | None = None):
    real = journal.Journal.append

    def append(self, step, tables):
        time.sleep(0.03)                    # the writer lags well behind the tiny steps
        if fail_step is not None and step == fail_step:
            raise OSError(28, "No space left on device")
        real(self, step, tables)

    monkeypatch.setattr(journal.Journal, "append", append)


def committed(root, run_id: str, step: int) -> bool:
    """Whether ``step`` is committed to the run's journal (what a reader and a resume would find)."""
    last = journal.last_commit(store_path(root).parent / "data" / f"run_id={run_id}" / "journal")
    return last is not None and last["step"] >= step


def test_a_step_is_in_place_before_it_is_reported_and_before_the_next_step_decides(tmp_path, monkeypatch):
    slow_writes(monkeypatch)
    root = write_probe_study(tmp_path / "probe", n_steps=5, rounds=2)
    seen = []
    spec = desim.load_study(root)
    engine = assemble(spec)
    decide = engine.decision.decide_batch

    def decide_checked(observations, memories):
        t = observations[0].step
        seen.append(("decide", t, committed(root, engine.run_id, t - 1)))
        return decide(observations, memories)

    engine.decision.decide_batch = decide_checked
    result = record(engine, sink_for(spec), on_step=lambda t, m: seen.append(
        ("reported", t, committed(root, engine.run_id, t))))
    assert result.status == "completed"
    assert [s for s in seen if s[0] == "reported"] == [("reported", t, True) for t in range(1, 6)]
    assert [s for s in seen if s[0] == "decide"] == [("decide", t, True) for t in range(1, 6) for _ in range(2)]
    for t in range(1, 5):   # step t is reported before step t + 1 decides anything
        assert seen.index(("reported", t, True)) < seen.index(("decide", t + 1, True))
    assert rows(store_path(root), "SELECT count(*) FROM panel")[0][0] == 5 * 5


def test_a_failed_write_fails_the_run_and_keeps_the_steps_before(tmp_path, monkeypatch):
    slow_writes(monkeypatch, fail_step=3)
    root = write_probe_study(tmp_path / "probe", n_steps=6)
    with pytest.raises(RunFailed) as err:
        desim.run_study(desim.load_study(root))
    assert "No space left on device" in str(err.value)
    db = store_path(root)
    assert rows(db, "SELECT status, last_step FROM runs") == [("failed", 2)]
    assert rows(db, "SELECT max(step), count(*) FROM panel") == [(2, 2 * 5)]
    assert rows(db, "SELECT max(step) FROM metrics")[0][0] == 2
