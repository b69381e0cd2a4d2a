"""Debian's Chromium for the browser tests, launched through Playwright the one way every test uses.

Playwright's own browser download is not reachable here, so the tests drive the system's Chromium;
when it is missing they fail saying what to install, rather than deep inside Playwright.
"""
from __future__ import annotations

import shutil

import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("Chromium is not installed: `apt-get install chromium` (as root), "
                    "or leave the browser tests out with -m 'not browser'", pytrace=False)
    return found


def launch(pw):
    """A headless Chromium for ``pw`` (a ``sync_playwright()`` handle)."""
    return pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
