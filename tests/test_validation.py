"""Bad input is refused before anything is written: one line naming the file and
field (or line and column), exit status 2, and no store, runs row or live file."""
from __future__ import annotations


import pytest

from desim.cli import main
from failing_study import edit, write_study
from storeq import sql

S = "studies/probe"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_study(tmp_path / "studies" / "probe")


def refused(capsys, root, argv, line):
    """``desim <argv>`` exits 2 with exactly ``desim: error: <line>`` and leaves no store behind."""
    code = main(argv)
    err = capsys.readouterr().err
    assert (code, err) == (2, f"desim: error: {line}\n")
    assert not (root / "runs").exists()


def sim(root, **kw):
    edit(root / "simulation" / "simulation.json", lambda d: d.update(kw))


def env(root, fn):
    edit(root / "environment" / "environment.json", fn)


# --- files that cannot be read as JSON -----------------------------------------------------

def test_json_with_bytes_that_are_not_utf8(root, capsys):
    (root / "study.json").write_bytes(b'{"id": "probe",\n "title": "caf\xe9"}')
    refused(capsys, root, ["run", S],
            f"{S}/study.json: not UTF-8 text: byte 0xe9 at line 2 (save the file as UTF-8)")


def test_a_directory_where_a_json_file_should_be(root, capsys):
    (root / "simulation" / "simulation.json").unlink()
    (root / "simulation" / "simulation.json").mkdir()
    refused(capsys, root, ["run", S], f"{S}/simulation/simulation.json: is a directory, not a file")


def test_json_nested_100000_deep(root, capsys):
    (root / "environment" / "environment.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(capsys, root, ["validate", S],
            f"{S}/environment/environment.json: JSON nested too deeply to be a study file")


def test_a_utf8_byte_order_mark_is_accepted(root, capsys):
    path = root / "study.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert main(["run", S]) == 0
    assert sql(root, "SELECT status FROM runs") == [("completed",)]


# --- strict JSON types and store-sized integers -----------------------------------------------

@pytest.mark.parametrize("field,value,expected", [
    ("n_steps", True, "n_steps: Input should be a valid integer (got bool true)"),
    ("n_steps", "12", 'n_steps: Input should be a valid integer (got str "12")'),
    ("interaction_rounds", True, "interaction_rounds: Input should be a valid integer (got bool true)"),
    ("record_rounds", "yes", 'record_rounds: Input should be a valid boolean (got str "yes")'),
    ("agent_processes", 1, "agent_processes: Input should be a valid boolean (got int 1)"),
    ("n_steps", 2**31, "n_steps: Input should be less than or equal to 2147483647 (got int 2147483648)"),
    ("seed", 2**63, "seed: Input should be less than or equal to 9223372036854775807 "
                    "(got int 9223372036854775808)"),
])
def test_strict_types_and_ranges_in_simulation_json(root, capsys, field, value, expected):
    sim(root, **{field: value})
    refused(capsys, root, ["run", S], f"{S}/simulation/simulation.json: {expected}")


def test_an_event_step_the_store_cannot_hold(root, capsys):
    env(root, lambda d: d.update(scheduled_events=[
        {"at_step": 2**31, "name": "far", "target": "level", "value": 2.0}]))
    refused(capsys, root, ["run", S], f"{S}/environment/environment.json: scheduled_events[0].at_step: "
                                      "Input should be less than or equal to 2147483647 (got int 2147483648)")


def test_an_arithmetic_event_needs_a_number_not_a_boolean(root, capsys):
    env(root, lambda d: d.update(scheduled_events=[
        {"at_step": 1, "name": "bump", "target": "level", "op": "add", "value": True}]))
    refused(capsys, root, ["run", S], f"{S}/environment/environment.json: scheduled_events[0].value: "
                                      "op 'add' needs a number, got bool")


# --- --set ---------------------------------------------------------------------------------------

def test_set_with_a_value_of_the_wrong_type(root, capsys):
    refused(capsys, root, ["run", S, "--set", "n_agents=abc"],
            f"{S}/simulation/simulation.json: parameters.n_agents: --set value 'abc' is not an int "
            "(declared as 4)")


# --- interventions -------------------------------------------------------------------------------

def test_an_event_on_a_misspelt_layer(root, capsys):
    env(root, lambda d: d.update(scheduled_events=[
        {"at_step": 2, "name": "bump", "target": "levle", "op": "add", "value": 1}]))
    refused(capsys, root, ["run", S], f"{S}/environment/environment.json: scheduled_events[0].target: "
                                      "unknown layer 'levle' (layers: level; an event with a selector changes "
                                      "agent attributes)")


def test_a_selector_that_matches_nobody(root, capsys):
    env(root, lambda d: d.update(broadcasts=[
        {"at_step": 1, "name": "memo", "content": "hi", "selector": {"group": "z"}}]))
    refused(capsys, root, ["run", S], f'{S}/environment/environment.json: broadcasts[0].selector: '
                                      '{"group": "z"} matches no agent of the 4')


def test_a_selector_on_an_attribute_nobody_has(root, capsys):
    env(root, lambda d: d.update(scheduled_events=[
        {"at_step": 1, "name": "grant", "target": "budget", "value": 5, "selector": {"grp": "a"}}]))
    refused(capsys, root, ["run", S], f"{S}/environment/environment.json: scheduled_events[0].selector.grp: "
                                      "no agent has attribute 'grp' (attributes: budget, group)")


