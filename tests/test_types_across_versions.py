"""A run reads back with the types it stored, whatever later versions of its study stored under the same
field names. The views over every run give a field one type for all of them (DuckDB unifies them): an
integer field that a later version made a float read back as floats there, two integers beyond 2**53 as one
number, a boolean as the text 'true'. ``desim.open(...).panel(run)`` and ``desim export`` read the run's own
files instead."""
from __future__ import annotations

import pyarrow.parquet as pq

import desim
from desim.store.export import export
from walk_study import write_walk_study

BIG = 2**60
FIRST = '{"big": %d + self.ctx.index[agent_id], "ok": self.ctx.index[agent_id] %% 2 == 0}' % BIG
LATER = '{"big": 0.5, "ok": "maybe"}'


def run_with_state(root, state: str) -> str:
    model = (root / "model.py").read_text()
    for old in ('{"x": self.x[agent_id]}', FIRST):
        model = model.replace(old, state)
    (root / "model.py").write_text(model)
    return desim.run_study(desim.load_study(root)).run_id


def test_an_old_run_reads_back_as_stored_after_a_version_changed_its_fields_types(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    first = run_with_state(root, FIRST)
    later = run_with_state(root, LATER)
    data = desim.open(root)
    old = data.panel(first)
    assert old.schema.field("big").type == "int64" and old.schema.field("ok").type == "bool"
    assert old.column("big").to_pylist()[:2] == [BIG, BIG + 1] and old.column("ok").to_pylist()[:2] == [True, False]
    assert data.initial_states(first).column("big").to_pylist()[:2] == [BIG, BIG + 1]
    assert data.panel(later).column("ok").to_pylist()[0] == "maybe"
    # both runs in one table: one type a column, as the view over every run gives it, and every row
    both = data.panel([first, later])
    assert both.num_rows == old.num_rows + data.panel(later).num_rows
    out = tmp_path / "out"
    export(root, out, run=first)
    exported = pq.read_table(out / "panel.parquet")
    assert exported.column("big").to_pylist()[:2] == [BIG, BIG + 1]
    assert exported.column("ok").to_pylist()[:2] == [True, False]
