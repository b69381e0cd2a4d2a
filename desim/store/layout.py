"""Where a study's outputs live: the one place that spells the folder layout.

Everything a study writes goes under ``<study>/runs/`` (git-ignored)::

    runs/desim.duckdb              the catalogue (runs, versions, sweeps, effects) and views over the data
    runs/data/run_id=<R>/          a run's data as typed Parquet files (``desim.store.files``)
    runs/live/<R>.json             a run's progress while it goes (``desim.store.live``)
    runs/reports/<name>/           reports and players (``<run_id>``, ``sweep-<id>``, ``effect-<id>``)
    runs/sweeps/<sweep_id>/        a sweep's worker stores until they are merged
    runs/effects/<effect_id>/      an effect's worker stores until they are merged
    runs/llm_cache.duckdb          the LLM reply cache (its path can be set in ``simulation.json``)
    runs/llm_unrecorded/<R>.json   the paid LLM calls of a step run R never closed (``desim.store.ledger``)
    runs/layouts/<key>.parquet     a network's layout (positions of its agents), shared by every run of it
    runs/orphaned-<time>/          run folders found without their database (it was deleted), set aside

A sweep worker keeps its run in a DuckDB file of its own (``<name>.duckdb``), with its data folder
beside it as ``<name>-data/`` so that workers never share one: ``StudyLayout.at(db)`` is that
store's layout.
"""
from __future__ import annotations

import os
from pathlib import Path

from desim.errors import StoreError, shell_arg
from desim.versions import printable

DB_NAME = "desim.duckdb"

# Characters DuckDB reads in a path as something else, so a store under a folder whose name has one is
# refused before anything is written (each with what DuckDB does with it). ``[``, ``]`` and ``*`` (glob
# characters) are not here: the views escape them (``desim.store.schema``).
REFUSED_IN_STORE_PATH = {
    "?": "DuckDB reads what follows '?' in a database path as options, and would open another file",
    "\\": "DuckDB reads '\\' in a path as '/', and would open another folder (another study's store)",
}
REFUSED_IN_DATA_PATH = {
    "=": "DuckDB reads a folder named key=value above the run data as a column 'key' of every table (a folder "
         "'step=3' would set every row's step to 3)",
}


class StorePathError(StoreError, ValueError):
    """The store's path cannot be used: a folder's name DuckDB misreads, or a symlink to nothing."""