def test_adding_to_an_attribute_the_agents_lack(root, capsys):
    env(root, lambda d: d.update(scheduled_events=[
        {"at_step": 1, "name": "grant", "target": "budget", "op": "add", "value": 5,
         "selector": {"group": "a"}}]))
    refused(capsys, root, ["run", S], f"{S}/environment/environment.json: scheduled_events[0].target: "
                                      "cannot add attribute 'budget' of agent 'p1': it is null, not a number")


def test_an_event_after_the_last_step_warns_and_strict_refuses(root, capsys):
    env(root, lambda d: d.update(scheduled_events=[
        {"at_step": 99, "name": "late", "target": "level", "value": 2.0}]))
    warning = ("environment/environment.json: scheduled_events[0].at_step: scheduled event 'late' is at "
               "step 99, after the last step (4): it never fires")
    assert main(["validate", S]) == 0
    assert f"warning: {warning}" in capsys.readouterr().out.splitlines()
    refused(capsys, root, ["validate", "--strict", S], f"{S}/{warning}")


def test_a_broadcast_after_the_last_step_is_the_same_lint_the_dashboard_shows(root):
    from desim.dashboard.data import study_config
    env(root, lambda d: d.update(broadcasts=[{"at_step": 7, "name": "memo", "content": "hi"}]))
    assert study_config(root)["warnings"] == [
        "environment/environment.json: broadcasts[0].at_step: broadcast 'memo' is at step 7, after the last "
        "step (4): it never fires"]


# --- population -------------------------------------------------------------------------------

def test_an_empty_persona_list(root, capsys):
    edit(root / "population" / "population.json", lambda d: (d.pop("provider"), d.update(personas=[])))
    refused(capsys, root, ["run", S], f"{S}/population/population.json: personas: the list is empty: "
                                      "a study needs at least one agent")


def test_a_provider_that_returns_nobody(root, capsys):
    refused(capsys, root, ["run", S, "--set", "n_agents=0"],
            f"{S}/population/population.json: the population is empty: a study needs at least one agent")


def test_a_self_loop_is_refused(root, capsys):
    edit(root / "population" / "population.json", lambda d: d.update(
        interaction={"kind": "edges", "edges": [["p0", "p1"], ["p2", "p2"]]}))
    refused(capsys, root, ["run", S], f"{S}/population/population.json: interaction.edges[1]: self-loop "
                                      "'p2' -> 'p2': an agent never reads its own posts, so it would change "
                                      "nothing; remove it")


# --- CSV rosters ----------------------------------------------------------------------------

def roster(root, text: str | bytes):
    path = root / "population" / "people.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    edit(root / "population" / "population.json", lambda d: (d.pop("provider"), d.update(roster="people.csv")))


CSV = "agent_id,group,score\n"
ROSTER = f"{S}/population/people.csv"


@pytest.mark.parametrize("body,expected", [
    ("p0,a,1\np1,b\n", "line 3: 2 fields, but the header has 3 (agent_id, group, score)"),
    ("p0,a,1,9\n", "line 2: 4 fields, but the header has 3 (agent_id, group, score)"),
    ("p0,a,1\n,b,2\n", "line 3, column agent_id: empty agent_id"),
    ("p0,a,1\np1,b,nan\n", ("line 3, column score: 'nan' is not a finite number, in a column of numbers (1 of its 2 "
                            "values, as line 2: 1); leave the cell empty for a missing value, or, to keep numbers "
                            "and text in one column, give the roster as JSON (each value has its own type there)")),
    ("p0,a,1\np1,b,2\np0,c,3\n", "line 4, column agent_id: duplicate agent_id 'p0' (first at line 2)"),
    ("", "the roster has a header but no rows: a study needs at least one agent"),
], ids=["short", "long", "empty-id", "nan", "duplicate", "header-only"])
def test_csv_roster_errors_name_line_and_column(root, capsys, body, expected):
    roster(root, CSV + body)
    refused(capsys, root, ["run", S], f"{ROSTER}: {expected}")


def test_csv_roster_without_an_agent_id_column(root, capsys):
    roster(root, "id,group\np0,a\n")
    refused(capsys, root, ["run", S], f"{ROSTER}: line 1: no agent_id column (columns: id, group)")


def test_csv_roster_with_a_byte_order_mark_runs(root, capsys):
    roster(root, b"\xef\xbb\xbf" + (CSV + "p0,a,1\np1,b,2.5\n").encode())
    assert main(["run", S]) == 0
    rows = sql(root, "SELECT agent_id, state FROM initial_states ORDER BY agent_id")
    assert rows == [("p0", {"x": 0.0}), ("p1", {"x": 0.0})]


# --- display names, checked by validate's probe ------------------------------------------------

def test_an_unknown_display_metric(root, capsys):
    edit(root / "study.json", lambda d: d.update(display_metrics=["mean_x", "mean_y"]))
    refused(capsys, root, ["validate", S], f"{S}/study.json: display_metrics[1]: unknown name 'mean_y' "
                                           "(the collector reports: mean_x)")


def test_an_unknown_display_state(root, capsys):
    edit(root / "study.json", lambda d: d.update(display_states=["y"]))
    refused(capsys, root, ["validate", S], f"{S}/study.json: display_states[0]: unknown name 'y' "
                                           "(agent states have: x)")
