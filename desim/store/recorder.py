"""The recorder: the sink a run writes into.

The engine hands a sink what a run produces, already checked: the initial states, every round's
actions (when the study records rounds), and each closed step's states, final actions, metrics,
events, messages and LLM calls. A sink turns them into typed Arrow tables (``desim.store.tables``,
with the run's field types kept in ``PanelTypes``) and keeps them:

* :class:`Recorder` -- a recorded run: its ``runs`` row (and version) in the catalogue, one folder of
  Parquet files per step, the field types, the live progress file and its heartbeat; a resumed run
  finds its row, forgets unfinished steps and writes only the steps it does not have;
* :class:`MemorySink` -- nothing kept but counts (``desim validate``'s probe): the same conversions,
  so a probe refuses what a real run would.

The calls, in order: ``step_zero(run, ...)`` once the study's ``reset`` has run (step 0 typed, before
anything is recorded: a value with no stored form there is the study's input, refused as such);
``open(run)`` (the run is recorded); ``initial(tables)``; per round ``round(...)``; per step
``capture(...)`` (as the step closes) then ``write(...)`` (from the collector process); ``close(...)``
however the run ended.
"""
from __future__ import annotations

import os
import socket
import time
import warnings
from dataclasses import dataclass
from traceback import format_exception

import numpy as np
import pyarrow as pa

from desim.errors import DesimNotice, StopRun, StoreError, resume_hint
from desim.store import journal
from desim.store.catalogue import Catalogue
from desim.store.connection import StoreMissing, open_store
from desim.store.files import RunFiles
from desim.store.health import HEARTBEAT_SECONDS, health_of
from desim.store.layout import StudyLayout
from desim.store.live import Heartbeat, LiveFile
from desim.store.tables import (
    PanelTypes,
    agent_rows,
    columnar_initial_rows,
    columnar_round_rows,
    columnar_rows,
    edge_rows,
    event_rows,
    initial_rows,
    message_rows,
    message_table,
    metric_rows,
    round_rows,
)
from desim.versions import code_hash, describe_overrides, overrides_of

WRITER_ATTEMPTS = 100
"""How many times (50 ms apart: 5 s) a run tries the store, when it records its start and its end,
before it says it is waiting (then it goes on trying). A reader holds the file for one query batch, and a batch over a store of
long runs (the dashboard's, a report's) takes seconds; a plain ``duckdb.connect`` in a notebook holds it
until closed. A run waits it out, as long as it takes, rather than fail at its end (all its steps done,
and the run left unrecorded) or at its start."""


END_WAIT_S = 600.0
"""How long a run whose steps are all done waits for a held store to record its end. Signals cannot stop
that wait (the run's end must not be cut short), so it is bounded: then the run fails to record its end,
its steps kept, and ``desim run --resume`` records it."""


def _waiting(what: str, then: str):
    """What a run says, once, while another process holds the store it must write to."""
    def say(reason: str) -> None:
        warnings.warn(DesimNotice(f"{what} waits for the study's store, held by another process: close a "
                                  f"notebook's duckdb connection to it; {then}. {reason}"), stacklevel=2)
    return say


@dataclass
class StepRecord:
    """A closed step as the collector process writes it."""

    step: int
    panel: pa.Table
    round_actions: pa.Table | None = None
    metrics: dict[str, float] | None = None
    events: list[dict] | None = None
    llm_calls: pa.Table | None = None


