"""The LLM layer's accounting adds up: every row of ``llm_calls`` says the attempts its request made,
every reply paid for reaches ``llm_calls`` exactly once (also when its step was lost to a failure
or a budget and the run was resumed), and scripted replies are free: no paid calls, no budget."""
from __future__ import annotations

import pytest
from llm_servers import HostileServer, dead_url, echoing
from llm_study import llm_study, query

from desim import RunFailed, load_study, run_study
from desim.experiments.branches import resume
from desim.llm.stub import running_stub
from storeq import read_only

OPENAI = {"llm_kind": "openai"}


def cache_size(root) -> int:
    con = read_only(root / "runs" / "llm_cache.duckdb")
    try:
        return con.execute("SELECT count(*) FROM llm_cache").fetchone()[0]
    finally:
        con.close()


def paid_rows(root, run_id):
    """Uncached server replies in llm_calls: count, tokens in, tokens out."""
    return query(root, "SELECT count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) "
                       f"FROM llm_calls WHERE run_id = '{run_id}' AND NOT cached AND model <> 'scripted' "
                       "AND outcome <> 'unavailable'")[0]


def test_unanswered_calls_record_the_attempts_they_made(study_copy, monkeypatch):
    """A dead server with on_unavailable fallback: the summary's retries are in the rows' attempts."""
    root = llm_study(study_copy, max_retries=2, backoff_s=0.01, backoff_max_s=0.05, on_unavailable="fallback")
    monkeypatch.setenv("DESIM_LLM_BASE_URL", dead_url())
    result = run_study(load_study(root, steps=2, params=OPENAI))
    llm = result.counters["llm"]
    assert result.status == "completed" and llm["retries"] > 0 and llm["calls"] == 0
    outcome, rows, attempts, retries = query(
        root, "SELECT outcome, count(*), sum(attempts), sum(greatest(attempts - 1, 0)) FROM llm_calls GROUP BY ALL")[0]
    assert (outcome, rows) == ("unavailable", 12 * 2 * 3)
    assert retries == llm["retries"]
    # each round: the request that ran out sent all 3 of its attempts, the others at least none
    assert attempts >= 3 * 2 * 3


def test_replies_of_a_failed_step_reach_llm_calls_when_the_run_is_resumed(study_copy, monkeypatch):
    """Step 2 round 1 fails after 6 replies (round 0's 12 are in too): the 18 paid replies are cached
    and, once the run is resumed, in llm_calls as 'abandoned' rows, each paid reply exactly once."""
    root = llm_study(study_copy, max_retries=0, concurrency=1)
    with HostileServer(echoing(500, after=12 * 3 + 12 + 6)) as server:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", server.base_url)
        with pytest.raises(RunFailed, match="step 2 round 1"):
            run_study(load_study(root, steps=3, params=OPENAI))
    run_id = query(root, "SELECT run_id FROM runs")[0][0]
    from desim.llm.accounting import ledger_path
    ledger = ledger_path(root, run_id)
    assert ledger.exists() and cache_size(root) == 54
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        resumed = resume(root, run_id)
        new = stub.stats.replies
    assert resumed.status == "completed" and not ledger.exists()
    assert resumed.counters["llm"]["calls"] == new == 12 * 3 * 3 - 54      # this invocation paid only these
    assert resumed.counters["llm"]["cache_hits"] == 54
    assert paid_rows(root, run_id)[0] == cache_size(root) == 54 + new      # every paid reply, once
    assert query(root, "SELECT step, round, count(*) FROM llm_calls WHERE outcome = 'abandoned' "
                       "GROUP BY ALL ORDER BY ALL") == [(2, 0, 12), (2, 1, 6)]
    assert query(root, "SELECT count(DISTINCT (step, round, agent_id)) FROM llm_calls "
                       "WHERE outcome <> 'abandoned'") == [(12 * 3 * 3,)]


def test_budget_stops_lose_no_paid_call_across_resumes(study_copy, monkeypatch):
    """max_calls=50 stops mid-step twice; the invocations' counters add up to the run's rows."""
    root = llm_study(study_copy, max_calls=50)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        runs = [run_study(load_study(root, steps=3, params=OPENAI))]
        while runs[-1].status == "interrupted":
            assert len(runs) < 5
            runs.append(resume(root, runs[0].run_id))
        replies = stub.stats.replies
    assert [r.status for r in runs] == ["interrupted", "interrupted", "completed"]
    assert [r.counters["llm"]["calls"] for r in runs] == [48, 48, 12]
    calls, tokens_in, tokens_out = paid_rows(root, runs[0].run_id)
    assert calls == replies == cache_size(root) == 108
    assert tokens_in == sum(r.counters["llm"]["tokens_in"] for r in runs)
    assert tokens_out == sum(r.counters["llm"]["tokens_out"] for r in runs)
    assert query(root, "SELECT step, count(*) FROM llm_calls WHERE outcome = 'abandoned' GROUP BY ALL "
                       "ORDER BY ALL") == [(2, 12), (3, 24)]


