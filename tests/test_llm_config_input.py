"""What a user gives the LLM layer, checked where it is read: the ``llm`` block of ``simulation.json`` (an
unknown key close to a known one says which, as every study file does) and ``DESIM_LLM_API_KEY`` (a key
with a newline or a space is refused naming the variable, not sent and taken for a server that is down)."""
from __future__ import annotations

import time

import pytest
from llm_study import llm_study

from desim.cli import main
from desim.errors import StudyConfigError
from desim.llm.config import ENV_API_KEY, api_key, load_llm_config
from desim.llm.errors import LLMError
from desim.llm.stub import running_stub

SECRET = "sk-secret-7f3a9c"


# --- DESIM_LLM_API_KEY -------------------------------------------------------------------------
@pytest.mark.parametrize("key, what", [
    (SECRET + "\n", "a newline at its end"),
    (SECRET + "\r\n", "a carriage return at character 17 of 18"),
    (" " + SECRET, "a space at its start"),
    ("sk-secret 7f3a9c", "a space at character 10 of 16"),
    ("sk-\tsecret", "a tab at character 4 of 10"),
    ("sk-\x07secret", r"a control character \(U\+0007\) at character 4 of 10"),
    ("\ufeffsk-secret", r"an invisible formatting character \(U\+FEFF\) at its start"),
    ("sk-sécret", r"a character outside ASCII \(U\+00E9\) at character 5 of 9"),
])
def test_an_api_key_with_whitespace_or_control_characters_is_refused_naming_the_variable(key, what):
    with pytest.raises(LLMError, match=f"^{ENV_API_KEY} has {what}: ") as info:
        api_key({ENV_API_KEY: key})
    assert key.strip() not in str(info.value) and "secret" not in str(info.value)     # the key is never shown


def test_a_plain_api_key_or_none_is_taken_as_it_is():
    assert api_key({ENV_API_KEY: SECRET}) == SECRET
    assert api_key({ENV_API_KEY: "sk-proj_A1b2.C3~d4+e5/f6=="}) == "sk-proj_A1b2.C3~d4+e5/f6=="
    assert api_key({ENV_API_KEY: ""}) is None and api_key({}) is None


def test_a_run_with_a_key_that_ends_in_a_newline_fails_at_once_saying_so(study_copy, monkeypatch, capsys):
    """Sent as it was, aiohttp refused the header (a ValueError), which was retried and reported as the
    server being down; now the run fails at its first request, before anything is sent, naming the variable."""
    root = llm_study(study_copy, max_retries=2, backoff_s=0.2)
    with running_stub() as stub:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", stub.base_url)
        monkeypatch.setenv(ENV_API_KEY, SECRET + "\n")
        started = time.monotonic()
        status = main(["run", str(root), "--set", "llm_kind=openai", "--steps", "1", "--quiet"])
        took = time.monotonic() - started
        sent = stub.stats.requests
    err = capsys.readouterr().err
    assert status == 2
    assert "desim: error: run " in err and f"LLMError: {ENV_API_KEY} has a newline at its end" in err, err
    assert "attempts" not in err and SECRET not in err
    assert sent == 0 and took < 5


# --- the llm block: did you mean ---------------------------------------------------------------
def test_a_misspelt_key_of_the_llm_block_says_which_key_it_may_be():
    with pytest.raises(StudyConfigError) as info:
        load_llm_config({"max_call": 3, "concurency": 4, "on_unavailble": "fallback", "colour": "red"}, environ={})
    assert info.value.problems == [
        ("llm.max_call", "unknown key; did you mean 'max_calls'? (unknown keys are not allowed)"),
        ("llm.concurency", "unknown key; did you mean 'concurrency'? (unknown keys are not allowed)"),
        ("llm.on_unavailble", "unknown key; did you mean 'on_unavailable'? (unknown keys are not allowed)"),
        ("llm.colour", "unknown key (check the spelling; unknown keys are not allowed)")]
    assert str(info.value).startswith("simulation/simulation.json: llm.max_call: unknown key; did you mean")


def test_the_llm_block_follows_the_rule_of_every_study_file():
    # a key the block gives already is not what a second one meant (as for the top-level keys)
    with pytest.raises(StudyConfigError) as info:
        load_llm_config({"max_calls": 3, "max_call": 4}, environ={})
    assert info.value.problems == [("llm.max_call", "unknown key (check the spelling; unknown keys are not allowed)")]
    # a base_url from the environment is the machine's: the file's misspelt one is still named
    with pytest.raises(StudyConfigError) as info:
        load_llm_config({"base_ur": "http://10.0.0.1:8000/v1"}, environ={"DESIM_LLM_BASE_URL": "http://x:1/v1"})
    assert info.value.problems == [("llm.base_ur", "unknown key; did you mean 'base_url'? (unknown keys are not "
                                                   "allowed)")]
    # other problems are as they were
    with pytest.raises(StudyConfigError) as info:
        load_llm_config({"concurrency": 0}, environ={})
    assert [field for field, _ in info.value.problems] == ["llm.concurrency"]


def test_desim_run_says_did_you_mean_for_a_misspelt_llm_key(study_copy, capsys):
    root = llm_study(study_copy, max_call=3)
    assert main(["run", str(root), "--steps", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert ("simulation/simulation.json: llm.max_call: unknown key; did you mean 'max_calls'? "
            "(unknown keys are not allowed)") in err, err
