"""Shared fixtures: copies of the reference studies in a temporary folder, so
tests run real studies against real DuckDB files without touching the repo."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ROOT / "studies"


@pytest.fixture
def study_copy(tmp_path):
    """``study_copy("opinion_diffusion")`` -> path of a fresh copy of that study (no runs)."""

    def make(name: str, dest_name: str | None = None) -> Path:
        dest = tmp_path / "studies" / (dest_name or name)
        shutil.copytree(STUDIES / name, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
        return dest

    return make


@pytest.fixture(autouse=True)
def _no_progress(monkeypatch):
    """Commands write progress lines to stderr off a terminal; the tests of other things read stderr for
    their own lines, so progress is off unless a test asks for it (``DESIM_PROGRESS``, as a user would)."""
    monkeypatch.setenv("DESIM_PROGRESS", "off")