def set_simulation(root, **fields):
    import json
    path = root / "simulation" / "simulation.json"
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def stored_steps(root, run_id):
    return query(root, f"SELECT step, agent_id, state::VARCHAR, payload::VARCHAR FROM panel WHERE run_id = '{run_id}' "
                       "ORDER BY ALL")


def test_a_resumed_run_without_a_reply_cache_replays_its_stored_steps_and_asks_nothing_twice(study_copy, monkeypatch):
    """cache: false and recorded rounds: the resume takes steps 1..2 from the store, asks only for what was
    never answered, and continues the run the panel holds (the stub's replies are deterministic, so an
    uninterrupted run is the reference)."""
    root = llm_study(study_copy, cache=False, max_calls=80)
    set_simulation(root, record_rounds=True)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        first = run_study(load_study(root, steps=4, params=OPENAI))
        assert first.status == "interrupted" and first.steps_done == 2        # 72 paid, round 0 of step 3 would pass 80
        asked = stub.stats.replies
        resumed = resume(root, first.run_id)          # its budget is the run's: 72 more calls fit in 80
        again = stub.stats.replies - asked
    assert resumed.status == "completed"
    assert again == resumed.counters["llm"]["calls"] == 12 * 3 * 2         # steps 3 and 4 only
    paid = query(root, f"SELECT count(*) FROM llm_calls WHERE run_id = '{first.run_id}' AND NOT cached "
                       "AND outcome <> 'abandoned'")[0][0]
    assert paid == 12 * 3 * 4                                              # every round of every step, once
    set_simulation(root, llm={**load_study(root).simulation.llm, "max_calls": None})
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        whole = run_study(load_study(root, steps=4, params=OPENAI))
    assert whole.status == "completed" and stored_steps(root, first.run_id) == stored_steps(root, whole.run_id)


def test_a_resume_that_would_ask_again_for_a_stored_step_is_refused_before_sending(study_copy, monkeypatch):
    """The cache cannot give a stored step's replies (another model now; or no cache and no recorded rounds):
    the resume stops at the first such round, sends nothing, and keeps the stored steps."""
    root = llm_study(study_copy, max_calls=80)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        first = run_study(load_study(root, steps=4, params=OPENAI))
        before, asked = stored_steps(root, first.run_id), stub.stats.replies
        monkeypatch.setenv("DESIM_LLM_MODEL", "another-model")
        with pytest.raises(RunFailed, match=r"step 1 round 0: resuming run r\w+ re-executes its stored steps 1\.\.2 "
                                            r"with the replies they had, but 12 of this round's 12 prompts have none"
                                            r".*the model is now 'another-model'"):
            resume(root, first.run_id)
        assert stub.stats.replies == asked and stored_steps(root, first.run_id) == before
        monkeypatch.delenv("DESIM_LLM_MODEL")
        assert resume(root, first.run_id).status == "completed"    # the same model: free up to step 2, 72 paid
        assert stub.stats.replies - asked == 12 * 3 * 2
    nocache = llm_study(study_copy, name="nocache", cache=False, max_calls=80)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        first = run_study(load_study(nocache, steps=4, params=OPENAI))
        asked = stub.stats.replies
        with pytest.raises(RunFailed, match=r"the reply cache is off \(llm\.cache: false\), and with rounds that are "
                                            r"not recorded \(record_rounds\)"):
            resume(nocache, first.run_id)
        assert stub.stats.replies == asked


def test_scripted_replies_are_free_and_spend_no_budget(study_copy):
    root = llm_study(study_copy, max_calls=0, max_tokens_budget=0)
    result = run_study(load_study(root, steps=2))
    llm = result.counters["llm"]
    assert result.status == "completed", result.error
    assert (llm["calls"], llm["tokens_in"], llm["tokens_out"], llm["scripted"]) == (0, 0, 0, 12 * 2 * 3)
    assert paid_rows(root, result.run_id) == (0, 0, 0)
    assert query(root, "SELECT count(*), min(model), max(attempts) FROM llm_calls") == [(72, "scripted", 0)]


