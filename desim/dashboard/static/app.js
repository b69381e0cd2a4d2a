/* desim dashboard: a one-page app over the JSON API of desim/dashboard/app.py.
 *
 * Views are chosen by the URL hash (#/, #/study/<id>, #/study/<id>/agent/<run>/<agent>,
 * #/study/<id>/messages/<run>/<step>). Everything from the server is put into the page
 * with textContent or SVG attributes, never as HTML, so study text cannot inject markup.
 * Time charts are uPlot (charts.js, vendored), the network views the report's 2-D canvas renderer
 * (netview.js, served from desim.report.netview; network.js ties it to the API), a positioned study's
 * grid a canvas of grid.js. While a run is going the page polls only the live progress endpoints (files,
 * never the database), so it never blocks the run's writes; the run has its own card and step axis.
 * When it ends the page reads the store again in place (reload), never blanking a section meanwhile.
 */
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const COLORS = ["#2f6fdf", "#d92d20", "#079455", "#dc6803", "#6941c6", "#0e9384", "#c11574", "#475467"];
const POLL_MS = 1000;
let timers = [];          // intervals and timeouts of the current view, cleared on navigation
let disposers = [];       // clean-ups of the current view (the network renderer), run on navigation
let viewToken = 0;        // bumps on navigation so late answers of an old view are dropped

// --- small DOM helpers -----------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}
/* replaceChildren would print "null" for absent parts; this drops them */
function fill(el, ...children) { el.replaceChildren(...children.flat().filter(c => c !== null && c !== undefined)); }
function card(title, ...children) { return h("section", {class: "card"}, title ? h("h2", {text: title}) : null, ...children); }
function errorCard(message, title) { return h("div", {class: "card error-card", role: "alert"}, title ? h("strong", {text: title + ": "}) : null, message); }
function infoCard(message) { return h("div", {class: "card info-card"}, message); }
function badge(status) { return h("span", {class: "badge status-" + (status || "none"), "data-status": status || ""}, status || "no runs"); }
function short(value, n = 140) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text === undefined ? "" : (text.length > n ? text.slice(0, n) + "…" : text);
}
// a stored value as a table shows it: numbers to 6 significant digits (a float's 17 are noise to a reader),
// the exact JSON in the cell's tooltip
function rounded(value) {
  return JSON.stringify(value, (k, v) => typeof v === "number" && Number.isFinite(v) && !Number.isInteger(v) ? +v.toPrecision(6) : v);
}
function exact(value) { return typeof value === "string" ? value : JSON.stringify(value); }
function valueCell(value, n = 140, cls = "json") {
  if (value == null) return h("td", {class: cls, text: "–"});
  return h("td", {class: cls, text: short(typeof value === "string" ? value : rounded(value), n), title: exact(value)});
}
function fmt(x) {
  if (x === null || x === undefined) return "–";
  if (typeof x !== "number") return String(x);
  return Math.abs(x) >= 1000 || Number.isInteger(x) ? String(x) : x.toPrecision(4);
}
function enc(x) { return encodeURIComponent(x); }
/* A derived seed has 19 digits: shown as its first and last four, whole on hover and in data-seed. */
function seedText(seed) { const t = String(seed); return t.length > 10 ? `${t.slice(0, 4)}…${t.slice(-4)}` : t; }
/* The study's unit of time ("week", "day"): what the step axis and the markers are labelled with. */
function unitOf(st) { return (st && st.simulation && st.simulation.time_unit) || "step"; }
function later(fn, ms) { timers.push(setTimeout(fn, ms)); }
function every(fn, ms) { timers.push(setInterval(fn, ms)); }

async function getJSON(url, method = "GET") {
  // the server refuses a POST without this header (a cross-site form cannot send it)
  const res = await fetch(url, {cache: "no-store", method, headers: method === "GET" ? {} : {"X-Desim-Request": "1"}});
  let body;
  try { body = await res.json(); } catch (e) { body = {error: `${res.status} ${res.statusText}`}; }
  if (!res.ok) { const err = new Error(body.error || res.statusText); err.status = res.status; throw err; }
  return body;
}

// --- population histograms (small SVG; the time charts are in charts.js) -----------------------
function histogram(dist, width = 260) {
  const height = dist.kind === "categorical" ? 26 + 15 * dist.values.length : dist.kind === "empty" ? 34 : 110;
  const svg = s("svg", {class: "dist", "data-attr": dist.name, viewBox: `0 0 ${width} ${height}`, width, height});
  svg.append(s("text", {x: 0, y: 11, class: "chart-title"}, dist.name));
  // the agents with no value (a roster's empty cell) are not in the bars: said beside the name
  if (dist.missing && dist.kind !== "empty") {
    svg.dataset.missing = dist.missing;
    svg.append(s("text", {x: width, y: 11, "text-anchor": "end", class: "dist-missing"},
      s("title", {}, `${dist.missing.toLocaleString("en")} of ${(dist.n + dist.missing).toLocaleString("en")} agents have no ${dist.name}`),
      `${dist.missing.toLocaleString("en")} missing`));
  }
  const m = {l: 4, t: 16, b: 16}, H = height - m.t - m.b, W = width - m.l * 2;
  if (dist.kind === "numeric") {
    const max = Math.max(1, ...dist.counts), bw = W / dist.counts.length;
    dist.counts.forEach((c, i) => svg.append(s("rect", {x: m.l + i * bw + 1, y: m.t + H - (c / max) * H, width: bw - 2,
      height: (c / max) * H, fill: "#7aa2ea", class: "bar"}, s("title", {}, String(c)))));
    svg.append(s("text", {x: m.l, y: height - 3}, fmt(dist.min)));
    svg.append(s("text", {x: width - m.l, y: height - 3, "text-anchor": "end"}, fmt(dist.max)));
    svg.append(s("text", {x: width / 2, y: height - 3, "text-anchor": "middle"}, "mean " + fmt(dist.mean)));
  } else if (dist.kind === "empty") {
    svg.append(s("text", {x: 0, y: 28}, "null for every agent"));
  } else {
    const max = Math.max(1, ...dist.values.map(v => v.count)), bh = H / Math.max(1, dist.values.length);
    dist.values.forEach((v, i) => {
      svg.append(s("rect", {x: 90, y: m.t + i * bh + 1, width: (v.count / max) * (W - 120), height: Math.max(1, bh - 2), fill: "#7aa2ea", class: "bar"}));
      svg.append(s("text", {x: 86, y: m.t + i * bh + bh / 2 + 3, "text-anchor": "end"}, short(v.value, 14)));
      svg.append(s("text", {x: 94 + (v.count / max) * (W - 120), y: m.t + i * bh + bh / 2 + 3}, v.count));
    });
    if (dist.distinct > dist.values.length) svg.append(s("text", {x: 0, y: height - 2}, `${dist.distinct - dist.values.length} more values`));
  }
  return svg;
}

// --- routing ---------------------------------------------------------------------------------
function crumbs(...parts) {
  const nav = document.getElementById("crumbs");
  fill(nav, ...parts.map(p => p.href ? h("a", {href: p.href, text: p.text}) : h("span", {text: p.text})));
}
function leaveView() {
  timers.forEach(t => { clearTimeout(t); clearInterval(t); });
  timers = [];
  disposers.forEach(fn => { try { fn(); } catch (e) { /* already gone */ } });
  disposers = [];
  viewToken += 1;
}
function route() {
  leaveView();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const view = document.getElementById("view");
  fill(view, h("p", {class: "muted"}, "Loading…"));
  if (parts[0] === "study" && parts[1]) {
    if (parts[2] === "agent" && parts[3] && parts[4]) return agentView(view, parts[1], parts[3], parts[4]);
    if (parts[2] === "messages" && parts[3] && parts[4] !== undefined) return messagesView(view, parts[1], parts[3], parts[4]);
    return studyView(view, parts[1]);
  }
  return listView(view);
}
/* The study page again, in place: the page stays as it is until the new one is built (no blank page while the
   store is read), and runs the old page followed live keep their curves from their progress files until the
   store's are read. Used when a run ends and while the store is locked. */
function reload(S) {
  leaveView();
  return studyView(document.getElementById("view"), S.sid, S);
}
window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);

