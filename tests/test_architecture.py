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
# a store's file names, spelled in a string or an f-string's text: <run>.duckdb, a table's .parquet, the
# write-ahead log, a run's data folder
FILE_NAME = re.compile(r"(\.duckdb|\.parquet|\.wal)\b|run_id=")


def modules(outside_store: bool = True):
    for path in sorted(PACKAGE.rglob("*.py")):
        if outside_store == (STORE not in path.parents):
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstrings and of the texts given as ``description=`` or ``help=`` (they may name a
    file to the reader: they do not make a path)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("description", "help"):
            out |= {id(n) for n in ast.walk(node.value) if isinstance(n, ast.Constant)}
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            out.add(id(node.body[0].value))
    return out


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
            elif isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "sql"):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: .{node.attr}")   # on any name
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and \
                    node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "duckdb":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: import_module('duckdb')")
    assert found == [], "database access outside desim/store/:\n" + "\n".join(found)


def path_spellings(tree: ast.AST) -> list[tuple[int, str]]:
    """Where ``tree`` spells an output path itself: ``x / "runs"``, ``joinpath``, ``os.path.join`` or ``Path``
    with one of the layout's folder names, or a store's file name in a string (a docstring may name one)."""
    found, skip = [], docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
                isinstance(node.right, ast.Constant) and node.right.value in PATH_PARTS:
            found.append((node.lineno, f"/ {node.right.value!r}"))
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            parts = [a.value for a in node.args if isinstance(a, ast.Constant) and a.value in PATH_PARTS]
            if name in ("joinpath", "join", "Path", "PurePath") and parts:
                found.append((node.lineno, f"{name}(... {parts[0]!r})"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip and \
                FILE_NAME.search(node.value):
            found.append((node.lineno, repr(node.value)[:60]))
    return found


def test_output_paths_are_spelled_only_by_the_layout():
    """``root / "runs" / ...``, ``f"{run}.duckdb"`` outside the store: a second owner of where outputs live."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
             for path, tree in modules() for line, what in path_spellings(tree)]
    assert found == [], "output paths outside desim/store/:\n" + "\n".join(found)


def test_the_path_check_sees_each_way_of_spelling_a_path():
    planted = """
def f(root, folder, run_id, cols):
    \"\"\"Writes <run>.duckdb (a docstring may say so).\"\"\"
    a = folder / f"{run_id}.duckdb"
    b = root.joinpath("runs", "desim.duckdb")
    c = os.path.join(root, "runs", "reports")
    d = Path(root, "runs", "live")
    e = root / "runs"
    g = f"data/run_id={run_id}"
    h = str(folder) + ".wal"
"""
    lines = sorted({line for line, _ in path_spellings(ast.parse(planted))})
    assert lines == [4, 5, 6, 7, 8, 9, 10]          # every line but the docstring's


# the study's own files and folders (desim.versions names them once): a path built from these words is a
# second owner of where a study keeps its configuration
STUDY_PARTS = ("study.json", "simulation.json", "population.json", "environment.json", "simulation",
               "population", "environment", "simulation/simulation.json", "population/population.json",
               "environment/environment.json")
# who may name study.json by its constant: the owner, its validated reader, a Study written from Python,
# and `desim new` (which sets the id in a template's copy)
STUDY_FILE_USERS = {"versions.py", "study/files.py", "study/study.py", "commands/core.py"}


def study_path_spellings(tree: ast.AST) -> list[tuple[int, str]]:
    """``root / "study.json"``, ``root / "population" / name``, ``Path(root, "simulation", ...)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
                isinstance(node.right, ast.Constant) and node.right.value in STUDY_PARTS:
            found.append((node.lineno, f"/ {node.right.value!r}"))
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            parts = [a.value for a in node.args if isinstance(a, ast.Constant) and a.value in STUDY_PARTS]
            if name in ("joinpath", "join", "Path", "PurePath") and parts:
                found.append((node.lineno, f"{name}(... {parts[0]!r})"))
    return found


def test_a_studys_files_are_named_once_and_study_json_read_through_its_validated_reader():
    """Paths to a study's files come from ``desim.versions`` (``STUDY_FILE``, ``POPULATION_DIR``, ...), and
    ``study.json`` is read by ``desim.study.files.read_study_file``: a reader of its own saw ``display_states``
    given as a string as a list of letters, and a ``state_colors`` entry that is not an object as a crash."""
    spelled = [f"{path.relative_to(PACKAGE)}:{line}: {what}" for path in sorted(PACKAGE.rglob("*.py"))
               for line, what in study_path_spellings(ast.parse(path.read_text(encoding="utf-8")))]
    assert spelled == [], "a study's file paths spelled outside desim/versions.py:\n" + "\n".join(spelled)
    users = sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                   if any(isinstance(n, ast.Name) and n.id == "STUDY_FILE"
                          for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))))
    assert set(users) <= STUDY_FILE_USERS, f"study.json read outside its reader: {set(users) - STUDY_FILE_USERS}"
    planted = """
def f(root, name):
    a = root / "study.json"
    b = root / "population" / name
    c = Path(root, "simulation", "simulation.json")
    d = root.joinpath("environment/environment.json")
"""
    assert sorted({line for line, _ in study_path_spellings(ast.parse(planted))}) == [3, 4, 5, 6]


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


