"""The architecture, pinned: storage has one owner. Every SQL statement, database connection and output
path of desim lives in ``desim/store/``; nothing there imports the package face (``desim/__init__``).

A module outside the store that needs data calls a named read of the store (``desim.store.queries``,
``desim.store.states``, ``Catalogue``, ``StudyData``); a new capability adds a read there, not SQL here.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "desim"
STORE = PACKAGE / "store"
# uppercase SQL keywords, as desim writes its SQL: a statement and the clause that makes it one
SQL = re.compile(r"\b(SELECT\b[\s\S]*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(OR\s+REPLACE\s+)?"
                 r"(TEMP\s+)?(TABLE|VIEW|MACRO)|ALTER\s+TABLE|DROP\s+(TABLE|VIEW)|ATTACH\s+')")
PATH_PARTS = ("runs", "reports", "sweeps", "effects", "live", "desim.duckdb", "llm_cache.duckdb")


def modules(outside_store: bool = True):
    for path in sorted(PACKAGE.rglob("*.py")):
        if outside_store == (STORE not in path.parents):
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def strings(tree: ast.AST):
    """Every string constant and every literal part of an f-string, with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            yield node.lineno, text


def test_no_sql_text_outside_the_store():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {text.strip()[:70]!r}"
             for path, tree in modules() for line, text in strings(tree) if SQL.search(text)]
    assert found == [], "SQL outside desim/store/:\n" + "\n".join(found)


def test_no_database_connection_outside_the_store():
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "duckdb" for a in node.names):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: import duckdb")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "duckdb":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: from duckdb import ...")
            elif isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "connect") and \
                    isinstance(node.value, ast.Name) and node.value.id in ("con", "duckdb", "cursor"):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert found == [], "database access outside desim/store/:\n" + "\n".join(found)


def test_output_paths_are_spelled_only_by_the_layout():
    """``root / "runs" / ...`` outside the store is a second owner of where outputs live."""
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
                    isinstance(node.right, ast.Constant) and node.right.value in PATH_PARTS:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: / {node.right.value!r}")
    assert found == [], "output paths outside desim/store/layout.py:\n" + "\n".join(found)


def test_the_store_never_imports_the_package_face():
    found = []
    for path, tree in modules(outside_store=False):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module is None:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: from .. import "
                             + ", ".join(a.name for a in node.names))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "desim":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: from desim import ...")
    assert found == [], "\n".join(found)


def test_the_checks_see_what_they_look_for():
    """The scanners find SQL, connections and paths where there are some: the store itself."""
    store_sql = [t for p, tree in modules(outside_store=False) for _, t in strings(tree) if SQL.search(t)]
    assert len(store_sql) > 50
    assert SQL.search('f"SELECT {x} FROM panel WHERE run_id = ?"') and not SQL.search("select the runs you want")
