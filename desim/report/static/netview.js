window.DesimNet = (function () {
  "use strict";
  const NO = 255, ORANGE = "#e6781e", LIT = "rgba(230,120,30,0.5)", EDGE = "125,138,151";
  const nf = new Intl.NumberFormat("en");
  const NAMES = {network: "network", communities: "communities", adoption: "adoption", tree: "transmission tree"};

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of kids.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  function decode(b64) {
    const s = atob(b64), a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }
  const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));
  const stepLabel = (M, s) => (s === 0 ? "initial state" : `${M.time_unit} ${s}`);

  function mount(root, data, opts) {
    opts = opts || {};
    const M = data.meta, n = M.n_agents;
    const S = {view: null, k: 0, overlay: false, mode: "hops", z: {s: 1, x: 0, y: 0}, frames: null,
               timer: null, alive: true, cache: {}, hit: null, side: 0, h: 0, drawnRadius: null, drawnColor: null};
    const palette = M.palette.slice();
    while (palette.length < 256) palette.push(M.missing);
    const pressed = [];
    const views = M.available.filter(v => opts.loadView || data[v]);
    const buttons = views.map(v => el("button", {type: "button", "data-view": v, "aria-pressed": "false", text: NAMES[v],
                                                 onclick: () => show(v, S.k)}));
    const slider = el("input", {type: "range", class: "dn-step", min: 0, max: M.steps.length - 1, value: 0,
                                "aria-label": "step"});
    const label = el("span", {class: "dn-step-label"});
    const play = el("button", {type: "button", class: "dn-play", text: "\u25b6 play"});
    const overlay = M.has_messages ? el("input", {type: "checkbox", class: "dn-messages"}) : null;
    const mode = el("select", {class: "dn-mode", "aria-label": "place agents by"},
      el("option", {value: "hops", text: "place by hops from the seeds"}),
      el("option", {value: "changed", text: "place by the step they changed state"}));
    const legend = el("div", {class: "dn-legend", "data-order": JSON.stringify(M.categories)});
    const sizeKey = el("div", {class: "dn-size"});
    const canvas = el("canvas", {class: "dn-canvas"});
    const stage = el("div", {class: "dn-stage"}, canvas);
    const caption = el("p", {class: "dn-caption"});
    const status = el("p", {class: "dn-status"});
    root.classList.add("dn");
    root.replaceChildren(
      el("div", {class: "dn-views", role: "group", "aria-label": "view"}, buttons),
      el("div", {class: "dn-controls"}, play, slider, label,
        overlay ? el("label", {class: "dn-overlay"}, overlay, " messages (links of the agents who posted in the step)") : null,
        mode),
      legend, sizeKey, stage, caption, status);
    const ctx = canvas.getContext("2d");

    // --- legend: declared order, counts over all agents -------------------------------------------
    // a share that never rounds agents away: 10 of 30,000 is "<0.1 %", not "0.0 %" (as the PNGs write it)
    function shareText(count, total) {
      if (count === 0 || count === total) return count === 0 ? "0 %" : "100 %";
      const text = (100 * count / total).toFixed(1);
      return text === "0.0" ? "<0.1 %" : text === "100.0" ? ">99.9 %" : `${text} %`;
    }
    function renderLegend() {
      const k = S.k;
      if (M.kind === "categorical") {
        const counts = M.counts[k], total = Math.max(1, counts.reduce((a, b) => a + b, 0));
        legend.replaceChildren(...M.categories.map((c, i) => el("span", {class: "dn-key", "data-category": c},
          el("i", {style: `background:${M.palette[i]}`}), el("span", {class: "dn-label", text: c}),
          el("span", {class: "dn-count", "data-count": counts[i],
                      text: `${nf.format(counts[i])} (${shareText(counts[i], total)})`}))),
          el("span", {class: "dn-total muted", text: `counts over all ${nf.format(n)} agents`}));
        legend.dataset.counts = JSON.stringify(Object.fromEntries(M.categories.map((c, i) => [c, counts[i]])));
      } else {
        const [lo, hi] = M.range, mean = M.means[k];
        legend.replaceChildren(el("span", {class: "dn-key"}, el("span", {text: lo.toPrecision(3)}),
          el("span", {class: "dn-ramp", style: `background:linear-gradient(to right, ${M.palette.join(",")})`}),
          el("span", {text: `${hi.toPrecision(3)} (${M.field})`})),
          el("span", {class: "dn-count", text: `mean over all ${nf.format(n)} agents: ${mean === null ? "n/a" : mean.toPrecision(4)}`}));
        legend.dataset.counts = JSON.stringify({mean});
      }
    }
    function renderSizeKey() {
      const keys = data.size_keys || {};
      const text = keys[S.view] || "";
      const parts = [];
      if (S.view === "network" && M.size_by === "degree" && S.radiusPx) {
        const r = S.radiusPx, deg = degree();
        let lo = 0, hi = 0;
        for (let i = 0; i < n; i++) { if (deg[i] < deg[lo]) lo = i; if (deg[i] > deg[hi]) hi = i; }
        for (const i of [lo, hi]) parts.push(el("span", {class: "dn-key"}, el("i", {style: `width:${2 * r[i]}px;height:${2 * r[i]}px`}),
          el("span", {text: `${nf.format(deg[i])} links` + (i === lo ? " (fewest)" : " (most)")})));
      }
      sizeKey.replaceChildren(el("span", {class: "dn-size-text", text}), ...parts);
      sizeKey.dataset.sizeBy = S.view === "network" ? M.size_by : S.view === "communities" ? "agents" : "constant";
      root.dataset.sizeBy = sizeKey.dataset.sizeBy;
    }
    let degreeCache = null;
    function degree() {
      if (degreeCache) return degreeCache;
      const d = new Int32Array(n), e = data.network ? data.network.edges : [];
      for (let i = 0; i < e.length; i++) d[e[i]]++;
      return (degreeCache = d);
    }

    // --- geometry --------------------------------------------------------------------------------
    function resize() {
      const width = Math.max(320, Math.floor(stage.clientWidth || 760));
      const side = S.view === "tree" ? width : Math.min(width, 760);
      const height = S.view === "tree" ? Math.round(width * 0.6) : side;
      const dpr = window.devicePixelRatio || 1;
      if (canvas.width !== Math.round(side * dpr) || canvas.height !== Math.round(height * dpr)) {
        canvas.width = Math.round(side * dpr); canvas.height = Math.round(height * dpr);
        canvas.style.width = side + "px"; canvas.style.height = height + "px";
        S.cache = {};
      }
      S.side = side; S.h = height; S.dpr = dpr;
    }
    const PAD = 12;
    function project(x, y) {       // data [0,1]^2 (y up) -> canvas px, with the zoom
      const w = S.side - 2 * PAD, h = S.h - 2 * PAD, scale = Math.min(w, h);
      const ox = PAD + (w - scale) / 2, oy = PAD + (h - scale) / 2;
      return [(ox + x * scale) * S.z.s + S.z.x, (oy + (1 - y) * scale) * S.z.s + S.z.y];
    }
    function positions(x, y) {
      const X = new Float32Array(x.length), Y = new Float32Array(x.length);
      for (let i = 0; i < x.length; i++) { const p = project(x[i], y[i]); X[i] = p[0]; Y[i] = p[1]; }
      return [X, Y];
    }
    function baseRadius() { return clamp(0.3 * Math.min(S.side, S.h) / Math.sqrt(Math.max(n, 1)), 0.7, 4.0) * Math.sqrt(S.z.s); }

    // --- frames ------------------------------------------------------------------------------------
    function frame(k) {
      if (!S.frames) S.frames = data.node.frames.map(() => null);
      if (!S.frames[k]) S.frames[k] = decode(data.node.frames[k]);
      return S.frames[k];
    }
    function posters(k) {
      const p = data.node && data.node.posters ? data.node.posters[String(M.steps[k])] : null;
      return p || [];
    }

    // --- drawing -------------------------------------------------------------------------------
    function dots(X, Y, R, codes, order, outline) {
      const colors = new Array(n);
      let last = null;
      ctx.beginPath();
      for (let j = 0; j < order.length; j++) {
        const i = order[j], c = palette[codes[i]];
        colors[i] = c;
        if (c !== last) { if (last !== null) ctx.fill(); ctx.beginPath(); ctx.fillStyle = c; last = c; }
        const r = R[i];
        if (r < 1.25) ctx.rect(X[i] - r, Y[i] - r, 2 * r, 2 * r);
        else { ctx.moveTo(X[i] + r, Y[i]); ctx.arc(X[i], Y[i], r, 0, 2 * Math.PI); }
      }
      if (last !== null) ctx.fill();
      if (outline && outline.length) {
        ctx.strokeStyle = ORANGE; ctx.lineWidth = 1; ctx.beginPath();
        for (const i of outline) { ctx.moveTo(X[i] + R[i] + 1.5, Y[i]); ctx.arc(X[i], Y[i], R[i] + 1.5, 0, 2 * Math.PI); }
        ctx.stroke();
      }
      return colors;
    }
    function orderBy(R) {
      const order = Array.from({length: R.length}, (_, i) => i);
      order.sort((a, b) => R[a] - R[b] || a - b);          // by size, then id: never by state
      return order;
    }
    function edgeLayer(key, paint) {
      if (S.cache[key]) return S.cache[key];
      const off = document.createElement("canvas");
      off.width = canvas.width; off.height = canvas.height;
      const c = off.getContext("2d");
      c.scale(S.dpr, S.dpr);
      paint(c);
      return (S.cache[key] = off);
    }
    function zkey() { return `${S.side}x${S.h}@${S.z.s.toFixed(4)},${S.z.x.toFixed(1)},${S.z.y.toFixed(1)}`; }

    function drawNetwork(k) {
      const net = data.network, [X, Y] = positions(net.x, net.y);
      const base = baseRadius(), rel = data.node.radius;
      const R = new Float32Array(n);
      for (let i = 0; i < n; i++) R[i] = base * rel[i];
      S.radiusPx = R;
      if (!S.order) S.order = orderBy(rel);
      const e = net.edges, m = e.length / 2;
      ctx.drawImage(edgeLayer("net:" + zkey(), c => {
        c.strokeStyle = `rgba(${EDGE},${clamp(25 / Math.sqrt(Math.max(m, 1)), 0.03, 0.35)})`; c.lineWidth = 0.5; c.beginPath();
        for (let j = 0; j < e.length; j += 2) { c.moveTo(X[e[j]], Y[e[j]]); c.lineTo(X[e[j + 1]], Y[e[j + 1]]); }
        c.stroke();
      }), 0, 0, S.side, S.h);
      if (S.overlay) {
        const lit = new Uint8Array(n); for (const i of posters(k)) lit[i] = 1;
        ctx.strokeStyle = LIT; ctx.lineWidth = 0.8; ctx.beginPath();
        for (let j = 0; j < e.length; j += 2) if (lit[e[j]] || lit[e[j + 1]]) { ctx.moveTo(X[e[j]], Y[e[j]]); ctx.lineTo(X[e[j + 1]], Y[e[j + 1]]); }
        ctx.stroke();
      }
      S.drawnColor = dots(X, Y, R, frame(k), S.order, null);
      S.drawnRadius = R;
      S.hit = {X, Y, R, kind: "node"};
    }
    function rings(levels) {
      let top = -1, never = false;
      for (const v of levels) { if (v > top) top = v; if (v < 0) never = true; }
      const bands = never ? top + 2 : top + 1, width = 0.5 / (bands + 0.5);
      const [cx, cy] = project(0.5, 0.5), edge = project(0.5 + width, 0.5)[0] - cx;
      ctx.strokeStyle = "#d0d5dd"; ctx.lineWidth = 0.6;
      const every = Math.max(1, Math.floor(bands / 8));
      for (let b = 0; b < bands; b++) { ctx.beginPath(); ctx.arc(cx, cy, edge * (b + 1), 0, 2 * Math.PI); ctx.stroke(); }
      // the labels, drawn after the nodes on white tags: the bands are full of nodes, which hid bare labels
      return () => {
        ctx.font = "10px system-ui, sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
        for (let b = 0; b < bands; b += every) {
          const text = b === bands - 1 && never ? "never" : String(b), y = cy - edge * (b + 0.5);
          const w = ctx.measureText(text).width + 6;
          ctx.fillStyle = "rgba(255,255,255,0.92)"; ctx.strokeStyle = "#d0d5dd"; ctx.lineWidth = 0.6;
          ctx.fillRect(cx - w / 2, y - 7, w, 14); ctx.strokeRect(cx - w / 2, y - 7, w, 14);
          ctx.fillStyle = "#344054"; ctx.fillText(text, cx, y);
        }
      };
    }
    function drawAdoption(k) {
      const a = data.adoption, place = (S.mode === "hops" && a.hops) ? a.hops : a.changed;
      const labels = rings(place.levels);
      const [X, Y] = positions(place.x, place.y), base = baseRadius(), R = new Float32Array(n).fill(base);
      if (!S.plainOrder) S.plainOrder = Array.from({length: n}, (_, i) => i);
      S.drawnColor = dots(X, Y, R, frame(k), S.plainOrder, S.overlay ? posters(k) : null);
      labels();
      S.drawnRadius = R; S.radiusPx = null;
      S.hit = {X, Y, R, kind: "node"};
    }
    function drawCommunities(k) {
      const c = data.communities, [X, Y] = positions(c.x, c.y);
      const scale = project(1, 0)[0] - project(0, 0)[0];
      const w = c.weight, wmax = Math.max(1, ...w);
      for (let j = 0; j < c.source.length; j++) {
        const s = Math.sqrt(w[j] / wmax);
        ctx.strokeStyle = `rgba(${EDGE},${0.05 + 0.55 * s})`; ctx.lineWidth = 0.3 + 2.2 * s;
        ctx.beginPath(); ctx.moveTo(X[c.source[j]], Y[c.source[j]]); ctx.lineTo(X[c.target[j]], Y[c.target[j]]); ctx.stroke();
      }
      const R = c.radius.map(r => r * scale);
      for (let i = 0; i < c.size.length; i++) {
        if (M.kind === "categorical") {
          let start = -Math.PI / 2;
          c.shares[k][i].forEach((share, cat) => {
            if (share <= 0) return;
            const end = start + 2 * Math.PI * share;
            ctx.fillStyle = M.palette[cat]; ctx.beginPath(); ctx.moveTo(X[i], Y[i]); ctx.arc(X[i], Y[i], R[i], start, end); ctx.closePath(); ctx.fill();
            start = end;
          });
        } else {
          const mean = c.means[k][i], [lo, hi] = M.range;
          const b = mean === null ? NO : clamp(Math.floor((mean - lo) / ((hi - lo) || 1) * M.palette.length), 0, M.palette.length - 1);
          ctx.fillStyle = palette[b]; ctx.beginPath(); ctx.arc(X[i], Y[i], R[i], 0, 2 * Math.PI); ctx.fill();
        }
        ctx.strokeStyle = "#fff"; ctx.lineWidth = 0.6; ctx.beginPath(); ctx.arc(X[i], Y[i], R[i], 0, 2 * Math.PI); ctx.stroke();
        if (S.overlay && c.posted && c.posted[k][i] > 0) {
          ctx.strokeStyle = ORANGE; ctx.lineWidth = Math.max(1.5, R[i] * 0.1); ctx.beginPath();
          ctx.arc(X[i], Y[i], R[i] * 1.1, -Math.PI / 2, -Math.PI / 2 + 2 * Math.PI * c.posted[k][i]); ctx.stroke();
        }
      }
      S.drawnRadius = Float32Array.from(R); S.drawnColor = null; S.radiusPx = null;
      S.hit = {X, Y, R: S.drawnRadius, kind: "community"};
    }
    function drawTree(k) {
      const t = data.tree, maxStep = Math.max(1, M.steps[M.steps.length - 1]);
      const left = 16, right = 12, top = 10, bottom = 28;
      const W = S.side - left - right, H = S.h - top - bottom;
      const X = new Float32Array(t.nodes.length), Y = new Float32Array(t.nodes.length);
      for (let i = 0; i < t.nodes.length; i++) {
        X[i] = (left + (t.x[i] / maxStep) * W) * S.z.s + S.z.x;
        Y[i] = (top + (1 - t.y[i]) * H) * S.z.s + S.z.y;
      }
      const where = new Map(t.nodes.map((a, i) => [a, i]));
      ctx.drawImage(edgeLayer("tree:" + zkey(), c => {
        c.strokeStyle = "rgba(152,162,179,0.8)"; c.lineWidth = 0.5; c.beginPath();
        for (let i = 0; i < t.nodes.length; i++) {
          const j = where.get(t.parent[i]);
          if (j === undefined) continue;
          c.moveTo(X[j], Y[j]); c.lineTo(X[j], Y[i]); c.lineTo(X[i], Y[i]);
        }
        c.stroke();
        c.fillStyle = "#667085"; c.font = "10px system-ui, sans-serif"; c.textAlign = "center"; c.textBaseline = "top";
        const every = Math.max(1, Math.ceil(maxStep / 10));
        for (let s = 0; s <= maxStep; s += every) c.fillText(String(s), (left + (s / maxStep) * W) * S.z.s + S.z.x, S.h - bottom + 6);
        c.textAlign = "right"; c.fillText(`${M.time_unit} of infection \u2192`, S.side - right, S.h - 12);
      }), 0, 0, S.side, S.h);
      const codes = frame(k), now = M.steps[k], r = clamp(2200 / Math.max(t.nodes.length, 1), 1.2, 3.5) * Math.sqrt(S.z.s);
      const R = new Float32Array(t.nodes.length).fill(r), colors = new Array(t.nodes.length);
      ctx.lineWidth = 0.8;
      for (let i = 0; i < t.nodes.length; i++) {
        const a = t.nodes[i];
        if (t.x[i] <= now) {
          colors[i] = palette[codes[a]]; ctx.fillStyle = colors[i];
          ctx.beginPath(); ctx.arc(X[i], Y[i], r, 0, 2 * Math.PI); ctx.fill();
          if (t.parent[i] < 0) { ctx.strokeStyle = "#111"; ctx.stroke(); }
        } else {
          colors[i] = "none"; ctx.strokeStyle = "#c0c6d0"; ctx.beginPath(); ctx.arc(X[i], Y[i], r, 0, 2 * Math.PI); ctx.stroke();
        }
      }
      if (S.overlay) {
        const p = new Set(posters(k));
        ctx.strokeStyle = ORANGE; ctx.beginPath();
        for (let i = 0; i < t.nodes.length; i++) if (p.has(t.nodes[i])) { ctx.moveTo(X[i] + r + 1.5, Y[i]); ctx.arc(X[i], Y[i], r + 1.5, 0, 2 * Math.PI); }
        ctx.stroke();
      }
      S.drawnRadius = R; S.drawnColor = colors; S.radiusPx = null;
      S.hit = {X, Y, R, kind: "tree"};
    }

    function draw() {
      if (!S.alive || !S.view) return;
      resize();
      const k = S.k;
      ctx.setTransform(S.dpr, 0, 0, S.dpr, 0, 0);
      ctx.clearRect(0, 0, S.side, S.h);
      if (S.view === "network") drawNetwork(k);
      else if (S.view === "adoption") drawAdoption(k);
      else if (S.view === "communities") drawCommunities(k);
      else if (S.view === "tree") drawTree(k);
      S.grid = null;
      label.textContent = ` ${stepLabel(M, M.steps[k])} (frame ${k + 1} of ${M.steps.length})`;
      renderLegend();
      renderSizeKey();
      root.dataset.step = M.steps[k];
      root.dataset.overlay = S.overlay ? "on" : "off";
      root.dataset.drawn = `${S.view}:${k}:${S.overlay ? 1 : 0}`;
    }

    async function show(view, k) {
      if (!S.alive) return;
      stop();
      if (!data[view] && opts.loadView) {
        status.textContent = `loading the ${NAMES[view]} view\u2026`;
        root.dataset.drawn = "";
        try {
          const part = await opts.loadView(view);
          if (part.node && !data.node) data.node = part.node;
          data[view] = part[view];
          if (part.captions) data.captions = Object.assign({}, data.captions, part.captions);
        } catch (err) { status.textContent = `could not load the ${NAMES[view]} view: ${err.message}`; return; }
      }
      if (view !== S.view) { S.z = {s: 1, x: 0, y: 0}; S.cache = {}; }
      S.view = view; S.k = clamp(k, 0, M.steps.length - 1); slider.value = S.k;
      root.dataset.view = view;
      buttons.forEach(b => b.setAttribute("aria-pressed", String(b.dataset.view === view)));
      mode.hidden = view !== "adoption";
      if (view === "adoption") {
        const hops = !!data.adoption.hops;
        mode.querySelector('option[value="hops"]').disabled = !hops;
        if (!hops) { mode.value = "changed"; S.mode = "changed"; }
      }
      caption.textContent = (data.captions || {})[view] || "";
      const lay = view === "network" && data.network.layout;
      status.textContent = lay ? `layout: ${lay.method}, ${lay.reused ? "reused from " + lay.file : lay.kept === false ? "computed, not kept (runs/layouts cannot be written)" : "computed and stored in " + lay.file}` +
        (lay.seconds ? ` (${lay.seconds.toFixed(1)} s when computed)` : "") : "";
      draw();
    }
    function stop() { if (S.timer) { clearTimeout(S.timer); S.timer = null; play.textContent = "\u25b6 play"; } }
    play.addEventListener("click", () => {
      if (S.timer) { stop(); return; }
      if (S.k >= M.steps.length - 1) S.k = 0;
      play.textContent = "\u275a\u275a pause";
      const tick = () => {
        if (!S.alive) return;
        if (S.k >= M.steps.length - 1) { stop(); return; }
        S.k += 1; slider.value = S.k; draw();
        S.timer = setTimeout(tick, 600);
      };
      S.timer = setTimeout(tick, 0);
    });
    slider.addEventListener("input", () => { stop(); S.k = +slider.value; draw(); });
    if (overlay) overlay.addEventListener("change", () => { S.overlay = overlay.checked; draw(); });
    mode.addEventListener("change", () => { S.mode = mode.value; S.z = {s: 1, x: 0, y: 0}; draw(); });

    // --- zoom, pan, hover, click -------------------------------------------------------------------
    let drag = null, moved = false;
    canvas.addEventListener("wheel", ev => {
      ev.preventDefault();
      const rect = canvas.getBoundingClientRect(), px = ev.clientX - rect.left, py = ev.clientY - rect.top;
      const f = Math.exp(-ev.deltaY * 0.0015), s = clamp(S.z.s * f, 1, 40), g = s / S.z.s;
      S.z = {s, x: px - (px - S.z.x) * g, y: py - (py - S.z.y) * g};
      if (s === 1) S.z = {s: 1, x: 0, y: 0};
      S.cache = {}; draw();
    }, {passive: false});
    canvas.addEventListener("pointerdown", ev => { drag = {x: ev.clientX, y: ev.clientY, z: {...S.z}}; moved = false; });
    window.addEventListener("pointerup", () => { drag = null; });
    canvas.addEventListener("pointermove", ev => {
      if (drag && (ev.buttons & 1)) {
        const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) moved = true;
        if (moved) { S.z = {s: drag.z.s, x: drag.z.x + dx, y: drag.z.y + dy}; S.cache = {}; draw(); }
        return;
      }
      const i = pick(ev);
      canvas.title = i === null ? "" : describe(i);
    });
    canvas.addEventListener("dblclick", () => { S.z = {s: 1, x: 0, y: 0}; S.cache = {}; draw(); });
    canvas.addEventListener("click", ev => {
      if (moved) return;
      const i = pick(ev);
      if (i === null || !opts.onNodeClick || S.hit.kind === "community") return;
      opts.onNodeClick(data.node.ids[S.hit.kind === "tree" ? data.tree.nodes[i] : i]);
    });
    function pick(ev) {
      if (!S.hit) return null;
      const rect = canvas.getBoundingClientRect(), x = ev.clientX - rect.left, y = ev.clientY - rect.top;
      const {X, Y, R} = S.hit, cell = 12;
      if (!S.grid) {
        S.grid = new Map();
        for (let i = 0; i < X.length; i++) {
          const key = Math.floor(X[i] / cell) * 100003 + Math.floor(Y[i] / cell);
          if (!S.grid.has(key)) S.grid.set(key, []);
          S.grid.get(key).push(i);
        }
      }
      let best = null, bd = Infinity;
      const cx = Math.floor(x / cell), cy = Math.floor(y / cell), reach = S.hit.kind === "community" ? 6 : 1;
      for (let a = -reach; a <= reach; a++) for (let b = -reach; b <= reach; b++) {
        for (const i of S.grid.get((cx + a) * 100003 + cy + b) || []) {
          const d = Math.hypot(X[i] - x, Y[i] - y);
          if (d <= Math.max(R[i], 4) + 2 && d < bd) { bd = d; best = i; }
        }
      }
      return best;
    }
    function describe(i) {
      if (S.hit.kind === "community") {
        const c = data.communities, parts = M.kind === "categorical"
          ? M.categories.map((cat, j) => `${cat} ${(100 * c.shares[S.k][i][j]).toFixed(0)} %`).join(", ")
          : `mean ${c.means[S.k][i] === null ? "n/a" : c.means[S.k][i].toPrecision(3)}`;
        return `community ${i + 1}: ${nf.format(c.size[i])} agents; ${parts}`;
      }
      const a = S.hit.kind === "tree" ? data.tree.nodes[i] : i, code = frame(S.k)[a];
      const value = code === NO ? "no value" : M.kind === "categorical" ? M.categories[code] : `bin ${code + 1} of ${M.palette.length}`;
      return `${data.node.ids[a]}: ${value}` + (data.network ? `, ${degree()[a]} links` : "");
    }
    if (window.ResizeObserver) {
      let width = 0;
      new ResizeObserver(() => { const w = stage.clientWidth; if (w !== width) { width = w; if (S.view) draw(); } }).observe(stage);
    }
    const api = {
      show: (view, k) => show(view, k === undefined ? S.k : k),
      drawn: () => ({view: S.view, frame: S.k, radius: S.drawnRadius ? Array.from(S.drawnRadius) : [],
                     color: S.drawnColor ? S.drawnColor.slice() : []}),
      dispose: () => { S.alive = false; stop(); },
    };
    root.desimNet = api;
    const first = opts.view && views.includes(opts.view) ? opts.view : (views.includes(M.suggested) ? M.suggested : views[0]);
    show(first, 0);
    return api;
  }
  return {mount, decode};
})();
