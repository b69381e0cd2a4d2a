"""The built wheel works on its own: installed into a fresh virtual environment,
``desim new`` finds its packaged templates and the new study runs.

The fresh venv borrows desim's dependencies from the environment the tests run in, whatever that
is (a venv of the user's, a system-wide install, a ``--user`` one): its site-packages folders are
listed in a ``.pth`` file, as plain paths, so that their own ``.pth`` files (an editable desim
among them) are not run and desim comes only from the wheel. ``--system-site-packages`` would not
do: inside a venv it points at the base interpreter, which lacks the dependencies."""
from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from waits import HANG_S

REPO = Path(__file__).resolve().parent.parent


def sh(*argv, cwd, env):
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def site_folders() -> list[str]:
    """The folders this interpreter imports installed packages from."""
    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        folders.append(site.getusersitepackages())
    return [f for f in folders if os.path.isdir(f)]


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_creates_and_runs_a_study(tmp_path):
    src = tmp_path / "src"              # build from a copy: the build leaves nothing in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "desim", src / "desim", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DESIM_TRACEBACK")}
    sh(sys.executable, "-m", "pip", "wheel", src, "--no-deps", "-q", "-w", tmp_path / "dist", cwd=tmp_path, env=env)
    [wheel] = (tmp_path / "dist").glob("desim-*.whl")
    # dependencies come from this environment's site folders; desim itself only from the wheel
    sh(sys.executable, "-m", "venv", tmp_path / "venv", cwd=tmp_path, env=env)
    bin_ = tmp_path / "venv" / "bin"
    venv_site = sh(bin_ / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                   cwd=tmp_path, env=env).strip()
    (Path(venv_site) / "borrowed-dependencies.pth").write_text("\n".join(site_folders()) + "\n")
    sh(bin_ / "python", "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel, cwd=tmp_path, env=env)
    work = tmp_path / "work"
    work.mkdir()
    where = sh(bin_ / "python", "-c", "import desim; print(desim.__file__)", cwd=work, env=env).strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where
    assert "starter" in sh(bin_ / "desim", "new", "--list", cwd=work, env=env)
    sh(bin_ / "desim", "new", "mystudy", cwd=work, env=env)
    out = sh(bin_ / "desim", "run", "studies/mystudy", cwd=work, env=env)
    assert ": completed" in out and (work / "studies" / "mystudy" / "runs" / "desim.duckdb").is_file()