class MemorySink:
    """Converts what a run produces into the store's typed tables, and keeps only counts."""

    def __init__(self):
        self.rows_written = 0
        self.messages = 0
        self.last_written = -1

    def warnings(self) -> list[str]:
        """What the run's author should know of how it was stored: ``panel.allow_nonfinite`` names no field has."""
        types = getattr(self, "types", None)
        unknown = types.unknown_nonfinite() if types is not None else []
        if not unknown:
            return []
        fields = ", ".join(sorted(set(types.state.types) | set(types.payload.types))) or "none"
        return [f"simulation.json: panel.allow_nonfinite names {', '.join(map(repr, unknown))}, which no state or "
                f"payload field of this run has (its fields: {fields}): a misspelling?"]

    # --- step 0, then the run ---------------------------------------------------------------------
    def step_zero(self, run, states, metrics: dict[str, float], events: list[dict], messages) -> dict[str, pa.Table]:
        """The run's shape, and the agents before step 1 (states: one dict per agent, or columns) with step
        0's other tables, typed before anything is recorded: an initial state with no stored form (a set, an
        integer beyond 64 bits, fields that differ only by case) is the study's input, refused as such."""
        self.run = run
        self.columnar = run.columnar
        self.ids = run.ids
        self.id_array = pa.array(run.ids, pa.string())
        panel = run.spec.simulation.panel
        self.types = PanelTypes(panel.allow_nonfinite if panel else ())
        self._rounds: list[pa.Table] = []
        self.zero_metrics = metrics
        if isinstance(states, dict):
            table = columnar_initial_rows(self.types, self.id_array, states)
        else:
            table = initial_rows(self.types, self.id_array, self.ids, states)
        messages = self._messages(messages, 0)
        self.messages += messages.num_rows          # posted before step 1 (at reset): stored at step 0
        return {"initial": table, "edges": edge_rows(self.run.network), "metrics": metric_rows(0, metrics),
                "events": event_rows(0, events) if events else None, "messages": messages}

    def open(self, run) -> None:
        """The run begins: from here on, how it ends is recorded (here, nothing is)."""

    def initial(self, tables: dict[str, pa.Table]) -> None:
        """Step 0's tables (:meth:`step_zero`), kept (here: counted as the last step stored, as a recorder
        would have written it: a run that its study ends at reset is complete at step 0)."""
        self.last_written = 0

    def round(self, t: int, r: int, actions) -> None:
        """One round's actions (``record_rounds``), typed now: a study may change them afterwards."""
        if self.columnar:
            self._rounds.append(columnar_round_rows(self.types, t, self.id_array, actions, r))
        else:
            self._rounds.append(round_rows(self.types, t, actions, r))

    def capture(self, t: int, states, actions, away: np.ndarray | None) -> StepRecord:
        """A step as it closes: the panel rows typed now (states may be the study's live objects)."""
        if self.columnar:
            panel = columnar_rows(self.types, t, self.id_array, states, actions, away)
        else:
            panel = agent_rows(self.types, t, self.id_array, self.ids, states, actions, away)
        rounds = (pa.concat_tables(self._rounds, promote_options="permissive") if self._rounds
                  else None)   # a payload field new in a later round is null in the earlier ones
        self._rounds = []
        return StepRecord(t, panel, rounds)

    def write(self, record: StepRecord, messages) -> None:
        """Keep a closed step (here: count it)."""
        self.messages += self._messages(messages, record.step).num_rows
        self.rows_written += record.panel.num_rows
        self.last_written = record.step

    def close(self, status: str, error: str | None, traceback: str | None, wall_seconds: float) -> None:
        """The run ended ``status``."""

    @staticmethod
    def _messages(drained, step: int) -> pa.Table:
        return message_table(drained, step) if isinstance(drained, pa.Table) else message_rows(drained, step)


