"""The spend summaries count the paid calls of steps a run has not closed yet.

A run stopped by its LLM budget inside a step does not write that step, nor its ``llm_calls`` rows: the paid
rows wait in the run's ledger (``runs/llm_unrecorded/<run>.json``) until a resume closes the step. ``desim
sweep``'s, ``desim run``'s and the dashboard's summaries count them with the stored rows, and say how many
are still only in the ledger, so what they print is what the server answered."""
from __future__ import annotations

import re

from llm_study import llm_study

from desim.cli import main
from desim.llm.stub import running_stub
from desim.store import StudyLayout, open_store, queries
from desim.store.ledger import unrecorded_calls

# the reference LLM study: 12 agents, 3 rounds a step; max_calls 30 lets 2 rounds of step 1 through (24 calls)
BUDGET = {"max_calls": 30}


def spend(root, run_ids):
    layout = StudyLayout(root)
    with open_store(layout) as con:
        return queries.llm_spend(con, run_ids, unrecorded_calls(layout, run_ids))


def paid_line(out: str) -> tuple[int, int]:
    """``(calls, tokens_in)`` of a summary's "paid for N calls, tokens_in T" line."""
    m = re.search(r"paid for ([\d,]+) calls, tokens_in ([\d,]+)", out)
    assert m, out
    return int(m[1].replace(",", "")), int(m[2].replace(",", ""))


def test_a_sweep_stopped_on_its_budget_inside_step_1_says_what_it_paid(study_copy, monkeypatch, capsys):
    root = llm_study(study_copy, **BUDGET)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        main(["sweep", str(root), "--set", "mu=0.4,0.6", "--set", "llm_kind=openai", "--workers", "2",
              "--steps", "2", "--quiet"])
        out = capsys.readouterr().out
        first = stub.stats.replies
        assert first == 2 * 24
        # nothing of step 1 is in llm_calls: the 48 paid calls are only in the runs' ledgers
        assert paid_line(out)[0] == first, out
        assert "48 of these calls (2 runs) are in steps not closed yet" in out, out
        assert "runs/llm_unrecorded/" in out
        sweep_id = re.search(r"sweep (sw[0-9a-f]+):", out)[1]
        main(["sweep", str(root), "--resume", sweep_id, "--quiet"])
        out = capsys.readouterr().out
        total = stub.stats.replies
    # the resume paid step 1's last round and step 2's first (12 + 12 a run), then stopped in step 2 again
    assert total == first + 2 * 24
    calls, tokens_in = paid_line(out)
    assert calls == total, out
    assert "24 of these calls (2 runs) are in steps not closed yet" in out, out
    run_ids = [f"{sweep_id}-{i}-0" for i in range(2)]
    got = spend(root, run_ids)
    assert (got["calls"], got["tokens_in"], got["unrecorded"], got["unrecorded_runs"]) == (total, tokens_in, 24, 2)


def test_desim_run_stopped_on_its_budget_says_what_it_paid_and_what_is_kept(study_copy, monkeypatch, capsys):
    root = llm_study(study_copy, **BUDGET)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        assert main(["run", str(root), "--set", "llm_kind=openai", "--steps", "2", "--quiet"]) == 3
        out = capsys.readouterr().out
        run_id = re.search(r"run (r[0-9a-f]+): interrupted", out)[1]
        assert stub.stats.replies == 24
        assert "llm: calls 24," in out
        kept = StudyLayout(root).llm_unrecorded(run_id)
        assert f"24 of these calls are in steps not closed yet: kept in {kept}" in out, out
        assert spend(root, [run_id])["calls"] == 24
        # the dashboard's line of the run counts them too
        from desim.dashboard.data import study_store
        (row,) = study_store(root)["runs"]
        assert (row["llm"]["calls"], row["llm"]["unrecorded"], row["llm"]["decisions"]) == (24, 24, 0)

        assert main(["run", str(root), "--resume", run_id, "--quiet"]) == 3
        out = capsys.readouterr().out
        assert stub.stats.replies == 48
        assert "llm: calls 24," in out                     # this invocation's
        assert paid_line(out)[0] == 48, out                 # the run's, over both invocations
        assert "12 of these calls are in steps not closed yet" in out, out

        assert main(["run", str(root), "--resume", run_id, "--quiet"]) == 0
        out = capsys.readouterr().out
        assert stub.stats.replies == 72
    assert paid_line(out)[0] == 72 and "not closed yet" not in out, out
    assert not kept.exists()
    assert spend(root, [run_id])["calls"] == 72 and spend(root, [run_id])["unrecorded"] == 0


def test_a_damaged_ledger_is_named_and_a_spend_summary_goes_on_without_it(tmp_path):
    import pytest as _pytest

    from desim.errors import DesimNotice, StoreError
    from desim.store import StudyLayout
    from desim.store.ledger import load_ledger, unrecorded_calls
    layout = StudyLayout(tmp_path / "s")
    path = layout.llm_unrecorded("r1")
    path.parent.mkdir(parents=True)
    path.write_bytes(b'[{"step": 1, "round": 0')                    # cut short
    with _pytest.raises(StoreError, match=r"r1\.json is damaged .* move it aside"):
        load_ledger(path)
    with _pytest.warns(DesimNotice, match="left out of what the runs paid for"):
        assert unrecorded_calls(layout).num_rows == 0
