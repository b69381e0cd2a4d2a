"""Read-only SQL on a study's store, for assertions (each call opens and closes the file)."""
from __future__ import annotations

import duckdb

from desim.store import StudyLayout
from desim.store.connection import _reader


def store_path(root):
    """The DuckDB file of the study folder ``root``."""
    return StudyLayout(root).db


def read_only(db):
    """A read-only connection to the DuckDB file ``db`` with the store's views; the caller closes it."""
    return _reader(StudyLayout.at(db), attempts=20, wait=0.05)


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


def sql_desim(root, text, params=()):
    """Rows of ``text`` through desim's reader, which also sees the runs still going (or killed before
    their end) from their journals; a plain DuckDB connection sees the ended runs only."""
    con = read_only(store_path(root))
    try:
        return con.execute(text, list(params)).fetchall()
    finally:
        con.close()