def test_a_token_budget_stops_a_paid_run_before_the_round_that_would_exceed_it(study_copy, monkeypatch):
    root = llm_study(study_copy, max_tokens_budget=40000)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        result = run_study(load_study(root, steps=6, params=OPENAI))
    llm = result.counters["llm"]
    assert result.status == "interrupted" and "max_tokens_budget=40000" in result.error
    assert 0 < llm["tokens_in"] + llm["tokens_out"] <= 40000
    last_step = query(root, "SELECT last_step FROM runs")[0][0]
    assert 1 <= last_step < 6
    assert paid_rows(root, result.run_id)[0] == last_step * 12 * 3      # whole steps only


def test_a_budget_smaller_than_one_round_says_no_resume_can_pass_it(study_copy, monkeypatch, capsys):
    """max_calls 5 for 12 agents: a resume has the same budget and would stop at the same round for ever, so the
    summary gives no resume command (it gave one, under the error saying no resume can pass)."""
    from desim.cli import main
    root = llm_study(study_copy, max_calls=5)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        result = run_study(load_study(root, steps=2, params=OPENAI))
        assert main(["run", str(root), "--steps", "2", "--set", "llm_kind=openai", "-q"]) == 3
        assert stub.stats.replies == 0
    assert result.status == "interrupted"
    assert "step 1 round 0 needs 12 more; that is more than the whole budget, so no resume can pass this round" \
        in result.error and "run the study anew with a larger llm.max_calls" in result.error
    out = capsys.readouterr().out
    assert "no resume can pass this round" in out and "--resume" not in out
    # a round that fits the budget but not what is left of it: resumable, as before
    root = llm_study(study_copy, name="fits", max_calls=20)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        result = run_study(load_study(root, steps=2, params=OPENAI))
        assert main(["run", str(root), "--steps", "2", "--set", "llm_kind=openai", "-q"]) == 3
    assert "needs 12 more; the run stops before this step and can be resumed" in result.error
    assert "  resume with: desim run" in capsys.readouterr().out


def answering_then_silent(answered: int):
    """Answers the first ``answered`` requests, then reads and never answers (the run waits in that round)."""
    from llm_servers import completion, http_response

    async def handler(server, reader, writer) -> None:
        while True:
            await server.read_request(reader)
            if server.requests > answered:
                await reader.read()
                return
            await server.send(writer, http_response(200, completion('{"opinion": 0.5, "argument": "ok"}')))
    return handler


