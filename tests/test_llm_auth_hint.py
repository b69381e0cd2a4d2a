"""A server that refuses the request's credentials (HTTP 401/403) is not "a server to fix": the error says
whether an API key was sent, and names the variable that holds it."""
from __future__ import annotations

import pytest
from llm_servers import HostileServer, echoing
from llm_study import llm_study

from desim import RunFailed, load_study, run_study


@pytest.mark.parametrize("key", [None, "sk-wrong"])
def test_a_refused_key_is_named_as_the_cause(study_copy, monkeypatch, key):
    root = llm_study(study_copy, max_retries=0)
    if key:
        monkeypatch.setenv("DESIM_LLM_API_KEY", key)
    else:
        monkeypatch.delenv("DESIM_LLM_API_KEY", raising=False)
    with HostileServer(echoing(401)) as server:
        monkeypatch.setenv("DESIM_LLM_BASE_URL", server.base_url)
        with pytest.raises(RunFailed) as failed:
            run_study(load_study(root, steps=1, params={"llm_kind": "openai"}))
    said = str(failed.value)
    assert "HTTP 401" in said
    assert ("is not accepted" if key else "no API key was sent: set DESIM_LLM_API_KEY") in said
    assert "sk-wrong" not in said                       # the key itself is never shown
