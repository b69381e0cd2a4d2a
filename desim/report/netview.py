"""The network views in the browser: one renderer for the report's offline player and the dashboard.

``static/netview.js`` (``NETVIEW_JS``, its style ``static/netview.css``) defines
``DesimNet.mount(root, data, options)``: it draws ``data`` (the dict of
``desim.report.network_picture.picture`` plus ``captions`` and ``size_keys`` from
``desim.report.diffusion``) on a 2-D canvas, with a button per view, a step slider, a play button,
a legend in the study's declared order with the counts over all agents, the size key, the
message overlay check box (off; only when the run stored messages) and the view's caption.
The report's player inlines it; the dashboard serves it as ``/static/netview.js`` and passes
``options.loadView(view)`` to fetch a view's data when its button is first pressed, and
``options.onNodeClick(agentId)``.

Why a 2-D canvas and not WebGL: measured in this machine's headless Chromium (no GPU, so WebGL
is software-rendered), sigma.js took 20 s to show 100,000 nodes with their 300,000 links and 5 s
without links; a 2-D canvas draws both in about 2 s (benchmarks/RESULTS.md).

Encodings, the same as the PNGs': node area constant or proportional to degree, never by state;
nodes drawn in an order fixed by size (then id), never by state; links faint, lit orange only with
the overlay. Zoom with the wheel, pan by dragging, double-click to reset; hover names the agent.

Readiness signals for tests and scripts, on ``root``: ``data-view``, ``data-step`` (the step
drawn), ``data-overlay`` (``on``/``off``), ``data-size-by`` and ``data-drawn``
(``<view>:<frame>:<overlay 0|1>``, set once the canvas holds that picture); ``root.desimNet``
has ``drawn()`` (per node: the radius in px and the colour as drawn) and ``show(view, frame)``.
"""

from desim.report.player import static_text

NETVIEW_CSS = static_text("netview.css")

NETVIEW_JS = static_text("netview.js")