class Recorder(MemorySink):
    """A recorded run: the catalogue row, the step files, the field types, the live file and heartbeat.

    ``kind``, ``parent_run_id``, ``fork_step``, ``note`` and ``sweep_id`` are what the ``runs`` row says
    of the run; ``resume`` continues the run of the assembled run's id from its last complete step."""

    def __init__(self, layout: StudyLayout, *, kind: str = "run", parent_run_id: str | None = None,
                 fork_step: int | None = None, note: str | None = None, sweep_id: str | None = None,
                 resume: bool = False):
        super().__init__()
        self.layout, self.kind, self.parent_run_id, self.fork_step = layout, kind, parent_run_id, fork_step
        self.note, self.sweep_id, self.resume = note, sweep_id, resume
        self.write_from = 1
        self.files = self.live = self.beat = None
        self._saved_types = None
        self.waited = 0.0       # seconds spent waiting for a store another process held (not the run's time)

    def open(self, run) -> None:
        journal.check_fsync()
        files = RunFiles(self.layout.data, run.run_id)
        asked = time.perf_counter()
        with open_store(self.layout, read_only=False, attempts=WRITER_ATTEMPTS, forever=True,
                        on_wait=_waiting(f"run {run.run_id}", "Ctrl-C stops the run, nothing recorded (twice from Python)")) as con:
            self.waited += time.perf_counter() - asked      # not the run's own time: execute() subtracts it
            catalogue = Catalogue(con)
            if self.resume:
                self._reopen(catalogue, run, files)
            else:
                self._start(catalogue, run)
        try:
            self.live = LiveFile(self.layout.live_file(run.run_id), run.run_id, run.spec.id, run.n_steps, self.kind,
                                 seed=run.spec.simulation.seed,
                                 overrides_text=describe_overrides(overrides_of(run.spec), seed=False))
            self.beat = Heartbeat(self.live, HEARTBEAT_SECONDS)
            files.start()
        except BaseException as e:
            self._not_started(run, e)
            raise
        self.files = files          # recorded and started: from here on, close() says how the run ended

    def _not_started(self, run, e: BaseException) -> None:
        """The run is recorded but could not start (its live file or its data folder cannot be made: a file
        where the folder goes, a full disk): its row says so, ``failed`` with the error (``interrupted`` for a
        Ctrl-C), rather than ``running`` until it is taken for a dead run, one more at each attempt. The caller
        raises ``e`` itself, and ``close`` has nothing to do (``files`` is unset): ``e`` is the only error seen,
        even when this record cannot be made (said then as a note on ``e``)."""
        if self.beat:
            self.beat.stop()
        self.beat = None
        status = "failed" if isinstance(e, Exception) and not isinstance(e, StopRun) else "interrupted"
        error = "interrupted by the user" if isinstance(e, KeyboardInterrupt) else f"{type(e).__name__}: {e}"
        try:
            if self.live:
                self.live.finish(status, error)
        except OSError:             # the runs folder went away: the row below still says how the run ended
            pass
        wait = _waiting(f"run {run.run_id}, which could not start,",
                        f"after {END_WAIT_S / 60:g} minutes it gives up, the run left as running")
        try:
            with open_store(self.layout, read_only=False, attempts=WRITER_ATTEMPTS, forever=True,
                            give_up_after=END_WAIT_S, on_wait=wait) as con:
                Catalogue(con).finish_run(run.run_id, status, error, 0.0,
                                          last_step=self.last_written if self.last_written >= 0 else None,
                                          traceback="".join(format_exception(e)) if status == "failed" else None)
        except Exception as failed:
            e.add_note(f"run {run.run_id} could not be recorded as {status} either: {type(failed).__name__}: {failed}")

    def _start(self, catalogue: Catalogue, run) -> None:
        """Record the run (and its version: a new configuration is a new version)."""
        spec = run.spec
        code = run.code()
        version_id, created = catalogue.ensure_version(spec.id, spec.version_config(), kind=self.kind, code=code,
                                                       parent_run_id=self.parent_run_id, fork_step=self.fork_step,
                                                       note=self.note, root=spec.root)
        if self.kind == "run" and created:
            previous = catalogue.parent_version(version_id)
            if previous:  # an edited study: a new version, child of the last run of the previous one
                self.kind, self.parent_run_id = "version", catalogue.latest_run_of(previous)
        sim = spec.simulation
        catalogue.start_run(
            run_id=run.run_id, study_id=spec.id, kind=self.kind, seed=sim.seed, n_steps=sim.n_steps,
            rounds=spec.rounds, time_unit=sim.time_unit, config=spec.resolved(), parameters=dict(sim.parameters),
            parent_run_id=self.parent_run_id, fork_step=self.fork_step, note=self.note, sweep_id=self.sweep_id,
            n_agents=len(run.ids), version_id=version_id, overrides=overrides_of(spec), code=code,
            code_hash=code_hash(code))

    def _reopen(self, catalogue: Catalogue, run, files: RunFiles) -> None:
        """A resumed run: its row, its last complete step on disk, its field types."""
        row = catalogue.run(run.run_id)
        if row is None:
            raise StoreMissing(f"no run '{run.run_id}' in {self.layout.db}")
        self._refuse_if_going(row)      # first, before anything is cut, decided with the store held
        last = max(row["last_step"], files.last_step())
        damaged = files.damaged_past()
        if damaged is not None:     # what a power loss garbled is not kept: the resume writes those steps again
            last, why = damaged
            warnings.warn(DesimNotice(f"{why}; run {run.run_id} goes on from step {last}, the last it reads whole"),
                          stacklevel=2)
        files.drop_after(last)
        self.write_from = max(1, last + 1)
        self.resume = last >= 0            # nothing stored yet: write step 0 too
        saved = files.load_types()
        if saved:
            self.types = PanelTypes(self.types.state.allow_nonfinite, saved)
            self._saved_types = saved
        self.last_written = last
        catalogue.reopen_run(run.run_id)

    def _refuse_if_going(self, row: dict) -> None:
        """Refuse to resume a run another live process is running (its pid alive here, or its live file's
        heartbeat fresh): two writers of one journal cut each other's steps (this resume would cut the log the
        other still appends to), and the run would end ``completed`` without them."""
        if row["status"] != "running" or (row["pid"], row["host"]) == (os.getpid(), socket.gethostname()):
            return
        if health_of(self.layout, row) == "running":
            raise StoreError(f"run {row['run_id']} is running (pid {row['pid']} on {row['host']}): wait for it to "
                             "end, or stop it, before resuming it; a run whose process is gone is resumed as it is")

    def initial(self, tables: dict[str, pa.Table]) -> None:
        if self.resume:                             # step 0 is on disk already: nothing of it is written again
            self.messages -= tables["messages"].num_rows
        else:
            self.files.write_step(0, tables)
            self._save_types()
            self.last_written = 0
        self.live.step(0, self.zero_metrics)

    def write(self, record: StepRecord, messages) -> None:
        table = self._messages(messages, record.step)
        if record.step >= self.write_from:          # counted as the panel rows are: what this process wrote
            self.messages += table.num_rows
            self.files.write_step(record.step, {
                "panel": record.panel, "metrics": metric_rows(record.step, record.metrics),
                "events": event_rows(record.step, record.events) if record.events else None,
                "messages": table, "round_actions": record.round_actions, "llm_calls": record.llm_calls})
            self.rows_written += record.panel.num_rows
            self._save_types()
            self.last_written = record.step
        self.live.step(record.step, record.metrics)

    def _save_types(self) -> None:
        saved = self.types.to_json()
        if saved != self._saved_types:
            self.files.save_types(saved)
            self._saved_types = saved

    def close(self, status: str, error: str | None, traceback: str | None, wall_seconds: float) -> None:
        """Merge the run's step files and record how it ended (nothing, if the run was never opened)."""
        if self.files is None:
            if self.beat:
                self.beat.stop()
            return
        try:
            # the steps are over: the live file says "finishing" while the run waits for the store and merges,
            # and the heartbeat goes on beating, so a long merge is not taken for a process that is gone
            self.live.finishing()
        except OSError:     # the runs folder went away: the merge below will say so
            pass
        try:
            asked = time.perf_counter()
            with open_store(self.layout, read_only=False, attempts=WRITER_ATTEMPTS, forever=True,
                            give_up_after=END_WAIT_S, on_wait=_waiting(
                                f"run {self.run.run_id}, its steps all done,",
                                f"after {END_WAIT_S / 60:g} minutes it gives up, its steps kept, and desim run --resume "
                                f"{self.run.run_id} records its end")) as con:
                self.waited += time.perf_counter() - asked
                last = self.last_written if self.last_written >= 0 else None
                try:
                    self.files.merge()
                except Exception as e:      # not recorded completed: its data is not where a reader looks
                    completed = status == "completed"
                    if completed:
                        status, error, traceback = "failed", f"recorded failed, not completed: {self._merge_failed(e)}", None
                    else:                       # the run's own end is what is said; the row adds the merge
                        error = f"{error}; and {self._merge_failed(e)}"
                    try:
                        last = self.files.last_step()   # what a resume finds: the journal may be gone with its steps
                    except Exception:           # noqa: BLE001 - not readable now: the row keeps what it said
                        last = None
                    if completed:
                        raise StoreError(error) from e
                finally:
                    ended = self.run.ctx.end_reason if status == "completed" else None
                    Catalogue(con).finish_run(self.run.run_id, status, error, wall_seconds,
                                              last_step=last, traceback=traceback, end_reason=ended)
        finally:
            if self.beat:
                self.beat.stop()
            try:
                self.live.finish(status, error)
            except OSError:         # the live folder went away: the runs row above says how the run ended
                pass

    def _merge_failed(self, e: Exception) -> str:
        """What a run whose end-of-run merge failed is recorded with: the cause, and how to go on."""
        run_id = self.run.run_id
        go_on = resume_hint(self.run.root, run_id)
        return (f"its steps ran, but merging them into the store failed ({type(e).__name__}: {e}); once the "
                f"cause is put right, {go_on} merges what the journal keeps (and runs again what it does not)")
