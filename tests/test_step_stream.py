"""The merge written while the run goes (desim.store.stream): the files it leaves are the files the
journal's merge makes, and whatever it cannot vouch for is merged from the journal instead."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

import desim.store.files as files_module
from desim.store.files import RunFiles
from test_journal import step_tables


def merged(data, run_id: str, table: str) -> pa.Table:
    return pq.read_table(data / f"run_id={run_id}" / f"{table}.parquet")


def run_files(data, run_id: str, steps, stream: bool, extra_from: int | None = None) -> None:
    files = RunFiles(data, run_id)
    files.start()
    assert files.stream is not None            # a fresh run streams
    if not stream:                             # the journal's merge alone, to compare with
        files.stream.abandon()
        files.stream = None
    for step in steps:
        files.write_step(step, step_tables(step, n=700, extra=extra_from is not None and step >= extra_from))
    files.merge()


def test_streamed_files_hold_what_the_journal_merge_writes(tmp_path):
    data = tmp_path / "data"
    run_files(data, "streamed", range(1, 9), stream=True)
    run_files(data, "merged", range(1, 9), stream=False)
    for table in ("panel", "metrics"):
        a, b = merged(data, "streamed", table), merged(data, "merged", table)
        assert a.schema.equals(b.schema) and a.equals(b)
    meta = pq.ParquetFile(data / "run_id=streamed" / "panel.parquet").metadata
    assert meta.num_rows == 8 * 700 and meta.num_row_groups == 8       # a row group a step, as merged
    small = pq.ParquetFile(data / "run_id=streamed" / "metrics.parquet").metadata
    assert small.num_row_groups == 1                                     # small steps gathered
    assert not list((data / ".incoming").iterdir())                      # no staging left behind


def test_a_schema_change_during_the_run_falls_back_to_the_journal(tmp_path):
    """A state field that first appears at step 4: the stream drops the panel, the merge unifies it."""
    data = tmp_path / "data"
    run_files(data, "r", range(1, 7), stream=True, extra_from=4)
    panel = merged(data, "r", "panel")
    ys = panel.column("state").combine_chunks().field("y").to_pylist()
    assert ys[:3 * 700] == [None] * 2100 and ys[-1] == "s6"
    assert panel.num_rows == 6 * 700
    assert merged(data, "r", "metrics").column("value").to_pylist() == [float(s) for s in range(1, 7)]


def test_a_failing_encoder_loses_nothing(tmp_path, monkeypatch):
    """The encoding thread fails on its first write: every step is still merged, from the journal."""
    data = tmp_path / "data"
    real = files_module.StepStream

    class Failing(real):
        def _append(self, name, table):
            raise OSError("disk full (a test)")

    monkeypatch.setattr(files_module, "StepStream", Failing)
    run_files(data, "r", range(1, 5), stream=True)
    assert merged(data, "r", "panel").column("step").to_pylist() == [s for s in range(1, 5) for _ in range(700)]
    assert not list((data / ".incoming").iterdir())


def test_a_resumed_run_does_not_stream(tmp_path):
    """A resumed run has a journal already: its files are merged from everything on disk at the end."""
    data = tmp_path / "data"
    first = RunFiles(data, "r")
    first.start()
    first.write_step(1, step_tables(1))
    first.journal.close()                  # the process dies here: no merge
    first.stream.abandon()
    again = RunFiles(data, "r")
    again.start()
    assert again.stream is None
    again.write_step(2, step_tables(2))
    again.merge()
    assert merged(data, "r", "panel").column("step").to_pylist() == [1, 1, 1, 2, 2, 2]


def test_the_run_waits_for_the_encoder_once_the_queued_steps_pass_their_bytes(tmp_path, monkeypatch):
    # memory stays bounded when encoding is slower than the run: a step that would take the queue past
    # QUEUED_BYTES waits until the encoder has taken one off, and nothing is lost either way
    import threading

    import desim.store.stream as stream_module
    encoding, release, waiting = threading.Event(), threading.Event(), threading.Event()
    real_append = stream_module.StepStream._append

    def slow_append(self, name, table):
        encoding.set()
        release.wait()
        real_append(self, name, table)

    monkeypatch.setattr(stream_module.StepStream, "_append", slow_append)
    monkeypatch.setattr(stream_module, "QUEUED_BYTES", 1)          # one step at a time
    stream = stream_module.StepStream(tmp_path / "incoming", lambda schema: {})
    real_wait = stream._room.wait
    monkeypatch.setattr(stream._room, "wait", lambda *a: (waiting.set(), real_wait(*a))[1])
    stream.put(step_tables(1, n=50))               # one step always fits; the encoder takes it and is held
    assert encoding.wait(10)
    second = threading.Thread(target=stream.put, args=(step_tables(2, n=50),))
    second.start()
    assert waiting.wait(10)                         # the run is held back ...
    assert second.is_alive()
    release.set()                                   # ... until the encoder makes room
    second.join(10)
    assert not second.is_alive()
    done = stream.finish()
    assert pq.read_table(done["panel"]).num_rows == 2 * 50