@pytest.mark.slow
def test_a_killed_run_keeps_the_paid_rows_of_the_rounds_it_finished(study_copy, tmp_path):
    """SIGKILL in step 2 round 1, round 0's 12 replies paid: they are in the run's ledger file at once, and
    the resumed run writes them as 'abandoned', so every reply paid across both invocations is one row."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from desim.llm.accounting import ledger_path, load_ledger
    root = llm_study(study_copy, cache=False, max_retries=0, timeout_s=3600)
    set_simulation(root, record_rounds=True)
    hang = float(os.environ.get("DESIM_TEST_HANG_S", "600"))
    with HostileServer(answering_then_silent(12 * 3 + 12)) as server:
        env = {**os.environ, "DESIM_LLM_BASE_URL": server.base_url}
        log = (tmp_path / "run.log").open("w")      # a file, not a pipe nobody reads while the run writes
        proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(root), "--set", "llm_kind=openai",
                                 "--steps", "3", "-q"], env=env, stdout=log, stderr=subprocess.STDOUT)
        run_id = None
        deadline = time.monotonic() + hang
        while time.monotonic() < deadline:          # ready: the ledger holds step 2 round 0's paid rows
            ledgers = list((root / "runs").glob("**/llm_unrecorded/*.json"))
            rows = load_ledger(ledgers[0]) if ledgers else []
            if [r["step"] for r in rows] == [2] * 12:
                run_id = ledgers[0].stem
                break
            assert proc.poll() is None, (tmp_path / "run.log").read_text()
            time.sleep(0.05)
        assert run_id is not None, f"the run never kept step 2's paid rows: {rows}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    paid_first = 48                                 # answered; step 2 round 1 never is
    assert ledger_path(root, run_id).exists()
    with running_stub() as stub:
        os.environ["DESIM_LLM_BASE_URL"] = stub.base_url
        try:
            resumed = resume(root, run_id)
        finally:
            del os.environ["DESIM_LLM_BASE_URL"]
        paid_now = stub.stats.replies
    assert resumed.status == "completed" and paid_now == 12 * 3 * 2       # steps 2 and 3: step 1 is replayed
    assert paid_rows(root, run_id)[0] == paid_first + paid_now             # every paid reply, once
    assert query(root, f"SELECT step, round, count(*) FROM llm_calls WHERE run_id = '{run_id}' AND "
                       "outcome = 'abandoned' GROUP BY ALL") == [(2, 0, 12)]
    assert not ledger_path(root, run_id).exists()


def test_a_round_s_replies_are_in_the_cache_before_its_paid_rows_are_kept(study_copy, monkeypatch):
    """A process killed between the two would leave paid rows whose replies the cache lacks: the resumed run
    asked those prompts again and paid twice (a kill after a round, while the cache's writer thread was still
    committing, did so in 2 of 5 tries). Each time the ledger of unrecorded rows is written, every paid reply
    it lists must already be committed to the cache file; a slow writer thread makes the race certain."""
    import time

    import desim.llm.decision as decision
    from desim.store.replies import ReplyCache
    root = llm_study(study_copy)
    slow_insert = ReplyCache._insert

    def insert(self, rows):
        time.sleep(0.2)
        slow_insert(self, rows)
    monkeypatch.setattr(ReplyCache, "_insert", insert)
    kept = decision.save_ledger
    checked, caches = [], []

    def save(path, rows):
        paid = {r["prompt_hash"] for r in rows if not r["cached"] and r["outcome"] != "unavailable"}
        committed = {k for (k,) in caches[-1].con.cursor().execute("SELECT key FROM llm_cache").fetchall()}
        assert paid <= committed, f"{len(paid - committed)} paid replies not yet in the cache"
        checked.append(len(paid))
        kept(path, rows)
    opened = ReplyCache.__init__

    def init(self, *a, **kw):
        opened(self, *a, **kw)
        caches.append(self)
    monkeypatch.setattr(ReplyCache, "__init__", init)
    monkeypatch.setattr(decision, "save_ledger", save)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        result = run_study(load_study(root, steps=2, params=OPENAI))
    assert result.status == "completed" and max(checked) == 12 * 3      # a step's three rounds, before it closes


def sweep_until_step_2(root, stub, tmp_path, **popen):
    """``desim sweep`` of two LLM runs (12 steps, 2 workers) against ``stub`` as a process of its own, returned
    once both runs have closed step 2 in their workers' stores."""
    import os
    import subprocess
    import sys
    import time

    from desim.store import journal
    env = {**os.environ, "DESIM_LLM_BASE_URL": stub.base_url}
    log = tmp_path / "sweep.log"
    with log.open("w") as out:      # a file, not a pipe nobody reads while the sweep writes
        proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "sweep", str(root), "--set", "llm_kind=openai",
                                 "--replicates", "2", "--workers", "2", "--steps", "12", "-q"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, **popen)
    deadline = time.monotonic() + float(os.environ.get("DESIM_TEST_HANG_S", "600"))
    while time.monotonic() < deadline:
        closed = [journal.last_commit(j) for j in (root / "runs").glob("sweeps/*/**/journal")]
        if len(closed) == 2 and all(c and c["step"] >= 2 for c in closed):
            return proc
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    raise AssertionError("the sweep's runs never closed step 2")


def resumed_paying(root, stub, sweep_id: str) -> int:
    """``desim sweep --resume`` against ``stub`` once the killed runs' requests are all answered (to nobody);
    returns the replies the resume was sent."""
    import os
    import time

    from desim.cli import main
    while stub.stats.in_flight:
        time.sleep(0.01)
    before = stub.stats.replies
    os.environ["DESIM_LLM_BASE_URL"] = stub.base_url
    try:
        assert main(["sweep", str(root), "--resume", sweep_id, "-q"]) == 0
    finally:
        del os.environ["DESIM_LLM_BASE_URL"]
    return stub.stats.replies - before


def paid_and_abandoned(root) -> tuple[int, int]:
    """The study's paid llm_calls rows, and of them those written as 'abandoned'."""
    [(paid, abandoned)] = query(root, "SELECT count(*) FILTER (WHERE NOT cached AND outcome <> 'unavailable'), "
                                      "count(*) FILTER (WHERE outcome = 'abandoned') FROM llm_calls")
    return paid, abandoned


