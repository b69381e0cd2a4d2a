"""The command line imports only what a command uses: ``desim --help`` loads no plotting, web or
database library, and ``desim run`` no plotting or web library. Speed itself is measured in
``benchmarks/bench_startup.py`` (results in benchmarks/RESULTS.md); its smoke configuration runs here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_startup_benchmark_smoke():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_startup.py"), "--repeat", "1", "--no-mesa"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "desim --help" in res.stdout and "heavy imports of desim --help: none" in res.stdout
