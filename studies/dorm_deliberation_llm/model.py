"""dorm_deliberation_llm: the dorm_deliberation world, with a language model deciding.

Students, prices, the canteen queue, the bus and the metrics are the base
study's (imported from the sibling folder ``dorm_deliberation``). Each
student is prompted with the four quadrants of its observation (prices, the
canteen wait, its budget and skill, its dorm-mates' posts), its last months'
choices and the round's instruction: an opening lean in round 0, revision in
round 1, the month's settled choice in round 2. A reply is
``{"option": "canteen" | "delivery" | "cook", "reason": "..."}`` and becomes
the base study's action (a post before the last round, ``choose_meal`` in
it), so the environment cannot tell an LLM student from a rule one. An
unusable reply falls back to the seeded rule.

``llm_kind: scripted`` answers each prompt with the rule's own decision,
written as a reply.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from desim.llm import LLMDecision, PromptTemplate
from desim.study.refs import study_module

base = study_module(Path(__file__).parent.parent / "dorm_deliberation")
Students = base.Students
DormEnvironment = base.DormEnvironment
DormMetrics = base.DormMetrics


class MealReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    option: Literal["canteen", "delivery", "cook"] = Field(description="where you eat this month")
    reason: str = Field(max_length=200, description="one sentence your dorm-mates will read")


class LLMDeliberation(LLMDecision):
    reply_model = MealReply
    template = PromptTemplate(
        role=("You are a university student deciding where to eat lunch this month: the canteen, delivery, or "
              "cooking in the dorm kitchen. You care about money (more when your budget is small), your time "
              "(canteen queues), and the effort of cooking (less if you cook well). You talk it over with the "
              "five students who share your dorm."),
        peers_key="peer_posts", persona_keys=(), show_text=False,
        hide=("round", "rounds", "final_round"),
        opening=("Nobody in your dorm has spoken yet this month. Say what you are leaning towards and why, in "
                 "one sentence."),
        revision=("Your dorm-mates' posts are above. Does anything they said change your mind? Give your current "
                  "lean and why."),
        final="Settle this month's choice, taking your dorm-mates' posts into account, and give your reason.")

    def __init__(self, llm_kind: str = "scripted", habit: float = 0.6, noise: float = 1.0):
        super().__init__(llm_kind, rule=base.RuleDeliberation(habit, noise))

    def to_action(self, obs, reply):
        return base.meal_action(obs, reply.option, reply.reason, source="llm")

    def scripted_reply(self, obs, memory, prompt_hash):
        option, reason = base.read_option(self.rule.decide_batch([obs], [memory])[0])
        return {"option": option, "reason": reason[:200]}
