"""Exported messages and events come out in one order, run after run: ties on the keys (one author posting
twice in a round, one event name fired twice in a step) are ordered by the other columns."""
from __future__ import annotations

import json

import desim
from tiny_study import write_tiny_study

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, Message, Observation


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.bus = InMemoryMessageBus()

    def advance_to(self, t):
        return super().advance_to(t) + [{"kind": "news", "name": "wire", "detail": {"n": n}} for n in (3, 1, 2)]

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            for n in (3, 1, 2):          # three posts by one author in one round
                self.bus.post(Message(author_id=a.agent_id, step=self.ctx.step, round=self.ctx.round_idx,
                                      content={"n": n}))

    def agent_state(self, agent_id):
        return {}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="post") for o in observations]
'''


def test_ties_in_messages_and_events_are_ordered_by_their_other_columns(tmp_path):
    root = write_tiny_study(tmp_path / "ties", MODEL, {"n_steps": 2, "decision": {"ref": "model:Decide"}}, agents=2)
    run = desim.run_study(desim.load_study(root))
    data = desim.open(root)
    messages = data.messages(run.run_id).to_pylist()
    assert [(m["step"], m["author_id"], json.loads(m["content"])["n"]) for m in messages] == \
        [(s, a, n) for s in (1, 2) for a in ("a0", "a1") for n in (1, 2, 3)]
    events = [(e["step"], json.loads(e["detail"])["n"]) for e in data.events(run.run_id).to_pylist()]
    assert events == [(s, n) for s in (0, 1, 2) for n in (1, 2, 3)]


def test_a_command_given_no_run_means_the_latest_made_by_hand(study_copy, tmp_path):
    """desim report (and viz) without --run take the latest completed run made by hand, as desim.open does,
    not a sweep's run that happens to be newer; with only a sweep's runs, the latest of them."""
    from desim.cli import main
    from desim.report.data import resolve_run
    from desim.store import StudyLayout, open_store
    root = study_copy("opinion_diffusion")
    assert main(["sweep", str(root), "--set", "campaign_week=1,2", "--set", "n_agents=12", "--steps", "2",
                 "--replicates", "1", "--workers", "1", "--quiet"]) == 0
    with open_store(StudyLayout(root)) as con:
        only_sweep = resolve_run(con, None)["run_id"]
    by_hand = desim.run_study(desim.load_study(root, steps=2, params={"n_agents": 12})).run_id
    assert main(["sweep", str(root), "--set", "campaign_week=1,2", "--set", "n_agents=13", "--steps", "2",
                 "--replicates", "1", "--workers", "1", "--quiet"]) == 0
    with open_store(StudyLayout(root)) as con:
        chosen = resolve_run(con, None)["run_id"]
        newest = con.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
    assert only_sweep.startswith("sw") and newest.startswith("sw") and chosen == by_hand
    assert desim.open(root).run_ids(None) == [by_hand]                  # the same rule as desim.open
    out = tmp_path / "report"
    assert main(["report", str(root), "--out", str(out)]) == 0
    assert by_hand in (out / "report.md").read_text()
