"""The typed panel store: fields keep their types, bad values stop the run with the agent,
step and field named (keeping the steps already written), both paths give the same panel,
and the data reads back in one line, also between runs in one process."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

import desim
from desim.run.assemble import assemble
from desim.cli import main
from desim.store import QueryError, StoreBusyError, StoreLayoutError, StudyLayout, open_store
from storeq import store_path
from storeq import query

MODEL = '''
import numpy as np
from desim import Action, ActionColumns, DecisionModel, EnvironmentProvider, MetricCollector, Observation

BAD = {bad!r}
BAD_STEP = {bad_step}


def bad_value():
    if BAD == "set":
        return {{1, 2}}
    if BAD == "nan":
        return float("nan")
    if BAD == "text":
        return "high"
    if BAD == "object":
        return object()
    if BAD == "bytes":
        return b"raw"
    if BAD == "huge":
        return 2 ** 70
    return None


class Walk(EnvironmentProvider):
    """Each agent walks on a line; the step's move depends only on the step and its index."""

    def reset(self, seed):
        n = len(self.ctx.agent_ids)
        self.x = np.linspace(0.0, 1.0, n)
        self.moves = np.zeros(n, np.int64)
        self.label = np.array(["left" if i % 2 else "right" for i in range(n)], dtype=object)

    def advance_to(self, t):
        return []

    # per-agent path
    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx, macro_physical={{}}, macro_information={{}},
                            local_information={{"i": self.ctx.index[a]}}) for a in ids]

    def apply(self, actions):
        for a in actions:
            i = self.ctx.index[a.agent_id]
            if a.kind == "move":
                self.x[i] += a.payload["dx"]
                self.moves[i] += 1

    def agent_state(self, agent_id):
        i = self.ctx.index[agent_id]
        state = {{"x": float(self.x[i]), "moves": int(self.moves[i]), "up": bool(self.x[i] > 0.5),
                 "label": str(self.label[i])}}
        if BAD and self.ctx.step == BAD_STEP and i == 2:
            if BAD == "new_field":
                state["extra"] = 1.0
            elif BAD == "missing_field":
                del state["label"]
            elif BAD == "renamed_field":          # the right number of fields, one of them another
                state["name"] = state.pop("label")
            else:
                state["x"] = bad_value()
        return state

    # columnar path
    def observe_columns(self, idx, t, round_idx):
        return {{"i": idx}}

    def apply_columns(self, idx, actions):
        acted = np.ones(len(idx), bool) if actions.acted is None else np.asarray(actions.acted, bool)
        self.x[idx[acted]] += np.asarray(actions.payload["dx"])[acted]
        self.moves[idx[acted]] += 1

    def state_columns(self):
        return {{"x": self.x, "moves": self.moves, "up": self.x > 0.5, "label": self.label}}


def rule(i, t):
    return (i + t) % 3 != 0, 0.05 * ((i * 7 + t) % 5 - 2)


class PerAgent(DecisionModel):
    def decide_batch(self, observations, memories):
        out = []
        for o in observations:
            moves, dx = rule(o.local_information["i"], o.step)
            if moves:
                out.append(Action(agent_id=o.agent_id, step=o.step, kind="move", payload={{"dx": dx}}))
        return out


class Columns(DecisionModel):
    def decide_columns(self, obs, idx, t, round_idx):
        pairs = [rule(int(i), t) for i in obs["i"]]
        return ActionColumns(kind="move", acted=np.array([p[0] for p in pairs]),
                             payload={{"dx": np.array([p[1] for p in pairs])}})


class Metrics(MetricCollector):
    def collect(self, t, environment, actions):
        return {{"mean_x": float(environment.x.mean())}}
