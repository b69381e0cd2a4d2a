"""The study's store: every SQL statement, view, data file and output path of desim lives here.

One folder per study keeps every run, ``studies/<id>/runs/`` (``StudyLayout`` knows every path):

* ``desim.duckdb`` holds the catalogue (``runs``, ``versions``, ``sweeps``, ``effects``,
  ``effect_pairs``: ``schema``, ``catalogue``) and views over the run data: ``panel`` (one row per
  agent per step), ``initial_states``, ``states`` (both, the initial states as step 0), ``metrics``,
  ``events``, ``messages``, ``edges``, ``round_actions``, ``llm_calls``, and the macro
  ``paired_panel(treatment, control)``;
* ``data/`` holds the run data as typed Parquet files, one folder per closed step while a run goes
  (``files``, written from Arrow tables built in ``tables`` with types kept in ``fields``), so that
  ``SELECT avg(state.opinion) FROM panel`` needs no cast.

The way in is ``with open_store(layout) as con:`` (read-only unless asked); the reads are named
functions (``queries``, ``states``, ``Catalogue``) and the public reader is ``StudyData``
(``desim.open``). A run's progress and health: ``live``, ``health``.
"""
import desim.store.arrow_start  # noqa: F401  (first, before any Arrow conversion: no pandas on a run)
from desim.store.catalogue import Catalogue, now
from desim.store.connection import (
                         StoreBroken,
                         StoreBusyError,
                         StoreError,
                         StoreLayoutError,
                         StoreMissing,
                         field,
                         open_store,
)
from desim.store.layout import StudyLayout, layout_of
from desim.store.reader import NoSuchRun, QueryError, StudyData, open

__all__ = ["Catalogue", "NoSuchRun", "QueryError", "StoreBroken", "StoreBusyError", "StoreError", "StoreLayoutError", "StoreMissing",
           "StudyData", "StudyLayout", "field", "layout_of", "now", "open", "open_store"]