@pytest.mark.slow
def test_a_killed_sweep_s_paid_calls_reach_llm_calls_when_it_is_resumed(study_copy, tmp_path, capsys):
    """SIGKILL to a sweep of two LLM runs (its workers too) after each run closed some steps in its worker's
    own store: nobody merges those stores, and --resume runs both again from step 0, taking the replies from
    the cache. The steps the killed attempt closed were paid for; they were lost with the leftover store
    (72 paid calls missing from an effect's accounting). Now the resumed runs write them as 'abandoned'."""
    import os
    import signal

    import pyarrow as pa

    from desim.cli import main
    from desim.store import journal
    from desim.store.ledger import load_ledger, paid_as_abandoned
    root = llm_study(study_copy)
    with running_stub(latency_ms=100) as stub:     # a round takes 0.1 s: the kill comes mid-run
        proc = sweep_until_step_2(root, stub, tmp_path, start_new_session=True)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        sweep_id = next((root / "runs" / "sweeps").iterdir()).name
        closed = []                                 # paid rows of the steps the killed attempts closed
        for folder in (root / "runs").glob("sweeps/*/**/journal"):
            _, logged = journal.read(folder)
            closed += [r for batch in logged.get("llm_calls", [])
                       for r in paid_as_abandoned(pa.Table.from_batches([batch])).to_pylist()]
        assert len(closed) >= 2 * 2 * 12 * 3        # each run's steps 1 and 2
        # and those of the step in flight, in the runs' ledgers (which may still list a step just closed)
        ledgers = [r for p in (root / "runs" / "llm_unrecorded").glob("*.json") for r in load_ledger(p)]
        kept = len({tuple(sorted(r.items())) for r in closed + ledgers})
        capsys.readouterr()
        assert main(["runs", str(root)]) == 0         # no run of the killed sweep was merged: its plan says it
        last = capsys.readouterr().out.splitlines()[-1]
        assert last.startswith(f"sweep {sweep_id}  ") and last.endswith(
            f"  0 of 2 runs completed; finish it: desim sweep {root} --resume {sweep_id}")
        paid_now = resumed_paying(root, stub, sweep_id)
    paid, abandoned = paid_and_abandoned(root)
    assert abandoned == kept
    assert paid == kept + paid_now                  # every reply paid, in either invocation, is one row
    # and the sweep's summary says what its runs cost, over both invocations
    assert f"  llm: the sweep's 2 runs paid for {paid:,} calls, tokens_in " in capsys.readouterr().out
    assert not list((root / "runs" / "llm_unrecorded").glob("*.json"))


@pytest.mark.slow
def test_a_sweep_whose_workers_die_keeps_what_they_paid_for(study_copy, tmp_path):
    """SIGKILL to the worker processes alone, after each run closed step 2: the sweep goes on, records both runs
    as crashed and removed their stores with its folder, and the calls of the steps they had closed were lost
    (216 of 300 paid replies in a reviewer's case). Now they are kept in each run's ledger first."""
    import os
    import signal
    import subprocess

    from desim.store.ledger import load_ledger

    def children(pid: int) -> list[int]:
        listed = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
        return [int(x) for x in listed.split()]
    root = llm_study(study_copy)
    with running_stub(latency_ms=100) as stub:
        proc = sweep_until_step_2(root, stub, tmp_path)
        for worker in (w for child in children(proc.pid) for w in children(child)):   # the forkserver's children
            os.kill(worker, signal.SIGKILL)
        assert proc.wait() == 2                     # the sweep ends, its two runs failed (crashed)
        ledgers = [r for p in (root / "runs" / "llm_unrecorded").glob("*.json") for r in load_ledger(p)]
        assert len(ledgers) >= 2 * 2 * 12 * 3       # each run's steps 1 and 2 at least, not only its step in flight
        sweep_id = query(root, "SELECT sweep_id FROM sweeps")[0][0]
        paid_now = resumed_paying(root, stub, sweep_id)
    paid, abandoned = paid_and_abandoned(root)
    assert abandoned == len(ledgers) and paid == len(ledgers) + paid_now
    assert not list((root / "runs" / "llm_unrecorded").glob("*.json"))


