"""The LLM layer without a server: configuration, prompts, reply parsing, the
stub's reply maker, and scripted mode running a real study through
prompt -> reply -> parse."""
from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from desim import Observation, Persona, StudyConfigError, load_study, run_study
from desim.run.assemble import assemble
from desim.llm import LLMConfig, PromptTemplate, load_llm_config
from desim.llm.config import api_key
from desim.llm.replies import fake_reply, parse_reply
from desim.llm.stub import request_schema
from storeq import read_only


class Vote(BaseModel):
    choice: str = Field(json_schema_extra={"enum": ["canteen", "delivery", "cook"]})
    certainty: float = Field(ge=0, le=1)
    reason: str = Field(max_length=80)


def llm_study(study_copy, **llm):
    """A fresh copy of opinion_diffusion_llm (with its base study beside it), ``llm`` merged into its block."""
    study_copy("opinion_diffusion")
    root = study_copy("opinion_diffusion_llm")
    path = root / "simulation" / "simulation.json"
    data = json.loads(path.read_text())
    data["llm"].update(llm)
    path.write_text(json.dumps(data))
    return root


def test_llm_block_errors_name_the_file_and_field(study_copy):
    root = llm_study(study_copy, concurrency=0, modle="gpt")
    spec = load_study(root)
    with pytest.raises(StudyConfigError) as e:
        assemble(spec)
    text = str(e.value)
    assert "simulation/simulation.json: llm.concurrency:" in text
    assert "simulation/simulation.json: llm.modle: unknown key" in text


def test_bad_llm_kind_is_named(study_copy):
    root = llm_study(study_copy)
    with pytest.raises(StudyConfigError, match="decision.args.llm_kind"):
        assemble(load_study(root, params={"llm_kind": "gpt"}))


def test_environment_overrides_url_and_model_and_holds_the_key():
    env = {"DESIM_LLM_BASE_URL": "http://10.0.0.5:9000/v1", "DESIM_LLM_MODEL": "llama",
           "DESIM_LLM_API_KEY": "sk-secret"}
    cfg = load_llm_config({"model": "qwen", "base_url": "http://127.0.0.1:1/v1", "temperature": 0.3}, env)
    assert (cfg.model, cfg.base_url, cfg.temperature) == ("llama", "http://10.0.0.5:9000/v1", 0.3)
    assert api_key(env) == "sk-secret"
    assert "sk-secret" not in cfg.model_dump_json()
    assert load_llm_config(None, {}).model == LLMConfig().model
    with pytest.raises(StudyConfigError, match="llm.api_key: a key in the study's files .* set it in DESIM_LLM_API_KEY"):
        load_llm_config({"api_key": "sk-secret"}, {})
    # a bad value from the environment names its variable, not simulation.json
    with pytest.raises(StudyConfigError, match=r"^environment variable DESIM_LLM_BASE_URL: llm\.base_url"):
        load_llm_config({"model": "qwen"}, {"DESIM_LLM_BASE_URL": "127.0.0.1:8901"})
    with pytest.raises(StudyConfigError, match=r"^simulation/simulation\.json: llm\.base_url"):
        load_llm_config({"base_url": "127.0.0.1:8901"}, {})


def test_parse_reply_is_tolerant_but_checks_the_schema():
    reply, why = parse_reply('Sure! ```json\n{"choice": "cook", "certainty": 0.8, "reason": "cheap {really}"}\n```',
                             Vote)
    assert why == "" and reply.choice == "cook" and reply.reason == "cheap {really}"
    assert parse_reply('{"choice": "cook", "certainty": 0.8, "reason": "cut', Vote)[0] is None
    assert "certainty" in parse_reply('{"choice": "cook", "certainty": 7, "reason": "x"}', Vote)[1]
    assert parse_reply("I would rather not say.", Vote) == (None, "no JSON object in the reply")
    # no coercion: the schema sent asks for a number, and true or "0.8" is none (a fallback, counted)
    for certainty in ("true", '"0.8"'):
        reply, why = parse_reply('{"choice": "cook", "certainty": %s, "reason": "x"}' % certainty, Vote)
        assert reply is None and why.startswith("certainty: Input should be a valid number"), certainty
    assert parse_reply('{"choice": "cook", "certainty": 1, "reason": "x"}', Vote)[0].certainty == 1.0
    assert parse_reply(None, Vote)[0] is None


def test_fake_replies_fit_the_schema_and_depend_on_the_seed():
    schema = Vote.model_json_schema()
    replies = [fake_reply(schema, seed) for seed in range(40)]
    for r in replies:
        Vote.model_validate(r)
    assert fake_reply(schema, 7) == fake_reply(schema, 7)
    assert len({json.dumps(r, sort_keys=True) for r in replies}) > 30
    assert {r["choice"] for r in replies} == {"canteen", "delivery", "cook"}


