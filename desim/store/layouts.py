"""Stored network layouts and communities: one Parquet file per network under ``runs/layouts/``.

A network's layout (positions of its agents) and its communities are computed once, by
``desim.report.network_picture``, and kept under the network's key (``desim.layout.network_key``: the
method, the agent ids, the edges and the layout seed), so every later picture of the same
network reuses them: the report's player, the dashboard, and the branches and effect replicates
that share their parent's network (same ids and edges, hence the same key).

* ``layout_file(key)``: columns ``agent_id`` (text), ``x``, ``y`` (float64);
* ``layout_file(key + "-communities")``: ``agent_id``, ``community`` (int64).

What made them (method, seed, sizes, seconds) is kept as JSON in the file's metadata
(``desim``). Files are written to a temporary name and renamed, so a reader never sees half a
file; a file that cannot be read, or whose rows do not match the ids it is asked for, reads as
missing (and is computed again). They are a cache: a write that fails (a read-only study) raises
``OSError``, and the caller uses what it computed all the same.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from desim.store.layout import StudyLayout, layout_of

COMMUNITIES = "-communities"


def _path(study: "str | Path | StudyLayout", name: str) -> Path:
    return layout_of(study).layout_file(name)


def _write(path: Path, table: pa.Table, meta: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = table.replace_schema_metadata({b"desim": json.dumps(meta, default=str).encode()})
    fd, tmp = tempfile.mkstemp(prefix=path.stem, suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _read(path: Path, ids: Sequence[str], columns: list[str]) -> tuple[pa.Table, dict[str, Any]] | None:
    try:        # a folder that cannot be searched raises even in is_file(): read as missing, computed again
        if not path.is_file():
            return None
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {}).get(b"desim", b"{}"))
    except (OSError, ValueError, pa.ArrowException):
        return None
    if table.num_rows != len(ids) or any(c not in table.column_names for c in ["agent_id"] + columns):
        return None
    if table.column("agent_id").to_pylist() != list(ids):
        return None
    return table, meta


def write_positions(study, key: str, ids: Sequence[str], xy: np.ndarray, meta: dict[str, Any]) -> Path:
    """Store the layout ``xy`` (n, 2) of the network ``key``, rows in the order of ``ids``."""
    xy = np.asarray(xy, dtype=float)
    table = pa.table({"agent_id": pa.array(list(ids), pa.string()), "x": pa.array(xy[:, 0]), "y": pa.array(xy[:, 1])})
    return _write(_path(study, key), table, meta)


def read_positions(study, key: str, ids: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]] | None:
    """The stored layout of ``key`` as an (n, 2) array in the order of ``ids`` and its metadata, or None."""
    got = _read(_path(study, key), ids, ["x", "y"])
    if got is None:
        return None
    table, meta = got
    xy = np.column_stack([table.column("x").to_numpy(), table.column("y").to_numpy()]).astype(float)
    return (xy, meta) if np.isfinite(xy).all() else None


def write_communities(study, key: str, ids: Sequence[str], labels: np.ndarray, meta: dict[str, Any]) -> Path:
    """Store a community label per agent of the network ``key``."""
    table = pa.table({"agent_id": pa.array(list(ids), pa.string()),
                      "community": pa.array(np.asarray(labels, dtype=np.int64))})
    return _write(_path(study, key + COMMUNITIES), table, meta)


def read_communities(study, key: str, ids: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]] | None:
    """The stored community labels of ``key`` in the order of ``ids`` and their metadata, or None."""
    got = _read(_path(study, key + COMMUNITIES), ids, ["community"])
    if got is None:
        return None
    table, meta = got
    return np.asarray(table.column("community").to_numpy(), dtype=np.int64), meta


def positions_file(study, key: str) -> Path:
    """Where the layout of ``key`` is (or would be) stored."""
    return _path(study, key)
