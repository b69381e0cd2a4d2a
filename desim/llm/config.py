"""The ``llm`` block of ``simulation/simulation.json`` and the environment variables.

A study names its model, sampling parameters, concurrency, timeouts, retries
and budgets in ``simulation.json``::

    "llm": {"model": "qwen2.5-7b-instruct", "temperature": 0.7, "concurrency": 32,
            "max_calls": 5000}

Where the server is and who pays for it are properties of the machine, not of
the study, so they come from the environment: ``DESIM_LLM_BASE_URL`` and
``DESIM_LLM_MODEL`` override the file's ``base_url`` and ``model`` (so one
study can be pointed at a stub, a local vLLM or a hosted API without being
edited), and ``DESIM_LLM_API_KEY`` is the only place the key is read from.
The key is never a field of :class:`LLMConfig`, so it cannot reach the stored
config, the cache key or an error message. For the same reason a ``base_url``
in the file may not carry ``user:password@``: the file is stored with every
run, the environment is not.

``base_url`` may list several endpoints (``DESIM_LLM_BASE_URL`` separated by
commas); ``concurrency`` applies to each. The deadlines the client enforces
follow from the settings (:meth:`LLMConfig.request_deadline_s`,
:meth:`LLMConfig.round_deadline_s`); ``docs/llm.md`` derives the worst-case
time to fail from them.
"""
from __future__ import annotations

import math
import os
import unicodedata
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator

from desim.records import Strict
from desim.study.files import KEY_IN_FILES, StudyConfigError, config_problems, describe_error, field_path
from desim.versions import SIMULATION_FILE

ENV_BASE_URL = "DESIM_LLM_BASE_URL"
ENV_API_KEY = "DESIM_LLM_API_KEY"
ENV_MODEL = "DESIM_LLM_MODEL"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


class LLMConfig(Strict):
    """Validated settings of the LLM decision layer (unknown keys are errors)."""

    model: str = Field(default="stub", min_length=1, description="the model's name at the server "
                       "(DESIM_LLM_MODEL overrides)")
    base_url: str | list[str] = Field(DEFAULT_BASE_URL, description="the OpenAI-compatible server, or several "
                                      "(DESIM_LLM_BASE_URL overrides, comma-separated)")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="sampling temperature")
    max_tokens: int = Field(default=256, ge=1, description="tokens per reply at most")
    sampling_seed: Literal["run"] | int | None = Field("run", description=(
        '"run": a sampling seed per (run seed, step, round, agent), sent to the server and part of the cache '
        "key; a number: that seed for every request; null: none"))
    response_format: Literal["json_schema", "json_object", "none"] = Field("json_schema", description=(
        "what the server is asked to constrain replies to"))
    concurrency: int = Field(default=16, ge=1, le=1024, description="requests in flight per endpoint")
    timeout_s: float = Field(default=60.0, gt=0, description="one attempt, all of it: connect, send and the "
                             "whole reply body")
    max_retries: int = Field(default=5, ge=0, le=50, description="retries of a failed request")
    backoff_s: float = Field(default=0.5, ge=0, description="the first wait before a retry (doubling)")
    backoff_max_s: float = Field(default=30.0, ge=0, description="the longest wait before a retry")
    max_reply_bytes: int = Field(default=256 * 1024, ge=1024, description="a larger reply body is refused while "
                                 "it is read")
    on_unavailable: Literal["fail", "fallback"] = Field("fail", description=(
        'a request out of retries: "fail" the run, or give the round\'s unanswered agents to the rule (counted)'))
    max_calls: int | None = Field(default=None, ge=0, description="paid requests per invocation at most: the "
                                  "run ends 'interrupted' before a round that would go over, its steps kept")
    max_tokens_budget: int | None = Field(default=None, ge=0, description="tokens per invocation at most (the same)")
    cache: bool = Field(True, description="replay stored replies for identical requests (no second bill)")
    cache_path: str | None = Field(None, description="the reply cache's file (default: runs/llm_cache.duckdb "
                                   "in the study)")

    @field_validator("base_url")
    @classmethod
    def _urls(cls, value: str | list[str]) -> str | list[str]:
        urls = [value] if isinstance(value, str) else value
        if not urls:
            raise ValueError("expected at least one URL")
        for url in urls:
            parts = urlsplit(url.strip())
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"expected an http:// or https:// URL, got {shown_url(url)!r}")
        return value

    def endpoints(self) -> list[str]:
        """The base URLs, one per endpoint, without trailing slashes."""
        urls = [self.base_url] if isinstance(self.base_url, str) else self.base_url
        return [u.strip().rstrip("/") for u in urls]

    def backoff_total_s(self) -> float:
        """The waits of one request against a server that sends no ``Retry-After``: ``backoff_s x 2^(k-1)``
        for the k-th retry (jitter only shortens it), each capped by ``backoff_max_s``."""
        return sum(min(self.backoff_max_s, self.backoff_s * 2 ** k) for k in range(self.max_retries))

    def request_deadline_s(self) -> float:
        """The longest one request may take from its first attempt: every attempt plus every wait at its cap.

        The client enforces it: a request still unanswered then is out of time,
        whatever its retries say (a retry waiting for a free slot is still bounded).
        """
        return (self.max_retries + 1) * self.timeout_s + self.max_retries * self.backoff_max_s

    def round_deadline_s(self, calls: int) -> float:
        """A round of ``calls`` requests: one request deadline plus a full attempt for each further wave.

        A server that answers every attempt within ``timeout_s`` needs at most
        ``ceil(calls / concurrency)`` attempt times; one request may need its whole
        deadline. A round that takes longer than this is stopped.
        """
        waves = max(1, math.ceil(calls / self.concurrency))
        return self.request_deadline_s() + (waves - 1) * self.timeout_s

    def cache_file(self, study_root: Path) -> Path:
        """Where the reply cache lives: relative paths are inside the study folder."""
        from desim.store.layout import StudyLayout
        return StudyLayout(study_root).llm_cache(self.cache_path)


