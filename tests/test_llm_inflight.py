"""A request that fails for good stops its round, but the requests already on the wire are let finish: the
server generates (and bills) their completions whether or not the client waits, so they are cached and
recorded, never paid for again. With ``on_unavailable: fallback`` only the agents left unanswered fall to
the rule, and a resume re-executes such a stored step as it went (asking nothing) instead of refusing."""
from __future__ import annotations

import pytest
from llm_servers import HostileServer, one_fails_while_others_run
from llm_study import llm_study, query

from desim import RunFailed, load_study, run_study
from desim.experiments.branches import resume
from desim.llm.stub import running_stub

OPENAI = {"llm_kind": "openai"}


def paid(root, run_id):
    return query(root, f"SELECT count(*) FROM llm_calls WHERE run_id = '{run_id}' AND NOT cached "
                       "AND model <> 'scripted' AND outcome <> 'unavailable'")[0][0]


def test_the_replies_on_the_wire_when_a_round_fails_are_kept_and_not_paid_again(study_copy, monkeypatch):
    root = llm_study(study_copy, max_retries=0, concurrency=4)
    with HostileServer(one_fails_while_others_run()) as server:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", server.base_url)
        with pytest.raises(RunFailed, match="step 1 round 0"):
            run_study(load_study(root, steps=2, params=OPENAI))
        generated = server.generated
    assert generated >= 3               # the three sent beside the failing one were on the wire
    run_id = query(root, "SELECT run_id FROM runs")[0][0]
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        resumed = resume(root, run_id)
        new = stub.stats.replies
    assert resumed.status == "completed"
    assert resumed.counters["llm"]["cache_hits"] == generated      # the first attempt's replies, from the cache
    assert paid(root, run_id) == generated + new                   # every completion made, recorded once


def test_a_fallback_round_leaves_only_the_unanswered_to_the_rule_and_resumes(study_copy, monkeypatch):
    # 12 agents, 3 rounds a step; the budget stops the run in step 2, after step 1 (with its fallbacks) is stored
    root = llm_study(study_copy, max_retries=0, concurrency=4, on_unavailable="fallback", max_calls=40)
    with HostileServer(one_fails_while_others_run(0.05)) as server:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", server.base_url)
        first = run_study(load_study(root, steps=2, params=OPENAI))
        generated = server.generated
    assert first.status == "interrupted" and first.steps_done == 1
    outcomes = dict(query(root, "SELECT outcome, count(*) FROM llm_calls WHERE step = 1 AND round = 0 GROUP BY ALL"))
    assert outcomes["ok"] >= 3 and outcomes["ok"] + outcomes["unavailable"] == 12
    sources = dict(query(root, "SELECT action_source, count(*) FROM panel WHERE step = 1 GROUP BY ALL"))
    assert sources.get("llm", 0) == 12 - sources.get("fallback", 0) and sources.get("fallback", 0) < 12
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        resumed = resume(root, first.run_id)        # step 1 is re-executed: its unanswered agents as they were
        new = stub.stats.replies
    assert resumed.status == "completed"
    assert not query(root, "SELECT * FROM llm_calls WHERE step = 1 AND outcome = 'abandoned'")
    assert paid(root, first.run_id) == generated + new


def test_the_token_budget_learns_a_server_that_counts_more_prompt_tokens_than_the_estimate(study_copy, monkeypatch):
    """The check before a round estimates prompts at four characters a token; a server counting 1,000 for
    prompts estimated at about 360 took a run 26 % past its max_tokens_budget. The estimate is now scaled by
    what the server counted: the run stops before the round that would go over."""
    import json as _json

    from llm_servers import http_response

    async def counting_more(server, reader, writer):
        while True:
            await server.read_request(reader)
            body = {"object": "chat.completion", "usage": {"prompt_tokens": 1000, "completion_tokens": 50},
                    "choices": [{"index": 0, "message": {"role": "assistant",
                                                         "content": '{"opinion": 0.5, "argument": "ok"}'}}]}
            await server.send(writer, http_response(200, _json.dumps(body).encode()))

    root = llm_study(study_copy, max_tokens_budget=20_000)
    with HostileServer(counting_more) as server:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", server.base_url)
        result = run_study(load_study(root, steps=3, params=OPENAI))
    llm = result.counters["llm"]
    assert result.status == "interrupted" and llm["calls"] == server.requests >= 12
    assert llm["tokens_in"] + llm["tokens_out"] <= 20_000


def test_a_fallback_before_the_last_stored_step_resumes_with_the_same_history(study_copy, monkeypatch):
    """An agent left unanswered in step 1's last round remembers that action in step 2's prompt. Its rationale
    named the failure, which a re-execution cannot repeat, so the resume's step 2 prompt missed the cache
    and the resume was refused. The rationale of an unanswered request is now the same whatever the failure."""
    from llm_servers import completion, http_response

    async def fails_25th(server, reader, writer):
        while True:
            await server.read_request(reader)
            if server.requests == 25:          # step 1, round 2 (its last round): one request fails
                await server.send(writer, http_response(500, b'{"error": {"message": "overloaded"}}', "Error"))
                continue
            await server.send(writer, http_response(200, completion('{"opinion": 0.5, "argument": "ok"}')))

    root = llm_study(study_copy, max_retries=0, concurrency=4, on_unavailable="fallback", max_calls=75)
    with HostileServer(fails_25th) as server:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", server.base_url)
        first = run_study(load_study(root, steps=4, params=OPENAI))
    assert first.status == "interrupted" and first.steps_done == 2
    assert query(root, "SELECT count(*) FROM llm_calls WHERE outcome = 'unavailable'")[0][0] >= 1
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        resumed = resume(root, first.run_id)
    assert resumed.status == "completed"


def test_nothing_new_is_sent_once_a_request_has_failed_for_good():
    """The failing request gave its slot back before the round heard of the failure, so a waiting request took
    it and went out. Now the round is stopping before the slot is given back: the waiter returns it unsent."""
    import asyncio

    from llm_servers import completion, http_response

    from desim.llm.client import ChatClient
    from desim.llm.config import LLMConfig

    async def first_fails(server, reader, writer):
        while True:
            await server.read_request(reader)
            status = 500 if server.requests == 1 else 200
            await server.send(writer, http_response(status, completion('{"opinion": 0.5, "argument": "ok"}')))

    with HostileServer(first_fails) as server:
        client = ChatClient(LLMConfig(base_url=server.base_url, max_retries=0, concurrency=1), None)
        bodies = [{"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(4)]

        async def round_():
            try:
                return await client.complete_many(bodies, [f"agent {i}" for i in range(4)], "step 1 round 0")
            finally:
                await client.aclose()

        replies, failure = asyncio.run(round_())
        sent = server.requests
    assert failure is not None and "agent 0" in str(failure)
    assert sent == 1 and replies == {}
