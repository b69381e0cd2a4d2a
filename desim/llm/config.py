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
config, the cache key or an error message.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import StudyConfigError, _describe, _field_path

SIMULATION_FILE = "simulation/simulation.json"
ENV_BASE_URL = "DESIM_LLM_BASE_URL"
ENV_API_KEY = "DESIM_LLM_API_KEY"
ENV_MODEL = "DESIM_LLM_MODEL"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


class LLMConfig(BaseModel):
    """Validated settings of the LLM decision layer (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="stub", min_length=1)
    base_url: str = DEFAULT_BASE_URL
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=256, ge=1)
    # "run": a sampling seed per (run seed, step, round, agent), sent to the server
    # and part of the cache key; an int: that seed for every request; null: none.
    sampling_seed: Literal["run"] | int | None = "run"
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    concurrency: int = Field(default=16, ge=1, le=1024)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=5, ge=0, le=50)
    backoff_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    max_calls: int | None = Field(default=None, ge=0)
    max_tokens_budget: int | None = Field(default=None, ge=0)
    cache: bool = True
    cache_path: str = "runs/llm_cache.duckdb"

    def cache_file(self, study_root: Path) -> Path:
        """Where the reply cache lives: relative paths are inside the study folder."""
        path = Path(self.cache_path)
        return path if path.is_absolute() else Path(study_root) / path


def load_llm_config(block: dict[str, Any] | None, environ: dict[str, str] | None = None,
                    where: str | Path = SIMULATION_FILE) -> LLMConfig:
    """Validate the ``llm`` block, then apply ``DESIM_LLM_BASE_URL`` / ``DESIM_LLM_MODEL``.

    An error names ``simulation/simulation.json: llm.<field>``.
    """
    environ = os.environ if environ is None else environ
    if not isinstance(block, (dict, type(None))):
        raise StudyConfigError(where, [("llm", f"expected an object, got {type(block).__name__}")])
    data = dict(block or {})
    for key, var in (("base_url", ENV_BASE_URL), ("model", ENV_MODEL)):
        if environ.get(var):
            data[key] = environ[var]
    try:
        return LLMConfig.model_validate(data)
    except ValidationError as e:
        raise StudyConfigError(where, [("llm." + _field_path(err["loc"]), _describe(err))
                                       for err in e.errors()]) from None


def api_key(environ: dict[str, str] | None = None) -> str | None:
    """The API key, from ``DESIM_LLM_API_KEY`` only (``None`` for local servers)."""
    environ = os.environ if environ is None else environ
    return environ.get(ENV_API_KEY) or None