def test_prompt_rounds_quadrants_memory_and_schema():
    template = PromptTemplate(role="You are a student.", peers_key="posts", hide=("secret",))
    persona = Persona(agent_id="s1", attributes={"dorm": "A", "budget": 300}, description="A second-year.")
    quadrants = dict(macro_physical={"price": 12}, local_physical={"queue_min": 4, "secret": 1},
                     macro_information={"news": "prices up"})
    opening = Observation(agent_id="s1", step=2, round_idx=0, local_information={"posts": []}, **quadrants)
    later = Observation(agent_id="s1", step=2, round_idx=1, **quadrants,
                        local_information={"posts": [{"from": "s2", "choice": "cook"}], "rumour": "x"})
    schema = Vote.model_json_schema()
    first = template.messages(persona, opening, [], schema, rounds=3)
    second = template.messages(persona, later, [], schema, rounds=3)
    user0, user1 = first[1]["content"], second[1]["content"]
    assert "opening round" in user0 and "neighbours' posts" not in user0.lower()
    assert "revise" in user1 and '{"choice":"cook","from":"s2"}' in user1 and "Your neighbours' posts" in user1
    for text in ("The world around everyone", "- price: 12", "Your own situation", "- queue_min: 4",
                 "News everyone has heard", "What you have heard yourself", "- rumour: x", "A second-year.",
                 "- budget: 300", "round 2 of 3"):
        assert text in user1
    assert "secret" not in user1
    assert template.messages(persona, later, [], schema, 3) == second          # deterministic
    assert request_schema({"messages": second}) == schema                      # the stub reads it back
    assert request_schema({"messages": [], "response_format": {
        "type": "json_schema", "json_schema": {"schema": {"type": "integer"}}}}) == {"type": "integer"}


def test_scripted_mode_runs_prompt_reply_parse_and_reproduces_the_rule(study_copy):
    """Scripted replies carry the rule's decision through JSON: the opinions must equal the rule study's."""
    root = llm_study(study_copy)
    rule_root = root.parent / "opinion_diffusion"
    llm_run = run_study(load_study(root, steps=4))
    rule_run = run_study(load_study(rule_root, steps=4, rounds=3, params={"n_agents": 12}))  # the LLM study's size
    assert llm_run.status == rule_run.status == "completed"
    assert llm_run.counters["llm"]["scripted"] == 12 * 4 * 3 and llm_run.counters["llm"]["calls"] == 0
    assert llm_run.counters["llm"]["fallbacks"] == 0 and not llm_run.warnings
    con = read_only(root / "runs" / "desim.duckdb")
    panel = con.execute("SELECT step, agent_id, CAST(state.opinion AS DOUBLE), action_source "
                        "FROM panel ORDER BY step, agent_id").fetchall()
    calls = con.execute("SELECT count(*), count(DISTINCT prompt_hash), min(model), bool_and(NOT cached) "
                        "FROM llm_calls").fetchone()
    posts = con.execute("SELECT count(*) FROM messages WHERE step = 2 AND round = 1 "
                        "AND json_extract_string(content, '$.argument') LIKE 'I stay open%'").fetchone()[0]
    con.close()
    con = read_only(rule_root / "runs" / "desim.duckdb")
    rule_panel = con.execute("SELECT step, agent_id, CAST(state.opinion AS DOUBLE) "
                             "FROM panel ORDER BY step, agent_id").fetchall()
    con.close()
    assert [row[:3] for row in panel] == rule_panel
    assert {row[3] for row in panel} == {"llm"}
    assert calls == (144, 144, "scripted", True)
    assert posts == 12


def test_scripted_dorm_deliberation_matches_the_rule_study(study_copy):
    """The dorm variant's scripted dry run goes through prompts and JSON and lands on the rule's choices."""
    rule_root = study_copy("dorm_deliberation")
    root = study_copy("dorm_deliberation_llm")
    llm_run = run_study(load_study(root, steps=3, params={"n_students": 30}))
    run_study(load_study(rule_root, steps=3, params={"n_students": 30}))
    sql = ("SELECT step, agent_id, state, action_kind, payload.choice "
           "FROM panel ORDER BY step, agent_id")
    rows = []
    for r in (root, rule_root):
        con = read_only(r / "runs" / "desim.duckdb")
        rows.append(con.execute(sql).fetchall())
        con.close()
    assert len(rows[0]) == 90 and rows[0] == rows[1]
    assert {r[3] for r in rows[0]} == {"choose_meal"}
    assert llm_run.counters["llm"]["scripted"] == 30 * 3 * 3


@pytest.mark.parametrize("usage", [{"prompt_tokens": -5, "completion_tokens": "lots"}, [1, 2],
                                   {"prompt_tokens": 3.5e9, "completion_tokens": True},
                                   {"prompt_tokens": 1e300, "completion_tokens": None}])
def test_a_reply_with_usage_counts_no_count_can_be_is_used_and_its_tokens_estimated(usage):
    """A 200 with a good message but a usage block of garbage was 'not a chat completion': retried (paid again)
    until the run failed. The reply is used; its token counts are estimated, as for a server that sends none."""
    import orjson

    from desim.llm.client import ChatClient
    body = {"messages": [{"role": "user", "content": "x" * 40}]}
    content = '{"opinion": 0.5}'
    raw = orjson.dumps({"choices": [{"message": {"content": content}}], "usage": usage})
    missing = ChatClient._read(orjson.dumps({"choices": [{"message": {"content": content}}]}), body)
    assert ChatClient._read(raw, body) == missing == (content, 10, 4)
