"""The LLM layer against hostile loopback servers: a run fails (or falls back) in bounded time and
memory whatever the server does, never shows a credential, and survives losing one of two endpoints.

Time bounds here are generous upper bounds that tell "bounded" from "hanging" on a loaded machine
(the old client took ceil(N / concurrency) x attempts x timeout, or for ever against a trickle);
speed is measured in benchmarks/bench_llm.py.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from llm_servers import (HostileServer, dead_url, echoing, first_silent, garbage, huge, replying, silent,
                         trickling)
from llm_study import llm_study, panel, query

from desim import RunFailed, load_study, run_study
from desim.llm import LLMConfig
from desim.llm.stub import stub_process
from waits import HANG_S

FAST = {"max_retries": 3, "backoff_s": 0.1, "backoff_max_s": 1.0, "timeout_s": 1.0, "concurrency": 8}


def fail_against(root, url, monkeypatch, n_agents=48, steps=1):
    """Run the study against ``url``; the failure's message and how long the run took to fail."""
    monkeypatch.setenv("DESIM_LLM_BASE_URL", url)
    spec = load_study(root, steps=steps, params={"n_agents": n_agents, "llm_kind": "openai"})
    started = time.perf_counter()
    with pytest.raises(RunFailed) as failed:
        run_study(spec)
    return str(failed.value), time.perf_counter() - started


def test_a_dead_server_fails_the_run_within_one_request_deadline(study_copy, monkeypatch):
    root = llm_study(study_copy, **FAST)
    url = dead_url()
    message, elapsed = fail_against(root, url, monkeypatch)
    cfg = LLMConfig(**FAST)
    # refused at once: only the back-off between the first request's 4 attempts (0.1 + 0.2 + 0.4 s at
    # most) stands between the start and the failure; 48 agents no longer wait their turn
    assert cfg.backoff_total_s() == pytest.approx(0.7)
    assert elapsed < cfg.backoff_total_s() + 10, f"{elapsed:.1f} s"
    assert "step 1 round 0 agent" in message and url in message and "failed after 4 attempts" in message
    assert "ClientConnectorError" in message
    assert query(root, "SELECT status, last_step, (SELECT count(*) FROM llm_calls) FROM runs") == [("failed", 0, 0)]


def test_a_silent_server_fails_after_one_requests_attempts_not_every_requests(study_copy, monkeypatch):
    llm = {**FAST, "max_retries": 2, "timeout_s": 0.5, "backoff_s": 0.05}
    root = llm_study(study_copy, **llm)
    with HostileServer(silent) as server:
        message, elapsed = fail_against(root, server.base_url, monkeypatch)
        sent = server.requests
    # 3 attempts of 0.5 s by the first request, with 0.05 + 0.1 s of back-off between them
    assert 3 * 0.5 <= elapsed < 3 * 0.5 + 0.15 + 10, f"{elapsed:.1f} s"
    assert "failed after 3 attempts" in message and "no complete answer within 0.5 s" in message
    # the first wave, then one probe at a time: not 48 agents x 3 attempts
    assert 8 <= sent <= 8 + 2, sent


def test_a_trickling_server_cannot_stretch_an_attempt_past_its_deadline(study_copy, monkeypatch):
    llm = {**FAST, "max_retries": 1, "timeout_s": 0.5, "backoff_s": 0.05}
    root = llm_study(study_copy, **llm)
    with HostileServer(trickling) as server:
        message, elapsed = fail_against(root, server.base_url, monkeypatch, n_agents=12)
        trickled = server.bytes_sent
    assert elapsed < 2 * 0.5 + 0.05 + 10, f"{elapsed:.1f} s"       # one byte every 0.1 s kept it alive
    assert "no complete answer within 0.5 s" in message and "failed after 2 attempts" in message
    assert trickled > 0


