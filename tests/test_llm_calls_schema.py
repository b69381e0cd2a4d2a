"""The ``llm_calls`` columns have one owner, the store (``desim.store.files``): the LLM layer's rows, the anchor
file the view binds to and the kept rows the spend summaries read are all made from it. A column added or
retyped in one place and not the others would make the view unite files that disagree."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from desim.llm.accounting import CALLS_SCHEMA, CallLog
from desim.store.files import BASE_COLUMNS, LLM_CALLS_READ, LLM_CALLS_WRITTEN, ensure_anchors
from desim.store.ledger import UNRECORDED_SCHEMA

COUNTS = ("tokens_in", "tokens_out", "attempts")


def test_the_rows_the_llm_layer_makes_are_in_the_stores_schema():
    assert CALLS_SCHEMA.equals(LLM_CALLS_WRITTEN)
    log = CallLog()
    log.add(step=1, round_idx=0, agent_id="a", model="m", prompt_hash="h", tokens_in=3, tokens_out=4,
            latency_ms=1.0, cached=False, outcome="ok", attempts=1)
    assert log.drain().schema.equals(LLM_CALLS_WRITTEN)


def test_written_narrow_read_wide_and_otherwise_the_same_columns():
    """Runs write the counts as int32 (the bytes of every store so far); the anchor declares them int64, so
    the view reads them as BIGINT, as it always has."""
    assert LLM_CALLS_READ.names == LLM_CALLS_WRITTEN.names
    for written, read in zip(LLM_CALLS_WRITTEN, LLM_CALLS_READ):
        assert (written.type, read.type) == ((pa.int32(), pa.int64()) if written.name in COUNTS
                                             else (read.type, read.type)), written.name
    assert pa.schema(BASE_COLUMNS["llm_calls"]).equals(LLM_CALLS_READ)


def test_the_kept_rows_are_typed_as_the_view_reads_them():
    assert UNRECORDED_SCHEMA.names[0] == "run_id"
    for field in list(UNRECORDED_SCHEMA)[1:]:
        assert field.equals(LLM_CALLS_READ.field(field.name)), field.name


def test_the_anchor_file_holds_the_read_schema(tmp_path):
    ensure_anchors(tmp_path)
    assert pq.read_schema(tmp_path / "run_id=_" / "llm_calls.parquet").equals(LLM_CALLS_READ)
