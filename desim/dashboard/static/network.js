/* desim dashboard network view: sigma.js (WebGL) draws a graphology graph laid out by ForceAtlas2
 * (Barnes-Hut), all vendored under static/vendor/.
 *
 * The server sends every agent (or, above its limit, a neighbourhood sample), the edges, one
 * value per agent and step, the category colours declared in study.json, and the counts over
 * the whole population. The layout runs here, in slices between frames so the page stays
 * responsive, a fixed number of iterations from seeded positions: the same run always gets the
 * same picture. It is computed once per run and cached (in memory and in localStorage).
 */
"use strict";

const layoutCache = new Map();
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

function rampColor(t) {
  t = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(t)), f = t - i;
  const c = VIRIDIS[i].map((v, k) => Math.round(v + (VIRIDIS[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function seeded(seed) {            // mulberry32: small, fast, good enough for start positions
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function layoutIterations(n) { return n <= 1000 ? 300 : n <= 5000 ? 150 : 100; }

function cachedLayout(key) {
  if (layoutCache.has(key)) return layoutCache.get(key);
  try { const v = JSON.parse(localStorage.getItem(key) || "null"); if (v) layoutCache.set(key, v); return v; }
  catch (e) { return null; }
}
function storeLayout(key, xy) {
  layoutCache.set(key, xy);
  try { localStorage.setItem(key, JSON.stringify(xy)); } catch (e) { /* quota: the memory cache is enough */ }
}

/* The drawn network with its controls; onDispose receives the clean-up for navigation. */
function networkView(sid, net, {loadPosters, onDispose}) {
  const n = net.ids.length, cats = net.categories || [], numeric = net.kind === "numeric";
  const [lo, hi] = net.range || [0, 1];
  const colorOf = v => (v === null || v === undefined ? "#c0c6d0"
    : numeric ? rampColor(hi > lo ? (v - lo) / (hi - lo) : 0.5) : net.colors[v]);
  const stage = h("div", {id: "net-canvas", "data-nodes": n, "data-edges": net.edges.length / 2, "data-layout": "running"});
  const counts = h("div", {id: "net-counts"});
  const status = h("span", {class: "muted", id: "net-layout-status"});
  const slider = h("input", {type: "range", id: "net-step", min: 0, max: net.steps.length - 1, value: 0});
  const stepLabel = h("span", {id: "net-step-label"});
  const showMessages = h("input", {type: "checkbox", id: "net-messages"});
  const legend = numeric
    ? h("div", {class: "legend"}, h("span", {text: valueLabel(lo)}),
      h("span", {class: "ramp", style: `background:linear-gradient(to right, ${VIRIDIS.map((_, i) => rampColor(i / 4)).join(",")})`}),
      h("span", {text: `${valueLabel(hi)} (${net.state})`}))
    : h("div", {class: "legend", id: "net-legend"}, cats.map((c, i) =>
      h("span", {"data-category": c}, h("span", {class: "swatch", style: `background:${net.colors[i]}`}), c)));

  const graph = new graphology.Graph({type: "undirected", multi: false, allowSelfLoops: false});
  const key = `desim-layout:${sid}:${net.run.run_id}:${n}:${net.seed_agent || ""}`;
  const cached = cachedLayout(key);
  const rand = seeded(n * 7919 + net.edges.length);
  const size = n > 4000 ? 1.6 : n > 1000 ? 2.4 : n > 200 ? 4 : 6;
  net.ids.forEach((id, i) => graph.addNode(id, {i, label: id, size,
    x: cached ? cached[i][0] : rand() * 100, y: cached ? cached[i][1] : rand() * 100}));
  for (let e = 0; e < net.edges.length; e += 2) {
    const a = net.ids[net.edges[e]], b = net.ids[net.edges[e + 1]];
    if (a !== b) graph.mergeEdge(a, b);
  }

  let t = 0, lit = null, posters = null, renderer = null;
  const rareAt = numeric ? [] : net.steps.map((_, k) => cats.map(c => net.population_counts[c][k] < 0.1 * net.n_agents));
  const reducers = {
    renderLabels: true, labelRenderedSizeThreshold: 1e9, defaultEdgeColor: "#d5dae3", zIndex: true,
    hideEdgesOnMove: n > 3000,
    // a category held by under 10 % of agents (the infected, the spreaders) is drawn larger and on top
    nodeReducer: (node, attrs) => {
      const v = net.values[t][attrs.i];
      const rare = !numeric && v !== null && rareAt[t] && rareAt[t][v];
      return {...attrs, color: colorOf(v), size: rare ? attrs.size * 2.2 : attrs.size, zIndex: rare ? 1 : 0};
    },
    edgeReducer: (edge, attrs) => {
      if (!lit) return {...attrs, size: n > 2000 ? 0.5 : 0.4, color: n > 2000 ? "#e3e7ee" : "#d5dae3"};
      const [a, b] = graph.extremities(edge);
      const on = lit[graph.getNodeAttribute(a, "i")] || lit[graph.getNodeAttribute(b, "i")];
      return on ? {...attrs, size: 0.6, color: "rgba(230,120,20,0.55)"} : {...attrs, size: 0.3, color: "#e4e7ec"};
    },
  };

  const show = k => {
    t = k;
    const step = net.steps[k];
    stepLabel.textContent = ` ${step === 0 ? "initial state" : "step " + step} (${k + 1} of ${net.steps.length})`;
    stage.dataset.step = step;
    if (showMessages.checked && posters) {
      lit = new Uint8Array(n);
      (posters[String(step)] || []).forEach(i => { lit[i] = 1; });
    } else lit = null;
    let text, data;
    if (numeric) {
      const m = net.population_mean[k];
      text = `mean ${net.state} over all ${net.n_agents.toLocaleString("en")} agents: ${valueLabel(m)}`;
      data = {mean: m};
    } else {
      data = Object.fromEntries(cats.map(c => [c, net.population_counts[c][k]]));
      text = cats.map(c => `${c} ${data[c].toLocaleString("en")}`).join(" · ") +
        ` (counts over all ${net.n_agents.toLocaleString("en")} agents)`;
    }
    counts.dataset.counts = JSON.stringify(data);
    counts.textContent = text;
    if (renderer) renderer.refresh();
  };
  slider.addEventListener("input", () => show(+slider.value));
  showMessages.addEventListener("change", async () => {
    if (showMessages.checked && !posters) posters = await loadPosters();
    show(t);
  });
  let playing = null;
  const play = h("button", {type: "button", text: "▶ play", onclick: () => {
    if (playing) { clearInterval(playing); playing = null; play.textContent = "▶ play"; return; }
    if (+slider.value >= net.steps.length - 1) slider.value = 0;
    play.textContent = "❚❚ pause";
    playing = setInterval(() => {
      const k = +slider.value + 1;
      if (k >= net.steps.length) { clearInterval(playing); playing = null; play.textContent = "▶ play"; return; }
      slider.value = k; show(k);
    }, 450);
  }});

  // ForceAtlas2 in slices, so the page paints while it settles
  let alive = true;
  const total = cached ? 0 : layoutIterations(n);
  const settings = {...ForceAtlas2.inferSettings(graph), barnesHutOptimize: n > 800};
  // the layout runs on a copy: every position update of the drawn graph would make sigma redraw
  const work = graph.copy();
  const publish = () => graph.updateEachNodeAttributes((node, attrs) =>
    ({...attrs, x: work.getNodeAttribute(node, "x"), y: work.getNodeAttribute(node, "y")}), {attributes: ["x", "y"]});
  const started = performance.now();
  let done = 0, perIteration = 0, drawn = performance.now();
  const slice = () => {
    if (!alive) return;
    if (done >= total) {
      stage.dataset.layout = "done";
      status.textContent = cached ? " layout from cache" : ` laid out in ${((performance.now() - started) / 1000).toFixed(1)} s`;
      if (!cached) storeLayout(key, net.ids.map(id => [work.getNodeAttribute(id, "x"), work.getNodeAttribute(id, "y")]));
      return;
    }
    // as many iterations as fit in about 150 ms (timed on the first), so clicks stay responsive; the
    // picture is redrawn about once a second (a WebGL redraw without a GPU costs more than an iteration)
    const t0 = performance.now();
    const chunk = Math.min(total - done, perIteration ? Math.max(1, Math.floor(150 / perIteration)) : 1);
    ForceAtlas2.assign(work, {iterations: chunk, settings});
    perIteration = (performance.now() - t0) / chunk;
    done += chunk;
    status.textContent = ` laying out… ${Math.round(100 * done / total)} %`;
    if (done >= total || performance.now() - drawn > 1000) { publish(); drawn = performance.now(); }
    setTimeout(slice, 0);
  };
  // sigma needs its container in the page (with a size): start on the next frame, once it is there
  requestAnimationFrame(() => {
    if (!alive) return;
    renderer = new Sigma(graph, stage, reducers);
    renderer.on("clickNode", ({node}) => { location.hash = `#/study/${enc(sid)}/agent/${enc(net.run.run_id)}/${enc(node)}`; });
    show(t);
    setTimeout(slice, 0);
  });
  onDispose(() => { alive = false; if (playing) clearInterval(playing); if (renderer) renderer.kill(); });
  show(0);

  const what = net.sampled
    ? `${n.toLocaleString("en")} of ${net.n_agents.toLocaleString("en")} agents drawn: a neighbourhood around ` +
      (net.seed_agent ? `agent ${net.seed_agent}` : "random seed agents") + "; counts are over all agents"
    : `all ${n.toLocaleString("en")} agents`;
  return h("div", {class: "net-view"},
    h("div", {class: "filters"}, play, slider, stepLabel,
      h("label", {class: "muted"}, showMessages, " message edges (who posted in this step)")),
    counts, legend,
    h("p", {class: "muted", id: "net-what"}, `${what}, ${(net.edges.length / 2).toLocaleString("en")} edges; click a node to open the agent.`, status),
    stage);
}