'''


def write_study(root: Path, *, decision: str = "PerAgent", bad: str | None = None, bad_step: int = 3,
                n_steps: int = 5, allow_nonfinite: list[str] | None = None) -> Path:
    (root / "simulation").mkdir(parents=True)
    (root / "population").mkdir()
    (root / "environment").mkdir()
    (root / "study.json").write_text(json.dumps({"id": root.name, "title": "walk"}))
    sim = {"n_steps": n_steps, "seed": 3, "decision": {"ref": f"model:{decision}"},
           "collector": {"ref": "model:Metrics"}, "memory_window": 0}
    if allow_nonfinite:
        sim["panel"] = {"allow_nonfinite": allow_nonfinite}
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    (root / "population" / "population.json").write_text(json.dumps(
        {"personas": [{"agent_id": f"w{i}"} for i in range(6)]}))
    (root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": "model:Walk"}}))
    (root / "model.py").write_text(MODEL.format(bad=bad, bad_step=bad_step))
    return root


PANEL = ("SELECT step, agent_id, state, action_kind, payload, action_source, away FROM panel "
         "WHERE run_id = ? ORDER BY step, agent_id")


def test_state_and_payload_fields_have_their_types(tmp_path):
    root = write_study(tmp_path / "walk")
    run = desim.run_study(desim.load_study(root))
    types = query(store_path(root), "SELECT DISTINCT typeof(state.x), typeof(state.moves), typeof(state.up), "
                                    "typeof(state.label), typeof(payload.dx) FROM panel WHERE run_id = ? "
                                    "AND payload IS NOT NULL", [run.run_id])
    assert types == [("DOUBLE", "BIGINT", "BOOLEAN", "VARCHAR", "DOUBLE")]
    # no cast needed: arithmetic and comparisons on the fields as they are
    (mean, ups), = query(store_path(root), "SELECT avg(state.x), count(*) FILTER (WHERE state.up) FROM panel "
                                           "WHERE run_id = ? AND step = 5", [run.run_id])
    x = run.panel(steps=5).column("x").to_pylist()
    assert mean == pytest.approx(sum(x) / len(x)) and ups == sum(v > 0.5 for v in x)
    assert query(store_path(root), "SELECT typeof(state.x) FROM initial_states LIMIT 1") == [("DOUBLE",)]


def test_reference_studies_store_numbers_as_numbers(study_copy):
    opinion = study_copy("opinion_diffusion")
    run = desim.run_study(desim.load_study(opinion, steps=2))
    assert query(store_path(opinion), "SELECT DISTINCT typeof(state.opinion) FROM panel WHERE run_id = ?",
                 [run.run_id]) == [("DOUBLE",)]
    schelling = study_copy("schelling")
    run = desim.run_study(desim.load_study(schelling, steps=2, params={"width": 10, "height": 10}))
    assert query(store_path(schelling), "SELECT DISTINCT typeof(state.x), typeof(state.happy) FROM panel "
                                        "WHERE run_id = ?", [run.run_id]) == [("BIGINT", "BOOLEAN")]


def test_per_agent_and_columnar_paths_store_the_same_typed_panel(tmp_path):
    a = write_study(tmp_path / "agents", decision="PerAgent")
    c = write_study(tmp_path / "columns", decision="Columns")
    ra = desim.run_study(desim.load_study(a))
    rc = desim.run_study(desim.load_study(c))
    assert assemble(desim.load_study(c)).columnar
    pa_rows = query(store_path(a), PANEL, [ra.run_id])
    pc_rows = query(store_path(c), PANEL, [rc.run_id])
    assert len(pa_rows) == 30 and pa_rows == pc_rows
    types = "SELECT DISTINCT typeof(state), typeof(payload) FROM panel WHERE payload IS NOT NULL"
    assert query(store_path(a), types) == query(store_path(c), types)
    assert query(store_path(a), "SELECT * FROM initial_states ORDER BY agent_id") == \
        [(ra.run_id,) + r[1:] for r in query(store_path(c), "SELECT * FROM initial_states ORDER BY agent_id")]


@pytest.mark.parametrize("bad, expected", [
    ("set", "state.x = {1, 2} (set) has no faithful stored form"),
    ("nan", "state.x is nan; NaN and infinity are refused"),
    ("text", "state.x = 'high' is str, but this run stores state.x as float"),
    ("object", "(object) has no faithful stored form"),
    ("bytes", "state.x = b'raw' (bytes) has no faithful stored form"),
    ("huge", "state.x = 1180591620717411303424 (int) has no faithful stored form"),
    ("new_field", "state field 'extra' is new"),
    ("missing_field", "state lacks field 'label'"),
    ("renamed_field", "state field 'name' is new"),
])
def test_a_value_without_a_faithful_form_stops_the_run_and_keeps_earlier_steps(tmp_path, bad, expected):
    root = write_study(tmp_path / "walk", bad=bad, bad_step=3)
    with pytest.raises(desim.RunFailed) as err:
        desim.run_study(desim.load_study(root))
    message = err.value.error
    assert "step 3: agent 'w2'" in message and expected in message, message
    db = store_path(root)
    (run_id, status, error), = query(db, "SELECT run_id, status, error FROM runs")
    assert status == "failed" and expected in error
    assert query(db, "SELECT DISTINCT step FROM panel ORDER BY step") == [(1,), (2,)]
    assert query(db, "SELECT count(*) FROM panel")[0][0] == 12


def test_nonfinite_values_are_kept_where_the_study_allows_them(tmp_path):
    root = write_study(tmp_path / "walk", bad="nan", allow_nonfinite=["x"])
    run = desim.run_study(desim.load_study(root))
    assert run.status == "completed"
    assert query(store_path(root), "SELECT count(*) FROM panel WHERE isnan(state.x)") == [(1,)]


def test_an_unknown_panel_option_is_refused(tmp_path):
    root = write_study(tmp_path / "walk")
    sim = json.loads((root / "simulation" / "simulation.json").read_text())
    sim["panel"] = {"allow_nan": ["x"]}
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    with pytest.raises(desim.StudyConfigError) as err:
        desim.load_study(root)
    assert "panel.allow_nan" in str(err.value)


def test_read_run_and_read_again_in_one_process(tmp_path):
    """A notebook: read the store, run the study again, read again; nothing to close by hand."""
    root = write_study(tmp_path / "walk")
    first = desim.run_study(desim.load_study(root))
    data = desim.open(root)
    df = data.panel().to_pandas()
    assert len(df) == 30 and str(df["x"].dtype) == "float64" and str(df["moves"].dtype) == "int64"
    assert list(df.columns[:4]) == ["run_id", "step", "agent_id", "x"] and "payload_dx" in df.columns
    second = desim.run_study(desim.load_study(root, seed=4))
    runs = data.runs().to_pandas()
    assert list(runs["run_id"]) == [first.run_id, second.run_id]
    assert data.panel().column("run_id").unique().to_pylist() == [second.run_id]   # default: the latest
    wide = data.metrics(first.run_id).to_pandas()
    assert list(wide.columns) == ["run_id", "step", "mean_x"] and list(wide["step"]) == list(range(6))
    long = first.metrics(wide=False)
    assert long.num_rows == 6 and long.column_names == ["run_id", "step", "name", "value"]
    assert first.panel(columns=["x", "action_kind"], steps=[1, 2]).column_names == \
        ["run_id", "step", "agent_id", "x", "action_kind"]
    with pytest.raises(KeyError, match="no panel column 'nope'"):
        data.panel(columns=["nope"])
    # steps outside the panel are said, not an empty table: step 0 is the initial states
    with pytest.raises(ValueError, match=r"holds steps 1 to 5, not step 0 \(step 0, the states before the first "
                                         r"step, is initial_states\(\)\)"):
        first.panel(steps=0)
    with pytest.raises(ValueError, match="holds steps 1 to 5, not steps 6, 7"):
        first.panel(steps=[6, 7])
    assert first.panel(steps=[0, 1]).column("step").unique().to_pylist() == [1]     # one step is in it
    assert first.panel(steps=np.int64(2)).num_rows == 6
    with pytest.raises(TypeError, match=r"2.0 is not a step number"):
        first.panel(steps=2.0)
    with pytest.raises(LookupError, match="no run 'r404'"):
        data.panel("r404")


def test_a_connection_left_open_in_the_process_gives_a_clear_error(tmp_path):
    root = write_study(tmp_path / "walk")
    desim.run_study(desim.load_study(root))
    con = duckdb.connect(str(store_path(root)), read_only=True)
    try:
        with pytest.raises(StoreBusyError, match=r"Close that connection \(con.close\(\)\)"):
            desim.run_study(desim.load_study(root))
    finally:
        con.close()
    assert desim.run_study(desim.load_study(root)).status == "completed"


def test_a_run_waits_out_a_reader_holding_the_store_for_longer_than_a_moment(tmp_path, monkeypatch):
    """A reader in another process (the dashboard over long runs, a report) holds the store for seconds; a run
    starting meanwhile waits for it and completes, instead of failing on DuckDB's lock. The reader lets go
    only after the run has retried more times than it used to before giving up (40)."""
    import types

    from desim.store import connection
    root = write_study(tmp_path / "walk")
    desim.run_study(desim.load_study(root))
    code = ("import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); print('held', flush=True); "
            "sys.stdin.read(); con.close(); print('let go', flush=True)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(store_path(root))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        if len(waits) == 100 and holder.poll() is None:
            holder.stdin.close()
            assert holder.stdout.readline().strip() == "let go"
            holder.wait()

    monkeypatch.setattr(connection, "time", types.SimpleNamespace(sleep=sleep, monotonic=__import__("time").monotonic))
    try:
        run = desim.run_study(desim.load_study(root, seed=4))
    finally:
        if holder.poll() is None:
            holder.stdin.close()
            holder.wait()
    assert run.status == "completed" and len(waits) >= 100
    assert query(store_path(root), "SELECT status FROM runs WHERE run_id = ?", [run.run_id]) == [("completed",)]


def test_a_run_waiting_for_the_store_at_its_end_says_finishing_and_keeps_its_heartbeat(tmp_path, monkeypatch):
    """The last step done, a reader holds the store: while the run waits to merge, its live file says
    "finishing" and its heartbeat thread still beats (a long wait or merge is not a process gone)."""
    import threading
    import types

    from desim.store import connection
    from desim.store.live import read_live
    root = write_study(tmp_path / "walk")
    desim.run_study(desim.load_study(root))
    code = ("import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); print('held', flush=True); "
            "sys.stdin.read(); con.close(); print('let go', flush=True)")
    holder = None

    def on_step(step, metrics):
        nonlocal holder
        if step == 5:           # the last step: hold the store before the run closes
            holder = subprocess.Popen([sys.executable, "-c", code, str(store_path(root))], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline().strip() == "held"

    seen = []

    def sleep(seconds):
        if holder is not None and holder.poll() is None:
            [live] = [d for d in map(read_live, (root / "runs" / "live").glob("*.json")) if d["status"] == "running"]
            beating = any(t.name == "desim-heartbeat" for t in threading.enumerate())
            seen.append((live.get("phase"), beating))
            holder.stdin.close()
            assert holder.stdout.readline().strip() == "let go"
            holder.wait()

    monkeypatch.setattr(connection, "time", types.SimpleNamespace(sleep=sleep, monotonic=__import__("time").monotonic))
    run = desim.run_study(desim.load_study(root, seed=4), on_step=on_step)
    assert run.status == "completed"
    assert seen == [("finishing", True)]


def test_a_store_of_the_json_layout_is_refused(tmp_path, capsys):
    root = write_study(tmp_path / "walk")
    db = store_path(root)
    db.parent.mkdir()
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE panel (run_id VARCHAR, step INTEGER, agent_id VARCHAR, state JSON, "
                "action_kind VARCHAR, action_payload JSON, action_source VARCHAR)")
    con.close()
    with pytest.raises(StoreLayoutError, match="stored the panel as JSON text"):
        with open_store(StudyLayout(root), read_only=False):
            pass
    assert main(["run", str(root)]) == 2
    assert "stored the panel as JSON text" in capsys.readouterr().err
    assert main(["sql", str(root), "SELECT 1"]) == 2


def test_sql_prints_csv_and_json(tmp_path):
    root = write_study(tmp_path / "walk")
    run = desim.run_study(desim.load_study(root))
    query_text = f"SELECT step, state.x AS x, state.label AS label FROM panel WHERE run_id = '{run.run_id}' " \
                 "AND agent_id = 'w0' ORDER BY step"
    out = subprocess.run([sys.executable, "-m", "desim.cli", "sql", str(root), query_text, "--csv"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    expected = query(store_path(root), query_text)
    assert out[0] == "step,x,label" and len(out) == 6
    assert [tuple(r) for r in csv.reader(out[1:])] == [(str(s), repr(x), lab) for s, x, lab in expected]
    out = subprocess.run([sys.executable, "-m", "desim.cli", "sql", str(root), query_text, "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [{"step": s, "x": x, "label": lab} for s, x, lab in expected]


def test_export_writes_typed_files_that_pandas_reads(tmp_path):
    import pandas as pd
    root = write_study(tmp_path / "walk")
    run = desim.run_study(desim.load_study(root))
    out = tmp_path / "out"
    assert main(["export", str(root), "--run", run.run_id, "--format", "parquet", "--out", str(out)]) == 0
    panel = pd.read_parquet(out / "panel.parquet")
    assert str(panel["x"].dtype) == "float64" and str(panel["moves"].dtype) == "int64"
    assert panel["up"].dtype == bool and len(panel) == 30
    stored = query(store_path(root), "SELECT state.x FROM panel WHERE run_id = ? ORDER BY step, agent_id",
                   [run.run_id])
    assert list(panel.sort_values(["step", "agent_id"])["x"]) == [r[0] for r in stored]
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert list(metrics.columns) == ["run_id", "step", "mean_x"]
    params = json.loads((out / "runs.json").read_text())[0]
    assert params["run_id"] == run.run_id and params["seed"] == 3
    csv_out = tmp_path / "csv"
    assert main(["export", str(root), "--format", "csv", "--out", str(csv_out)]) == 0
    assert pd.read_csv(csv_out / "panel.csv")["x"].tolist() == panel["x"].tolist()
    for name in ("metrics", "events", "messages", "initial_states"):
        assert (csv_out / f"{name}.csv").exists()


def test_export_keeps_what_each_run_changed_by_hand(tmp_path):
    """runs.json holds a run's overrides and code hashes as values (they were strings of JSON text), and the
    runs table keeps the overrides (it dropped them, so an export could not tell a --seed run from the study's)."""
    import pyarrow.parquet as pq
    root = write_study(tmp_path / "walk")
    plain = desim.run_study(desim.load_study(root)).run_id
    seeded = desim.run_study(desim.load_study(root, seed=11)).run_id
    out = tmp_path / "out"
    assert main(["export", str(root), "--out", str(out)]) == 0
    rows = {r["run_id"]: r for r in json.loads((out / "runs.json").read_text())}
    assert rows[seeded]["overrides"] == {"seed": 11} and not rows[plain]["overrides"]
    assert isinstance(rows[seeded]["code"], dict) and "model.py" in rows[seeded]["code"]
    table = {r["run_id"]: r for r in pq.read_table(out / "runs.parquet").to_pylist()}
    assert json.loads(table[seeded]["overrides"]) == {"seed": 11}


def test_the_dashboard_shows_a_json_layout_store_as_an_error_naming_it(tmp_path):
    from desim.dashboard import data as dashboard
    root = write_study(tmp_path / "studies" / "walk")
    db = store_path(root)
    db.parent.mkdir()
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE panel (run_id VARCHAR, step INTEGER, agent_id VARCHAR, state JSON)")
    con.close()
    with pytest.raises(dashboard.BrokenStore) as err:
        dashboard.study_store(root)
    assert "walk/runs/desim.duckdb was written by an earlier desim" in str(err.value)
    assert str(tmp_path) not in str(err.value)             # no absolute path reaches the page


def test_a_run_in_progress_is_readable_while_it_goes(tmp_path):
    """The database is held only at a run's start and end: a reader between steps sees the steps so far."""
    root = write_study(tmp_path / "walk", n_steps=6)
    seen = []

    def look(step, metrics):
        if step >= 1:
            seen.append((step, desim.open(root).sql("SELECT max(step) AS s FROM panel").column("s")[0].as_py()))

    desim.run_study(desim.load_study(root), on_step=look)
    assert seen == [(s, s) for s in range(1, 7)]


def test_a_bare_state_field_in_sql_says_how_sql_names_it(study_copy, capsys):
    """pandas and desim.open name state fields flat (opinion), SQL keeps them in the state struct: a query
    that names one bare fails with DuckDB's error and the line that says state.opinion."""
    root = study_copy("opinion_diffusion")
    desim.run_study(desim.load_study(root, steps=2, params={"n_agents": 10}))
    assert "opinion" in desim.open(root).panel().column_names
    assert main(["sql", str(root), "SELECT opinion FROM panel"]) == 2
    err = capsys.readouterr().err
    assert 'Referenced column "opinion" not found' in err
    assert "'opinion' is a state field: in SQL, state fields are state.<name> (state.opinion)" in err
    with pytest.raises(QueryError, match=r"state fields are state\.<name> \(state\.opinion\)"):
        desim.open(root).sql("SELECT avg(opinion) FROM panel")
    assert main(["sql", str(root), "SELECT no_such_column FROM panel"]) == 2      # no hint for other names
    assert "is a state field" not in capsys.readouterr().err
    assert main(["sql", str(root), "SELECT avg(state.opinion) FROM panel"]) == 0


def test_a_function_of_a_json_field_says_to_cast_it_in_one_line_and_a_hint(study_copy, capsys):
    """avg(content.opinion) on the messages table: DuckDB's error listed all 15 overloads of avg, and nothing
    said that content is JSON (the README said the store needs no casts)."""
    root = study_copy("opinion_diffusion")
    desim.run_study(desim.load_study(root, steps=2, params={"n_agents": 10}))
    assert main(["sql", str(root), "SELECT avg(content.opinion) FROM messages"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["desim: error: query failed: Binder Error: No function matches the given name and argument "
                   "types 'avg(JSON)'. You might need to add explicit type casts.",
                   "avg() got a JSON value: messages.content and events.detail are JSON, and so is a field of them "
                   "(content.x); cast it to what it holds: content.x::DOUBLE, or content->>'x' for text"]
    assert main(["sql", str(root), "SELECT avg(content.opinion::DOUBLE) FROM messages"]) == 0


def test_which_payload_fields_belong_to_which_action_kind(study_copy):
    """The panel's payload columns are the union of every kind's fields; payload_fields says whose is which,
    as the panel's own non-null cells say."""
    root = study_copy("rumor_network")
    run = desim.run_study(desim.load_study(root, steps=4, params={"n_agents": 100}))
    got = desim.open(root).payload_fields(run.run_id)
    panel = desim.open(root).panel(run.run_id).to_pylist()
    payload_columns = [c for c in panel[0] if c.startswith("payload_")]
    want: dict[str, set] = {}
    for row in panel:
        if row["action_kind"] is not None:
            want.setdefault(row["action_kind"], set()).update(c[8:] for c in payload_columns if row[c] is not None)
    assert {k: set(v) for k, v in got.items()} == want
    assert got["post"] == ["rumor"] and got["hear"] == []          # the union, told apart


def test_the_nonfinite_check_names_the_first_nan_not_a_missing_value():
    # a null (a missing value) reads as NaN through numpy: only a real NaN or infinity is refused,
    # and the agent named is the first with one, also in a slice of a longer column
    import pyarrow as pa

    from desim.store.fields import _first_nonfinite
    assert _first_nonfinite(pa.array([1.0, None, 2.0])) is None
    assert _first_nonfinite(pa.array([None, 3.0, float("inf"), float("nan")])) == 2
    assert _first_nonfinite(pa.array([float("nan"), None, None, float("nan")]).slice(1)) == 2


def test_the_stores_connections_draw_no_progress_bar(tmp_path, study_copy):
    """A long query (an effect's pairs over many runs) must not print DuckDB's bar into a command's output."""
    from desim.store import open_store
    root = study_copy("opinion_diffusion")
    desim.run_study(desim.load_study(root, steps=1, params={"n_agents": 20}))
    for read_only in (True, False):
        with open_store(root, read_only=read_only) as con:
            assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)


def test_integer_starting_values_averaged_into_fractions_say_what_to_do():
    """Integer starting values averaged into a fraction: the error said only to keep one type per field."""
    from desim.store.fields import FieldError, Fields
    whole = Fields("payload", fixed=False)
    whole.column("x", [0, 10], ["a", "b"], 1)
    with pytest.raises(FieldError, match=r"keep one type per field; whole numbers that become fractions .* "
                                         r"float\(x\) where the first values are made, or 1\.0 rather than 1"):
        whole.column("x", [5.0, 10], ["a", "b"], 2)
