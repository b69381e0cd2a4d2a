"""Paired reads of agents that die (a boolean state field ``alive``, as in Sugarscape) follow the store's one rule
for the dead (``desim.store.states``): ``desim compare``, ``desim effect`` and the report's per-agent differences
take each arm's mean and category shares over its own living agents, per-agent differences only over the agents
alive in both arms (counting those left out), and ``alive`` itself over everyone.

The study: four agents, one unit of sugar eaten a step, dead (``alive: false``, the last sugar kept) once their
sugar is at or below 0. From the fork (step 2) the treatment's policy adds 1.5 a step to a0, a2 and a3 and takes
1 from a1. Every number below is worked out by hand from that:

    step            1     2     3     4     5     6
    control   a0    9     8     7     6     5     4      (mood rich at >= 5, else poor)
              a1    1.5   0.5   -0.5 dead from step 3
              a2    0.5   -0.5 dead from step 2
              a3    -0.5 dead from step 1
    treatment a0    9     9.5   10    10.5  11    11.5
              a1    1.5   -0.5 dead from step 2
              a2    0.5   1     1.5   2     2.5   3
              a3    -0.5 dead from step 1
"""
from __future__ import annotations

import re

import pytest

import desim
from desim.cli import main
from desim.experiments.branches import branch
from desim.experiments.comparisons import agent_differences, compare
from desim.experiments.effects import effect_rows, effect_table, run_effect
from desim.store import StudyLayout, open_store
from desim.store import states as state_reads
from tiny_study import write_tiny_study

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation

START = {"a0": 10.0, "a1": 2.5, "a2": 1.5, "a3": 0.5}
AID = {"a0": 1.5, "a1": -1.0, "a2": 1.5, "a3": 1.5}      # what the policy gives a living agent each step


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.sugar = {a: START[a] for a in self.ctx.agent_ids}
        self.alive = {a: True for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        pass

    def end_step(self, t):
        policy = self.ctx.interventions.value("policy", 0.0)
        for a in self.ctx.agent_ids:
            if self.alive[a]:
                self.sugar[a] += policy * AID[a] - 1.0
                self.alive[a] = self.sugar[a] > 0

    def agent_state(self, agent_id):
        s = self.sugar[agent_id]
        return {"sugar": s, "alive": self.alive[agent_id], "mood": "rich" if s >= 5 else "poor"}


class Stay(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="stay") for o in observations]


class Count(MetricCollector):
    def collect(self, t, environment, actions):
        return {"living": float(sum(environment.alive.values()))}
