"""opinion_diffusion_llm: the opinion_diffusion world, with agents that talk and a language model deciding.

The environment, population and metrics are the base study's (imported from
the sibling folder ``opinion_diffusion``, so the two stay one world). The
environment adds each neighbour's post (opinion and argument, and whether it
was said last week or in this week's discussion) to the agent's local
information, for the prompt. The decision is an :class:`LLMDecision`: round
0 asks for an opening position, rounds 1 and 2 show the neighbours' posts and
invite revision; a reply is ``{"opinion": 0..1, "argument": "..."}`` and
becomes a ``post`` that the neighbours read. An unusable reply falls back to
the base study's bounded-confidence rule.

``llm_kind: scripted`` answers every prompt with the rule's own decision
written as a reply, so a dry run exercises prompt -> reply -> parse and
reproduces the rule study's opinions exactly.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from desim import Action
from desim.llm import LLMDecision, PromptTemplate
from desim.study.refs import study_module

base = study_module(Path(__file__).parent.parent / "opinion_diffusion")
Population = base.Population
OpinionMetrics = base.OpinionMetrics


class OpinionEnvironment(base.OpinionEnvironment):
    """The base world; observations also carry each neighbour's latest post, with its argument."""

    def observe_batch(self, ids, t, round_idx):
        out = super().observe_batch(ids, t, round_idx)
        for obs in out:
            latest = {}
            for m in self.feed.local_for(obs.agent_id, t, round_idx):
                if m.author_id not in latest or (m.step, m.round) > (latest[m.author_id].step,
                                                                     latest[m.author_id].round):
                    latest[m.author_id] = m
            obs.local_information["peer_posts"] = [
                {"from": m.author_id, "when": "last week" if m.step < t else f"this week, round {m.round + 1}",
                 **m.content} for m in latest.values()]
        return out


class OpinionReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    opinion: float = Field(ge=0.0, le=1.0, description="your position: 0 fully against the proposal, 1 fully for")
    argument: str = Field(max_length=300, description="one or two sentences you post to your neighbours")


class LLMOpinion(LLMDecision):
    reply_model = OpinionReply
    template = PromptTemplate(
        role=("You are a resident of a small town. This week the town discusses a public proposal with "
              "neighbours. Your opinion is a number from 0 (fully against) to 1 (fully for). You listen to "
              "neighbours whose views are not too far from yours, and to the media as much as you trust them."),
        peers_key="peer_posts", hide=("neighbour_opinions",), persona_keys=())

    def __init__(self, llm_kind: str = "scripted", epsilon: float = 0.3, mu: float = 0.5,
                 campaign_weight: float = 0.4):
        super().__init__(llm_kind, rule=base.BoundedConfidence(epsilon, mu, campaign_weight))

    def to_action(self, obs, reply):
        return Action(agent_id=obs.agent_id, step=obs.step, kind="post",
                      payload={"opinion": reply.opinion, "argument": reply.argument},
                      rationale=reply.argument, source="llm")

    def scripted_reply(self, obs, memory, prompt_hash):
        ruled = self.rule.decide_batch([obs], [memory])[0]
        return {"opinion": ruled.payload["opinion"], "argument": f"I stay open: {ruled.rationale}."}