def load_llm_config(block: dict[str, Any] | None, environ: dict[str, str] | None = None,
                    where: str | Path = SIMULATION_FILE) -> LLMConfig:
    """Validate the ``llm`` block, then apply ``DESIM_LLM_BASE_URL`` / ``DESIM_LLM_MODEL``.

    An error names ``simulation/simulation.json: llm.<field>``.
    """
    environ = os.environ if environ is None else environ
    if not isinstance(block, (dict, type(None))):
        raise StudyConfigError(where, [("llm", f"expected an object, got {type(block).__name__}")])
    data = dict(block or {})
    stored = data.get("base_url")
    for url in [stored] if isinstance(stored, str) else stored if isinstance(stored, list) else []:
        if isinstance(url, str) and "@" in urlsplit(url.strip()).netloc:
            raise StudyConfigError(where, [("llm.base_url", "credentials in the URL (user:password@) would be "
                                            f"stored with every run; put them in {ENV_BASE_URL} instead")])
    if "api_key" in data:       # said before the generic "unknown key": where a key goes instead
        raise StudyConfigError(where, [("llm.api_key", KEY_IN_FILES)])
    from_env = set()
    if environ.get(ENV_BASE_URL):
        urls = [u.strip() for u in environ[ENV_BASE_URL].split(",") if u.strip()]
        data["base_url"] = urls[0] if len(urls) == 1 else urls
        from_env.add("base_url")
    if environ.get(ENV_MODEL):
        data["model"] = environ[ENV_MODEL]
        from_env.add("model")
    try:
        return LLMConfig.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        env = {"base_url": ENV_BASE_URL, "model": ENV_MODEL}
        for err in errors:      # a value the environment gave is its variable's fault, not the file's
            if err["loc"] and err["loc"][0] in from_env:
                raise StudyConfigError(f"environment variable {env[err['loc'][0]]}",
                                       [("llm." + field_path(err["loc"]), describe_error(err))]) from None
        # the file's own keys: an unknown one close to a known one says which (the rule of every study file)
        raise StudyConfigError(where, config_problems(LLMConfig, dict(block or {}), errors, ("llm",))) from None


def shown_url(url: str) -> str:
    """``url`` without its ``user:password@`` part: the only form of a URL that reaches a message."""
    parts = urlsplit(url.strip())
    if "@" not in parts.netloc:
        return url.strip()
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=host).geturl()


def api_key(environ: dict[str, str] | None = None) -> str | None:
    """The API key, from ``DESIM_LLM_API_KEY`` only (``None`` for local servers).

    A key is visible ASCII: one with a space, a newline (a key read from a file keeps its last one), another
    control character or a character outside ASCII is refused here, with an :class:`LLMError` naming the
    variable and what is wrong where (never the key). Sent as it is, the HTTP library refuses the header
    (which looked like a server that never answers, after every retry) or the server the key."""
    environ = os.environ if environ is None else environ
    key = environ.get(ENV_API_KEY) or None
    if key is not None:
        bad = next((i for i, ch in enumerate(key) if not "!" <= ch <= "~"), None)
        if bad is not None:
            from desim.llm.errors import LLMError
            raise LLMError(f"{ENV_API_KEY} has {_unprintable(key[bad])} {_where(bad, len(key))}: an API key is "
                           "visible ASCII characters only, without spaces or line breaks (a key read from a file "
                           f"often keeps the file's last newline); set {ENV_API_KEY} to the key alone")
    return key


def _unprintable(ch: str) -> str:
    """What a character that cannot be in a key is, without showing the key."""
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}
    if ch in names:
        return names[ch]
    if ch.isspace():
        return f"a space character (U+{ord(ch):04X})"
    if unicodedata.category(ch) == "Cc":
        return f"a control character (U+{ord(ch):04X})"
    if unicodedata.category(ch) == "Cf":
        return f"an invisible formatting character (U+{ord(ch):04X})"
    return f"a character outside ASCII (U+{ord(ch):04X})"


def _where(i: int, n: int) -> str:
    return ("at its end" if i == n - 1 else "at its start" if i == 0
            else f"at character {i + 1} of {n}")
