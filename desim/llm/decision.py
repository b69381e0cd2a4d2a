"""``LLMDecision``: a behaviour model that asks a language model, one prompt per agent.

A study subclasses it and says three things: the reply's pydantic model
(``reply_model``), how agents are prompted (``template``) and how a reply
becomes an action (``to_action``). The run's ``llm`` block and the study
folder (where the reply cache lives) come from ``self.ctx`` at ``reset``. It passes its rule model to the
constructor: the rule decides for every agent whose reply is unusable
(``source = fallback``, counted).

One round, for N agents, in ``decide_batch``:

1. render each agent's messages and hash the request (the cache key);
2. look every key up in the cache in one query; the misses are the calls;
3. check the budget: if the misses would exceed ``max_calls`` or
   ``max_tokens_budget``, raise :class:`BudgetExhausted` before sending any;
4. send the misses, ``concurrency`` at a time per endpoint, on the model's
   private event loop, and store the replies in the cache (even if the round
   then fails); a request out of retries fails the round at once, or, with
   ``on_unavailable: fallback``, leaves its unanswered agents to the rule;
5. parse every reply; the unusable ones go to the rule; actions come back in
   the order of the observations, never in order of arrival.

``llm_kind: scripted`` replaces steps 2-4 by ``scripted_reply`` (by default a
reply made up from the schema and the prompt's hash): the whole prompt ->
reply -> parse path runs, free and reproducible, with no server. Being free,
scripted replies are counted as ``scripted``, not as paid ``calls`` or
tokens, and no budget applies to them (``desim validate`` probes on them).

Paid replies of a step that never closes (the run failed, stopped or was
killed in it) are kept in a file of the run, rewritten after every round
that paid and when the model closes, and written to ``llm_calls`` when the
resumed run closes that step (``outcome = 'abandoned'``;
:mod:`desim.llm.accounting`).
"""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from desim.llm.accounting import CallLog, ledger_path, load_ledger, save_ledger
from desim.llm.client import ChatClient, LoopThread, Reply, estimate_tokens
from desim.llm.config import SIMULATION_FILE, LLMConfig, api_key, load_llm_config
from desim.llm.errors import BudgetExhausted, LLMError, LLMUnavailable
from desim.llm.prompts import PromptTemplate
from desim.llm.replies import fake_reply, parse_reply, seed_from
from desim.records import Action, Observation
from desim.store.replies import ReplyCache, request_key
from desim.study.contract import DecisionModel
from desim.study.files import StudyConfigError

LLM_KINDS = ("openai", "scripted")
_NO_REPLY = Reply(None, 0, 0, 0.0, 0)


