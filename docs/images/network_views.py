"""The network-view screenshots of docs/dashboard.md, made the way a user sees them.

    python docs/images/network_views.py            # writes docs/images/network_*.png (about 2 minutes)

Two real runs in a temporary folder: an SIR of ``desim.diffusion`` on a 5,000-agent Barabasi-Albert
network (the study ``benchmarks/bench_network_views.py`` measures), and the ``rumor_network`` study on
its 1,000-agent Watts-Strogatz network. Then ``desim dashboard`` over that folder, Debian's Chromium
through Playwright, each view opened by its button at a step where the spread is under way, and the
network card captured once the page says the picture is drawn (``data-drawn``), never after a delay.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_network_views import Dashboard, chromium, write_sir_study  # noqa: E402


def show(page, url: str, sid: str, state: str) -> None:
    page.goto(f"{url}/#/study/{sid}")
    page.wait_for_selector("#study-title[data-ready]")
    page.select_option("#net-state", state)
    page.click("text=Show network")
    page.wait_for_selector("#net-view[data-drawn]")


def at_step(page, step: int, view: str, overlay: bool = False) -> None:
    """Open ``view`` at ``step`` and wait until the canvas holds exactly that picture."""
    if page.get_attribute("#net-view", "data-view") != view:
        page.click(f'#net-view .dn-views button[data-view="{view}"]')
        page.wait_for_selector(f'#net-view[data-drawn^="{view}:"]')
    page.eval_on_selector("#net-view .dn-step", "(s, k) => { s.value = k; s.dispatchEvent(new Event('input')); }",
                          step)
    if overlay:
        page.check("#net-view .dn-messages")
    page.wait_for_selector(f'#net-view[data-drawn="{view}:{step}:{int(overlay)}"]')


def main() -> None:
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory(prefix="desim_shots_") as tmp:
        folder = Path(tmp)
        sir = write_sir_study(folder / "sir_ba_5000", "ba", 5000)
        rumor = folder / "rumor_network"
        shutil.copytree(ROOT / "studies" / "rumor_network", rumor, ignore=shutil.ignore_patterns("runs"))
        for study in (sir, rumor):
            subprocess.run([sys.executable, "-m", "desim.cli", "run", str(study)], check=True, cwd=folder)
        server = Dashboard(folder)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"],
                                             env={"TMPDIR": "/tmp", "PATH": "/usr/bin:/bin"})
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.set_default_timeout(600_000)
                show(page, server.url, sir.name, "state")
                for view in ("network", "communities", "adoption", "tree"):
                    at_step(page, 12, view)
                    page.locator("#net-view").screenshot(path=str(HERE / f"network_ba5000_{view}.png"))
                    print(f"network_ba5000_{view}.png")
                show(page, server.url, rumor.name, "rumor_state")
                at_step(page, 4, "network", overlay=True)
                page.locator("#net-view").screenshot(path=str(HERE / "network_ws1000_network.png"))
                print("network_ws1000_network.png")
                browser.close()
        finally:
            server.close()


if __name__ == "__main__":
    main()
