"""Loading a study: every bad file gives an error naming the file and the field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import desim
from desim.cli import main
from desim.study.clock import Clock
from desim.study.interventions import Interventions
from desim.records import Persona
from desim.study.interventions import Broadcast, ScheduledEvent


def edit(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def test_a_key_given_twice_in_one_object_is_refused_with_its_lines(study_copy):
    """Python's reader keeps the last of two: an old n_steps left above a new one ran 3 steps, and validate
    said "valid study"."""
    root = study_copy("opinion_diffusion")
    path = root / "simulation" / "simulation.json"
    text = path.read_text()
    at = text.index('"n_steps"')
    path.write_text(text[:at] + '"n_steps": 100,\n  ' + text[at:])
    line = text.count("\n", 0, at) + 1
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert str(info.value).endswith(f"simulation/simulation.json: 'n_steps' is given twice in one object (lines {line} "
                                    f"and {line + 1}): JSON readers keep one of them without a word; give it once")
    path.write_text('{"parameters": {"a": 1}, "decision": {"ref": "m:A", "args": {"a": 2}}}')  # one per object
    with pytest.raises(desim.StudyConfigError) as info:     # refused for other reasons, not as a repeated key
        desim.load_study(root)
    assert "given twice" not in str(info.value)


def test_malformed_json_names_file_and_line(study_copy):
    root = study_copy("opinion_diffusion")
    path = root / "simulation" / "simulation.json"
    path.write_text('{"n_steps": 12,\n "seed": }')
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    msg = str(info.value)
    assert "simulation/simulation.json" in msg and "malformed JSON at line 2" in msg


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_as_not_json_naming_line_and_column(study_copy, constant):
    """Python's reader takes them; JSON has no such numbers, and re-read they would turn into None."""
    root = study_copy("opinion_diffusion")
    path = root / "simulation" / "simulation.json"
    text = path.read_text()
    at = text.index('"epsilon"')
    value = text.index(":", at) + 2                       # where epsilon's value starts
    end = min(i for i in (text.index(",", value), text.index("}", value)))
    path.write_text(text[:value] + constant + text[end:])
    line, column = text.count("\n", 0, value) + 1, value - text.rfind("\n", 0, value)
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    msg = str(info.value)
    assert "simulation/simulation.json" in msg
    assert f"malformed JSON at line {line} column {column}: {constant} is not a JSON number" in msg


def test_a_bad_command_line_override_is_named_as_such(study_copy):
    """--steps 0 is the command line's mistake, not the file's: the message says which, and what the file says."""
    root = study_copy("opinion_diffusion")
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root, steps=0)
    n_steps = json.loads((root / "simulation" / "simulation.json").read_text())["n_steps"]
    assert f"n_steps: Input should be greater than or equal to 1 (got int 0); the value is --steps 0 (the file " \
           f"says {n_steps})" in str(info.value)


def test_unknown_key_is_an_error(study_copy):
    root = study_copy("opinion_diffusion")
    edit(root / "simulation" / "simulation.json", lambda d: d.update(n_step=3))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert "simulation.json: n_step: unknown key" in str(info.value)


def test_a_misspelt_required_key_is_one_problem_not_two(study_copy):
    root = study_copy("opinion_diffusion")
    edit(root / "simulation" / "simulation.json", lambda d: d.update(n_step=d.pop("n_steps")))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert info.value.problems == [("n_step", "unknown key; did you mean 'n_steps'? (required, and missing)")]


def test_a_misspelt_optional_key_says_which_key_was_meant(study_copy):
    """An optional key mistyped would otherwise leave its default in force: the error names the key meant,
    inside lists and either kind of event, and only a key the object does not already give."""
    root = study_copy("opinion_diffusion")
    edit(root / "simulation" / "simulation.json", lambda d: d.update(interaction_round=d.pop("interaction_rounds")))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert info.value.problems == [("interaction_round", "unknown key; did you mean 'interaction_rounds'? "
                                                         "(unknown keys are not allowed)")]
    edit(root / "simulation" / "simulation.json", lambda d: d.update(interaction_rounds=d["interaction_round"]))
    with pytest.raises(desim.StudyConfigError) as info:     # both given: the stray one is just unknown
        desim.load_study(root)
    assert info.value.problems == [("interaction_round", "unknown key (check the spelling; unknown keys are "
                                                         "not allowed)")]
    edit(root / "simulation" / "simulation.json", lambda d: d.pop("interaction_round"))
    edit(root / "environment" / "environment.json",
         lambda d: (d["scheduled_events"][0].update(notes=d["scheduled_events"][0].pop("note")),
                    d.update(broadcast=d.pop("broadcasts"))))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert sorted(info.value.problems) == [
        ("broadcast", "unknown key; did you mean 'broadcasts'? (unknown keys are not allowed)"),
        ("scheduled_events[0].notes", "unknown key; did you mean 'note'? (unknown keys are not allowed)")]


def test_nested_unknown_key_names_the_path(study_copy):
    root = study_copy("opinion_diffusion")
    edit(root / "environment" / "environment.json", lambda d: d["scheduled_events"][0].update(atstep=3))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert "environment/environment.json: scheduled_events[0].atstep: unknown key" in str(info.value)


