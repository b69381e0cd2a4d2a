"""Versions: every distinct configuration of a study that has run.

A study's files (as on disk, before run-time overrides such as ``--seed``,
``--steps`` or ``--set``, which are recorded on the run itself) are hashed. The first run of a new hash
creates a version whose parent is the study's previous version, and the
version keeps a diff of the two configurations, so "what changed?" has an
answer in the store. Runs of a configuration seen before join its version.
Branches are versions too, with a parent run and a fork step.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import duckdb

from .store import now


def config_hash(config: dict[str, Any]) -> str:
    """Hash of a study's files, study.json (title, description) excepted."""
    body = {k: v for k, v in config.items() if k != "study"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def diff_configs(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """Leaf-level differences between two JSON values: ``[{path, old, new}]``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old:
                out.append({"path": sub, "old": None, "new": new[key]})
            elif key not in new:
                out.append({"path": sub, "old": old[key], "new": None})
            else:
                out.extend(diff_configs(old[key], new[key], sub))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out.extend(diff_configs(a, b, f"{path}[{i}]"))
        return out
    return [] if old == new else [{"path": path, "old": old, "new": new}]


def ensure_version(con: duckdb.DuckDBPyConnection, study_id: str, config: dict[str, Any], *,
                   kind: str, parent_run_id: str | None = None, fork_step: int | None = None,
                   note: str | None = None) -> tuple[str, bool]:
    """The version id for ``config`` (created if new) and whether it was created now."""
    h = config_hash(config)
    if kind != "branch":
        row = con.execute("SELECT version_id FROM versions WHERE study_id=? AND config_hash=? AND kind<>'branch' "
                          "ORDER BY created_at LIMIT 1", [study_id, h]).fetchone()
        if row:
            return row[0], False
    parent = con.execute("SELECT version_id, config FROM versions WHERE study_id=? "
                         "ORDER BY created_at DESC LIMIT 1", [study_id]).fetchone()
    if kind == "branch" and parent_run_id:
        parent = con.execute("SELECT v.version_id, v.config FROM runs r JOIN versions v USING (version_id) "
                             "WHERE r.run_id=?", [parent_run_id]).fetchone() or parent
    diff = diff_configs(json.loads(parent[1]), config) if parent else []
    version_id = f"v{uuid.uuid4().hex[:8]}"
    con.execute("INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [version_id, study_id, parent[0] if parent else None, parent_run_id, fork_step,
                 "branch" if kind == "branch" else ("version" if parent else "initial"), note, json.dumps(config), h,
                 json.dumps(diff, default=str), now()])
    return version_id, True


def latest_run_of(con: duckdb.DuckDBPyConnection, version_id: str) -> str | None:
    row = con.execute("SELECT run_id FROM runs WHERE version_id=? ORDER BY started_at DESC LIMIT 1",
                      [version_id]).fetchone()
    return row[0] if row else None