// --- the study list ----------------------------------------------------------------------------
async function listView(view) {
  const token = viewToken;
  crumbs({text: "studies"});
  let body;
  try { body = await getJSON("/api/studies"); } catch (e) { fill(view, errorCard(e.message, "cannot list studies")); return; }
  if (token !== viewToken) return;
  const grid = h("div", {class: "grid", id: "study-list"});
  for (const st of body.studies) {
    const status = st.error ? "error" : st.status;
    const el = h("section", {class: "card study-card" + (st.error ? " error-card" : ""), "data-study": st.id},
      h("h2", {}, h("a", {href: "#/study/" + enc(st.id), text: st.id})),
      st.title ? h("div", {text: st.title}) : null,
      h("div", {}, badge(status), " ", st.last_run ? h("span", {class: "muted run-id", text: st.last_run.run_id}) : null,
        st.last_run && st.last_run.n_steps ? h("span", {class: "muted progress", text: ` step ${Math.max(0, st.last_run.last_step ?? st.last_run.step ?? 0)}/${st.last_run.n_steps}`}) : null),
      st.error ? h("pre", {class: "error-text", text: st.error}) : null);
    grid.append(el);
  }
  fill(view, h("h1", {text: "Studies"}), h("p", {class: "muted", text: body.studies_dir}),
    body.studies.length ? grid : infoCard("No study folders (with a study.json) here."));
  // running studies are picked up from the live files only; a run that starts or ends redraws the list
  const runningAt = new Set(body.studies.filter(st => st.status === "running").map(st => st.id));
  every(async () => {
    let live;
    try { live = await getJSON("/api/live"); } catch (e) { return; }
    if (token !== viewToken) return;
    const now = new Set(Object.entries(live.live).filter(([, runs]) => runs.length).map(([sid]) => sid));
    if (now.size !== runningAt.size || [...now].some(sid => !runningAt.has(sid))) {
      leaveView();
      return listView(view);
    }
    for (const [sid, runs] of Object.entries(live.live)) {
      const el = grid.querySelector(`[data-study="${CSS.escape(sid)}"]`);
      if (!el || !runs.length) continue;
      const r = runs[runs.length - 1];
      el.querySelector(".badge")?.replaceWith(badge("running"));
      const id = el.querySelector(".run-id");
      if (id) id.textContent = r.run_id;
      const prog = el.querySelector(".progress");
      const text = ` step ${Math.max(0, r.step)}/${r.n_steps}`;
      if (prog) prog.textContent = text; else el.append(h("span", {class: "muted progress", text}));
    }
  }, POLL_MS * 2);
}

// --- one study --------------------------------------------------------------------------------
async function studyView(view, sid, prev) {
  const token = viewToken;
  crumbs({text: "studies", href: "#/"}, {text: sid});
  let st;
  try { st = await getJSON("/api/studies/" + enc(sid)); } catch (e) { fill(view, errorCard(e.message, sid)); return; }
  if (token !== viewToken) return;
  if (st.error) { fill(view, h("h1", {id: "study-title", text: sid}), errorCard(st.error, "this study cannot be loaded")); return; }
  const S = {sid, st, runs: st.store.runs.slice(), selected: new Set(), series: {}, seriesFrom: {}, events: {}, live: {},
             liveStatus: {}, diff: false, token};
  const done = S.runs.filter(r => r.status === "completed");
  if (done.length) S.selected.add(done[done.length - 1].run_id);
  // a run in progress has its own card and step axis; it joins the compared runs only when ticked
  for (const r of S.runs) if (r.status === "running" && r.live) S.liveStatus[r.run_id] = "running";
  if (prev) {
    // the runs the reader ticked stay ticked; a page left as it opened shows the latest finished run again
    if (prev.touched) {
      S.selected = new Set([...prev.selected].filter(rid => S.runs.some(r => r.run_id === rid)));
      S.touched = true;
    }
    S.diff = prev.diff;
    // the runs the page followed live: their whole curves (read from the progress file), drawn at once
    for (const [rid, lv] of Object.entries(prev.live)) {
      if (S.liveStatus[rid] === "running") { S.live[rid] = lv; continue; }
      if (lv.metrics && Object.keys(lv.metrics).length) { S.series[rid] = lv.metrics; S.seriesFrom[rid] = "live"; }
    }
  }

  const study = st.study;
  const els = {
    banner: h("div", {id: "live-banner"}),
    live: h("div", {id: "live-runs"}),
    runs: h("div", {id: "runs-tree"}),
    charts: h("div", {id: "metric-charts", class: "chart-grid"}),
    states: (st.study.display_states || []).length ? h("div", {id: "state-charts", class: "chart-grid"}) : null,
    legend: h("div", {class: "legend", id: "legend"}),
  };
  const positioned = !!st.population.positioned;
  const grid = positioned ? gridCard(S) : null;
  fill(view, 
    h("h1", {id: "study-title", text: study.title || study.id}),
    study.question ? h("p", {class: "question"}, h("strong", {text: "Question: "}), study.question) : null,
    study.description ? h("p", {class: "muted", text: study.description}) : null,
    els.banner,
    st.store_error ? errorCard(st.store_error, "store") : null,
    h("div", {class: "row"}, populationCard(st), card("Runs", h("p", {class: "muted", text: "Tick runs to overlay them in the charts."}), els.runs)),
    els.live,
    interventionsCard(st),
    card("Metrics", h("label", {class: "muted"}, h("input", {type: "checkbox", id: "diff-mode", checked: S.diff,
      onchange: async ev => { S.diff = ev.target.checked; await loadMetrics(S); }}),
      " show each ticked run minus its parent (a branch's effect, step by step)"), els.legend, els.charts),
    els.states ? card("States over time", els.states) : null,
    panelCard(S),
    grid,
    // a positioned study without a network: its agents are on the grid, not on a graph laid out by id
    positioned && !st.population.n_edges ? null : networkCard(S));
  S.els = els;
  renderBanner(S);
  renderRuns(S);
  renderLive(S);
  renderCharts(S);          // what the page has already (a finished run's curves from its progress file), at once
  const stateRun = S.runs.filter(r => S.selected.has(r.run_id) && S.liveStatus[r.run_id] !== "running").pop();
  if (els.states) fill(els.states, stateRun ? loadingNote(`Reading the states of run ${stateRun.run_id} from the store…`)
    : h("p", {class: "muted", text: "Tick a finished run to see its states."}));
  // the live card polls from the start: a running run's curves grow while the finished runs' metrics,
  // states and panel are still being read (those reads take seconds on a store of long runs)
  const firstPoll = pollLive(S);
  every(() => pollLive(S), POLL_MS);
  await loadMetrics(S);
  await firstPoll;
  await S.panelLoaded;
  // the first loads are drawn: nothing above the panel moves any more (the browser tests wait for this)
  if (token === viewToken) document.getElementById("study-title").dataset.ready = "1";
  if (grid && token === viewToken) grid.querySelector("#grid-state") && later(() => gridShow(grid), 0);
  if (st.busy) later(() => { if (token === viewToken) reload(S); }, 2500);
}

function gridShow(grid) { const button = grid.querySelector(".grid-controls button.primary"); if (button) button.click(); }

/* A section being read from the store: said, never left blank. */
function loadingNote(text) { return h("p", {class: "muted loading-note", "data-loading": "1", text}); }

function populationCard(st) {
  const p = st.population;
  const facts = h("dl", {class: "facts"},
    h("dt", {text: "agents"}), h("dd", {class: "pop-size", text: p.size ?? "unknown until the first run"}),
    h("dt", {text: "interaction"}), h("dd", {class: "pop-interaction", text: p.interaction + (p.n_edges != null ? ` (${p.n_edges} edges)` : "")}),
    h("dt", {text: "propagation"}), h("dd", {class: "pop-propagation", text: p.propagation}),
    h("dt", {text: "personas from"}), h("dd", {text: p.source}),
    h("dt", {text: "steps"}), h("dd", {class: "pop-steps", text: `${stepsOfLatest(st)} × ${st.simulation.time_unit}, ${st.simulation.interaction_rounds} round(s)/step` +
      (stepsOfLatest(st) !== st.simulation.n_steps ? ` (latest run; the study file says ${st.simulation.n_steps})` : "")}),
    h("dt", {text: "decision"}), h("dd", {text: st.simulation.decision}));
  const warnings = st.warnings.length
    ? h("ul", {class: "warnings"}, st.warnings.map(w => h("li", {text: "⚠ " + w})))
    : h("p", {class: "muted no-warnings", text: "No lint warnings."});
  const dists = h("div", {class: "row dists"}, (p.distributions || []).map(d => histogram(d)));
  return h("section", {class: "card", id: "population-card"}, h("h2", {text: "Population"}), facts, warnings,
    p.distributions_from ? h("p", {class: "muted", text: "Distributions: " + p.distributions_from}) : null, dists);
}