def test_wrong_type_names_field_and_expectation(study_copy):
    root = study_copy("opinion_diffusion")
    edit(root / "simulation" / "simulation.json", lambda d: d.update(n_steps="twelve"))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    msg = str(info.value)
    assert "simulation.json: n_steps:" in msg and "integer" in msg and "twelve" in msg


def test_duplicate_agent_id(tmp_path, study_copy):
    root = study_copy("opinion_diffusion")
    edit(root / "population" / "population.json", lambda d: (d.pop("provider"), d.update(personas=[
        {"agent_id": "x1"}, {"agent_id": "x2"}, {"agent_id": "x1"}])))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert "population/population.json: personas[2].agent_id: duplicate agent_id 'x1' (first at personas[0])" \
        in str(info.value)


def test_population_needs_exactly_one_source(study_copy):
    root = study_copy("opinion_diffusion")
    edit(root / "population" / "population.json", lambda d: d.update(roster="people.json"))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root)
    assert "exactly one of personas, roster, provider" in str(info.value)


def test_roster_csv_and_unknown_parameter(study_copy):
    root = study_copy("opinion_diffusion")
    rows = "".join(f"u{i},0.{i},0.5\n" for i in range(1, 7))
    (root / "population" / "people.csv").write_text("agent_id,opinion,media_trust\n" + rows)
    edit(root / "population" / "population.json", lambda d: (d.pop("provider"), d.update(roster="people.csv")))
    result = desim.run_study(desim.load_study(root, steps=2))
    assert result.status == "completed" and result.rows_written == 12
    # a network that cannot be built over this population is a config error, not a traceback
    edit(root / "population" / "population.json", lambda d: d["interaction"].update(k=10))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.run_study(desim.load_study(root, steps=2))
    assert "population/population.json: interaction: cannot build a 'watts_strogatz' network over 6" \
        in str(info.value)
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root, params={"n_agent": 5})
    assert "unknown parameter(s) ['n_agent']" in str(info.value)


def test_a_parameter_that_makes_an_invalid_step_is_named_with_its_origin(study_copy, capsys):
    """The error names the field and the parameter whose value it holds, and where that value was set."""
    root = study_copy("opinion_diffusion")
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root, params={"campaign_week": -1})
    assert "scheduled_events[0].at_step: Input should be greater than or equal to 0 (got int -1); the value is " \
           "parameter 'campaign_week' = -1 (set by --set)" in str(info.value)
    edit(root / "simulation" / "simulation.json", lambda d: d["parameters"].update(campaign_week=-2))
    assert main(["run", str(root), "--steps", "2"]) == 2
    assert "parameter 'campaign_week' = -2 (its default in simulation.json)" in capsys.readouterr().err


def test_interventions_ops_selectors_and_ttl():
    people = [Persona(agent_id="a", attributes={"dorm": "A", "budget": 10}),
              Persona(agent_id="b", attributes={"dorm": "B", "budget": 10})]
    iv = Interventions({"price": 4.0},
                       [ScheduledEvent(at_step=0, name="open", target="price", op="add", value=1),
                        ScheduledEvent(at_step=2, name="rise", target="price", op="multiply", value=1.5),
                        ScheduledEvent(at_step=2, name="grant", target="budget", op="add", value=5,
                                       selector={"dorm": ["B"]})],
                       [Broadcast(at_step=0, name="welcome", content="hi", ttl=1),
                        Broadcast(at_step=2, name="dorm_b_news", content="b only", ttl=2, selector={"dorm": "B"})],
                       people)
    fired0 = iv.fire(0)
    assert [f["name"] for f in fired0] == ["open", "welcome"] and iv.value("price") == 5.0
    assert [b["name"] for b in iv.active_broadcasts("a")] == ["welcome"]
    iv.fire(1)
    assert iv.active_broadcasts("a") == []
    iv.fire(2)
    assert iv.value("price") == 7.5
    assert iv.attribute("a", "budget") == 10 and iv.attribute("b", "budget") == 15
    assert [b["name"] for b in iv.active_broadcasts("b")] == ["dorm_b_news"]
    assert iv.active_broadcasts("a") == [] and iv.active_broadcasts() == []
    iv.fire(3)
    assert [b["name"] for b in iv.active_broadcasts("b")] == ["dorm_b_news"]
    iv.fire(4)
    assert iv.active_broadcasts("b") == []


def test_arithmetic_event_needs_a_number():
    with pytest.raises(ValueError, match="needs a number"):
        ScheduledEvent(at_step=1, name="x", target="price", op="add", value="lots")


def test_clock_converts_durations_to_steps():
    day = Clock("day")
    assert day.minutes(45) == pytest.approx(45 / 1440)
    assert day.duration(2, "day") == 2.0
    assert Clock("week").days(7) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        Clock("step").minutes(3)


