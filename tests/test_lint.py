"""``desim validate`` warnings: the ``propagation`` label against the wiring,
and posts that no agent can ever read. Silent on every shipped study."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from desim.cli import main
from desim.lint import validate

STUDIES = Path(__file__).resolve().parent.parent / "studies"
SHIPPED = sorted(p.parent.name for p in STUDIES.glob("*/study.json"))

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, NeighborFeed, Observation, neighbors_fn


class Env(EnvironmentProvider):
    def __init__(self, bus=True, carry=False):
        self.with_bus, self.carry = bus, carry

    def reset(self, seed):
        if self.with_bus:
            self.bus = InMemoryMessageBus(carry_previous_step=self.carry)
            self.feed = NeighborFeed(neighbors_fn(self.ctx.graph), self.bus)

    def observe_batch(self, ids, t, r):
        return [Observation(agent_id=a, step=t, round_idx=r) for a in ids]

    def apply(self, actions):
        if self.with_bus:
            self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {}


class FeedOnlyEnv(Env):
    """The bus is held only by the NeighborFeed (no self.bus), and its posts are never stored."""

    def reset(self, seed):
        self.feed = NeighborFeed(neighbors_fn(self.ctx.graph), InMemoryMessageBus(carry_previous_step=self.carry))


class FeedsInADictEnv(Env):
    """Feeds kept by name in a dict (one per channel), the bus with them: found there, its carry read."""

    def reset(self, seed):
        bus = InMemoryMessageBus(carry_previous_step=self.carry)
        self.parts = {"all": NeighborFeed(neighbors_fn(self.ctx.graph), bus)}

    def apply(self, actions):
        self.parts["all"].ingest(actions, self.ctx.step, self.ctx.round_idx)

    def drain_messages(self):
        return self.parts["all"].bus.drain()


class Speak(DecisionModel):
    def __init__(self, kind="post"):
        self.kind = kind

    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind=self.kind, payload={"content": "hi"})
                for o in observations]
'''


def make_study(root: Path, *, propagation: str, bus: bool, carry: bool = False, rounds: int = 1,
               kind: str = "post", interaction: dict | None = None, env: str = "Env") -> Path:
    for sub in ("environment", "population", "simulation"):
        (root / sub).mkdir(parents=True)
    (root / "model.py").write_text(MODEL)
    (root / "study.json").write_text(json.dumps({"id": root.name}))
    (root / "environment" / "environment.json").write_text(json.dumps(
        {"provider": {"ref": f"model:{env}", "args": {"bus": bus, "carry": carry}}}))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"a{i}"} for i in range(6)],
        "interaction": interaction or {"kind": "ring", "k": 2}, "propagation": propagation}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": 3, "interaction_rounds": rounds, "decision": {"ref": "model:Speak", "args": {"kind": kind}}}))
    return root


def test_contagion_without_a_bus_warns(tmp_path):
    report = validate(make_study(tmp_path / "mute", propagation="contagion", bus=False, kind="choose"))
    assert len(report.warnings) == 1
    assert "'contagion' but the environment wires no message bus" in report.warnings[0]


def test_independent_with_a_bus_warns(tmp_path):
    report = validate(make_study(tmp_path / "chatty", propagation="independent", bus=True, rounds=2))
    assert len(report.warnings) == 1
    assert "'independent' but the environment wires a message bus" in report.warnings[0]


def test_posts_with_one_round_and_no_carry_warn(tmp_path):
    report = validate(make_study(tmp_path / "delayed", propagation="contagion", bus=True, rounds=1))
    assert report.messages_in_probe == 6
    assert len(report.warnings) == 1
    assert "interaction_rounds: 1 and carry_previous_step off" in report.warnings[0]


@pytest.mark.parametrize("rounds,carry", [(1, True), (3, False)])
def test_a_real_conversation_or_a_deliberate_delay_is_silent(tmp_path, rounds, carry):
    report = validate(make_study(tmp_path / "fine", propagation="contagion", bus=True, rounds=rounds, carry=carry))
    assert report.warnings == []
    assert report.messages_in_probe == 6 * rounds


def test_one_round_without_posts_warns_as_several_rounds_do(tmp_path):
    """A bus wired, labelled contagion, and nothing posted: nobody hears anyone, with one round as with three."""
    report = validate(make_study(tmp_path / "quiet", propagation="contagion", bus=True, kind="move"))
    assert report.messages_in_probe == 0
    assert len(report.warnings) == 1 and "a message bus is wired but step 1 posted no message" in report.warnings[0]


def test_broadcast_then_local_without_a_bus_or_the_network_warns(tmp_path):
    """The label says the broadcast spreads locally; nothing in the study can carry it (the contagion label
    warned for the same wiring, this one did not)."""
    root = make_study(tmp_path / "nolocal", propagation="broadcast_then_local", bus=False, kind="choose")
    env = root / "environment" / "environment.json"
    env.write_text(json.dumps({**json.loads(env.read_text()),
                               "layers": {"news": 0.0}, "broadcasts": [{"at_step": 1, "name": "news", "content": "x", "ttl": 1}]}))
    warnings = validate(root).warnings
    assert [w for w in warnings if "'broadcast_then_local' but the environment wires no message bus and never "
                                   "reads the network" in w]
    quiet = make_study(tmp_path / "local", propagation="broadcast_then_local", bus=True, rounds=2)
    quiet_env = quiet / "environment" / "environment.json"
    quiet_env.write_text(env.read_text().replace('"bus": false', '"bus": true').replace('"choose"', '"post"'))
    assert not [w for w in validate(quiet).warnings if "broadcast_then_local" in w]


def test_bus_without_neighbours_warns(tmp_path):
    report = validate(make_study(tmp_path / "alone", propagation="contagion", bus=True, rounds=2,
                                 interaction={"kind": "none"}))
    assert any("interaction.kind is 'none'" in w for w in report.warnings)


def test_cli_strict_refuses_warnings_with_status_2(tmp_path, capsys):
    root = make_study(tmp_path / "mute", propagation="contagion", bus=False, kind="choose")
    assert main(["validate", str(root)]) == 0
    assert "warning: population/population.json: propagation is 'contagion'" in capsys.readouterr().out
    assert main(["validate", "--strict", str(root)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"desim: error: {root}/population/population.json: propagation is 'contagion' but the "
                   "environment wires no message bus (none among its attributes after reset, and no message "
                   "posted): nothing propagates between agents\n")


def test_a_bus_held_only_by_a_neighbor_feed_is_found(tmp_path):
    report = validate(make_study(tmp_path / "feed", propagation="contagion", bus=True, carry=True,
                                 env="FeedOnlyEnv"))
    # the bus only in self.feed is found and its posts stored (they were left out of the messages table)
    assert report.messages_in_probe > 0
    assert report.warnings == []


@pytest.mark.parametrize("carry", [True, False])
def test_a_bus_in_a_dict_of_feeds_is_found_and_its_carry_read(tmp_path, carry):
    report = validate(make_study(tmp_path / "dict", propagation="contagion", bus=True, carry=carry,
                                 env="FeedsInADictEnv"))
    assert report.messages_in_probe > 0
    unread = [w for w in report.warnings if "no agent can ever read them" in w]
    assert bool(unread) is (not carry)          # carried to the next step: read; not carried: never


# docs/columnar.md, "Messages on the columnar path": the feed is self.feed (not self.bus) and drain_messages
# is overridden; plus the carry switch, state_columns and a behaviour model to make it a study
COLUMNAR = '''
import numpy as np
from desim import ActionColumns, DecisionModel, EnvironmentProvider
from desim.messaging.columnar import ColumnarFeed

class Env(EnvironmentProvider):
    def __init__(self, carry=False):
        self.carry = carry

    def reset(self, seed):
        self.v = self.ctx.streams.numpy("values").random(len(self.ctx.agent_ids))
        self.feed = ColumnarFeed.from_network(self.ctx.network, carry_previous_step=self.carry)

    def apply_columns(self, idx, actions):
        self.v[idx] = actions.payload["v"]
        self.feed.post(idx, self.ctx.step, self.ctx.round_idx, {"v": actions.payload["v"]})

    def observe_columns(self, idx, t, round_idx):
        count, total = self.feed.neighbour_sum(idx, t, round_idx, "v")
        return {"v": self.v[idx], "heard_mean": total / np.maximum(count, 1), "heard": count}

    def drain_messages(self):
        return self.feed.drain()

    def state_columns(self):
        return {"v": self.v}


class Average(DecisionModel):
    def decide_columns(self, obs, idx, t, round_idx):
        return ActionColumns(kind="post", payload={"v": (obs["v"] + obs["heard_mean"]) / 2})
'''


def make_columnar_study(root: Path, *, carry: bool, rounds: int = 1) -> Path:
    make_study(root, propagation="contagion", bus=True, rounds=rounds)
    (root / "model.py").write_text(COLUMNAR)
    (root / "environment" / "environment.json").write_text(json.dumps(
        {"provider": {"ref": "model:Env", "args": {"carry": carry}}}))
    (root / "simulation" / "simulation.json").write_text(json.dumps(
        {"n_steps": 3, "interaction_rounds": rounds, "decision": {"ref": "model:Average"}}))
    return root


def test_columnar_feed_with_carry_is_a_wired_bus(tmp_path, capsys):
    root = make_columnar_study(tmp_path / "columnar", carry=True)
    report = validate(root)
    assert report.messages_in_probe == 6
    assert report.warnings == []
    assert main(["validate", "--strict", str(root)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_columnar_feed_without_carry_on_one_round_warns(tmp_path):
    report = validate(make_columnar_study(tmp_path / "columnar", carry=False))
    assert report.messages_in_probe == 6
    assert len(report.warnings) == 1
    assert "interaction_rounds: 1 and carry_previous_step off" in report.warnings[0]


def test_columnar_feed_without_carry_on_two_rounds_is_silent(tmp_path):
    report = validate(make_columnar_study(tmp_path / "columnar", carry=False, rounds=2))
    assert report.messages_in_probe == 12
    assert report.warnings == []


def test_every_shipped_study_is_found():
    assert {"opinion_diffusion", "dorm_deliberation"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_studies_are_silent(name):
    report = validate(STUDIES / name)
    assert report.warnings == [], report.warnings
    assert report.n_agents > 0


def test_validate_refuses_a_warm_start_from_a_run_the_store_does_not_have(study_copy, capsys):
    import json as _json
    from desim.cli import main as _main
    root = study_copy("opinion_diffusion")
    sim_file = root / "simulation" / "simulation.json"
    sim = _json.loads(sim_file.read_text())
    sim["warm_start"] = {"from_run": "rnosuchrun0", "at_step": 2}
    sim_file.write_text(_json.dumps(sim))
    assert _main(["validate", str(root)]) == 2
    assert "warm_start.from_run: no run 'rnosuchrun0' in this study's store" in capsys.readouterr().err


@pytest.mark.parametrize("target, warned", [("grup", True), ("vaccinated", False), ("group", False)])
def test_an_event_setting_an_attribute_like_one_the_agents_have_warns(tmp_path, target, warned):
    """'grup' for 'group' on a selected event passed validate --strict: the event gave its agents a new
    attribute nothing reads and the intervention did nothing. A new name unlike any is legitimate."""
    root = make_study(tmp_path / "s", propagation="contagion", bus=True, rounds=2)
    pop = json.loads((root / "population" / "population.json").read_text())
    pop["personas"] = [{"agent_id": f"a{i}", "attributes": {"group": "L" if i < 3 else "R"}} for i in range(6)]
    (root / "population" / "population.json").write_text(json.dumps(pop))
    env = json.loads((root / "environment" / "environment.json").read_text())
    env["scheduled_events"] = [{"at_step": 2, "name": "shock", "target": target, "value": "M",
                                "selector": {"group": "L"}}]
    (root / "environment" / "environment.json").write_text(json.dumps(env))
    said = [w for w in validate(root).warnings if "scheduled_events[0].target" in w]
    assert said == ([f"environment/environment.json: scheduled_events[0].target: no agent has attribute 'grup', so "
                     "event 'shock' gives its agents a new one; did you mean 'group'? (a study reading 'group' would "
                     "see no change)"] if warned else [])


def test_a_wired_bus_that_gets_no_post_warns_naming_the_kinds_ingest_posts(tmp_path):
    """Actions of kind 'share' through NeighborFeed.ingest post nothing (the seed's rule: only post and reply);
    a study of three rounds on a network validated without a word, and stored no message."""
    root = make_study(tmp_path / "s", propagation="contagion", bus=True, rounds=3, kind="share")
    [said] = [w for w in validate(root).warnings if "posted no message" in w]
    assert "NeighborFeed.ingest posts only actions of kind 'post' or 'reply'" in said
    assert not [w for w in validate(make_study(tmp_path / "t", propagation="contagion", bus=True, rounds=3)).warnings
                if "posted no message" in w]


def test_validate_refuses_a_warm_start_that_desim_run_would_refuse(study_copy, capsys):
    """A warm start from a 3-round run that did not record its rounds passed validate ("valid") and was
    then refused by desim run; both refuse it now, naming simulation.json's warm_start."""
    import json as _json
    from desim.cli import main as _main
    root = study_copy("opinion_diffusion")
    sim_file = root / "simulation" / "simulation.json"
    sim = _json.loads(sim_file.read_text())
    sim.update(interaction_rounds=3, record_rounds=False, n_steps=3)
    sim_file.write_text(_json.dumps(sim))
    assert _main(["run", str(root), "-q", "--set", "n_agents=40"]) == 0
    (run_id,) = [line.split()[1].rstrip(":") for line in capsys.readouterr().out.splitlines() if line.startswith("run ")]
    sim["warm_start"] = {"from_run": run_id, "at_step": 2}
    sim_file.write_text(_json.dumps(sim))
    for command in (["validate", str(root)], ["run", str(root), "-q"]):
        assert _main(command) == 2, command
        err = capsys.readouterr().err
        assert f"{sim_file}: warm_start: interaction_rounds is 3" in err, err


def test_validate_without_the_probe_checks_an_llm_study_s_llm_block(study_copy, capsys):
    """``--no-probe`` ("only validate the files") said 'valid study' of an llm block the run refuses."""
    study_copy("opinion_diffusion")
    root = study_copy("opinion_diffusion_llm")
    sim = root / "simulation" / "simulation.json"
    data = json.loads(sim.read_text())
    sim.write_text(json.dumps({**data, "llm": {**data["llm"], "max_call": 3}}))
    assert main(["validate", str(root), "--no-probe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"desim: error: {sim}: llm.max_call: unknown key; did you mean "
                                               "'max_calls'?")


def test_an_llm_block_a_rule_study_does_not_read_is_left_alone_but_a_key_in_it_is_refused_by_every_load(
        tmp_path, capsys):
    """A rule study keeping an llm block: its settings are not read (validate and run agree), but a key there
    would be stored with every run's configuration, so run and validate both refuse it."""
    root = make_study(tmp_path / "llm", propagation="contagion", bus=True, rounds=3)
    sim = root / "simulation" / "simulation.json"
    data = json.loads(sim.read_text())
    sim.write_text(json.dumps({**data, "llm": {"model": "m", "max_call": 3}}))
    assert main(["validate", str(root), "--no-probe"]) == 0
    sim.write_text(json.dumps({**data, "llm": {"model": "m", "api_key": "sk-secret"}}))
    for command in (["validate", str(root), "--no-probe"], ["run", str(root), "--quiet"]):
        capsys.readouterr()
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"desim: error: {sim}: llm.api_key: a key in the study's "
                                                   "files would be stored")
    assert not (root / "runs").exists() or "sk-secret" not in "".join(
        p.read_text(errors="replace") for p in (root / "runs").rglob("*.json"))