class StudyLayout:
    """The paths of one study's outputs (``root`` is the study folder)."""

    def __init__(self, root: str | Path, db: str | Path | None = None):
        self.root = Path(root)
        self.runs = self.root / "runs"
        self.db = Path(db) if db is not None else self.runs / DB_NAME

    @classmethod
    def at(cls, db: str | Path) -> "StudyLayout":
        """The layout of a store kept in the DuckDB file ``db`` (a study's, or a sweep worker's)."""
        db = Path(db)
        root = db.parent.parent if db.name == DB_NAME and db.parent.name == "runs" else db.parent
        return cls(root, db)

    def __repr__(self) -> str:
        return f"StudyLayout({str(self.root)!r})"

    # --- the store ---------------------------------------------------------------------
    @property
    def data(self) -> Path:
        """The run data beside the database: ``data/`` for a study's, ``<name>-data/`` for any other."""
        if self.db.name == DB_NAME:
            return self.db.parent / "data"
        return self.db.parent / f"{self.db.stem}-data"

    def missing_store(self) -> str:
        """Why there is nothing to read: no such study folder (a typo), a symlink to nothing (a disk not
        mounted: "run the study first" would start a second store beside the first), or a study never run."""
        if self.db.name == DB_NAME and not self.root.is_dir():
            return f"{self.root} is not a folder: no study there"
        dangling = self.dangling_link()
        if dangling is not None:
            return dangling
        if self.db.is_symlink():
            return (f"{self.db} is a symlink to {os.readlink(self.db)}, which does not exist: run the study to make "
                    f"its store there (desim run {shell_arg(self.root)}), or fix the link")
        return f"{self.db} does not exist: run the study first (desim run {shell_arg(self.root)})"

    def dangling(self) -> Path | None:
        """The first of ``runs/``, the database and the data folder that is a symlink to nothing, else None.
        A link to a database not made yet, in a folder that is there, is none: a store put on another disk
        before its first run, which the run makes where it points. A link into a folder that is not there (a
        disk not mounted) is one: a store made anywhere else would leave the runs behind."""
        for path in (self.db.parent, self.db, self.data):
            if not path.is_symlink() or path.exists():
                continue
            if path == self.db and (path.parent / os.readlink(path)).parent.is_dir():
                continue
            return path
        return None

    def dangling_link(self) -> str | None:
        """What is wrong when :meth:`dangling` finds a symlink to nothing, and what to do, else None."""
        path = self.dangling()
        if path is None:
            return None
        return (f"{path} is a symlink to {os.readlink(path)}, which does not exist (a disk not mounted, a folder "
                "moved?); mount or restore it, or fix the link. The runs are where it points")

    def check_paths(self) -> None:
        """Refuse, before anything is opened or written, a store DuckDB would misread (a folder name with a
        character of :data:`REFUSED_IN_STORE_PATH`, or one of :data:`REFUSED_IN_DATA_PATH` above the run
        data, which the views read by their absolute path) or that is a symlink to nothing (:meth:`dangling`)."""
        try:
            str(self.db.absolute()).encode("utf-8")
        except UnicodeEncodeError:          # a Latin-1 folder name: DuckDB fails with std::bad_cast
            raise StorePathError(f"{printable(self.db.parent.parent)}: a folder name is not UTF-8 text, which "
                                 "DuckDB cannot open; rename the folder") from None
        everywhere = REFUSED_IN_STORE_PATH
        for path, refused in ((self.db.absolute(), everywhere), (self.db.resolve(), everywhere),
                              (self.data.resolve(), {**everywhere, **REFUSED_IN_DATA_PATH})):
            for char, why in refused.items():
                if char in str(path):       # the folder named as the user gave it, when it is in what they gave
                    folder = _folder_with(self.db, char) or _folder_with(path, char)
                    raise StorePathError(f"{folder}: the folder name has '{char}': {why}; rename the folder, or "
                                         f"move the study to a path without '{char}'")
        dangling = self.dangling_link()
        if dangling is not None:
            raise StorePathError(dangling)

    def run_dir(self, run_id: str) -> Path:
        return self.data / f"run_id={run_id}"

    def run_dirs(self) -> list[Path]:
        """The data folder's run folders (not the empty tables that let the views bind, ``run_id=_``)."""
        if not self.data.is_dir():
            return []
        return sorted(p for p in self.data.glob("run_id=*") if p.is_dir() and p.name != "run_id=_")

    def orphaned(self, stamp: str) -> Path:
        """Where a new database sets aside the run folders of one that was deleted."""
        return self.db.parent / f"orphaned-{stamp}" if self.db.name == DB_NAME else \
            self.db.parent / f"{self.db.stem}-orphaned-{stamp}"

    @property
    def live(self) -> Path:
        return self.db.parent / "live"

    def live_file(self, run_id: str) -> Path:
        return self.live / f"{run_id}.json"

    # --- what the commands write ----------------------------------------------------------
    @property
    def reports(self) -> Path:
        return self.runs / "reports"

    def report_dir(self, name: str) -> Path:
        """A report's folder: ``name`` is a run id, ``sweep-<id>`` or ``effect-<id>``."""
        return self.reports / name

    @property
    def sweeps(self) -> Path:
        return self.runs / "sweeps"

    def sweep_dir(self, sweep_id: str) -> Path:
        return self.sweeps / sweep_id

    @property
    def effects(self) -> Path:
        return self.runs / "effects"

    def effect_dir(self, effect_id: str) -> Path:
        return self.effects / effect_id

    @property
    def layouts(self) -> Path:
        return self.runs / "layouts"

    def layout_file(self, key: str) -> Path:
        """Where the layout of the network named ``key`` (``desim.layout.network_key``) is kept."""
        return self.layouts / f"{key}.parquet"

    @staticmethod
    def worker_store(folder: Path, run_id: str) -> Path:
        """A worker's own store for one run of a sweep or an effect, in that sweep's or effect's folder (the
        study's store takes one writer at a time; the parent merges this file when the run ends)."""
        return folder / f"{run_id}.duckdb"

    @staticmethod
    def worker_stores(folder: Path) -> dict[str, Path]:
        """The workers' stores in a sweep's or effect's folder, by run id (not the parents' extracts)."""
        return {p.name[:-len(".duckdb")]: p for p in sorted(folder.glob("*.duckdb"))
                if not p.name.endswith(".parent.duckdb")}

    @staticmethod
    def parent_extract(folder: Path, run_id: str) -> Path:
        """The steps of ``run_id`` a branch of it replays, copied out for a worker that cannot read the study's store."""
        return folder / f"{run_id}.parent.duckdb"

    @staticmethod
    def owner_file(folder: Path) -> Path:
        """Which process works in a sweep's worker folder (a folder whose process died is cleared)."""
        return folder / "owner.json"

    def llm_cache(self, configured: str | Path | None = None) -> Path:
        """The LLM reply cache: ``configured`` (relative to the study folder) or ``runs/llm_cache.duckdb``."""
        return self.root / (configured or Path("runs") / "llm_cache.duckdb")

    @property
    def llm_unrecorded_dir(self) -> Path:
        """The runs' ledgers of paid LLM calls not recorded yet (:meth:`llm_unrecorded`)."""
        return self.runs / "llm_unrecorded"

    def llm_unrecorded(self, run_id: str) -> Path:
        """The paid LLM calls of a step a run never closed, kept for its resume to record."""
        return self.llm_unrecorded_dir / f"{run_id}.json"

    def llm_unrecorded_files(self) -> dict[str, Path]:
        """Every run's ledger of paid LLM calls not recorded yet, by run id (none when no run keeps any)."""
        folder = self.llm_unrecorded_dir
        if not folder.is_dir():
            return {}
        return {p.name[:-len(".json")]: p for p in sorted(folder.glob("*.json")) if p.is_file()}


def _folder_with(path: Path, char: str) -> Path | None:
    """The first folder of ``path`` whose name has ``char`` (``path`` up to that folder), or None."""
    parts = path.parts
    for i, name in enumerate(parts):
        if char in name:
            return Path(*parts[:i + 1])
    return None


def layout_of(study: "str | Path | StudyLayout") -> StudyLayout:
    """A layout from a study folder, a path to a ``.duckdb`` store, or a layout."""
    if isinstance(study, StudyLayout):
        return study
    path = Path(study)
    return StudyLayout.at(path) if path.suffix == ".duckdb" else StudyLayout(path)