def test_a_sweep_another_live_process_runs_is_not_run_again_beside_it(tmp_path):
    """Resuming a sweep while it still runs (desim runs listed it as unfinished) took its live workers' stores
    for leftovers of a killed attempt, and removed them under the workers' feet."""
    import json
    import socket
    import subprocess

    from desim.experiments.sweep import run_sweep
    from desim.experiments.sweep.plan import SweepError
    from desim.store import StudyLayout
    from walk_study import write_walk_study
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    swept = run_sweep(root, {}, replicates=2, workers=1)
    folder = StudyLayout(root).sweep_dir(swept.sweep_id)
    folder.mkdir(parents=True)
    other = subprocess.Popen(["sleep", "600"])
    try:
        StudyLayout.owner_file(folder).write_text(json.dumps({"pid": other.pid, "host": socket.gethostname()}))
        with pytest.raises(SweepError, match=rf"sweep {swept.sweep_id} is running \(pid {other.pid} on "):
            run_sweep(root, {}, replicates=2, workers=1, resume=swept.sweep_id)
    finally:
        other.kill()
        other.wait()
    assert run_sweep(root, {}, replicates=2, workers=1, resume=swept.sweep_id).completed == 2   # its owner gone


def test_a_run_attempted_again_over_a_leftover_worker_store_keeps_what_the_first_attempt_paid(study_copy,
                                                                                                tmp_path):
    """An effect's control whose parent was killed before it merged the worker's store: the resumed effect
    runs the control again into the same worker file (taking the replies from the cache). The first attempt's
    paid rows are added to the second's as 'abandoned', so the run's paid rows are the replies the server sent."""
    import os

    import pyarrow.parquet as pq

    from desim.experiments.sweep.worker import RunTask, execute_run
    from desim.store import StudyLayout
    root = llm_study(study_copy)
    worker = tmp_path / "effects" / "ef1" / "ef1-c0.duckdb"
    worker.parent.mkdir(parents=True)
    task = RunTask(str(root), None, "ef1-c0", 7, {**load_study(root).simulation.parameters, **OPENAI}, 2,
                   str(worker))
    with running_stub() as stub:
        os.environ["DESIM_LLM_BASE_URL"] = stub.base_url
        try:
            assert execute_run(task).status == "completed"
            first = stub.stats.replies
            assert execute_run(task).status == "completed"
        finally:
            del os.environ["DESIM_LLM_BASE_URL"]
        assert stub.stats.replies == first == 12 * 3 * 2       # the second attempt paid nothing
    calls = pq.read_table(StudyLayout.at(worker).run_dir("ef1-c0") / "llm_calls.parquet").to_pylist()
    assert sum(not c["cached"] for c in calls) == sum(c["outcome"] == "abandoned" for c in calls) == first
    assert sum(c["cached"] for c in calls) == first                # the second attempt's own rows: cache hits
    assert not StudyLayout(root).llm_unrecorded("ef1-c0").exists()


def test_a_branch_and_an_effect_say_what_they_paid_for(study_copy, capsys):
    """desim run printed its llm line; a branch (396 paid calls in a reviewer's case) and an effect (2,484)
    printed nothing of what they cost."""
    from desim.cli import main
    import json
    root = llm_study(study_copy)
    set_simulation(root, record_rounds=True)
    sim = json.loads((root / "simulation" / "simulation.json").read_text())
    sim["parameters"]["campaign"] = 0.9         # the campaign's position, as a parameter a branch may change
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    env = json.loads((root / "environment" / "environment.json").read_text())
    env["scheduled_events"][0]["value"] = "$campaign"
    (root / "environment" / "environment.json").write_text(json.dumps(env))
    with running_stub() as stub:
        import os
        os.environ["DESIM_LLM_BASE_URL"] = stub.base_url
        try:
            parent = run_study(load_study(root, steps=3, params=OPENAI)).run_id
            capsys.readouterr()
            before = stub.stats.replies
            assert main(["branch", str(root), "--from-run", parent, "--at-step", "2", "--set", "campaign=0.1",
                         "-q"]) == 0
            branch_paid = stub.stats.replies - before
            out = capsys.readouterr().out
            before = stub.stats.replies
            assert main(["effect", str(root), "--at-step", "2", "--set", "campaign=0.1", "--control-set",
                         "llm_kind=openai", "--replicates", "2", "--workers", "1", "--steps", "3", "-q"]) == 0
            effect_out = capsys.readouterr().out
            effect_paid = stub.stats.replies - before
        finally:
            del os.environ["DESIM_LLM_BASE_URL"]
    assert branch_paid == 12 * 3 * 2 and f"  llm: calls {branch_paid}, " in out
    assert effect_paid > 0 and f"  llm: the effect's 4 runs paid for {effect_paid:,} calls" in effect_out
