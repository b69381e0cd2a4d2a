"""Step 0 stacks onto the panel: a state field None for every agent at step 0 is typed as in the panel
(``desim.open().initial_states()`` and the export's ``initial_states`` file), not Arrow's ``null``."""
from __future__ import annotations

import csv

import pyarrow as pa
import pyarrow.parquet as pq

import desim
from desim.store.export import export
from tiny_study import write_tiny_study

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        t = self.ctx.step
        # None for every agent before the first step: the initial file has no type for these
        return {"n": t, "note": None if t == 0 else f"s{t}", "flag": None if t == 0 else t % 2 == 0,
                "w": None if t == 0 else t / 2, "tags": None if t == 0 else [t]}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="wait") for o in observations]
'''
LATE = ("note", "flag", "w", "tags")


def test_fields_none_at_step_0_take_the_panels_types(tmp_path):
    root = write_tiny_study(tmp_path / "late", MODEL, {"n_steps": 2, "decision": {"ref": "model:Decide"}})
    run = desim.run_study(desim.load_study(root)).run_id
    data = desim.open(root)
    panel, initial = data.panel(run), data.initial_states(run)
    want = {name: panel.schema.field(name).type for name in LATE}
    assert {k: want[k] for k in ("note", "flag", "w")} == {"note": pa.string(), "flag": pa.bool_(), "w": pa.float64()}
    assert {name: initial.schema.field(name).type for name in LATE} == want
    assert initial.column("n").type == panel.column("n").type
    assert all(initial.column(name).null_count == 3 for name in LATE)
    # step 0 stacked onto the panel
    zero = initial.select(["run_id", "agent_id", "n", *LATE]).append_column("step", pa.array([0] * 3, pa.int32()))
    stacked = pa.concat_tables([zero, panel.select(zero.column_names)])
    assert stacked.num_rows == 9
    out = tmp_path / "out"
    export(root, out, run=run)
    exported = pq.read_table(out / "initial_states.parquet")
    assert {name: exported.schema.field(name).type for name in LATE} == want
    export(root, tmp_path / "csv", run=run, fmt="csv")     # CSV: still empty fields
    rows = list(csv.DictReader((tmp_path / "csv" / "initial_states.csv").open(newline="")))
    assert [[r[name] for name in LATE] for r in rows] == [[""] * 4] * 3
