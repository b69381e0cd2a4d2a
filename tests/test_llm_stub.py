"""The LLM layer against the stub over real HTTP on loopback: throughput, retries,
fallbacks, the cache, budgets and resume, a dying server, and the API key."""
from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
import time

import pytest

from desim import RunFailed, load_study, run_study
from desim.experiments.branches import resume
from desim.llm.stub import running_stub, stub_process

from llm_study import llm_study, panel, query
from waits import HANG_S

SECRET = "sk-test-9f8e7d6c5b4a-DO-NOT-STORE"


@pytest.mark.slow
def test_200_agents_keep_64_requests_in_flight(study_copy, monkeypatch):
    root = llm_study(study_copy, concurrency=64)
    with stub_process(latency_ms=100) as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        spec = load_study(root, steps=2, params={"n_agents": 200, "llm_kind": "openai"})
        started = time.perf_counter()
        result = run_study(spec)
        wall = time.perf_counter() - started
        stats = stub.stats()
    calls = 200 * 2 * 3
    assert result.status == "completed"
    assert stats["requests"] == stats["distinct_prompts"] == calls
    assert 32 <= stats["max_in_flight"] <= 64          # many in flight, never more than the bound
    assert result.counters["llm"]["calls"] == calls and result.counters["llm"]["cache_hits"] == 0
    assert query(root, "SELECT count(*), count(DISTINCT (step, round, agent_id)), bool_or(cached) "
                       "FROM llm_calls") == [(calls, calls, False)]
    # calls x latency / concurrency is 1.9 s; six round barriers make it 6 x ceil(200/64) x 0.1 = 2.4 s.
    # One at a time it would be 120 s: half of that tells "many in flight" from "one at a time" on any
    # machine, however loaded; benchmarks/bench_llm.py measures the real ratios.
    waves = 2 * 3 * math.ceil(200 / 64) * 0.1
    assert waves <= wall < calls * 0.1 / 2, f"{wall:.2f} s against a floor of {waves:.1f} s"


def test_errors_are_retried_garbage_falls_back_and_a_rerun_is_free(study_copy, monkeypatch):
    root = llm_study(study_copy, concurrency=32, backoff_s=0.01, max_retries=10)
    with stub_process(error_rate=0.2, garbage_rate=0.1, retry_after_s=0.01, seed=3) as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        spec = load_study(root, steps=2, params={"n_agents": 60, "llm_kind": "openai"})
        first = run_study(spec)
        after_first = stub.stats()
        second = run_study(spec)
        after_second = stub.stats()
    calls = 60 * 2 * 3
    assert first.status == second.status == "completed"
    llm = first.counters["llm"]
    assert after_first["replies"] == calls and after_first["errors"] > 20
    assert llm["retries"] == after_first["errors"]      # each failed attempt was retried once
    assert llm["fallbacks"] == after_first["garbage"] > 0
    assert query(root, f"SELECT count(*), count(*) FILTER (outcome = 'fallback'), sum(attempts - 1) "
                       f"FROM llm_calls WHERE run_id = '{first.run_id}'") == \
        [(calls, after_first["garbage"], after_first["errors"])]
    rows = panel(root, first.run_id)
    assert len(rows) == 60 * 2 and all(r[3] == "post" for r in rows)          # every agent decided
    final_fallbacks = query(root, f"SELECT count(*) FROM llm_calls WHERE run_id = '{first.run_id}' "
                                  "AND round = 2 AND outcome = 'fallback'")[0][0]
    assert sum(r[5] == "fallback" for r in rows) == final_fallbacks > 0
    # the re-run: no request reaches the server, every reply comes from the cache, same panel
    assert after_second["requests"] == after_first["requests"]
    assert second.counters["llm"]["calls"] == 0 and second.counters["llm"]["cache_hits"] == calls
    assert second.counters["llm"]["fallbacks"] == llm["fallbacks"]
    assert panel(root, second.run_id) == rows


def test_retries_wait_as_long_as_retry_after_asks(study_copy, monkeypatch):
    root = llm_study(study_copy, backoff_s=0.001, max_retries=8)
    with running_stub(error_rate=0.2, retry_after_s=0.3, seed=1) as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        result = run_study(load_study(root, steps=1, params={"n_agents": 20, "llm_kind": "openai"}))
    assert result.status == "completed" and stub.stats.errors > 0
    retried = query(root, "SELECT latency_ms FROM llm_calls WHERE attempts > 1")
    assert len(retried) > 0
    assert all(ms >= 300 for (ms,) in retried)     # a first failure is a 429 with Retry-After: 0.3


