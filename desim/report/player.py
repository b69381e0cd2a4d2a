"""What the offline players share: the page, the play/slider controls, the frames picked for a PNG.

The network player (``diffusion.py``) and the grid player (``grid.py``) each
draw one frame on a canvas; everything around the drawing is the same and
lives here. A player's script defines ``draw(k)`` and calls
``desimControls(n, draw, ms)``.
"""
from __future__ import annotations

import json
from html import escape
from importlib.resources import files


def static_text(name: str) -> str:
    """A script or style the players inline, kept as a file of its own in ``desim/report/static/`` (so it
    reads, and lints, as JavaScript or CSS); the dashboard serves the same files."""
    return (files("desim.report") / "static" / name).read_text(encoding="utf-8")


CONTROLS_JS = static_text("player_controls.js")

BASE_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
canvas { border: 1px solid #ddd; max-width: 100%; }
.controls { margin: 0.6em 0; display: flex; gap: 0.8em; align-items: center; }
#step { width: 420px; } .note { color: #a33; font-weight: bold; }
.key { margin-right: 1em; } .key i { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.3em; }
"""


def panel_steps(n: int, max_panels: int) -> list[int]:
    """At most ``max_panels`` frame positions out of ``n``, evenly spread, first and last included."""
    if n <= max_panels:
        return list(range(n))
    return sorted({int(round(i * (n - 1) / (max_panels - 1))) for i in range(max_panels)})


def page(payload: dict, *, title: str, data_id: str, canvas_id: str, legend: str, caption: str,
         script: str, css: str = "") -> str:
    """A self-contained player page: title, note, controls, legend, counts, canvas, data, scripts."""
    blob = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
    note = f'<p class="note">{escape(payload["note"])}</p>' if payload.get("note") else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{BASE_CSS}{css}</style></head><body>
<h1>{escape(title)}</h1>
{note}
<div class="controls"><button id="play">&#9654; play</button>
<input id="step" type="range" min="0" max="0" value="0"><span id="label"></span></div>
<div id="legend">{legend}</div>
<p id="counts"></p>
<canvas id="{canvas_id}" width="760" height="760"></canvas>
<p>{caption}</p>
<script type="application/json" id="{data_id}">{blob}</script>
<script>{CONTROLS_JS}{script}</script>
</body></html>
"""
