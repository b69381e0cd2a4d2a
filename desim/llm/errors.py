"""Why the LLM layer stops a run.

* :class:`BudgetExhausted` — a ``max_calls`` or ``max_tokens_budget`` would be
  exceeded by the round about to start. It is raised before any request of
  that round is sent, so the step in flight is abandoned whole; the engine
  ends the run ``interrupted`` at the step boundary and ``desim run --resume``
  continues it (re-executed steps are served by the cache, free).
* :class:`LLMUnavailable` — a request still failed after every retry or its
  deadline (server down, timeouts, persistent 429/5xx), or a round outlived
  its deadline. The round stops at once and the run fails (unless the study
  sets ``on_unavailable: fallback``); completed steps and the replies already
  paid for are kept.
* :class:`LLMRequestRejected` — the server refused a request in a way retrying
  cannot fix (400 wrong model name, 401 bad key, ...).

Messages name the server URL and the step, round and agent, never the key
or a URL's ``user:password@`` (:mod:`desim.llm.scrub`).
"""
from __future__ import annotations

from desim.errors import NO_RESUME, DesimError, StopRun


class LLMError(DesimError, RuntimeError):
    """Base class of the LLM layer's errors."""


class LLMUnavailable(LLMError):
    """The server could not be reached or kept failing after all retries."""


class LLMRequestRejected(LLMError):
    """The server answered with an error that retrying will not fix."""


class BudgetExhausted(StopRun):
    """The next round would spend more calls or tokens than the budget allows."""

    def __init__(self, what: str, spent: int, needed: int, limit: int, step: int, round_idx: int):
        self.what, self.spent, self.needed, self.limit = what, spent, needed, limit
        self.step, self.round_idx = step, round_idx
        if needed > limit:      # a budget is per invocation: a resume starts at this round with the same one
            then = (f"that is more than the whole budget, so {NO_RESUME} (a resumed run has the "
                    f"run's own budget again): run the study anew with a larger llm.{what}")
        else:
            then = "the run stops before this step and can be resumed with 'desim run --resume' (cached replies are free)"
        super().__init__(f"LLM budget {what}={limit} reached: {spent} spent, step {step} round {round_idx} "
                         f"needs {needed} more; {then}")
