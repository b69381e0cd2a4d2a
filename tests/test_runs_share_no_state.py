"""Runs of one process (a sweep worker's lane, a notebook's loop of run_study) share no state the study can
write on: desim.diffusion:Nodes gave every run the same persona objects, and a network file the same dict of
edge attributes, so a study keeping a score on a persona (or adding an edge attribute) started its second run
where the first ended, with the same seed."""
from __future__ import annotations

import numpy as np

import desim
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation


class Scores(EnvironmentProvider):
    """Each agent's score kept on its persona; each run adds an edge attribute of its own to the network."""

    def reset(self, seed):
        self.people = {p.agent_id: p for p in self.ctx.personas}
        for p in self.ctx.personas:
            p.attributes.setdefault("score", 0)
        attrs = self.ctx.network.attributes        # an edge attribute of the study's own: runs that saw the edges
        seen = attrs.get("seen_by", np.zeros(len(self.ctx.network.source)))
        self.runs_seen = int(seen[0])                # 0 in a run of its own
        attrs["seen_by"] = seen + 1

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, local_physical={"score": self.people[a].attributes["score"]})
                for a in ids]

    def apply(self, actions):
        for a in actions:
            self.people[a.agent_id].attributes["score"] += 1

    def agent_state(self, agent_id):
        return {"score": self.people[agent_id].attributes["score"], "runs_seen": self.runs_seen}


class Coin(DecisionModel):
    def decide_batch(self, observations, memories):
        u = self.ctx.rng("coin").random(len(observations))
        return [Action(agent_id=o.agent_id, step=o.step, kind="act") for k, o in enumerate(observations) if u[k] < 0.5]


class Mean(MetricCollector):
    def collect(self, t, environment, actions):
        scores = [p.attributes["score"] for p in environment.people.values()]
        return {"mean_score": sum(scores) / len(scores)}


def study(folder, tmp_path):
    (tmp_path / folder / "population").mkdir(parents=True)
    (tmp_path / folder / "population" / "contacts.csv").write_text("source,target\n" + "".join(f"n{i:02d},n{(i + 1) % 20:02d}\n" for i in range(20)))
    return desim.Study(environment=Scores, decision=Coin, collector=Mean, steps=4, seed=5, folder=tmp_path / folder,
                       population={"ref": "desim.diffusion:Nodes", "args": {"n": 20}},
                       interaction={"kind": "file", "path": "contacts.csv"})


def test_two_runs_of_one_process_with_the_same_seed_store_the_same_panel(tmp_path):
    same = study("a", tmp_path)
    first, second = desim.run_study(same), desim.run_study(same)      # one network file, one folder, one seed
    assert first.status == second.status == "completed"
    drop = ["run_id"]
    assert first.panel().drop(drop).equals(second.panel().drop(drop))
    assert first.metrics().drop(drop).equals(second.metrics().drop(drop))
    assert set(second.panel().column("runs_seen").to_pylist()) == {0}
    assert first.metrics().column("mean_score").to_pylist()[0] == 0.0     # step 0: every score starts at 0