@pytest.mark.slow
def test_the_round_deadline_stops_a_round_that_outlives_it(study_copy, monkeypatch):
    """A round has one request deadline plus one ``timeout_s`` per further wave. A server that lets
    every request's first attempt time out and answers its retry keeps each request within its own
    deadline, but the round as a whole is stopped."""
    cfg = LLMConfig(timeout_s=2, max_retries=3, backoff_max_s=5, concurrency=16)
    assert cfg.request_deadline_s() == 4 * 2 + 3 * 5
    assert cfg.round_deadline_s(100) == 23 + 6 * 2 and cfg.round_deadline_s(1) == 23
    llm = {"max_retries": 1, "timeout_s": 0.4, "backoff_s": 0.2, "backoff_max_s": 0.2, "concurrency": 1}
    root = llm_study(study_copy, **llm)
    with HostileServer(first_silent) as server:
        message, elapsed = fail_against(root, server.base_url, monkeypatch, n_agents=12)
    deadline = LLMConfig(**llm).round_deadline_s(12)
    assert deadline == pytest.approx(2 * 0.4 + 0.2 + 11 * 0.4)
    assert "step 1 round 0" in message and f"not answered within its deadline of {deadline:g} s" in message
    assert deadline <= elapsed < deadline + 10


def rss_of_run(root, url, tmp_path):
    """Peak memory (MiB) of a ``desim run`` process against ``url``, its exit status and stderr."""
    env = {**os.environ, "DESIM_LLM_BASE_URL": url}
    err = tmp_path / f"stderr-{time.monotonic_ns()}"
    with open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(root), "--steps", "1",
                                 "--set", "llm_kind=openai"], env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, proc.returncode, err.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-close"])
def test_huge_replies_are_refused_while_read(study_copy, tmp_path, declared):
    """Twelve 64 MiB replies at once (the old client held them all: 4.2 GiB for twelve 32 MiB)."""
    root = llm_study(study_copy, max_retries=1, backoff_s=0.05, concurrency=12, max_reply_bytes=65536, cache=False)
    with stub_process() as stub:                       # the same run against a well-behaved server
        baseline, status, stderr = rss_of_run(root, stub.base_url, tmp_path)
    assert status == 0, stderr
    with HostileServer(huge(64 * 2**20, declared)) as server:
        peak, status, stderr = rss_of_run(root, server.base_url, tmp_path)
        requests = server.requests
    assert status == 2, stderr
    assert ("over" if declared else "grew past") + " llm.max_reply_bytes=65536" in stderr
    assert requests >= 12
    assert peak < baseline + 100, f"peak RSS {peak:.0f} MiB against {baseline:.0f} MiB"


def test_hostile_reply_text_is_parsed_in_linear_time():
    from pydantic import BaseModel

    from desim.llm.replies import first_json_object, parse_reply

    class Reply(BaseModel):
        opinion: float

    started = time.perf_counter()
    for text in ("{" * 250_000, "{" * 125_000 + "}" * 125_000, '{"a": "' + "{" * 250_000,
                 '{"' * 125_000, "[" * 250_000):
        reply, why = parse_reply(text, Reply)
        assert reply is None and why
    assert parse_reply("x {" * 80_000 + '{"opinion": 0.5}', Reply)[0].opinion == 0.5   # found behind them
    elapsed = time.perf_counter() - started
    assert elapsed < 10, f"{elapsed:.1f} s"        # the old scan took 38.5 s for 20,000 '{'
    # still the first balanced object, strings and all
    assert first_json_object('noise {"a": "}{", "b": {"c": 1}} {"d": 2}') == '{"a": "}{", "b": {"c": 1}}'
    assert first_json_object('{ unclosed {"opinion": 0.25} tail') == '{"opinion": 0.25}'
    assert parse_reply('{ unclosed {"opinion": 0.25}', Reply)[0].opinion == 0.25


def test_replies_full_of_braces_fall_back_quickly(study_copy, monkeypatch):
    root = llm_study(study_copy, max_retries=0)
    with HostileServer(replying("{" * 20_000 + '"opinion": ' + "[" * 20_000)) as server:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", server.base_url)
        started = time.perf_counter()
        result = run_study(load_study(root, steps=1, params={"llm_kind": "openai"}))
        elapsed = time.perf_counter() - started
    assert result.status == "completed" and result.counters["llm"]["fallbacks"] == 36
    # completed, but every decision is the rule's: said, not hidden behind the status
    assert [w for w in result.warnings if "fell back" in w] == [
        "36 of 36 LLM decisions (100 %) fell back to the study's rule (36 unusable replies): the panel holds the "
        "rule's actions for them (action_source 'fallback'), and llm_calls.outcome says which"]
    assert elapsed < 30, f"{elapsed:.1f} s"        # 36 such replies: 23 min with the old scan
    assert query(root, "SELECT DISTINCT outcome FROM llm_calls") == [("fallback",)]