def test_cli_new_then_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "my_study"]) == 0
    assert main(["validate", "studies/my_study"]) == 0
    assert main(["run", "studies/my_study", "--steps", "3", "--set", "n_agents=30"]) == 0
    out = capsys.readouterr().out
    assert "completed" in out and "panel rows written 90" in out
    assert main(["sql", "studies/my_study", "SELECT count(*) AS n FROM panel"]) == 0
    assert "90" in capsys.readouterr().out
    assert main(["run", "studies/my_study", "--set", "nope=1"]) == 2
    assert "unknown parameter" in capsys.readouterr().err


def test_cli_new_lists_only_packaged_templates(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "studies" / "mine").mkdir(parents=True)          # a user's study is not a template
    (tmp_path / "studies" / "mine" / "study.json").write_text('{"id": "mine"}')
    assert main(["new", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    packaged = sorted(p.parent.name for p in (Path(desim.__file__).parent / "templates").glob("*/study.json"))
    assert listed == packaged and "starter" in listed
    assert main(["new", "x", "--template", "mine"]) == 2
    assert capsys.readouterr().err == f"desim: error: unknown template 'mine' (templates: {', '.join(packaged)})\n"
    assert main(["new", "bad id"]) == 2
    assert "may use only letters, digits" in capsys.readouterr().err
    assert not (tmp_path / "studies" / "x").exists()


@pytest.mark.parametrize("where, bad, says", [
    ("personas", {"agent_id": "x2", "colour": "red"}, "personas[1].colour: unknown key"),
    ("personas", {"attributes": {}}, "personas[1].agent_id: required field is missing"),
    ("personas", {"agent_id": ""}, "personas[1].agent_id: String should have at least 1 character"),
    ("personas", {"agent_id": 7}, "personas[1].agent_id: Input should be a valid string"),
    ("roster", "x2", "people.json: [1]: Input should be a dictionary or an instance of Persona"),
    ("roster", {"agent_id": "x2", "colour": "red"}, "people.json: [1].colour: unknown key"),
])
def test_a_bad_persona_is_refused_naming_the_file_item_and_field(study_copy, where, bad, says):
    root = study_copy("opinion_diffusion")
    people = [{"agent_id": "x1"}, bad]
    if where == "roster":
        (root / "population" / "people.json").write_text(json.dumps(people))
        edit(root / "population" / "population.json", lambda d: (d.pop("provider"), d.update(roster="people.json")))
    else:
        edit(root / "population" / "population.json", lambda d: (d.pop("provider"), d.update(personas=people)))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.load_study(root) if where == "personas" else desim.run_study(desim.load_study(root))
    assert says in str(info.value)


def test_a_file_named_by_study_code_is_named_from_where_the_command_was_typed(study_copy, monkeypatch, capsys):
    """The study's own check names simulation/simulation.json as the study sees it; typed from the study's
    parent folder, the error names the file from there, as desim's own checks do."""
    from desim.cli import main
    root = study_copy("opinion_diffusion")
    monkeypatch.chdir(root.parent.parent)
    assert main(["run", "studies/opinion_diffusion", "--set", "mu=5", "--set", "epsilon=-1", "-q"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "desim: error: studies/opinion_diffusion/simulation/simulation.json: parameters.epsilon: opinion_diffusion: "
        "must be 0 or more (got -1.0)",
        "studies/opinion_diffusion/simulation/simulation.json: parameters.mu: opinion_diffusion: must be between 0 "
        "and 1 (got 5.0)"]
    monkeypatch.chdir(root)
    assert main(["run", ".", "--set", "campaign_weight=2", "-q"]) == 2
    assert capsys.readouterr().err == ("desim: error: simulation/simulation.json: parameters.campaign_weight: "
                                       "opinion_diffusion: must be between 0 and 1 (got 2.0)\n")
    assert not (root / "runs").exists()                 # refused before anything was written


def test_arithmetic_on_a_layer_that_holds_no_number_is_refused_before_the_run(tmp_path):
    """'none' + 1 failed at its step, deep in the run, and 'a' + 'b' would have joined two texts; a set to a
    number before it makes it fine."""
    import json

    from walk_study import write_walk_study
    root = write_walk_study(tmp_path / "walk", n_steps=4)
    path = root / "environment" / "environment.json"
    env = json.loads(path.read_text())
    env["layers"].update({"policy": "none", "level": "low"})
    env["scheduled_events"] += [
        {"at_step": 2, "name": "tighten", "target": "policy", "op": "add", "value": 1},
        {"at_step": 1, "name": "score", "target": "level", "op": "set", "value": 3},
        {"at_step": 3, "name": "double", "target": "level", "op": "multiply", "value": 2},
        {"at_step": 4, "name": "again", "target": "level", "op": "set", "value": "high"},
        {"at_step": 4, "name": "more", "target": "level", "op": "multiply", "value": 3}]
    path.write_text(json.dumps(env))
    with pytest.raises(desim.StudyConfigError) as info:
        desim.run_study(desim.load_study(root))
    assert str(info.value).splitlines() == [
        "environment/environment.json: scheduled_events[1]: 'tighten' would add 1 to layer 'policy' at step 2, "
        "when it holds 'none', not a number",
        "environment/environment.json: scheduled_events[5]: 'more' would multiply layer 'level' by 3 at step 4, "
        "when it holds 'high', not a number"]
    assert not (root / "runs").exists()
