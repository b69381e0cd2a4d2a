/* desim dashboard grid view: a positioned run's agents where they are (state fields x and y), coloured by a
 * state, one step at a time (GET /api/studies/<id>/grid?run=&state=&step=, desim/dashboard/grid.py).
 *
 * The server sends one step per request, so a run of any length is drawn at once. Categories come in the
 * study's colours and order (those of the "States over time" charts); numbers on the whole run's range by
 * default, or this step's own range, or log(1 + value). Agents whose state says alive = false are not drawn
 * (the store's rule; the legend says how many). A study's layer (Sugarscape's sugar left) is drawn under the
 * agents, white to orange, computed by the code of the run's own version (the legend names it), not the study's
 * code as it is now.
 *
 * For tests and devtools the stage carries what it drew: data-drawn="<state>:<step>", data-run, data-cell
 * (pixels per cell), data-width, data-height, data-shown, data-dead and, for categories, data-counts.
 */
"use strict";

const GRID_EMPTY = "#eef0f3", GRID_MISSING = "#cccccc", MAX_STEP = 10000000;   // the API clamps a step to the run's last
const LAYER_LOW = [255, 255, 255], LAYER_HIGH = [237, 158, 13];     // the report's sugar ramp

function gridCard(S) {
  const runs = S.runs.filter(r => r.status !== "running" || r.stalled);
  const dists = S.st.population.distributions || [];
  // the cells are the position; alive = false agents are not drawn, so colouring by alive says nothing: last
  const keys = [...new Set([...(S.st.study.display_states || []), ...dists.map(d => d.name)])]
    .filter(k => k !== "x" && k !== "y").sort((a, b) => (a === "alive") - (b === "alive"));
  const runSel = h("select", {id: "grid-run"}, runs.slice().reverse().map(r => h("option", {value: r.run_id, text: r.run_id})));
  const keySel = h("select", {id: "grid-state"}, keys.map(k => h("option", {value: k, text: k})));
  const scaleSel = h("select", {id: "grid-scale", hidden: true},
    h("option", {value: "run", text: "whole run's range (steps compare)"}),
    h("option", {value: "step", text: "this step's range (the spread within it)"}),
    h("option", {value: "log", text: "whole run, log(1 + value)"}));
  const slider = h("input", {type: "range", id: "grid-step", min: 0, max: 0, value: 0, step: 1, "aria-label": "step"});
  const number = h("input", {type: "number", id: "grid-step-number", min: 0, max: 0, value: 0, step: 1, class: "grid-step-number", "aria-label": "step number"});
  const label = h("span", {id: "grid-step-label", class: "muted"});
  const play = h("button", {type: "button", id: "grid-play", text: "▶ play"});
  const canvas = h("canvas", {id: "grid-canvas"});
  const stage = h("div", {id: "grid-view"}, canvas);
  const legend = h("div", {class: "grid-legend", id: "grid-legend"});
  const hover = h("p", {class: "muted", id: "grid-hover", text: "Point at a cell to read it; click an agent to open it."});
  const body = h("div", {class: "grid-body", hidden: true}, stage, h("div", {class: "grid-side"}, legend, hover));
  const G = {answer: null, inflight: false, pending: null, playing: false, unit: unitOf(S.st)};

  const url = step => `/api/studies/${enc(S.sid)}/grid?run=${enc(runSel.value)}&state=${enc(keySel.value)}&step=${step}`;
  // one request at a time: while one is out, a newer step asked for (a slider dragged) waits, and only the
  // latest such step is read next, so dragging never piles up reads of a long run's store
  const load = async step => {
    if (G.inflight) { G.pending = step; return; }
    G.inflight = true; G.pending = null;
    label.textContent = `loading ${G.unit} ${step}…`;
    const asked = url(step);          // the run and state too: a new choice while a read is out is read next
    let g;
    try { g = await getJSON(asked); }
    catch (e) {
      G.inflight = false;
      if (S.token === viewToken) { fill(legend, errorCard(e.message, "grid")); body.hidden = false; G.playing = false; }
      return;
    }
    G.inflight = false;
    if (S.token !== viewToken) return;                      // the reader has left this page
    if (G.pending !== null) {
      const next = G.pending;
      G.pending = null;
      if (url(next) !== asked) { load(next); return; }
    }
    if (g.busy) { fill(legend, infoCard(g.message)); body.hidden = false; return; }
    G.answer = g;
    for (const el of [slider, number]) { el.max = g.last_step; el.value = g.step; }
    scaleSel.hidden = g.kind !== "numeric";
    body.hidden = false;
    draw();
    if (G.playing) {
      if (g.step >= g.last_step) { G.playing = false; play.textContent = "▶ play"; }
      else later(() => { if (G.playing) load(g.step + 1); }, 120);
    }
  };
  const go = step => { G.playing = false; play.textContent = "▶ play"; load(Math.max(0, Math.min(+slider.max || 0, step))); };
  slider.addEventListener("input", () => load(+slider.value));
  number.addEventListener("change", () => go(+number.value || 0));
  scaleSel.addEventListener("change", () => draw());
  play.addEventListener("click", () => {
    G.playing = !G.playing;
    play.textContent = G.playing ? "❚❚ pause" : "▶ play";
    if (G.playing) load(G.answer && G.answer.step < G.answer.last_step ? G.answer.step + 1 : 0);
  });

  function cellSize(g) {
    const room = Math.max(200, Math.min(stage.parentElement ? stage.parentElement.clientWidth - 300 : 640, 720));
    return Math.max(2, Math.floor(room / Math.max(g.width, g.height)));
  }
  function colourOf(g) {
    if (g.kind !== "numeric") return v => (v >= 0 ? g.colors[v] : GRID_MISSING);
    const scale = scaleSel.value;
    let [lo, hi] = scale === "step" && g.step_range ? g.step_range : g.range;
    const f = scale === "log" ? (v => Math.log1p(Math.max(0, v))) : (v => v);
    const a = f(lo ?? 0), b = f(hi ?? 1), n = g.palette.length;
    return v => (v === null || v === undefined ? GRID_MISSING
      : g.palette[Math.max(0, Math.min(n - 1, Math.floor(((f(v) - a) / ((b - a) || 1)) * n)))]);
  }
  function draw() {
    const g = G.answer;
    if (!g) return;
    const cell = cellSize(g), W = g.width * cell, H = g.height * cell;
    canvas.width = W; canvas.height = H;
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
    const ctx = canvas.getContext("2d");
    const lay = g.layer && g.layer.values;
    if (lay) {
      const top = g.layer.range[1] || 1;
      for (let i = 0; i < lay.length; i++) {
        const t = Math.max(0, Math.min(1, lay[i] / top));
        ctx.fillStyle = `rgb(${LAYER_LOW.map((c, k) => Math.round(c + (LAYER_HIGH[k] - c) * t)).join(",")})`;
        ctx.fillRect((i % g.width) * cell, Math.floor(i / g.width) * cell, cell, cell);
      }
    } else {
      ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, W, H);
      ctx.fillStyle = GRID_EMPTY;
      for (let y = 0; y < g.height; y++) for (let x = 0; x < g.width; x++) ctx.fillRect(x * cell, y * cell, cell - (cell > 5 ? 1 : 0), cell - (cell > 5 ? 1 : 0));
    }
    const colour = colourOf(g), a = g.agents;
    G.at = new Map();
    for (let i = 0; i < a.id.length; i++) {
      const x = a.x[i], y = a.y[i];
      G.at.set(y * g.width + x, i);
      ctx.fillStyle = colour(a.v[i]);
      if (lay) {
        ctx.beginPath(); ctx.arc(x * cell + cell / 2, y * cell + cell / 2, cell * 0.42, 0, 2 * Math.PI); ctx.fill();
        if (cell >= 6) { ctx.strokeStyle = "rgba(29,35,48,0.75)"; ctx.lineWidth = 1; ctx.stroke(); }
      } else ctx.fillRect(x * cell, y * cell, cell - (cell > 5 ? 1 : 0), cell - (cell > 5 ? 1 : 0));
    }
    label.textContent = `${g.step === 0 ? "initial state" : `${G.unit} ${g.step}`} of ${g.last_step}`;
    renderLegend(g);
    Object.assign(stage.dataset, {drawn: `${g.state}:${g.step}`, run: g.run.run_id, cell: String(cell), width: String(g.width), height: String(g.height),
      shown: String(g.shown), dead: String(g.dead), scale: g.kind === "numeric" ? scaleSel.value : ""});
    if (g.counts) stage.dataset.counts = JSON.stringify(g.counts); else delete stage.dataset.counts;
  }
  function renderLegend(g) {
    const parts = [];
    if (g.kind === "numeric") {
      const scale = scaleSel.value;
      const [lo, hi] = scale === "step" && g.step_range ? g.step_range : g.range;
      parts.push(h("div", {class: "grid-key"}, h("strong", {text: g.state + " "}), fmt(lo), " ",
        h("span", {class: "ramp", style: `background:linear-gradient(to right, ${g.palette.join(", ")})`}), " ", fmt(hi),
        scale === "log" ? " (log scale)" : "", h("div", {class: "muted", text: `mean at this ${G.unit}: ${fmt(g.mean)}`})));
    } else {
      parts.push(h("div", {class: "grid-key"}, h("strong", {text: g.state}), h("ul", {class: "grid-categories"},
        g.categories.map((c, k) => h("li", {"data-category": c}, h("span", {class: "swatch", style: `background:${g.colors[k]}`}),
          `${c}: ${g.counts[c] ?? 0}`)))));
      if (g.many) parts.push(h("p", {class: "muted", text: `${g.categories.length} values: colours repeat.`}));
    }
    if (g.layer) parts.push(h("div", {class: "grid-key"}, h("strong", {text: g.layer.name + " "}), fmt(g.layer.range[0]), " ",
      h("span", {class: "ramp", style: `background:linear-gradient(to right, rgb(${LAYER_LOW}), rgb(${LAYER_HIGH}))`}), " ",
      fmt(g.layer.range[1]), g.layer.total != null ? h("div", {class: "muted", text: `in all at this ${G.unit}: ${Math.round(g.layer.total).toLocaleString("en")}`}) : null,
      g.layer.version ? h("div", {class: "muted grid-layer-version", text: `drawn by version ${g.layer.version}'s code (this run's)`}) : null));
    parts.push(h("p", {class: "grid-shown", text: `${g.shown.toLocaleString("en")} agents drawn` +
      (g.dead ? `; ${g.dead.toLocaleString("en")} dead (alive = false), not drawn` : "") + "."}));
    parts.push(h("p", {class: "muted", text: `${g.width} × ${g.height} cells; x to the right, y = 0 the top row.`}));
    if (g.layer_note) parts.push(h("p", {class: "muted grid-note", text: g.layer_note}));
    fill(legend, parts);
  }
  const cellAt = ev => {
    const g = G.answer, cell = +stage.dataset.cell || 1, r = canvas.getBoundingClientRect();
    const x = Math.floor((ev.clientX - r.left) / cell), y = Math.floor((ev.clientY - r.top) / cell);
    return g && x >= 0 && y >= 0 && x < g.width && y < g.height ? {x, y, i: G.at.get(y * g.width + x)} : null;
  };
  canvas.addEventListener("mousemove", ev => {
    const c = cellAt(ev), g = G.answer;
    if (!c) return;
    const lay = g.layer && g.layer.values ? ` · ${g.layer.name} ${fmt(g.layer.values[c.y * g.width + c.x])}` : "";
    if (c.i === undefined) { hover.textContent = `cell (${c.x}, ${c.y}): empty${lay}`; canvas.style.cursor = "default"; return; }
    const v = g.agents.v[c.i];
    hover.textContent = `cell (${c.x}, ${c.y}): agent ${g.agents.id[c.i]}, ${g.state} ${g.kind === "numeric" ? fmt(v) : (g.categories[v] ?? "null")}${lay}`;
    canvas.style.cursor = "pointer";
  });
  canvas.addEventListener("click", ev => {
    const c = cellAt(ev);
    if (c && c.i !== undefined) location.hash = `#/study/${enc(S.sid)}/agent/${enc(G.answer.run.run_id)}/${enc(G.answer.agents.id[c.i])}`;
  });
  // the first look at a run is its last step (what came of it); the slider and play go back from there
  const show = () => { G.playing = false; play.textContent = "▶ play"; load(G.answer ? +slider.value || 0 : MAX_STEP); };
  runSel.addEventListener("change", () => { G.answer = null; show(); });
  keySel.addEventListener("change", show);
  const controls = h("div", {class: "filters grid-controls"}, "run ", runSel, " state ", keySel, " ",
    h("button", {type: "button", class: "primary", onclick: show, text: "Show grid"}), " ", scaleSel);
  const steps = h("div", {class: "grid-steps"}, h("button", {type: "button", text: "◀", title: "previous step", onclick: () => go(+slider.value - 1)}),
    slider, h("button", {type: "button", text: "▶", title: "next step", onclick: () => go(+slider.value + 1)}), number, play, label);
  const card = h("section", {class: "card", id: "grid"}, h("h2", {text: "Grid"}),
    h("p", {class: "muted", text: "Where the agents are (their state's x and y), coloured by a state, one step at a time."}),
    runs.length && keys.length ? [controls, steps, body] : h("p", {class: "muted", text: "Needs a finished run."}));
  G.show = show;
  return card;
}