def test_a_server_answering_garbage_fails_the_run_naming_it(study_copy, monkeypatch):
    root = llm_study(study_copy, **{**FAST, "max_retries": 1})
    with HostileServer(garbage) as server:
        message, elapsed = fail_against(root, server.base_url, monkeypatch, n_agents=12)
    assert server.base_url in message and "failed after 2 attempts" in message
    assert elapsed < 10


def test_fallback_on_unavailability_completes_the_run_with_the_rule(study_copy, monkeypatch):
    root = llm_study(study_copy, max_retries=1, backoff_s=0.05, on_unavailable="fallback")
    monkeypatch.setenv("DESIM_LLM_BASE_URL", dead_url())
    result = run_study(load_study(root, steps=2, params={"llm_kind": "openai"}))
    assert result.status == "completed"
    llm = result.counters["llm"]
    assert llm["calls"] == 0 and llm["fallbacks"] == 12 * 2 * 3
    assert any(w.startswith("72 of 72 LLM decisions (100 %) fell back to the study's rule (72 unanswered "
                            "requests)") for w in result.warnings)
    assert query(root, "SELECT outcome, count(*), count(endpoint) FROM llm_calls GROUP BY ALL") == \
        [("unavailable", 72, 0)]
    sources = query(root, "SELECT DISTINCT action_source, action_rationale LIKE 'LLM unavailable (%' FROM panel")
    assert sources == [("fallback", True)]


USER, PASSWORD = "canary-user", "CANARY-pa55w0rd-7f3e"
KEY = "sk-CANARY-key-0c1d2e3f4a5b"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["userinfo", "api_key"])
def test_credentials_never_leave_the_request(study_copy, tmp_path, how):
    """A server that echoes its request headers (credentials included) into its errors: the canary
    reaches the server, and no message, file, store row, report or dashboard answer."""
    from dashboard_helpers import server_thread

    root = llm_study(study_copy, max_retries=1, backoff_s=0.05)
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    canaries = [PASSWORD, token, KEY, f"{USER}:"]
    with HostileServer(echoing(500, after=36)) as server:
        url = server.base_url
        env = {**os.environ, "DESIM_LLM_BASE_URL": url.replace("//", f"//{USER}:{PASSWORD}@")}
        if how == "api_key":
            env = {**os.environ, "DESIM_LLM_BASE_URL": url, "DESIM_LLM_API_KEY": KEY}
        run = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--steps", "2",
                              "--set", "llm_kind=openai"], env=env, capture_output=True, text=True, timeout=HANG_S)
        heads = "\n".join(server.heads)
    sent = f"Authorization: Basic {token}" if how == "userinfo" else f"Authorization: Bearer {KEY}"
    assert sent in heads                                   # the credential did travel, and was echoed
    assert run.returncode == 2 and "step 2 round 0" in run.stderr and "HTTP 500" in run.stderr
    assert "Authorization: ***" in run.stderr              # the echoed header is there, its value is not
    (run_id,), = query(root, "SELECT run_id FROM runs")
    report = subprocess.run([sys.executable, "-m", "desim.cli", "report", str(root), "--run", run_id],
                            capture_output=True, text=True, timeout=HANG_S)
    assert report.returncode == 0, report.stderr
    with server_thread(root.parent) as base:
        pages = [urllib.request.urlopen(base + path, timeout=HANG_S).read().decode()
                 for path in ("/api/studies", "/api/live", f"/api/studies/{root.name}",
                              f"/api/studies/{root.name}/live")]
    assert any("HTTP 500" in page for page in pages)       # the error is shown, scrubbed
    texts = [run.stdout, run.stderr, report.stdout, report.stderr, *pages]
    texts += [str(row) for row in query(root, "SELECT * FROM runs")]
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.parent.name == "live" for p in files) and any(p.suffix == ".html" for p in files)
    for canary in canaries:
        for text in texts:
            assert canary not in text
        for path in files:
            assert canary.encode() not in path.read_bytes(), path


