"""The command line imports only what a command uses: ``desim --help`` loads no plotting, web or
database library, and ``desim run`` no plotting or web library. Speed itself is measured in
``benchmarks/bench_startup.py`` (results in benchmarks/RESULTS.md); its smoke configuration runs here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent


def modules_after(args: list[str], cwd: Path) -> set[str]:
    """Top-level packages imported by ``desim <args>`` (``python -X importtime``)."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "desim.cli", *args], capture_output=True,
                         text=True, cwd=cwd, env=os.environ.copy())
    assert res.returncode in (0, 1), res.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in res.stderr.splitlines() if "|" in line}


def test_help_imports_no_plotting_web_or_database_library(tmp_path):
    loaded = modules_after(["--help"], tmp_path)
    assert "desim" in loaded                 # the probe does see our own imports
    assert not loaded & {"matplotlib", "uvicorn", "starlette", "duckdb", "pyarrow", "networkx", "numpy"}


@pytest.mark.parametrize("command", [["report", "--help"], ["dashboard", "--help"], ["viz", "diffusion", "--help"]])
def test_help_of_each_command_is_as_light(tmp_path, command):
    assert "matplotlib" not in modules_after(command, tmp_path)


def test_run_imports_no_plotting_or_web_library(tmp_path, study_copy):
    study = study_copy("opinion_diffusion")
    loaded = modules_after(["run", str(study), "--steps", "2"], tmp_path)
    assert {"duckdb", "desim"} <= loaded
    assert not loaded & {"matplotlib", "uvicorn", "starlette"}


RUN_IMPORTS = """
import sys
before = set(sys.modules)
from desim.cli import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["run", sys.argv[1], "--steps", "2"]) == 0
new = {m.split(".")[0] for m in set(sys.modules) - before}
print(" ".join(sorted(n for n in new if n not in sys.stdlib_module_names and not n.startswith(("_", "desim")))))
"""
# What a run needs, and nothing else (what pyarrow brings with it: cloudpickle, dateutil, six; cython_runtime is
# Cython's own). A new import on the run path fails here: a run's start-up is most of a short study's time.
RUN_NEEDS = {"annotated_types", "cloudpickle", "cython_runtime", "dateutil", "duckdb", "msgspec", "numpy", "orjson",
             "pyarrow", "pydantic", "pydantic_core", "simpy", "six", "typing_extensions", "typing_inspection"}
BY_PYARROW_IF_INSTALLED = {"cloudpickle", "dateutil", "six"}


@pytest.mark.parametrize("study, graph", [("schelling", False), ("opinion_diffusion", True)])
def test_a_run_imports_what_it_needs_and_no_more(tmp_path, study_copy, study, graph):
    folder = study_copy(study)
    res = subprocess.run([sys.executable, "-c", RUN_IMPORTS, str(folder)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=HANG_S)
    assert res.returncode == 0, res.stderr[-2000:]
    loaded = set(res.stdout.split())
    # no pandas (pyarrow's first conversion would load it), no networkx unless the study has a network;
    # pyarrow imports cloudpickle, dateutil and six only where they are installed (Ray brings cloudpickle)
    assert loaded - BY_PYARROW_IF_INSTALLED == (RUN_NEEDS | ({"networkx"} if graph else set())) - BY_PYARROW_IF_INSTALLED


@pytest.mark.slow
def test_startup_benchmark_smoke(tmp_path):
    figures = tmp_path / "figures.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_startup.py"), "--repeat", "1", "--no-mesa",
                          "--json", str(figures)], capture_output=True, text=True, cwd=ROOT, timeout=HANG_S)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip()                # the table for people is still printed
    f = json.loads(figures.read_text())
    assert (f["repeat"], f["mesa"], f["median_to_import_mesa"]) == (1, False, {})
    assert [c["command"] for c in f["commands"]] == ["python -c pass", "desim --help",
                                                     "desim run (12 agents x 12 steps)"]
    for c in f["commands"]:
        assert c["runs"] == 1 and 0 < c["fastest_s"] <= c["median_s"]
    assert f["heavy_imports"]["desim --help"] == []
    assert "duckdb" in f["heavy_imports"]["desim run"]   # the probe does see the heavy imports a command makes


@pytest.mark.parametrize("env, want", [({}, "1"), ({"OPENBLAS_NUM_THREADS": "4"}, "4"), ({"OMP_NUM_THREADS": "2"}, None)])
def test_the_command_line_asks_numpy_for_one_blas_thread_unless_the_user_chose(env, want):
    # an idle OpenBLAS thread per core spins for about 0.1 s of CPU when numpy loads (docs/performance.md)
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    probe = "import desim.cli, os; print(os.environ.get('OPENBLAS_NUM_THREADS'))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env={**clean, **env},
                         check=True).stdout.strip()
    assert out == str(want)