@pytest.mark.slow
def test_budget_stops_at_a_step_boundary_and_resume_pays_nothing_twice(study_copy, monkeypatch):
    root = llm_study(study_copy, max_calls=130)
    fresh = llm_study(study_copy, name="unbudgeted")
    with stub_process() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        stopped = run_study(load_study(root, steps=4, params={"n_agents": 20, "llm_kind": "openai"}))
        assert stopped.status == "interrupted" and "max_calls=130" in stopped.error
        assert stub.stats()["requests"] == 120      # steps 1-2; step 3 round 0 would have needed 20 more
        assert query(root, "SELECT status, last_step FROM runs") == [("interrupted", 2)]
        assert query(root, "SELECT max(step), count(*) FROM panel") == [(2, 40)]
        resumed = resume(root, stopped.run_id)
        stats = stub.stats()
        reference = run_study(load_study(fresh, steps=4, params={"n_agents": 20, "llm_kind": "openai"}))
    assert resumed.status == "completed"
    assert stats["requests"] == stats["distinct_prompts"] == 240      # no paid call repeated
    assert resumed.counters["llm"]["calls"] == 120 and resumed.counters["llm"]["cache_hits"] == 120
    assert query(root, "SELECT status, last_step FROM runs") == [("completed", 4)]
    assert query(root, "SELECT count(*), count(DISTINCT (step, round, agent_id)) FROM llm_calls") == [(240, 240)]
    assert [r[1:] for r in panel(root, stopped.run_id)] == [r[1:] for r in panel(fresh, reference.run_id)]


def test_a_killed_server_fails_the_run_with_completed_steps_kept(study_copy, monkeypatch):
    root = llm_study(study_copy, max_retries=2, backoff_s=0.05, timeout_s=2)
    with stub_process(latency_ms=20) as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        spec = load_study(root, steps=4, params={"n_agents": 30, "llm_kind": "openai"})
        started = time.perf_counter()
        with pytest.raises(RunFailed) as failed:
            run_study(spec, on_step=lambda step, metrics: step == 1 and stub.kill())
        elapsed = time.perf_counter() - started
    message = str(failed.value)
    assert "step 2 round 0" in message and "failed after 3 attempts" in message and stub.base_url in message
    assert elapsed < 30
    assert query(root, "SELECT status, last_step FROM runs") == [("failed", 1)]
    assert query(root, "SELECT step, count(*) FROM panel GROUP BY step") == [(1, 30)]
    assert query(root, "SELECT count(*) FROM llm_calls") == [(90,)]


def test_a_request_the_server_refuses_is_not_retried(study_copy, monkeypatch):
    root = llm_study(study_copy)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", f"http://127.0.0.1:{stub.port}/wrong")
        with pytest.raises(RunFailed, match="answered HTTP 404"):
            run_study(load_study(root, steps=1, params={"llm_kind": "openai"}))


@pytest.mark.slow
def test_the_api_key_is_sent_but_never_stored_or_printed(study_copy):
    root = llm_study(study_copy, max_retries=1, backoff_s=0.05)
    with stub_process() as stub:
        env = {**os.environ, "DESIM_LLM_BASE_URL": stub.base_url, "DESIM_LLM_API_KEY": SECRET}
        ok = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--steps", "2",
                             "--set", "llm_kind=openai"], env=env, capture_output=True, text=True, timeout=HANG_S)
        sent = stub.stats()["key_hashes"]
        stub.kill()
        down = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--steps", "2", "--seed", "5",
                               "--set", "llm_kind=openai"], env=env, capture_output=True, text=True, timeout=HANG_S)
    assert ok.returncode == 0, ok.stderr
    assert "llm: calls 72" in ok.stdout
    assert down.returncode == 2 and "failed after" in down.stderr
    assert sent == [hashlib.sha256(SECRET.encode()).hexdigest()[:16]]   # the server did get it
    for output in (ok.stdout, ok.stderr, down.stdout, down.stderr):
        assert SECRET not in output
    files = [p for p in (root / "runs").rglob("*") if p.is_file()]
    assert any(p.name == "llm_cache.duckdb" for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    configs = query(root, "SELECT config FROM runs")
    assert len(configs) == 2 and all(SECRET not in c[0] for c in configs)