def test_credentials_in_the_study_file_are_refused(study_copy):
    from desim import StudyConfigError
    from desim.run.assemble import assemble

    root = llm_study(study_copy, base_url=f"http://{USER}:{PASSWORD}@127.0.0.1:1/v1")
    with pytest.raises(StudyConfigError) as e:
        assemble(load_study(root))
    assert "llm.base_url" in str(e.value) and "DESIM_LLM_BASE_URL" in str(e.value)
    assert PASSWORD not in str(e.value)


def test_the_scrubber_masks_every_form_of_a_credential():
    from desim.llm.scrub import Scrubber

    scrub = Scrubber(KEY, [f"http://{USER}:{PASSWORD.replace('-', '%2D')}@10.0.0.1:9/v1"]).clean
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    text = (f"key {KEY}; basic {token}; raw {PASSWORD}; url http://{USER}:{PASSWORD}@10.0.0.1:9/v1; "
            f"other https://bob:hunter22@example.org/x; header 'authorization': 'Bearer sk-other'; "
            f"Proxy-Authorization: Basic Ym9iOmh1bnRlcjIy\r\n")
    clean = scrub(text)
    for secret in (KEY, token, PASSWORD, "hunter22", "sk-other", "Ym9iOmh1bnRlcjIy"):
        assert secret not in clean
    assert "http://***@10.0.0.1:9/v1" in clean and "https://***@example.org/x" in clean
    assert scrub("HTTP 500: nothing secret here") == "HTTP 500: nothing secret here"


@pytest.mark.slow
def test_two_endpoints_one_killed_mid_run_complete_with_the_single_endpoint_panel(study_copy, monkeypatch):
    root = llm_study(study_copy, concurrency=4, max_retries=4, backoff_s=0.05, timeout_s=5)
    single = llm_study(study_copy, name="single", concurrency=4, max_retries=4, backoff_s=0.05, timeout_s=5)
    params = {"n_agents": 30, "llm_kind": "openai"}
    with stub_process(latency_ms=30) as a, stub_process(latency_ms=30) as b, stub_process(latency_ms=30) as c:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", f"{a.base_url},{b.base_url}")
        killer = threading.Timer(0.05, a.kill)          # inside step 2's first rounds
        result = run_study(load_study(root, steps=3, params=params),
                           on_step=lambda step, metrics: step == 1 and killer.start())
        killer.join()
        monkeypatch.setenv("DESIM_LLM_BASE_URL", c.base_url)
        reference = run_study(load_study(single, steps=3, params=params))
        served_by_b = b.stats()["replies"]
    assert result.status == reference.status == "completed"
    assert [r[1:] for r in panel(root, result.run_id)] == [r[1:] for r in panel(single, reference.run_id)]
    by_step = query(root, "SELECT step, endpoint, count(*) FROM llm_calls GROUP BY ALL ORDER BY ALL")
    assert {(s, e) for s, e, _ in by_step if s == 1} == {(1, a.base_url), (1, b.base_url)}   # both served
    assert {e for s, e, _ in by_step if s == 3} == {b.base_url}                             # the survivor
    assert sum(n for _, e, n in by_step if e == b.base_url) == served_by_b
    assert query(root, "SELECT count(*), bool_and(outcome = 'ok'), sum(attempts - 1) FROM llm_calls") == \
        [(30 * 3 * 3, True, result.counters["llm"]["retries"])]
    assert query(single, "SELECT DISTINCT endpoint FROM llm_calls") == [(c.base_url,)]


def test_several_endpoints_from_the_file_or_the_environment():
    from desim.llm import load_llm_config

    cfg = load_llm_config({"base_url": ["http://10.0.0.1:8000/v1/", "http://10.0.0.2:8000/v1"]}, {})
    assert cfg.endpoints() == ["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"]
    env = {"DESIM_LLM_BASE_URL": "http://a:1/v1, http://b:2/v1,"}
    assert load_llm_config({}, env).endpoints() == ["http://a:1/v1", "http://b:2/v1"]
    from desim import StudyConfigError
    for bad in ([], ["ftp://x/v1"], "localhost:8000"):
        with pytest.raises(StudyConfigError, match="llm.base_url"):
            load_llm_config({"base_url": bad}, {})
    assert json.loads(cfg.model_dump_json())["max_reply_bytes"] == 256 * 1024