class LLMDecision(DecisionModel):
    """Base class of a study's LLM behaviour model (see the module docstring)."""

    reply_model: type[BaseModel]
    template: PromptTemplate

    def __init__(self, llm_kind: str = "scripted", rule: DecisionModel | None = None):
        if llm_kind not in LLM_KINDS:
            raise StudyConfigError(SIMULATION_FILE, [("decision.args.llm_kind",
                                                      f"expected one of {', '.join(LLM_KINDS)}, got '{llm_kind}'")])
        if rule is None:
            raise TypeError(f"{type(self).__name__} needs the study's rule model for fallbacks")
        self.llm_kind = llm_kind
        self.rule = rule
        self.schema = self.reply_model.model_json_schema()
        self.log = CallLog()
        self._cache: ReplyCache | None = None
        self._client: ChatClient | None = None
        self._loop: LoopThread | None = None
        self._ledger: Path | None = None
        self._prompt_ratio = 1.0        # a server's prompt tokens over our estimate: the budget's check learns it
        self._unanswered: str | None = None     # why the first request left unanswered was (for warnings)

    # --- what a study provides ---------------------------------------------------
    def to_action(self, obs: Observation, reply: BaseModel) -> Action:
        """Turn a valid reply into the agent's action (``source="llm"``); ValueError makes it a fallback."""
        raise NotImplementedError(f"{type(self).__name__} must implement to_action")

    def scripted_reply(self, obs: Observation, memory: list[Action], prompt_hash: str) -> Any:
        """The fake reply of scripted mode: a dict (sent as JSON) or raw text."""
        return fake_reply(self.schema, seed_from(prompt_hash))

    # --- the public side -------------------------------------------------------------
    def reset(self, seed: int) -> None:
        """Read the run's ``llm`` block (validated: unknown keys name ``simulation.json: llm.<field>``)."""
        self.rule.ctx = self.ctx
        self.rule.reset(seed)
        self.cfg: LLMConfig = load_llm_config(self.ctx.llm)
        self.model_name = self.cfg.model if self.llm_kind == "openai" else "scripted"
        self._params = self._request_params()
        if self.ctx.root is not None:          # a resumed run: the paid calls of the step it lost, if any
            self._ledger = ledger_path(Path(self.ctx.root), self.ctx.run_id)
            # rows of a stored step reached the store with it (the ledger is rewritten a round later)
            self.log.carry([r for r in load_ledger(self._ledger) if r["step"] > self.ctx.stored_until])

    def decide_batch(self, observations: list[Observation], memories: list[list[Action]]) -> list[Action]:
        ctx = self.ctx
        self.rule.ctx = ctx
        step, round_idx = ctx.step, ctx.round_idx
        paid_before = self.log.totals["calls"]
        requests = [self._request(obs, mem) for obs, mem in zip(observations, memories)]
        keys = [key for key, _ in requests]
        unanswered: str | None = None
        sent: dict[int, int] = {}
        scripted = self.llm_kind == "scripted"
        if scripted:
            replies, cached = self._scripted(observations, memories, requests), set()
        else:
            replies, cached, unanswered, sent = self._served(observations, requests, step, round_idx)
        actions: list[Action | None] = []
        unusable: dict[int, str] = {}
        for i, (obs, reply) in enumerate(zip(observations, replies)):
            if reply is None:                   # the server failed and the study falls back
                # the rationale (which later prompts show as memory) says no more than this, the same in a resume
                # that re-executes the step: why the server failed is in the run's warnings, not in the history
                action, why, outcome = None, "LLM unavailable (no reply)", "unavailable"
                self._unanswered = self._unanswered or unanswered
                reply = dataclasses.replace(_NO_REPLY, attempts=sent.get(i, 0))   # the attempts it did make
            else:
                action, why = self._parse(obs, reply.content)
                outcome = "fallback" if action is None else "ok"
                why = f"LLM reply unusable ({why})"
            actions.append(action)
            if action is None:
                unusable[i] = why
            self.log.add(step=step, round_idx=round_idx, agent_id=obs.agent_id, model=self.model_name,
                         prompt_hash=keys[i], tokens_in=reply.tokens_in, tokens_out=reply.tokens_out,
                         latency_ms=reply.latency_ms, cached=keys[i] in cached, outcome=outcome,
                         attempts=reply.attempts, endpoint=reply.endpoint, scripted=scripted)
        if unusable:
            self._fall_back(actions, unusable, observations, memories)
        if self.log.totals["calls"] > paid_before:
            self._keep_unrecorded()     # at once: a killed process (SIGKILL, power) keeps this round's paid rows
        return actions

    def resume_replays(self) -> bool:
        """Whether a resumed run must replay this model's stored steps rather than re-execute them: a server
        asked without a reply cache would be paid again, and answer with other samples."""
        return self.llm_kind == "openai" and not load_llm_config(self.ctx.llm).cache

    def drain_calls(self) -> pa.Table:
        """``llm_calls`` rows since the last drain (columns of ``CALLS_SCHEMA``), with the rows an earlier
        invocation of this run paid for in the step closing now (``abandoned``)."""
        ctx = getattr(self, "ctx", None)
        return self.log.drain(ctx.step if ctx is not None else None)

    def counters(self) -> dict[str, int]:
        """This invocation's totals: calls, tokens_in, tokens_out (paid: uncached server replies),
        cache_hits, fallbacks, retries (attempts after a request's first) and scripted (free)."""
        return dict(self.log.totals)

    def warnings(self) -> list[str]:
        """What the run's author should know of this invocation's decisions: many that fell back to the rule."""
        said = self.log.fallback_warning()
        if self._unanswered:        # said whatever the share: the rationale does not carry it
            said = (f"{said}; " if said else "") + f"the first LLM request left unanswered: {self._unanswered}"
        return [said] if said else []

    def close(self) -> None:
        self._keep_unrecorded()
        if self._loop is not None:
            if self._client is not None:
                try:
                    self._loop.run(self._client.aclose())
                except Exception:  # noqa: BLE001 - closing a dead connection must not mask the run's outcome
                    pass
            self._loop.close()
            self._loop = self._client = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def _keep_unrecorded(self) -> None:
        """Keep the paid calls the store has not received (the step in flight never closed) for the
        resumed run to write, so no paid reply goes uncounted; nothing kept removes the file."""
        if self._ledger is None:
            return
        try:
            save_ledger(self._ledger, self.log.unrecorded())
        except OSError as e:        # the run's own outcome matters more than this record
            warnings.warn(f"cannot keep the unrecorded LLM calls in {self._ledger}: {e}", RuntimeWarning,
                          stacklevel=2)

    # --- inside a round ---------------------------------------------------------------
    def _request_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.cfg.temperature, "max_tokens": self.cfg.max_tokens}
        if self.cfg.response_format == "json_schema":
            params["response_format"] = {"type": "json_schema", "json_schema": {
                "name": self.reply_model.__name__, "schema": self.schema}}
        elif self.cfg.response_format == "json_object":
            params["response_format"] = {"type": "json_object"}
        return params

    def _sampling_seed(self, obs: Observation) -> int | None:
        seed = self.cfg.sampling_seed
        if seed == "run":
            return seed_from(self.ctx.seed, obs.step, obs.round_idx, obs.agent_id) & 0x7FFFFFFF
        return seed

    def _request(self, obs: Observation, memory: list[Action]) -> tuple[str, dict[str, Any]]:
        messages = self.template.messages(self.ctx.persona(obs.agent_id), obs, memory, self.schema,
                                          self.ctx.rounds)
        seed = self._sampling_seed(obs)
        body = {"model": self.model_name, "messages": messages, **self._params}
        if seed is not None:
            body["seed"] = seed
        return request_key(self.model_name, messages, self._params, seed), body

    def _scripted(self, observations, memories, requests) -> list[Reply]:
        out = []
        for obs, mem, (key, body) in zip(observations, memories, requests):
            reply = self.scripted_reply(obs, mem, key)
            text = reply if isinstance(reply, str) else json.dumps(reply, sort_keys=True)
            tokens_in = sum(estimate_tokens(m["content"]) for m in body["messages"])
            out.append(Reply(text, tokens_in, estimate_tokens(text), 0.0, 0))
        return out          # free: no budget applies (max_calls and max_tokens_budget count paid requests)

    def _served(self, observations, requests, step: int,
                round_idx: int) -> tuple[list[Reply | None], set[str], str | None, dict[int, int]]:
        """Replies from the cache and the server; ``None`` for an agent left unanswered (only when the
        study sets ``on_unavailable: fallback``; otherwise the failure is raised), with the reason and
        the attempts each request sent (by agent index)."""
        keys = [key for key, _ in requests]
        if self._cache is None and self.cfg.cache:
            self._cache = ReplyCache(self.cfg.cache_file(self._root()))
        hits = self._cache.get_many(keys) if self._cache else {}
        todo = [i for i, key in enumerate(keys) if key not in hits]
        if todo and step <= self.ctx.stored_until:
            left = self.ctx.stored_unanswered
            before = {i for i in todo if (step, round_idx, keys[i]) in left}     # the rule decided them then
            todo = [i for i in todo if i not in before]
            if todo:
                raise self._not_as_stored(len(todo), len(keys), step, round_idx)
        estimated = {i: sum(estimate_tokens(m["content"]) for m in requests[i][1]["messages"]) for i in todo}
        self._check_budget(len(todo), sum(estimated.values()))
        fresh: dict[int, Reply] = {}
        failure: Exception | None = None
        sent = [0] * len(todo)
        if todo:
            if self._client is None:
                self._loop, self._client = LoopThread(), ChatClient(self.cfg, api_key())
            labels = [f"step {step} round {round_idx} agent {observations[i].agent_id}" for i in todo]
            answered, failure = self._loop.run(self._client.complete_many(
                [requests[i][1] for i in todo], labels, f"step {step} round {round_idx}", sent))
            fresh = {todo[j]: reply for j, reply in answered.items()}
            for i, reply in fresh.items():      # the server counts prompts its own way: the budget learns it
                self._prompt_ratio = max(self._prompt_ratio, reply.tokens_in / max(1, estimated[i]))
            if self._cache:
                self._cache.put_many([(keys[i], self.model_name, r.content, r.tokens_in, r.tokens_out)
                                      for i, r in fresh.items()])
                # committed before the round's paid rows are kept (_keep_unrecorded): a process killed in
                # between would leave rows whose replies a resumed run cannot find, and it would pay again
                self._cache.flush()
        falls_back = isinstance(failure, LLMUnavailable) and self.cfg.on_unavailable == "fallback"
        if failure is not None and not falls_back:
            for i, r in fresh.items():      # paid for: kept with the step's other rows for the resumed run
                self.log.add(step=step, round_idx=round_idx, agent_id=observations[i].agent_id,
                             model=self.model_name, prompt_hash=keys[i], tokens_in=r.tokens_in,
                             tokens_out=r.tokens_out, latency_ms=r.latency_ms, cached=False, outcome="abandoned",
                             attempts=r.attempts, endpoint=r.endpoint)
            if isinstance(failure, LLMError):
                raise type(failure)(f"{failure}; the {len(fresh)} replies received this round are cached, "
                                    "completed steps are kept: fix the server and resume the run") from None
            raise failure
        replies: list[Reply | None] = []
        for i, k in enumerate(keys):
            if i in fresh:
                replies.append(fresh[i])
            elif k in hits:
                replies.append(Reply(hits[k].content, hits[k].tokens_in, hits[k].tokens_out, 0.0, 0))
            else:
                replies.append(None)
        return (replies, set(hits), (str(failure) if failure is not None else None),
                {todo[j]: n for j, n in enumerate(sent)})

    def _not_as_stored(self, missing: int, asked: int, step: int, round_idx: int) -> LLMError:
        """A resumed run re-executes its stored steps with the replies it had, from the reply cache. A prompt
        the cache does not hold would be asked again: paid twice, and its new reply would continue the run
        from another history than the panel stored. Refused before any request is sent."""
        where = self.cfg.cache_file(self._root()) if self.cfg.cache else None
        why = ("the reply cache is off (llm.cache: false), and with rounds that are not recorded "
               "(record_rounds) the stored steps cannot be replayed from the store" if where is None else
               f"the reply cache {where} does not hold them: it was moved or emptied, or the prompts changed since "
               f"(the model is now '{self.model_name}': DESIM_LLM_MODEL, or an edited template or persona)")
        return LLMError(f"step {step} round {round_idx}: resuming run {self.ctx.run_id} re-executes its stored steps "
                        f"1..{self.ctx.stored_until} with the replies they had, but {missing} of this round's "
                        f"{asked} prompts have none to reuse: {why}. Asking again would pay twice and continue the "
                        "run from another history than the stored one, so nothing was sent and the stored steps "
                        "are kept. Resume with the same cache and model, or run the study anew")

    def _check_budget(self, calls: int, prompt_tokens: int) -> None:
        """Raise before a round that would go over ``max_calls`` or ``max_tokens_budget``. The round's prompt
        tokens are an estimate (four characters a token), scaled by the largest ratio of a server's count to
        the estimate seen so far: a tokenizer that counts more than the estimate can take the first paid round
        past the budget; the later rounds are checked with what it counted."""
        t, cfg, ctx = self.log.totals, self.cfg, self.ctx
        if cfg.max_calls is not None and t["calls"] + calls > cfg.max_calls:
            raise BudgetExhausted("max_calls", t["calls"], calls, cfg.max_calls, ctx.step, ctx.round_idx)
        if cfg.max_tokens_budget is not None and calls:
            spent = t["tokens_in"] + t["tokens_out"]
            worst = math.ceil(prompt_tokens * self._prompt_ratio) + calls * cfg.max_tokens
            if spent + worst > cfg.max_tokens_budget:
                raise BudgetExhausted("max_tokens_budget", spent, worst, cfg.max_tokens_budget,
                                      ctx.step, ctx.round_idx)

    def _parse(self, obs: Observation, content: str | None) -> tuple[Action | None, str]:
        reply, why = parse_reply(content, self.reply_model)
        if reply is None:
            return None, why
        try:
            return self.to_action(obs, reply), ""
        except ValueError as e:
            return None, str(e)

    def _fall_back(self, actions: list[Action | None], unusable: dict[int, str],
                   observations: list[Observation], memories: list[list[Action]]) -> None:
        order = sorted(unusable)
        ruled = self.rule.decide_batch([observations[i] for i in order], [memories[i] for i in order])
        by_agent = {a.agent_id: a for a in ruled}
        for i in order:
            a = by_agent.get(observations[i].agent_id)
            if a is not None:
                why = f"{unusable[i]}; rule: {a.rationale}"
                actions[i] = a.model_copy(update={"source": "fallback", "rationale": why[:500]})
        actions[:] = [a for a in actions if a is not None]

    def _root(self) -> Path:
        if self.ctx.root is None:
            raise LLMError("the run has no study folder: the reply cache lives in the study folder")
        return Path(self.ctx.root)