/* Where a run's step axis ends: a run in progress runs to its n_steps; one that has ended (a stop_when
   condition, a budget, a failure) ends at its last step, as the report's figures do, so a run that stopped
   at step 90 of a 500-step cap is not drawn in the first fifth of its charts. */
function runEnd(r, running) {
  return !running && Number.isInteger(r.last_step) && r.last_step >= 0 ? r.last_step : (r.n_steps || 0);
}

/* Steps of the latest run (a run may override the study file's n_steps with --steps). */
function stepsOfLatest(st) {
  const runs = st.store.runs || [];
  const done = runs.filter(r => r.status === "completed" && r.n_steps);
  const last = done.length ? done[done.length - 1] : runs[runs.length - 1];
  return (last && last.n_steps) || st.simulation.n_steps;
}

// The markers of the ticked runs, each from its own resolved configuration (a run made with
// --set campaign_week=5 marks step 5, not the study file's default); the study files' only for a run
// that has none stored.
function interventionMarks(st, xmax, runs) {
  const markers = [], spans = [], seen = new Set();
  const sources = (runs || []).map(r => r.interventions).filter(Boolean);
  for (const iv of sources.length ? sources : [st.interventions]) {
    for (const e of iv.scheduled_events || []) {
      const key = `e ${e.at_step} ${e.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      markers.push({step: e.at_step, name: e.name, label: `${e.name}: ${e.op} ${e.target} = ${short(e.value, 40)}`});
    }
    for (const b of iv.broadcasts || []) {
      const key = `b ${b.at_step} ${b.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      spans.push({from: b.at_step, to: b.ttl ? b.at_step + b.ttl : xmax, label: `${b.name} (${b.channel})`});
      markers.push({step: b.at_step, name: b.name, label: `broadcast ${b.name}`});
    }
  }
  return {markers, spans};
}

/* Steps as a reader wants them: "week 4", "weeks 2, 6 and 9", or for many a range, its spacing and a count
   ("weeks 400–19,600, every 800 (25×)"), so a run with hundreds of scheduled events still reads. */
function stepsText(steps, unit) {
  const n = steps.length, num = t => t.toLocaleString("en");
  if (n === 1) return `${unit} ${num(steps[0])}`;
  if (n <= 3) return `${unit}s ${steps.slice(0, -1).map(num).join(", ")} and ${num(steps[n - 1])}`;
  const gaps = new Set(steps.slice(1).map((t, i) => t - steps[i]));
  return gaps.size === 1 ? `${unit}s ${num(steps[0])}–${num(steps[n - 1])}, every ${num([...gaps][0])} (${n}×)`
    : `${unit}s ${num(steps[0])}, ${num(steps[1])}, … ${num(steps[n - 1])} (${n}×)`;
}

/* Tick values for a step axis 0..n at most every `room` units apart, on a 1-2-5 ladder, labels never touching. */
function axisTicks(n, width) {
  const labelWidth = String(Math.round(n)).length * 6.5 + 14;
  const most = Math.max(1, Math.floor(width / labelWidth));
  const raw = Math.max(1, n / most), mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map(m => m * mag).find(v => v >= raw);
  const out = [];
  for (let t = 0; t <= n; t += step) out.push(t);
  return out;
}

function interventionsCard(st) {
  // the interventions as the run whose fired events are shown resolved them (its --set values in);
  // the study files' own only when no run is stored
  const shown = (st.store.runs || []).find(r => r.run_id === st.store.events_run);
  const iv = (shown && shown.interventions) || st.interventions, unit = unitOf(st);
  const last = shown ? runEnd(shown, shown.status === "running") : stepsOfLatest(st);
  const fired = st.store.events || [];
  const n = Math.max(last, ...iv.scheduled_events.map(e => e.at_step), ...iv.broadcasts.map(b => b.at_step),
    ...fired.map(e => e.step));
  // One row per planned intervention (the same one repeated at many steps: one row, a mark per step), then one
  // per thing that fired: a plan and what came of it never share a row, and every row is named on the left.
  const plans = new Map();
  const plan = (key, item, step, to) => {
    if (!plans.has(key)) plans.set(key, {...item, steps: [], spans: []});
    plans.get(key).steps.push(step);
    if (to !== undefined) plans.get(key).spans.push([step, to]);
  };
  for (const e of iv.scheduled_events) {
    const text = `${e.op} ${e.target} → ${short(e.value, 30)}${e.selector ? " (selected agents)" : ""}`;
    plan(`e ${e.name} ${text}`, {name: e.name, what: "event", text}, e.at_step);
  }
  for (const b of iv.broadcasts) {
    const text = `on ${b.channel} ${b.ttl ? `for ${b.ttl} ${unit}${b.ttl === 1 ? "" : "s"}` : "until the end"}: ${short(b.content, 50)}`;
    plan(`b ${b.name} ${text}`, {name: b.name, what: "broadcast", text}, b.at_step, b.ttl ? Math.min(n, b.at_step + b.ttl) : n);
  }
  const planned = [...plans.values()].map(p => ({...p, steps: [...new Set(p.steps)].sort((a, b) => a - b)}));
  const groups = new Map();
  for (const e of fired) {
    const key = `${e.kind} ${e.name}`;
    if (!groups.has(key)) groups.set(key, {name: e.name, what: e.kind, steps: []});
    groups.get(key).steps.push(e.step);
  }
  const width = 900, gutter = 220, right = 14, W = width - gutter - right, rowH = 22, noteH = 13;
  const X = v => gutter + (v / Math.max(1, n)) * W;
  const rowHeight = p => rowH + (p.steps.length > 1 ? noteH : 0);
  const height = 14 + (planned.length ? rowH + planned.reduce((a, p) => a + rowHeight(p), 0) : 0) + rowH * (groups.size + 1) + 34;
  const svg = s("svg", {id: "timeline", viewBox: `0 0 ${width} ${height}`, width: "100%", height, "data-xmax": n});
  const label = (y, text, cls) => s("text", {x: 6, y: y + 4, class: cls || "tl-label"}, s("title", {}, text), text.length > 34 ? text.slice(0, 33) + "…" : text);
  // a description beside its mark, on the side with more room, cut to fit: it never runs off the picture
  // or into the row names
  const note = (left, rightEnd, y, text) => {
    const after = width - right - (rightEnd + 10), before = left - 10 - (gutter + 4), room = Math.max(after, before);
    const chars = Math.max(0, Math.floor(room / 5.6));
    const shown = text.length > chars ? text.slice(0, Math.max(0, chars - 1)) + "…" : text;
    const onRight = after >= before || text.length * 5.6 <= after;
    return s("text", {x: onRight ? rightEnd + 10 : left - 10, y: y + 4, "text-anchor": onRight ? "start" : "end", class: "tl-note"},
      s("title", {}, text), shown);
  };
  // the description of a row with many marks goes on its own line under them, from the plot's left edge
  const noteBelow = (y, text) => {
    const chars = Math.floor(W / 5.6);
    return s("text", {x: gutter, y: y + noteH + 3, class: "tl-note tl-note-below"}, s("title", {}, text),
      text.length > chars ? text.slice(0, chars - 1) + "…" : text);
  };
  // marks closer than a diamond's width are drawn as thin ticks: a dense series reads as a rug, not a smear
  const dense = steps => steps.some((t, i) => i && X(t) - X(steps[i - 1]) < 11);
  const guide = y => s("line", {x1: gutter, x2: gutter + W, y1: y, y2: y, class: "tl-guide"});
  let y = 14;
  if (planned.length) {
    svg.append(label(y, "planned", "tl-section"));
    y += rowH;
    for (const p of planned) {
      const many = p.steps.length > 1;
      const g = s("g", {class: "tl-row", "data-row": "planned", "data-name": p.name, "data-steps": p.steps.join(",")});
      g.append(guide(y), label(y, `${p.what} ${p.name}` + (many ? ` (${p.steps.length}×)` : "")));
      const thin = dense(p.steps);
      if (p.what === "event") {
        for (const t of p.steps) g.append(thin
          ? s("rect", {x: X(t) - 1, y: y - 6, width: 2, height: 12, fill: "#d92d20", class: "tl-event", "data-step": t}, s("title", {}, `${p.name} planned at ${unit} ${t}`))
          : s("circle", {cx: X(t), cy: y, r: 5, fill: "#d92d20", class: "tl-event", "data-step": t}, s("title", {}, `${p.name} planned at ${unit} ${t}`)));
      } else {
        for (const [from, to] of p.spans) g.append(s("rect", {x: X(from), y: y - 6, width: Math.max(thin ? 2 : 4, X(to) - X(from)), height: 12, fill: "#fdb022", class: "tl-broadcast"},
          s("title", {}, `${p.name} from ${unit} ${from} to ${to}`)));
      }
      const lastEnd = p.what === "event" ? X(p.steps[p.steps.length - 1]) : Math.max(...p.spans.map(([, to]) => X(to)));
      g.append(many ? noteBelow(y, `${p.text} · ${stepsText(p.steps, unit)}`) : note(X(p.steps[0]), lastEnd, y, p.text));
      svg.append(g);
      y += rowHeight(p);
    }
  }
  svg.append(label(y, fired.length ? `fired in run ${st.store.events_run}` : "no fired events recorded", "tl-section"));
  y += rowH;
  for (const f of groups.values()) {
    const g = s("g", {class: "tl-row", "data-row": "fired", "data-name": f.name, "data-steps": f.steps.join(",")});
    g.append(guide(y), label(y, `${f.what} ${f.name}` + (f.steps.length > 1 ? ` (${f.steps.length}×)` : "")));
    const thin = dense(f.steps);
    for (const t of f.steps) g.append(s("path", {d: thin ? `M${X(t) - 1} ${y - 6} h2 v12 h-2 z` : `M${X(t)} ${y - 6} l5 6 l-5 6 l-5 -6 z`,
      fill: "#475467", class: "tl-fired", "data-step": t}, s("title", {}, `${f.what} ${f.name} fired at ${unit} ${t}`)));
    svg.append(g);
    y += rowH;
  }
  const axisY = y;
  svg.append(s("line", {x1: gutter, x2: gutter + W, y1: axisY, y2: axisY, class: "axis"}));
  for (const t of axisTicks(n, W)) {
    const text = t.toLocaleString("en"), half = text.length * 3.3;      // the last label ends at the plot's edge
    svg.append(s("text", {x: Math.min(X(t), width - 2 - half), y: axisY + 13, "text-anchor": "middle", class: "tl-tick"}, text));
  }
  svg.append(s("text", {x: gutter + W, y: axisY + 27, "text-anchor": "end", class: "tl-unit"}, unit));
  if (n > last) svg.append(s("line", {x1: X(last), x2: X(last), y1: 4, y2: axisY, class: "run-end"}, s("title", {}, `last step of run ${shown ? shown.run_id : "the latest run"}`)));
  // what fired, one line per intervention (its steps, and its detail when every firing had the same)
  const details = new Map();
  for (const e of fired) {
    const key = `${e.kind} ${e.name}`, text = e.detail ? short(e.detail, 100) : "";
    if (!details.has(key)) details.set(key, new Set());
    details.get(key).add(text);
  }
  const list = h("ul", {class: "muted", id: "fired-list"}, [...groups.entries()].slice(0, 30).map(([key, f]) => {
    const texts = [...details.get(key)];
    return h("li", {"data-name": f.name, text: `${stepsText([...new Set(f.steps)].sort((a, b) => a - b), unit)}: ${key} ` +
      (texts.length === 1 ? texts[0] : `(${texts.length} different details)`)});
  }), groups.size > 30 ? h("li", {text: `… and ${groups.size - 30} more (the events table holds them all)`}) : null);
  const source = h("p", {class: "muted", id: "timeline-source", text: shown && shown.interventions
    ? `Planned as run ${shown.run_id} resolved them (its parameters), and what fired in it.`
    : "Planned as the study files say (no run stored yet)."});
  return h("section", {class: "card", id: "interventions"}, h("h2", {text: "Environment and interventions"}),
    source, Object.keys(st.interventions).length ? svg : null, list);
}

/* A colour per run drawn (ticked, or running live), the first one no other drawn run has: two runs in one chart
   never share a colour while at most COLORS.length are drawn (a colour by list position repeated every 8 runs). */
function runColor(S, rid) {
  S.colorOf = S.colorOf || {};
  const drawn = new Set([...S.selected, ...Object.keys(S.liveStatus).filter(r => S.liveStatus[r] === "running")]);
  for (const r of Object.keys(S.colorOf)) if (!drawn.has(r)) delete S.colorOf[r];
  if (!drawn.has(rid)) return UNDRAWN;
  if (!(rid in S.colorOf)) {
    const used = new Set(Object.values(S.colorOf));
    S.colorOf[rid] = COLORS.find(c => !used.has(c)) || COLORS[Object.keys(S.colorOf).length % COLORS.length];
  }
  return S.colorOf[rid];
}
const UNDRAWN = "#d8d8d8";
const MAX_DRAWN = 20;     // runs one chart request takes (the metrics API's limit)

function paintSwatches(S) {
  for (const li of S.els.runs.querySelectorAll("li[data-run]")) {
    const sw = li.querySelector(":scope > label > .swatch");
    if (sw) sw.style.background = runColor(S, li.dataset.run);
  }
  for (const group of S.els.runs.querySelectorAll("li.sweep-group")) {     // a folded sweep says how many are drawn
    const drawn = [...group.querySelectorAll("li[data-run]")].filter(li => S.selected.has(li.dataset.run)).length;
    group.querySelector(".drawn-count").textContent = drawn ? `, ${drawn} drawn` : "";
  }
}

function renderRuns(S) {
  const ids = new Set(S.runs.map(r => r.run_id));
  const children = {};
  for (const r of S.runs) {
    const parent = r.parent_run_id && ids.has(r.parent_run_id) ? r.parent_run_id : "";
    (children[parent] = children[parent] || []).push(r);
  }
  const versions = {};
  for (const v of S.st.store.versions || []) versions[v.version_id] = v;
  // a version's changes are said once, under its first run (S.runs is in the order the runs started), not
  // repeated under each of its runs: a sweep made after an edit is many runs of one version
  const firstOfVersion = {};
  for (const r of S.runs) if (r.version_id && !(r.version_id in firstOfVersion)) firstOfVersion[r.version_id] = r.run_id;
  const one = (r, depth) => {
    const box = h("input", {type: "checkbox", class: "overlay", "data-run": r.run_id, checked: S.selected.has(r.run_id),
      onchange: async ev => {
        S.touched = true;
        if (ev.target.checked && S.selected.size >= MAX_DRAWN) {     // said, not a broken chart
          ev.target.checked = false;
          let note = S.els.runs.querySelector(".limit-note");
          if (!note) S.els.runs.prepend(note = h("p", {class: "muted limit-note"}));
          note.textContent = `At most ${MAX_DRAWN} runs are drawn at once: untick one first.`;
          return;
        }
        if (ev.target.checked) S.selected.add(r.run_id); else S.selected.delete(r.run_id);
        paintSwatches(S);
        await loadMetrics(S);
      }});
    const v = r.version_id && firstOfVersion[r.version_id] === r.run_id && versions[r.version_id];
    const progress = r.n_steps ? ` step ${Math.max(0, r.last_step ?? 0)}/${r.n_steps}` : "";
    return h("li", {"data-run": r.run_id},
      h("label", {}, box, h("span", {class: "swatch", style: `background:${runColor(S, r.run_id)}`}),
        h("span", {class: "run-id", text: r.run_id})), " ",
      h("span", {class: "muted", text: r.kind + (r.fork_step ? ` from step ${r.fork_step}` : "")}), " ",
      badge(r.stalled ? "stale" : r.status), h("span", {class: "muted", text: progress}),
      r.stalled ? h("span", {class: "muted", text: " (marked running, but no process writes the store)"}) : null,
      r.seed !== undefined && r.seed !== null ? h("span", {class: "muted run-seed", "data-seed": r.seed,
        title: `seed ${r.seed}`, text: ` seed ${seedText(r.seed)}`}) : null,
      r.sweep_id ? h("span", {class: "muted", text: ` sweep ${r.sweep_id}` + (r.sweep_values ? `: ${r.sweep_values}` : "")}) : null,
      r.overrides_text ? h("div", {}, h("code", {class: "run-set", title: "what this run changed from the study's files",
        text: r.overrides_text})) : null,
      r.llm ? llmLine(r.llm) : null,
      r.note ? h("em", {text: ` “${r.note}”`}) : null,
      r.error ? h("div", {class: "run-error", text: r.error}) : null,
      v && v.diff && v.diff.length ? versionDiff(S, v) : null,
      tree(r.run_id, depth + 1));
  };
  const tree = (parent, depth) => h("ul", {class: "runs" + (depth ? "" : " root")},
    depth ? (children[parent] || []).map(r => one(r, depth)) : grouped(S, children[""] || [], r => one(r, 0)));
  fill(S.els.runs, S.runs.length ? tree("", 0) : h("p", {class: "muted", text: "No runs yet."}));
}

/* A run's LLM decisions in one line: what it paid for, and how many fell back to the study's rule; a tenth or
   more fallen back is marked, as desim run warns (the run is "completed", but its panel is largely the rule's). */
function llmLine(llm) {
  const n = x => x.toLocaleString("en-US");
  const share = llm.decisions ? llm.fallbacks / llm.decisions : 0;
  const parts = [`LLM: ${n(llm.calls)} paid calls (tokens ${n(llm.tokens_in)} in, ${n(llm.tokens_out)} out)`];
  if (llm.unrecorded) parts.push(`${n(llm.unrecorded)} of them in steps not closed yet (recorded when the run is resumed)`);
  if (llm.cache_hits) parts.push(`${n(llm.cache_hits)} from the cache`);
  if (llm.scripted) parts.push(`${n(llm.scripted)} scripted`);
  parts.push(`${n(llm.fallbacks)} of ${n(llm.decisions)} decisions fell back to the rule` +
             (llm.fallbacks ? ` (${Math.round(100 * share)} %)` : ""));
  return h("div", {class: "run-llm" + (share >= 0.1 ? " run-llm-warn" : ""), text: parts.join(", ")});
}

/* The top of the runs tree, a large sweep's runs folded into one line that opens (a sweep of 200 runs was 200
   lines to scroll past): folded until opened, or while one of its runs is running; the line says how many of its
   runs are drawn. A small sweep is listed as it is. Opening and closing is kept across the list's redraws. */
const FOLD_SWEEP = 6;
function grouped(S, roots, one) {
  const bySweep = {};
  for (const r of roots) if (r.sweep_id) (bySweep[r.sweep_id] = bySweep[r.sweep_id] || []).push(r);
  const out = [], placed = new Set();
  for (const r of roots) {
    const runs = r.sweep_id ? bySweep[r.sweep_id] : null;
    if (!runs || runs.length < FOLD_SWEEP) { out.push(one(r)); continue; }
    if (placed.has(r.sweep_id)) continue;
    placed.add(r.sweep_id);
    const count = status => runs.filter(x => (x.stalled ? "stale" : x.status) === status).length;
    const parts = [["completed", count("completed")], ["failed", count("failed")],
                   ["interrupted", count("interrupted")], ["stale", count("stale")], ["running", count("running")]].filter(([, n]) => n);
    S.openSweeps = S.openSweeps || {};
    const drawn = runs.filter(x => S.selected.has(x.run_id)).length;
    const box = h("details", {class: "sweep-runs"},
      h("summary", {}, h("span", {class: "run-id", text: `sweep ${r.sweep_id}`}),
        h("span", {class: "muted", text: `: ${runs.length} runs (` + parts.map(([s, n]) => `${n} ${s}`).join(", ") + ")"}),
        h("span", {class: "muted drawn-count", text: drawn ? `, ${drawn} drawn` : ""})),
      h("ul", {class: "runs"}, runs.map(one)));
    box.open = S.openSweeps[r.sweep_id] ?? runs.some(x => S.liveStatus[x.run_id] === "running");
    const sid = r.sweep_id;
    box.addEventListener("toggle", () => { S.openSweeps[sid] = box.open; });
    out.push(h("li", {class: "sweep-group", "data-sweep": r.sweep_id}, box));
  }
  return out;
}

// A version's changes since its parent: the changed paths at a glance, and, opened, its settings and a
// unified diff of each file it changed (the texts the store kept with the version), read on first opening.
function versionDiff(S, v) {
  const body = h("div", {class: "version-files"});
  const box = h("details", {class: "version-diff", "data-version": v.version_id},
    h("summary", {class: "muted", title: v.diff.map(d => `${d.path}: ${short(d.old, 200)} → ${short(d.new, 200)}`).join("\n"),
      text: `version ${v.version_id} changed: ` + v.diff.map(d => d.path).join(", ")}), body);
  box.addEventListener("toggle", async () => {
    if (!box.open || body.dataset.state) return;
    body.dataset.state = "loading";
    fill(body, loadingNote("Reading the version's files from the store…"));
    let d;
    try { d = await getJSON(`/api/studies/${enc(S.sid)}/versions/${enc(v.version_id)}/diff`); }
    catch (e) { delete body.dataset.state; fill(body, errorCard(e.message, "version diff")); return; }
    if (d.busy) { delete body.dataset.state; fill(body, h("p", {class: "muted", text: d.message})); return; }
    const settings = d.config.filter(c => !c.path.startsWith("code."));
    fill(body,
      h("p", {class: "muted", text: `against its parent version ${d.older}`}),
      settings.length ? h("ul", {class: "version-settings"}, settings.map(c =>
        h("li", {}, h("code", {text: c.path}), `: ${short(JSON.stringify(c.old), 200)} → ${short(JSON.stringify(c.new), 200)}`))) : null,
      d.files.map(f => h("div", {class: "version-file", "data-path": f.path},
        h("strong", {text: `${f.path} (${f.change})`}),
        f.diff === null ? h("p", {class: "muted", text: f.why})
          : h("pre", {class: "diff"}, f.diff.split("\n").filter((line, i, all) => i < all.length - 1 || line).map(line =>
              h("span", {class: line.startsWith("+") && !line.startsWith("+++") ? "add"
                : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "",
                text: line || " "}))))));
    body.dataset.state = "shown";
  });
  return box;
}

function renderBanner(S) {
  const running = S.runs.filter(r => S.liveStatus[r.run_id] === "running");
  const indicator = document.getElementById("live-indicator");
  if (!running.length && !S.st.busy) { fill(S.els.banner); indicator.hidden = true; return; }
  const lines = running.map(r => {
    const lv = S.live[r.run_id];
    const step = lv ? lv.step : r.last_step;
    const changes = (lv && lv.overrides_text) || r.overrides_text;
    const finishing = lv && lv.phase === "finishing";
    return h("div", {class: "live-run", "data-run": r.run_id, "data-phase": finishing ? "finishing" : "running",
      text: finishing
        ? `run ${r.run_id} has done its ${Math.max(0, step ?? 0)} ${unitOf(S.st)}s and is storing its data; ` +
          "its charts are from its progress file until then"
        : `run in progress: ${r.run_id} at ${unitOf(S.st)} ${Math.max(0, step ?? 0)} of ${r.n_steps}` + (changes ? ` (${changes})` : "")});
  });
  if (S.st.busy) lines.push(h("div", {class: "store-busy", text: "The store is held by a desim process (a run storing its data); " +
    "runs, panel and messages show the last data read before, and the page reloads when it is free."}));
  fill(S.els.banner, infoCard(lines));
  indicator.hidden = !running.length;
  indicator.textContent = running.length ? `${running.length} run(s) live` : "";
}

/* Runs in progress, each on its own step axis (its own n_steps): a 20,000-step run does not stretch the
   charts of the runs compared below; ticking it in the runs tree overlays it there too. */
function renderLive(S) {
  const running = S.runs.filter(r => S.liveStatus[r.run_id] === "running");
  if (!running.length) { fill(S.els.live); return; }
  fill(S.els.live, running.map(r => {
    const lv = S.live[r.run_id] || {};
    const metrics = lv.metrics || {};
    const names = [...(S.st.study.display_metrics || []).filter(n => n in metrics),
                   ...Object.keys(metrics).filter(n => !(S.st.study.display_metrics || []).includes(n))];
    const xmax = Math.max(1, r.n_steps || lv.n_steps || 0);
    const {markers, spans} = interventionMarks(S.st, xmax, [r]);
    const finishing = lv.phase === "finishing";
    const title = finishing ? `Run ${r.run_id}: all ${lv.step} ${unitOf(S.st)}s done, storing its data…`
      : `Live: run ${r.run_id}, ${unitOf(S.st)} ${Math.max(0, lv.step ?? r.last_step ?? 0)} of ${xmax}`;
    return h("section", {class: "card live-card", "data-run": r.run_id}, h("h2", {text: title}),
      h("p", {class: "muted", text: `On its own ${unitOf(S.st)} axis (0 to ${xmax}); tick it in the runs tree to compare it with other runs.`}),
      names.length ? h("div", {class: "chart-grid live-charts"}, names.map(name => timeChart({
        title: name, key: name, mode: "live", xmax, markers, spans, xLabel: unitOf(S.st),
        series: [{label: r.run_id, color: runColor(S, r.run_id), dash: [4, 2], points: metrics[name]}]})))
        : loadingNote("Waiting for the run's first steps…"));
  }));
}

/* The run a difference is taken against: a branch's parent, which it shares every step with before the fork. A
   new version's first run also names a parent (the last run of the version before), but with other code and
   another seed: their difference would be no effect of anything. */
function parentOf(S, rid) {
  const run = S.runs.find(r => r.run_id === rid);
  return run && run.kind === "branch" && run.parent_run_id && S.runs.some(r => r.run_id === run.parent_run_id)
    ? run.parent_run_id : null;
}

async function loadMetrics(S) {
  const call = S.metricsCall = (S.metricsCall || 0) + 1;   // only the latest call draws (ticks can overlap)
  const wanted = new Set(S.selected);
  if (S.diff) for (const rid of S.selected) { const p = parentOf(S, rid); if (p) wanted.add(p); }
  const stored = [...wanted].filter(rid => S.liveStatus[rid] !== "running");
  if (stored.length) {
    try {
      // fired events per run (a branch fires interventions its study files may not list), in the same read
      const missing = stored.some(r => !(r in S.events));
      const body = await getJSON(`/api/studies/${enc(S.sid)}/metrics?` + stored.map(r => "run=" + enc(r)).join("&") + (missing ? "&events=1" : ""));
      if (body.events) for (const rid of stored) if (!(rid in S.events)) S.events[rid] = body.events[rid] || [];
      for (const rid of stored) {
        // a run just ended keeps its curves from its progress file until the store answers with its own
        if (Object.keys(body.series[rid] || {}).length || S.seriesFrom[rid] !== "live") {
          S.series[rid] = body.series[rid] || {};
          S.seriesFrom[rid] = body.sources[rid];
        }
      }
    } catch (e) { fill(S.els.charts, errorCard(e.message, "metrics")); return; }
  }
  if (S.token === viewToken && call === S.metricsCall) { renderCharts(S); await renderStates(S); }
}

function renderCharts(S) {
  const names = [...(S.st.study.display_metrics || [])];
  const add = n => { if (!names.includes(n)) names.push(n); };
  (S.st.store.metric_names || []).forEach(add);
  for (const rid of S.selected) Object.keys(S.series[rid] || {}).forEach(add);
  for (const rid of S.selected) Object.keys((S.live[rid] || {}).metrics || {}).forEach(add);
  const selected = S.runs.filter(r => S.selected.has(r.run_id));
  // the step axis covers the ticked runs' own steps (a run may have been started with --steps): runs ticked
  // together are compared, on one axis; a run in progress that is not ticked has its own card
  const xmax = Math.max(1, ...selected.map(r => runEnd(r, S.liveStatus[r.run_id] === "running")));
  const {markers, spans} = interventionMarks(S.st, xmax, selected);
  const seen = new Set(markers.map(mk => mk.step + " " + mk.name));
  for (const r of selected) for (const e of S.events[r.run_id] || []) {
    if (seen.has(e.step + " " + e.name)) continue;
    seen.add(e.step + " " + e.name);
    markers.push({step: e.step, name: e.name, label: `${e.kind} ${e.name} fired in ${r.run_id}`});
  }
  S.marks = {markers, spans, xmax};
  const fromLive = selected.filter(r => S.seriesFrom[r.run_id] === "live" && S.liveStatus[r.run_id] !== "running");
  fill(S.els.legend, ...selected.map(r => h("span", {}, h("span", {class: "swatch", style: `background:${runColor(S, r.run_id)}`}),
    r.run_id + (S.liveStatus[r.run_id] === "running" ? " (live)" : ""))),
    fromLive.length ? h("span", {class: "loading-note", "data-loading": "1",
      text: `${fromLive.map(r => r.run_id).join(", ")}: curves from the run's progress file while the store is read`}) : null);
  const loaded = selected.some(r => S.series[r.run_id] || S.liveStatus[r.run_id] === "running");
  if (selected.length && !loaded) { fill(S.els.charts, loadingNote(`Reading the metrics of run ${selected.map(r => r.run_id).join(", ")} from the store…`)); return; }
  if (!names.length) { fill(S.els.charts, h("p", {class: "muted", text: "No metrics yet."})); return; }
  const pointsOf = (rid, name) => {
    const src = S.liveStatus[rid] === "running" ? (S.live[rid] || {}).metrics : S.series[rid];
    return (src || {})[name] || [];
  };
  /* treatment minus control: each run with a parent, step by step (a branch against the run it forked from) */
  const diffOf = (rid, name) => {
    const parent = new Map(pointsOf(parentOf(S, rid), name).map(([t, v]) => [t, v]));
    return pointsOf(rid, name).filter(([t, v]) => v !== null && parent.get(t) != null).map(([t, v]) => [t, v - parent.get(t)]);
  };
  const shown = S.diff ? selected.filter(r => parentOf(S, r.run_id)) : selected;
  if (S.diff && !shown.length) { fill(S.els.charts, infoCard("None of the ticked runs has a parent run to compare with.")); return; }
  const seriesOf = name => shown.map(r => ({label: r.run_id, color: runColor(S, r.run_id),
    dash: S.liveStatus[r.run_id] === "running" ? [4, 2] : undefined,
    points: S.diff ? diffOf(r.run_id, name) : pointsOf(r.run_id, name)}));
  // a metric the study does not display that holds one value at every step of every run shown (an SIR's
  // new_S, 0 throughout) is named with its value under the charts, not drawn as a flat line
  const declared = S.st.study.display_metrics || [];
  const flat = names.filter(n => !declared.includes(n)).map(n => [n, oneValue(seriesOf(n))]).filter(([, v]) => v !== null);
  const flatNames = flat.map(([n]) => n);
  fill(S.els.charts, ...names.filter(n => !flatNames.includes(n)).map(name => timeChart({
    title: S.diff ? `${name}: run − parent` : name, key: name, mode: S.diff ? "diff" : "level", xmax, markers, spans,
    xLabel: unitOf(S.st), zeroLine: S.diff, series: seriesOf(name)})),
    flat.length ? h("p", {class: "muted flat-metrics", "data-metrics": flatNames.join(","), style: "grid-column: 1 / -1",
      text: `Not drawn, the same at every ${unitOf(S.st)} of the runs shown: ` +
        flat.map(([n, v]) => `${n}${S.diff ? " (run − parent)" : ""} = ${valueLabel(v)}`).join(", ")}) : null);
}

/* The one value every point of these series holds (at least two points in all), else null. */
function oneValue(series) {
  const values = series.flatMap(se => se.points.map(p => p[1])).filter(v => v !== null && Number.isFinite(v));
  return values.length >= 2 && values.every(v => v === values[0]) ? values[0] : null;
}

/* Display states of one run: stacked shares per category (booleans too), or quantile bands of numbers. */
async function renderStates(S) {
  const keys = S.st.study.display_states || [];
  const runs = S.runs.filter(r => S.selected.has(r.run_id) && S.liveStatus[r.run_id] !== "running");
  if (!keys.length || !S.els.states) return;
  if (!runs.length) { fill(S.els.states, h("p", {class: "muted", text: "Tick a finished run to see its states."})); return; }
  const run = runs[runs.length - 1];
  const {markers = [], spans = []} = S.marks || {};
  if (!S.els.states.querySelector("figure.chart")) fill(S.els.states, loadingNote(`Reading the states of run ${run.run_id} from the store…`));
  const charts = await Promise.all(keys.map(async key => {
    let summary;
    try { summary = await getJSON(`/api/studies/${enc(S.sid)}/states?run=${enc(run.run_id)}&state=${enc(key)}`); }
    catch (e) { return errorCard(e.message, key); }
    if (summary.busy) return infoCard(summary.message);
    const xmax = Math.max(1, runEnd(run, false), ...summary.steps);
    const title = `${key} (run ${run.run_id}${summary.excluded ? ", living agents" : ""})`;
    const xLabel = unitOf(S.st);
    // dead agents (alive = false) leave every other state's distribution: said under the chart
    const ex = summary.excluded;
    const dead = ex ? `; dead agents (${ex.field} = false) left out: ${ex.last.toLocaleString("en")} at the last ${xLabel}` +
      (ex.most !== ex.last ? `, at most ${ex.most.toLocaleString("en")}` : "") : "";
    const el = summary.kind === "numeric"
      ? bandsChart({title, key, summary, xmax, markers, spans, xLabel, note: "median, mean and 5–95 % / 25–75 % of " +
          (ex ? "living agents" : "agents") + dead})
      : sharesChart({title, key, summary, xmax, markers, spans, xLabel, note: "share of " + (ex ? "living agents" : "agents") +
          " in each category" + dead});
    if (ex) el.dataset.excluded = JSON.stringify(ex);
    return el;
  }));
  if (S.token === viewToken) fill(S.els.states, ...charts);
}

async function pollLive(S) {
  if (S.polling) return;        // one poll at a time: a slow answer never lands after a newer one
  S.polling = true;
  let body;
  const followed = Object.keys(S.liveStatus).filter(rid => S.liveStatus[rid] === "running");
  try { body = await getJSON(`/api/studies/${enc(S.sid)}/live` + (followed.length ? `?metrics=${followed.map(enc).join(",")}` : "")); }
  catch (e) { return; }
  finally { S.polling = false; }
  if (S.token !== viewToken) return;
  let ended = false, changed = false;
  for (const lv of body.runs) {
    const before = S.liveStatus[lv.run_id];
    if (lv.status === "running") {
      if (!S.runs.some(r => r.run_id === lv.run_id)) {
        S.runs.push({run_id: lv.run_id, kind: lv.kind || "run", status: "running", n_steps: lv.n_steps, last_step: lv.step,
          live: true, seed: lv.seed, overrides_text: lv.overrides_text});
        changed = true;
      }
      const run = S.runs.find(r => r.run_id === lv.run_id);
      run.last_step = lv.step; run.n_steps = lv.n_steps; run.status = "running";
      S.live[lv.run_id] = lv;
      S.liveStatus[lv.run_id] = "running";
      changed = true;
    } else if (before === "running") {
      if (lv.metrics) S.live[lv.run_id] = lv;     // its last steps, drawn until the store's are read
      ended = true;
    }
  }
  if (ended) { reload(S); return; }   // the run finished: the page reads the store again, in place
  if (changed) {
    renderRuns(S); renderBanner(S); renderLive(S);
    if ([...S.selected].some(rid => S.liveStatus[rid] === "running")) renderCharts(S);
  }
}

// --- the panel table ------------------------------------------------------------------------------
function panelCard(S) {
  const runs = S.runs.filter(r => r.status !== "running" || r.stalled);
  const form = h("form", {class: "filters", id: "panel-filters"},
    h("label", {}, "run", h("select", {id: "f-run"}, runs.slice().reverse().map(r => h("option", {value: r.run_id, text: `${r.run_id} (${r.status})`})))),
    h("label", {}, "step", h("input", {id: "f-step", name: "step", size: 5, inputmode: "numeric"})),
    h("label", {}, "agent_id", h("input", {id: "f-agent", name: "agent_id", size: 12})),
    h("label", {}, "action_kind", h("select", {id: "f-kind"}, h("option", {value: "", text: "any"}))),
    h("button", {type: "submit", class: "primary", text: "Filter"}));
  const first = runs.length ? runs[runs.length - 1] : null;
  const out = h("div", {id: "panel-table"}, first ? loadingNote(`Reading the panel of run ${first.run_id} from the store…`) : null);
  const pager = h("div", {class: "pager"});
  const kinds = h("p", {class: "muted", id: "payload-kinds"});
  let page = 0;
  const load = async () => {
    const q = new URLSearchParams({run: form.querySelector("#f-run").value, page, page_size: 25});
    const step = form.querySelector("#f-step").value.trim(), agent = form.querySelector("#f-agent").value.trim(), kind = form.querySelector("#f-kind").value;
    if (step) q.set("step", step);
    if (agent) q.set("agent_id", agent);
    if (kind) q.set("action_kind", kind);
    let body;
    try { body = await getJSON(`/api/studies/${enc(S.sid)}/panel?${q}`); } catch (e) { fill(out, errorCard(e.message, "panel")); fill(pager); return; }
    if (body.busy) { fill(out, infoCard(body.message)); return; }
    const kindSel = form.querySelector("#f-kind");
    if (kindSel.options.length === 1) body.action_kinds.forEach(k => kindSel.append(h("option", {value: k, text: k})));
    const rid = body.run.run_id;
    // the payload columns are the union of every action kind's fields: say whose is which, and show
    // each row only its own kind's fields (a move's to_x, not a post's empty content)
    const fields = body.payload_fields || {};
    const own = r => {
      const mine = fields[r.action_kind];
      if (r.action_payload == null || typeof r.action_payload !== "object" || !mine) return r.action_payload;
      return mine.length ? Object.fromEntries(mine.filter(f => f in r.action_payload).map(f => [f, r.action_payload[f]])) : null;
    };
    fill(kinds, Object.keys(fields).length ? ["payload fields by action kind: ",
      ...Object.entries(fields).flatMap(([k, fs], i) => [i ? " · " : "", h("span", {class: "payload-kind", "data-kind": k,
        "data-fields": fs.join(","), text: `${k}: ${fs.length ? fs.join(", ") : "(none)"}`})])] : []);
    fill(out, h("p", {class: "muted", id: "panel-total", "data-total": body.total, text: `${body.total} rows`}),
      h("table", {}, h("thead", {}, h("tr", {}, ["step", "agent_id", "state", "action", "payload", "source", "rationale"].map(c => h("th", {text: c})))),
        h("tbody", {}, body.rows.map(r => h("tr", {},
          h("td", {}, h("a", {href: `#/study/${enc(S.sid)}/messages/${enc(rid)}/${r.step}`, text: r.step, title: "messages of this step"})),
          h("td", {}, h("a", {href: `#/study/${enc(S.sid)}/agent/${enc(rid)}/${enc(r.agent_id)}`, text: r.agent_id, class: "agent-link"})),
          valueCell(r.state), h("td", {text: r.action_kind ?? "–"}),
          valueCell(own(r), 140, "json payload"),
          h("td", {text: r.action_source ?? ""}), h("td", {text: r.action_rationale ?? ""}))))));
    const pages = Math.max(1, Math.ceil(body.total / body.page_size));
    fill(pager, 
      h("button", {type: "button", disabled: page === 0, onclick: () => { page -= 1; load(); }, text: "← previous"}),
      h("span", {id: "panel-page", text: `page ${page + 1} of ${pages}`}),
      h("button", {type: "button", disabled: page + 1 >= pages, onclick: () => { page += 1; load(); }, text: "next →"}));
  };
  form.addEventListener("submit", ev => { ev.preventDefault(); page = 0; load(); });
  form.querySelector("#f-run").addEventListener("change", () => { page = 0; load(); });
  if (runs.length) S.panelLoaded = load(); else out.append(h("p", {class: "muted", text: "No finished runs to show."}));
  return h("section", {class: "card", id: "panel"}, h("h2", {text: "Panel"}), form, kinds, out, pager);
}

// --- the network views (network.js, drawn by netview.js) -----------------------------------------------
function networkCard(S) {
  const runs = S.runs.filter(r => r.status !== "running" || r.stalled);
  const dists = S.st.population.distributions || [];
  const keys = [...new Set([...(S.st.study.display_states || []), ...dists.filter(d => d.kind === "numeric").map(d => d.name), ...dists.map(d => d.name)])];
  const runSel = h("select", {id: "net-run"}, runs.slice().reverse().map(r => h("option", {value: r.run_id, text: r.run_id})));
  const keySel = h("select", {id: "net-state"}, keys.map(k => h("option", {value: k, text: k})));
  const stage = h("div", {id: "net-stage"});
  const external = h("span", {});
  const url = extra => `/api/studies/${enc(S.sid)}/network?run=${enc(runSel.value)}&state=${enc(keySel.value)}` + extra;
  const load = async () => {
    disposers.forEach(fn => fn()); disposers = [];
    fill(stage, h("p", {class: "muted", id: "net-loading", text: "Loading the network (its layout is computed once, on first need, and stored)…"}));
    let net;
    try { net = await getJSON(url("")); } catch (e) { fill(stage, errorCard(e.message, "network")); return; }
    if (net.busy) { fill(stage, infoCard(net.message)); return; }
    fill(stage, networkView(S.sid, net, {url, onDispose: fn => disposers.push(fn)}));
  };
  const openFull = async () => {
    fill(external, h("span", {class: "muted", text: " building…"}));
    try {
      const r = await getJSON(`/api/studies/${enc(S.sid)}/diffusion?run=${enc(runSel.value)}&state=${enc(keySel.value)}`, "POST");
      fill(external, " ", h("a", {href: r.url, target: "_blank", rel: "noopener", text: "open in a new tab"}));
      disposers.forEach(fn => fn()); disposers = [];
      fill(stage, h("iframe", {id: "report-player", src: r.url, title: "diffusion player", style: "width:100%;height:1100px;border:1px solid #d9dee7"}));
    } catch (e) { fill(external, errorCard(e.message)); }
  };
  const controls = h("div", {class: "filters"}, "run ", runSel, " state ", keySel, " ",
    h("button", {type: "button", class: "primary", onclick: load, text: "Show network"}),
    S.st.diffusion_player ? h("button", {type: "button", onclick: openFull, text: "Full diffusion player (report)"}) : null, external);
  return h("section", {class: "card", id: "network"}, h("h2", {text: "Network diffusion"}),
    runs.length && keys.length ? controls : h("p", {class: "muted", text: "Needs a finished run with numeric states."}), stage);
}

// --- one agent ----------------------------------------------------------------------------------------
async function agentView(view, sid, rid, aid) {
  const token = viewToken;
  crumbs({text: "studies", href: "#/"}, {text: sid, href: "#/study/" + enc(sid)}, {text: `run ${rid}`}, {text: `agent ${aid}`});
  let a;
  try { a = await getJSON(`/api/studies/${enc(sid)}/agent?run=${enc(rid)}&agent_id=${enc(aid)}`); }
  catch (e) { fill(view, errorCard(e.message, "agent")); return; }
  if (token !== viewToken) return;
  if (a.busy) { fill(view, infoCard(a.message)); return; }
  const numeric = {};
  const take = (step, state) => {
    for (const [k, v] of Object.entries(state || {})) {
      const x = typeof v === "boolean" ? +v : v;
      if (typeof x === "number") (numeric[k] = numeric[k] || []).push([step, x]);
    }
  };
  take(0, a.initial);
  a.steps.forEach(r => take(r.step, r.state));
  const charts = h("div", {class: "chart-grid"}, Object.entries(numeric).map(([k, pts]) =>
    timeChart({title: k, key: k, xmax: runEnd(a.run, a.run.status === "running"), xLabel: a.run.time_unit || "step",
      series: [{label: rid, color: COLORS[0], points: pts}]})));
  const rows = [h("tr", {class: "initial"}, h("td", {text: "0 (initial)"}), valueCell(a.initial, 300), h("td", {}), h("td", {}), h("td", {}), h("td", {}))];
  for (const r of a.steps) rows.push(h("tr", {"data-step": r.step},
    h("td", {}, h("a", {href: `#/study/${enc(sid)}/messages/${enc(rid)}/${r.step}`, text: r.step})),
    valueCell(r.state, 300), h("td", {text: r.action_kind ?? "–"}),
    valueCell(r.action_payload, 300),
    h("td", {text: r.action_source ?? ""}), h("td", {text: r.action_rationale ?? ""})));
  fill(view, h("div", {id: "agent-view"},
    h("h1", {text: `Agent ${aid}`}), h("p", {class: "muted", text: `run ${rid} (${a.run.status}), ${a.steps.length} steps`}),
    card("State over time", charts),
    card("Trajectory", h("table", {id: "trajectory"}, h("thead", {}, h("tr", {}, ["step", "state", "action", "payload", "source", "rationale"].map(c => h("th", {text: c})))), h("tbody", {}, rows))),
    h("section", {class: "card", id: "agent-messages"}, h("h2", {text: `Messages posted (${a.messages.length})`}),
      a.messages.length ? h("table", {}, h("thead", {}, h("tr", {}, ["step", "round", "channel", "kind", "content"].map(c => h("th", {text: c})))),
        h("tbody", {}, a.messages.map(m => h("tr", {}, h("td", {text: m.step}), h("td", {text: m.round}), h("td", {text: m.channel ?? ""}),
          h("td", {text: m.kind ?? ""}), valueCell(m.content, 200)))))
        : h("p", {class: "muted", text: "This agent posted nothing."}))));
}

// --- the messages of one step --------------------------------------------------------------------------
async function messagesView(view, sid, rid, step) {
  const token = viewToken;
  crumbs({text: "studies", href: "#/"}, {text: sid, href: "#/study/" + enc(sid)}, {text: `run ${rid}`}, {text: `messages of step ${step}`});
  let body;
  try { body = await getJSON(`/api/studies/${enc(sid)}/messages?run=${enc(rid)}&step=${enc(step)}`); }
  catch (e) { fill(view, errorCard(e.message, "messages")); return; }
  if (token !== viewToken) return;
  if (body.busy) { fill(view, infoCard(body.message)); return; }
  const n = +step, last = body.run.n_steps;
  const nav = h("div", {class: "pager"},
    n > 0 ? h("a", {href: `#/study/${enc(sid)}/messages/${enc(rid)}/${n - 1}`, text: "← step " + (n - 1)}) : null,
    n < last ? h("a", {href: `#/study/${enc(sid)}/messages/${enc(rid)}/${n + 1}`, text: "step " + (n + 1) + " →"}) : null);
  fill(view, h("div", {id: "messages-view"}, h("h1", {text: `Messages of step ${step}`}), nav,
    body.rounds.length ? body.rounds.map(r => h("section", {class: "card round", "data-round": r.round},
      h("h2", {text: `Round ${r.round}: ${r.count} message(s)` + (r.count > r.messages.length ? `, first ${r.messages.length} shown` : "")}),
      r.messages.map(m => h("div", {class: "message"},
        h("a", {class: "author", href: `#/study/${enc(sid)}/agent/${enc(rid)}/${enc(m.author_id)}`, text: m.author_id}),
        h("span", {class: "muted", text: `${m.channel ?? ""} ${m.kind ?? ""} → ${m.audience ?? ""} `}), h("span", {class: "json", text: short(rounded(m.content), 300), title: exact(m.content)})))))
      : infoCard("No messages in this step.")));
}
