"""The LLM decision layer: OpenAI-compatible chat completions for a study's agents.

* ``config``: the ``llm`` block of ``simulation.json`` (:class:`LLMConfig`) and the
  ``DESIM_LLM_*`` environment variables;
* ``prompts``: :class:`PromptTemplate`, persona + four quadrants + memory as messages;
* ``client``: async HTTP (aiohttp) with deadlines, a reply size cap, retries and fail-fast rounds;
* ``endpoints``: several servers, a concurrency limit on each, back-off of one that stops answering;
* ``scrub``: credentials kept out of every message;
* ``cache``: replies keyed by a hash of the request, in a DuckDB file of the study;
* ``accounting``: the ``llm_calls`` rows and the run's counters;
* ``decision``: :class:`LLMDecision`, the base a study subclasses (``llm_kind``
  ``openai`` or ``scripted``), with budgets (:class:`BudgetExhausted`);
* ``stub``: a loopback server speaking the same API (``desim stub-llm``).

See ``docs/llm.md``.
"""
from desim.llm.config import LLMConfig, load_llm_config
from desim.llm.decision import LLMDecision
from desim.llm.errors import (
           BudgetExhausted,
           LLMError,
           LLMRequestRejected,
           LLMUnavailable,
)
from desim.llm.prompts import PromptTemplate

__all__ = ["BudgetExhausted", "LLMConfig", "LLMDecision", "LLMError", "LLMRequestRejected",
           "LLMUnavailable", "PromptTemplate", "load_llm_config"]
