"""Read-only SQL on a study's store, for assertions (each call opens and closes the file)."""
from __future__ import annotations

import duckdb

from desim.store import store_path


def query(db, sql, params=()):
    """Rows of ``sql`` on the DuckDB file ``db``."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def sql(root, text, params=()):
    """Rows of ``text`` on the store of the study folder ``root``."""
    return query(store_path(root), text, params)