# --- the layers -------------------------------------------------------------------------------------
BOTTOM = {"desim.errors", "desim.version", "desim.records", "desim.jsontext", "desim.versions"}
# on top, importing anything: the package face (its names are imported on first use), the command line
TOP = {"desim", "desim.cli", "desim.commands"}
# every other package or top-level module -> the packages it may import (besides itself and the bottom); a
# module of desim whose package has no entry here is an error (test_every_module_has_a_layer), so a new one
# is placed when it is written, not left unchecked
ALLOWED = {
    "desim.study": set(),
    "desim.messaging": set(),
    "desim.run": {"desim.study", "desim.messaging"},
    "desim.store": set(),
    "desim.experiments": {"desim.study", "desim.messaging", "desim.run", "desim.store"},
    "desim.llm": {"desim.study", "desim.store"},
    "desim.diffusion": {"desim.study"},
    # the network views' arithmetic on plain arrays (numpy, igraph): they read and write nothing. The old
    # spellings network_views.diffusion_player and .picture, now desim.report.network_picture's, are looked up
    # by name when asked for (importlib in its __getattr__, as the package face does): no import upwards
    "desim.layout": set(),
    "desim.network_views": {"desim.layout"},
    # reports draw what the experiments compute (treatment minus control in comparisons, the effect table,
    # the sweep summaries), so a report and `desim compare`, `effect` and `sweep` give the same numbers from
    # one computation; the network pictures lay a run's network out (layout, network_views)
    "desim.report": {"desim.study", "desim.store", "desim.experiments", "desim.layout", "desim.network_views"},
    # `desim validate` runs a study's first step in memory, recorded the way a run records it (experiments),
    # and checks the llm block with the reader the run uses (llm)
    "desim.lint": {"desim.study", "desim.run", "desim.store", "desim.experiments", "desim.llm"},
    # the page draws with the report's data, figures, palette and network pictures, so the page and a
    # report show a run the same way, and lists a study's warnings as `desim validate` does (lint)
    "desim.dashboard": {"desim.study", "desim.store", "desim.experiments", "desim.report", "desim.lint",
                        "desim.layout", "desim.network_views"},
    # docs/reference.md, written from the models that validate the study files (the llm block's among them)
    "desim.reference": {"desim.study", "desim.llm"},
    # a study that `desim new` copies out: its code imports the package face, as any study's does
    "desim.templates": {"desim"},
    # shims, kept for studies written for an earlier desim: each re-exports the module that replaced it
    # (tests/test_shims.py), and sits on that module's layer
    "desim.config": {"desim.study"},
    "desim.interfaces": {"desim.study"},
    "desim.network": {"desim.study"},
    "desim.refs": {"desim.study"},
    "desim.feed": {"desim.messaging"},
    "desim.columnar_feed": {"desim.messaging"},
    "desim.schemas": set(),
    "desim.sweep": {"desim.experiments"},
}


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def imports() -> dict[str, set[str]]:
    """``{module: the desim modules it imports}``, lazy imports included, ``TYPE_CHECKING`` blocks not;
    ``from package import submodule`` counts as the submodule."""
    known = {module_name(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        out = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("desim"):
                subs = {f"{node.module}.{a.name}" for a in node.names} & known
                out |= subs | ({node.module} if len(subs) < len(node.names) else set())
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name.startswith("desim")}
        name = module_name(path)
        graph[name] = {m for m in out if m in known and m != name}
    return graph


def package_of(module: str) -> str:
    if module in BOTTOM:
        return "bottom"
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def unplaced(modules) -> list[str]:
    """The modules whose package (or top-level module) is in no layer: neither the bottom, nor on top, nor
    an entry of ``ALLOWED``. Their imports would go unchecked."""
    return sorted(m for m in modules if package_of(m) != "bottom" and package_of(m) not in TOP
                  and package_of(m) not in ALLOWED)


def against_layers(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        home = package_of(module)
        for target in sorted(targets):
            there = package_of(target)
            if there == "bottom" or there == home:
                # the errors are the floor of the floor: a bottom module may raise them, and they import nothing
                if home == "bottom" and there == "bottom" and (target != "desim.errors" or module == target):
                    wrong.append(f"{module} -> {target} (the bottom imports nothing from desim but its errors)")
                continue
            if home in TOP:
                continue
            if home == "bottom" or home not in ALLOWED or there not in ALLOWED[home]:
                wrong.append(f"{module} -> {target}" + ("" if home == "bottom" or home in ALLOWED
                                                        else f" ({home} is in no layer)"))
    return wrong


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    path: list[str] = []
    state: dict[str, int] = {}

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_layers_import_one_way():
    """Records and errors at the bottom; study and messaging on them; the run on those; the store on the
    bottom alone; experiments, models, reports and the dashboard above; the CLI on top."""
    wrong = against_layers(imports())
    assert wrong == [], "imports against the layers:\n" + "\n".join(wrong)


def test_every_module_has_a_layer():
    """A package or top-level module missing from ``ALLOWED`` would be checked against nothing: each has its
    entry (the bottom and ``TOP`` aside), and the entries name layers that exist and go one way."""
    graph = imports()
    assert unplaced(graph) == [], "modules in no layer (give their package an entry in ALLOWED):\n" + \
        "\n".join(unplaced(graph))
    named = {there for theres in ALLOWED.values() for there in theres}
    assert named <= set(ALLOWED) | {"desim"}, f"ALLOWED names no layer: {named - set(ALLOWED) - {'desim'}}"
    assert circle({home: theres - {"desim"} for home, theres in ALLOWED.items()}) is None
    assert not (set(ALLOWED) & (TOP | BOTTOM))


def test_no_import_circle():
    found = circle(imports())
    assert found is None, "import circle: " + " -> ".join(found or [])


def test_the_engine_reads_in_one_sitting():
    lines = (PACKAGE / "run" / "engine.py").read_text(encoding="utf-8").count("\n")
    # about 300 lines: room to wrap a line or name a thing plainly, not to take on another job
    assert lines <= 320, f"desim/run/engine.py has {lines} lines"


def test_the_layer_checks_catch_what_they_are_for():
    graph = imports()
    assert "desim.run.engine" in graph["desim.run.execute"]          # it sees real imports
    assert against_layers({"desim.store.recorder": {"desim.run.engine"}}) == ["desim.store.recorder -> desim.run.engine"]
    assert against_layers({"desim.records": {"desim.jsontext"}}) != []
    assert against_layers({"desim.versions": {"desim.errors"}}) == []          # a bottom module may raise
    assert against_layers({"desim.errors": {"desim.records"}}) != []           # errors import nothing
    assert not any(t.startswith("desim") for t in graph.get("desim.errors", ()))
    assert against_layers({"desim.run.engine": {"desim.study.files", "desim.errors"}}) == []
    assert against_layers({"desim.network_views": {"desim.report.network_picture"}}) == \
        ["desim.network_views -> desim.report.network_picture"]
    assert against_layers({"desim.shiny": {"desim.study.files"}}) == \
        ["desim.shiny -> desim.study.files (desim.shiny is in no layer)"]
    assert against_layers({"desim.commands.core": {"desim.dashboard.app"}, "desim": {"desim.run.engine"}}) == []
    assert unplaced({"desim.shiny", "desim.shiny.parts", "desim.cli", "desim.errors", "desim.lint"}) == \
        ["desim.shiny", "desim.shiny.parts"]
    assert circle({"desim.a": {"desim.b"}, "desim.b": {"desim.c"}, "desim.c": {"desim.a"}}) == \
        ["desim.a", "desim.b", "desim.c", "desim.a"]