'''
SIMULATION = {"n_steps": 6, "decision": {"ref": "model:Stay"}, "collector": {"ref": "model:Count"},
              "parameters": {"policy_at": 50}}
ENVIRONMENT = {"layers": {"policy": 0.0}, "scheduled_events": [
    {"at_step": "$policy_at", "name": "policy", "target": "policy", "op": "set", "value": 1.0}]}

# by hand, from the table in the module docstring; per step:
# (alive in both, per-agent mean difference over them, treatment mean over its living, control mean over its
#  living, treatment living, control living, dead in the treatment only, in the control only, in both)
SUGAR = {1: (3, 0.0, 11 / 3, 11 / 3, 3, 3, 0, 0, 1),
         2: (1, 1.5, (9.5 + 1.0) / 2, (8 + 0.5) / 2, 2, 2, 1, 1, 1),
         3: (1, 3.0, (10 + 1.5) / 2, 7.0, 2, 1, 0, 1, 2),
         4: (1, 4.5, (10.5 + 2) / 2, 6.0, 2, 1, 0, 1, 2),
         5: (1, 6.0, (11 + 2.5) / 2, 5.0, 2, 1, 0, 1, 2),
         6: (1, 7.5, (11.5 + 3) / 2, 4.0, 2, 1, 0, 1, 2)}
# mood over each arm's living agents: (share rich under treatment, under control); a0 is the one agent alive in
# both from step 2, and differs (rich 11.5 against poor 4) only at step 6
MOOD_RICH = {1: (1 / 3, 1 / 3), 2: (0.5, 0.5), 3: (0.5, 1.0), 4: (0.5, 1.0), 5: (0.5, 1.0), 6: (0.5, 0.0)}
MOOD_DIFFER = {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0, 5: 0.0, 6: 1.0}
# alive, over all four agents: share alive under treatment, under control, share of agents that differ
ALIVE = {1: (0.75, 0.75, 0.0), 2: (0.5, 0.5, 0.5), 3: (0.5, 0.25, 0.25), 4: (0.5, 0.25, 0.25),
         5: (0.5, 0.25, 0.25), 6: (0.5, 0.25, 0.25)}
COUNTS = ("dead_treatment_only", "dead_control_only", "dead_both")


@pytest.fixture(scope="module")
def dying(tmp_path_factory):
    """-> (study root, control run, its branch with the policy from step 2)."""
    root = write_tiny_study(tmp_path_factory.mktemp("dead") / "dying", MODEL, SIMULATION, agents=4,
                            study={"display_states": ["alive", "sugar", "mood"]}, environment=ENVIRONMENT)
    control = desim.run_study(desim.load_study(root)).run_id
    treatment = branch(root, control, 2, params={"policy_at": 2})
    assert treatment.status == "completed"
    return root, control, treatment.run_id


def test_compare_takes_each_arms_living_and_differences_over_agents_alive_in_both(dying):
    root, control, treatment = dying
    out = compare(root, control, treatment)
    sugar = {r["step"]: r for r in out["paired"] if r["field"] == "sugar"}
    assert sorted(sugar) == [1, 2, 3, 4, 5, 6]
    for step, (both, diff, t_mean, c_mean, t_living, c_living, *dead) in SUGAR.items():
        r = sugar[step]
        assert (r["n"], r["treatment_living"], r["control_living"]) == (both, t_living, c_living), step
        assert r["mean_diff"] == pytest.approx(diff) and r["min_diff"] == r["max_diff"] == pytest.approx(diff)
        assert (r["treatment_mean"], r["control_mean"]) == pytest.approx((t_mean, c_mean)), step
        assert tuple(r[k] for k in COUNTS) == tuple(dead), step
    mood = {r["step"]: r for r in out["categorical"] if r["field"] == "mood"}
    for step, (t_rich, c_rich) in MOOD_RICH.items():
        shares = mood[step]["shares"]
        assert (shares["rich"]["treatment"], shares["rich"]["control"]) == pytest.approx((t_rich, c_rich)), step
        assert shares["poor"]["treatment"] == pytest.approx(1 - t_rich) and \
            shares["poor"]["diff"] == pytest.approx(c_rich - t_rich), step
        assert mood[step]["differ"] == MOOD_DIFFER[step] and mood[step]["n"] == SUGAR[step][0], step
        assert (mood[step]["treatment_living"], mood[step]["control_living"]) == SUGAR[step][4:6]
        assert tuple(mood[step][k] for k in COUNTS) == SUGAR[step][6:], step
    # survival is alive itself, over all four agents, with no dead left out
    alive = {r["step"]: r for r in out["categorical"] if r["field"] == "alive"}
    for step, (t_share, c_share, differ) in ALIVE.items():
        r = alive[step]
        assert r["n"] == 4 and r["differ"] == pytest.approx(differ) and "dead_both" not in r
        assert r["shares"]["true"]["diff"] == pytest.approx(t_share - c_share), step
    notes = [n for n in out["notes"] if "living agents" in n]
    assert [n.split("'")[1] for n in notes] == ["sugar", "mood"]
    assert ("At step 6: 1 alive in both, 0 dead in the treatment only, 1 in the control only, 2 in both; "
            "mean over the living: treatment 7.25 (2 agents), control 4 (1).") in notes[0]


def test_the_compare_command_prints_the_rule_and_the_differences_over_the_living(dying, capsys):
    root, control, treatment = dying
    capsys.readouterr()
    assert main(["compare", str(root), control, treatment, "--state", "sugar"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"note: 'sugar' is compared over living agents \(alive = false left out.*only over the agents "
                     r"alive in both runs\. At step 6: 1 alive in both", out)
    rows = {int(c[1]): c for c in (line.split() for line in out.splitlines()) if c[:1] == ["sugar"]}
    assert [(rows[s][2], rows[s][3]) for s in (1, 2, 3, 6)] == [("3", "0"), ("1", "1.5"), ("1", "3"), ("1", "7.5")]


def test_an_agents_value_is_none_in_the_arm_where_it_is_dead(dying):
    root, control, treatment = dying
    got = {(r["step"], r["agent_id"]): (r["control"], r["treatment"], r["diff"])
           for r in agent_differences(root, control, treatment, "sugar")}
    assert got[(3, "a0")] == (7.0, 10.0, 3.0)
    assert got[(3, "a2")] == (None, 1.5, None)          # the control's a2 starved at step 2
    assert got[(2, "a1")] == (0.5, None, None)          # the treatment's a1 starved at step 2
    assert got[(3, "a3")] == (None, None, None)


def test_the_reports_per_agent_differences_leave_the_dead_out(dying):
    root, control, treatment = dying
    with open_store(StudyLayout(root)) as con:
        q = state_reads.paired_quantiles(con, treatment, control, "sugar")
        changed = state_reads.paired_changed_share(con, treatment, control, "mood")
        # each arm's living mean is the report's band mean of that run: one definition of the living
        bands = {run: dict(zip(*(state_reads.quantile_bands(con, run, "sugar")[k] for k in ("steps", "mean"))))
                 for run in (treatment, control)}
    assert q["steps"] == [1, 2, 3, 4, 5, 6]
    assert q["pairs"] == [SUGAR[s][0] for s in q["steps"]]
    assert q["left_out"] == [sum(SUGAR[s][6:]) for s in q["steps"]]
    assert q["mean"] == pytest.approx([SUGAR[s][1] for s in q["steps"]])
    assert changed["changed_share"] == [MOOD_DIFFER[s] for s in changed["steps"]]
    assert changed["pairs"] == [SUGAR[s][0] for s in changed["steps"]]
    for step, (_, _, t_mean, c_mean, *_) in SUGAR.items():
        assert (bands[treatment][step], bands[control][step]) == pytest.approx((t_mean, c_mean)), step


def test_an_effect_reads_each_arms_living_and_per_agent_differences_over_agents_alive_in_both(dying):
    root = dying[0]
    effect = run_effect(root, 2, {"policy_at": 2}, replicates=2, workers=1)
    assert effect.completed == 2
    table = effect_table(root, effect.effect_id)
    states = {(r["field"], r["step"]): r for r in table["states"]}
    living = {(r["field"], r["step"]): r for r in table["living"]}
    shares = {(r["field"], r["category"], r["step"]): r for r in table["categories"]}
    for step, (both, diff, t_mean, c_mean, t_living, c_living, *dead) in SUGAR.items():
        r = states[("sugar", step)]
        assert (r["n"], r["mean"], r["mean_abs"]) == (2, pytest.approx(diff), pytest.approx(abs(diff))), step
        assert r["share_changed"] == (0.0 if diff == 0 else 1.0)          # a0 moved from the fork on
        assert (r["agents"], *(r[k] for k in COUNTS)) == (both, *dead), step
        lv = living[("sugar", step)]
        assert (lv["n"], lv["mean"]) == (2, pytest.approx(t_mean - c_mean)), step
        assert (lv["treatment_mean"], lv["control_mean"]) == pytest.approx((t_mean, c_mean))
        assert (lv["treatment_living"], lv["control_living"]) == (t_living, c_living)
    for step, (t_rich, c_rich) in MOOD_RICH.items():
        assert shares[("mood", "rich", step)]["mean"] == pytest.approx(t_rich - c_rich), step
        assert shares[("mood", "poor", step)]["mean"] == pytest.approx(c_rich - t_rich), step
    for step, (t_share, c_share, differ) in ALIVE.items():       # over everyone: no dead left out of alive
        r = states[("alive", step)]
        assert r["mean"] == pytest.approx(t_share - c_share) and r["share_changed"] == pytest.approx(differ)
        assert "dead_both" not in r
        assert shares[("alive", "true", step)]["mean"] == pytest.approx(t_share - c_share)
    assert [n.split("'")[1] for n in table["notes"]] == ["sugar", "mood"]
    assert "At step 6, per pair on average: 1 alive in both, 0 dead in the treatment only, 1 in the control only, " \
           "2 in both." in table["notes"][0]
    tidy = [r for r in effect_rows(root, effect.effect_id) if r["what"] == "living"]
    assert [(r["name"], r["step"]) for r in tidy] == [("sugar", s) for s in range(1, 7)]   # alive: everyone
    assert {r["step"]: r["mean"] for r in tidy if r["name"] == "sugar"} == pytest.approx(
        {s: v[2] - v[3] for s, v in SUGAR.items()})


def test_a_study_without_alive_counts_every_agent_as_before(tmp_path):
    """The same study with no alive field: the dead rule has nothing to go by, so every agent is paired at
    every step, its last sugar included, and the rows carry no counts of the dead."""
    model = MODEL.replace('"alive": self.alive[agent_id], ', "")
    root = write_tiny_study(tmp_path / "undying", model, SIMULATION, agents=4,
                            study={"display_states": ["sugar", "mood"]}, environment=ENVIRONMENT)
    control = desim.run_study(desim.load_study(root)).run_id
    treatment = branch(root, control, 2, params={"policy_at": 2}).run_id
    out = compare(root, control, treatment)
    step3 = next(r for r in out["paired"] if r["step"] == 3)
    # a0 10 - 7, a1 -0.5 - -0.5, a2 1.5 - -0.5, a3 -0.5 - -0.5
    assert step3 == {"step": 3, "field": "sugar", "n": 4, "mean_diff": pytest.approx(5 / 4),
                     "sd_diff": pytest.approx((((3 - 1.25) ** 2 + 2 * 1.25 ** 2 + 0.75 ** 2) / 4) ** 0.5),
                     "min_diff": 0.0, "max_diff": 3.0}
    mood3 = next(r for r in out["categorical"] if r["step"] == 3)
    assert set(mood3) == {"step", "field", "n", "differ", "shares"} and mood3["n"] == 4
    assert mood3["shares"]["rich"]["diff"] == 0.0          # a0 rich in both; the other three poor in both
    assert not [n for n in out["notes"] if "living agents" in n]
