"""The runs of a sweep share the study's LLM reply cache: each opens it for a look-up or a write and lets go,
so two workers side by side both finish, and what one paid for the other takes from the cache. A cache file
that is not a DuckDB database is said to be one, not taken for a busy file."""
from __future__ import annotations

import subprocess
import sys

import pytest
from llm_study import llm_study, query

from desim import RunFailed, load_study, run_study
from desim.experiments.sweep import run_sweep
from desim.llm.stub import running_stub
from desim.store.replies import ReplyCache, ReplyCacheError
from storeq import read_only

OPENAI = {"llm_kind": "openai"}


def test_two_workers_of_a_sweep_share_the_reply_cache(study_copy, monkeypatch):
    # sampling_seed null: every seed sends the same prompts at step 1, so the second run can reuse the first's
    root = llm_study(study_copy, sampling_seed=None)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        result = run_sweep(root, {"llm_kind": ["openai"], "epsilon": [0.2, 0.3]}, replicates=1, workers=2, steps=2)
        paid = stub.stats.replies
    assert result.completed == 2 and not result.errors
    con = read_only(root / "runs" / "llm_cache.duckdb")
    try:
        cached = con.execute("SELECT count(*) FROM llm_cache").fetchone()[0]
    finally:
        con.close()
    rows = query(root, "SELECT count(*) FROM llm_calls WHERE NOT cached")[0][0]
    assert rows == paid == cached          # every paid reply is in the one cache, once, and recorded


def test_a_cache_another_process_holds_is_waited_for_and_a_broken_one_is_named(tmp_path):
    path = tmp_path / "llm_cache.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys\ncon = duckdb.connect(sys.argv[1])\n"
                               "print('held', flush=True)\nsys.stdin.read()", str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ReplyCacheError, match=r"another process has held it for 0\.4 s"):
            ReplyCache(path, attempts=2, wait_s=0.2)
    finally:
        holder.stdin.close()
        holder.wait()
    # a sweep worker's cache (shared) is open only while it looks up or writes: another process gets in
    sharer = subprocess.Popen([sys.executable, "-c", "import sys\nfrom desim.store.replies import ReplyCache\n"
                               "cache = ReplyCache(sys.argv[1], shared=True)\ncache.put_many([('k', 'm', 'reply', 3, 4)])\n"
                               "cache.flush()\nprint('ready', flush=True)\nsys.stdin.read()\ncache.close()", str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert sharer.stdout.readline().strip() == "ready"
        cache = ReplyCache(path, attempts=1)                # no wait allowed: the file is free
        assert cache.get_many(["k", "x"])["k"].content == "reply"
        cache.close()
    finally:
        sharer.stdin.close()
        assert sharer.wait() == 0
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(b"not a database" * 100)
    with pytest.raises(ReplyCacheError, match=r"broken\.duckdb: .*not a valid DuckDB database file.* Move the file aside"):
        ReplyCache(broken, attempts=50, wait_s=1.0)     # at once: no waiting on a file that is not busy


def test_a_sweep_resumed_after_budget_stops_keeps_every_paid_row(study_copy, monkeypatch):
    """max_calls 50: the sweep's run stops mid-step; --resume runs it again from step 0 (cache hits), twice.
    The replies the earlier attempts paid for stay in llm_calls (as 'abandoned'), so the paid rows are every
    reply the server gave, once."""
    root = llm_study(study_copy, max_calls=50)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        first = run_sweep(root, {"llm_kind": ["openai"]}, replicates=1, workers=1, steps=3)
        attempts = [first]
        while attempts[-1].completed < 1:
            assert len(attempts) < 5
            attempts.append(run_sweep(root, resume=first.plan.sweep_id, workers=1))
        paid = stub.stats.replies
    assert len(attempts) == 3 and paid == 12 * 3 * 3
    (run_id,) = [r.run_id for r in first.plan.runs]
    rows = query(root, f"SELECT count(*) FROM llm_calls WHERE run_id = '{run_id}' AND NOT cached "
                       "AND model <> 'scripted' AND outcome <> 'unavailable'")[0][0]
    assert rows == paid


def test_a_later_sweep_sees_the_environment_as_it_is_now(study_copy, monkeypatch):
    """The workers come from a forkserver started by the first sweep; the second sweep's workers must still
    see the DESIM_LLM_BASE_URL set since (a notebook pointing the study at another server)."""
    root = llm_study(study_copy, cache=False)
    for _ in range(2):
        with running_stub() as stub:            # a new server, on a new port, each time
            monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
            result = run_sweep(root, {"llm_kind": ["openai"]}, replicates=1, workers=1, steps=1)
            assert result.completed == 1 and stub.stats.replies == 12 * 3
