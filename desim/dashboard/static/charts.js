/* desim dashboard charts: thin wrappers over the vendored uPlot (static/vendor/uPlot.iife.min.js).
 *
 * uPlot does the hard parts (rounded tick steps, hover cursor with values, legend, fast canvas
 * drawing); this file adds what a study needs: the step axis over the run's own steps,
 * intervention markers and broadcast spans, a zero line in difference mode, full tick labels
 * (the axis grows to fit them, negatives keep their minus sign), stacked shares of categories,
 * quantile bands, and a chart that follows its card's width.
 *
 * What each chart draws is also left on its element for tests and devtools: data-series (the
 * points per series), data-yticks (the y tick labels as drawn), data-markers, data-zero-line.
 */
"use strict";

const CHART_FONT = '11px system-ui, -apple-system, "Segoe UI", sans-serif';
const MINUS = "\u2212";

/* Tick labels with as many decimals as the tick step needs, the same for every tick. */
function tickLabels(splits) {
  const finite = splits.filter(v => v !== null && Number.isFinite(v));
  const step = finite.length > 1 ? Math.abs(finite[1] - finite[0]) : Math.abs(finite[0] || 1);
  const big = Math.max(...finite.map(Math.abs), 0);
  let decimals = 0;
  if (step > 0 && step < 1) {
    decimals = Math.ceil(-Math.log10(step) - 1e-9);
    if (Math.abs(step * 10 ** decimals - Math.round(step * 10 ** decimals)) > 1e-6) decimals += 1;
  }
  return splits.map(v => {
    if (v === null || !Number.isFinite(v)) return "";
    let text = big >= 1e6 ? v.toExponential(1) : v.toFixed(Math.min(decimals, 10));
    if (Number(text) === 0) text = text.replace("-", "");
    return text.replace("-", MINUS);
  });
}

function valueLabel(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  const text = Number.isInteger(v) || a >= 1000 ? String(Math.round(v * 100) / 100) : v.toPrecision(4);
  return text.replace("-", MINUS);
}

/* The axis is as wide as its longest label (uPlot calls this until the size settles). */
function axisSize(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size;
  let size = axis.ticks.size + axis.gap + 6;
  const longest = (values || []).reduce((a, v) => (String(v).length > a.length ? String(v) : a), "");
  if (longest) {
    u.ctx.font = axis.font[0];
    size += u.ctx.measureText(longest).width / (window.devicePixelRatio || 1);
  }
  return Math.ceil(size);
}

/* Union of steps of all series, each series aligned on it (null where it has no value). */
function align(series) {
  const steps = [...new Set(series.flatMap(se => se.points.map(p => p[0])))].sort((a, b) => a - b);
  const at = steps.reduce((m, t, i) => { m.set(t, i); return m; }, new Map());
  return [steps, ...series.map(se => {
    const col = new Array(steps.length).fill(null);
    for (const [t, v] of se.points) if (v !== null && Number.isFinite(v)) col[at.get(t)] = v;
    return col;
  })];
}

/* Vertical lines at intervention steps, shaded spans for broadcasts, the zero line. */
function overlayPlugin({markers = [], spans = [], zeroLine = false}, el) {
  const X = (u, v) => u.valToPos(v, "x", true);
  return {
    hooks: {
      drawClear: [u => {
        const {ctx, bbox} = u;
        ctx.save();
        ctx.fillStyle = "rgba(253, 176, 34, 0.18)";
        for (const sp of spans) {
          const x0 = X(u, Math.max(u.scales.x.min, sp.from)), x1 = X(u, Math.min(u.scales.x.max, sp.to));
          if (x1 > x0) ctx.fillRect(x0, bbox.top, x1 - x0, bbox.height);
        }
        ctx.restore();
      }],
      draw: [u => {
        const {ctx, bbox} = u;
        ctx.save();
        ctx.lineWidth = Math.max(1, window.devicePixelRatio || 1);
        if (zeroLine && u.scales.y.min <= 0 && u.scales.y.max >= 0) {
          const y = Math.round(u.valToPos(0, "y", true)) + 0.5;
          ctx.strokeStyle = "#1d2330";
          ctx.beginPath(); ctx.moveTo(bbox.left, y); ctx.lineTo(bbox.left + bbox.width, y); ctx.stroke();
          el.dataset.zeroLine = String(u.valToPos(0, "y"));
        }
        // many markers (a study with hundreds of scheduled events) are drawn fainter, so the curves still read
        const inView = markers.filter(mk => mk.step >= u.scales.x.min && mk.step <= u.scales.x.max).length;
        ctx.strokeStyle = inView > 30 ? "rgba(217, 45, 32, 0.35)" : "#d92d20";
        ctx.setLineDash([4, 3]);
        const drawn = [];
        for (const mk of markers) {
          if (mk.step < u.scales.x.min || mk.step > u.scales.x.max) continue;
          const x = Math.round(X(u, mk.step)) + 0.5;
          ctx.beginPath(); ctx.moveTo(x, bbox.top); ctx.lineTo(x, bbox.top + bbox.height); ctx.stroke();
          drawn.push(mk.step);
        }
        el.dataset.markers = [...new Set(drawn)].join(",");
        ctx.restore();
      }],
    },
  };
}

/* A time chart in a <figure class="chart">. series: [{label, color, points: [[step, value]], dash,
   width, fill}]; bands: [{upper, lower, fill}] (indices into series); stacked: series are shares
   to be stacked (the legend shows each share, the plot the cumulative sum). */
function timeChart({title, key, mode = "level", series, xmax, markers = [], spans = [], zeroLine = false,
                    yRange = null, stacked = false, bands = [], height = 220, xLabel = "step", note = null}) {
  const el = h("figure", {class: "chart", "data-metric": key, "data-mode": mode, "data-xmax": Math.max(1, xmax)});
  el.dataset.series = JSON.stringify(Object.fromEntries(series.map(se => [se.label, se.points])));
  const plot = h("div", {class: "chart-plot"});
  const marks = markers.filter(mk => mk.step <= xmax);
  // one entry per intervention, however often it fires ("weeks 400–19,600, every 800 (25×): campaign_on"),
  // in order of its first step: hundreds of firings stay a few readable lines under the chart
  const byName = new Map();
  for (const mk of marks) {
    if (!byName.has(mk.name)) byName.set(mk.name, {name: mk.name, steps: new Set(), labels: new Set()});
    byName.get(mk.name).steps.add(mk.step);
    byName.get(mk.name).labels.add(mk.label);
  }
  const entries = [...byName.values()].map(g => ({...g, steps: [...g.steps].sort((a, b) => a - b)}))
    .sort((a, b) => a.steps[0] - b.steps[0] || (a.name < b.name ? -1 : 1));
  fill(el, h("figcaption", {class: "chart-title", text: title}), plot,
    entries.length ? h("div", {class: "chart-events muted"}, entries.map(g => h("span", {"data-event": g.name,
      "data-steps": g.steps.join(","), title: [...g.labels].slice(0, 3).join("\n") + (g.steps.length > 1 ? `\n${xLabel}s ${g.steps.slice(0, 60).join(", ")}` +
        (g.steps.length > 60 ? ", …" : "") : "")}, h("i", {class: "event-tick"}), `${stepsText(g.steps, xLabel)}: ${g.name}`))) : null,
    note ? h("div", {class: "chart-note muted", text: note}) : null);
  let data = align(series);
  const raw = data;
  if (stacked) {       // cumulative sums, bottom category first
    const acc = new Array(data[0].length).fill(0);
    data = [data[0], ...data.slice(1).map(col => col.map((v, i) => (acc[i] += v ?? 0)))];
  }
  const opts = {
    width: 300, height,
    cursor: {points: {size: 6}, drag: {x: true, y: false}},
    legend: {live: true},
    scales: {x: {time: false, range: () => [0, Math.max(1, xmax)]},
             y: yRange ? {range: () => yRange} : {range: (u, lo, hi) => {
               if (lo === null || hi === null) return [0, 1];
               if (zeroLine) { lo = Math.min(lo, 0); hi = Math.max(hi, 0); }
               if (hi - lo < 1e-12) { lo -= 0.5; hi += 0.5; }
               const pad = (hi - lo) * 0.06;
               return uPlot.rangeNum(lo - pad, hi + pad, 0.02, true);
             }}},
    axes: [
      {font: CHART_FONT, label: xLabel, labelFont: CHART_FONT, labelSize: 18, size: axisSize,
       values: (u, splits) => splits.map(v => (Number.isInteger(v) ? String(v) : "")),
       grid: {stroke: "#eceff4"}, ticks: {stroke: "#c5ccd8"}},
      {font: CHART_FONT, size: axisSize, grid: {stroke: "#eceff4"}, ticks: {stroke: "#c5ccd8"},
       values: (u, splits) => { const labels = tickLabels(splits); el.dataset.yticks = JSON.stringify(labels); return labels; }},
    ],
    series: [{label: xLabel, value: (u, v) => (v === null ? "–" : String(v))},
      ...series.map((se, i) => ({
        label: se.label, stroke: se.color, width: se.width ?? 1.6, dash: se.dash, fill: se.fill,
        spanGaps: false, show: true,
        points: {show: (u, si) => raw[0].length <= 60 && !stacked && !se.noPoints, size: 4},
        value: (u, v, si, idx) => (idx === null ? "–" : valueLabel(raw[i + 1][idx])),
      }))],
    bands: stacked ? series.slice(1).map((se, i) => ({series: [i + 2, i + 1], fill: se.color}))
      : bands.map(b => ({series: [b.upper + 1, b.lower + 1], fill: b.fill})),
    plugins: [overlayPlugin({markers: marks, spans, zeroLine}, el)],
  };
  let chart = null;
  const observer = new ResizeObserver(entries => {
    const width = Math.floor(entries[0].contentRect.width);
    if (width < 50) return;
    if (!chart) { chart = new uPlot({...opts, width}, data, plot); el.uplot = chart; }
    else if (chart.width !== width) chart.setSize({width, height});
    el.dataset.drawnWidth = String(width);   // the width the chart now has (the browser tests wait on it)
  });
  observer.observe(el);
  return el;
}

/* Shares of each category over time, stacked; from {steps, categories, counts, colors}. */
function sharesChart({title, key, summary, xmax, markers, spans, note, xLabel}) {
  const totals = summary.steps.map((_, i) => summary.categories.reduce((a, c) => a + summary.counts[c][i], 0) || 1);
  const series = summary.categories.map((c, k) => ({label: c, color: summary.colors[k], width: 0.5, noPoints: true,
    fill: k === 0 ? summary.colors[k] : undefined,
    points: summary.steps.map((t, i) => [t, summary.counts[c][i] / totals[i]])}));
  const el = timeChart({title, key, mode: "shares", series, xmax, markers, spans, stacked: true, yRange: [0, 1], note, xLabel});
  el.dataset.colors = JSON.stringify(Object.fromEntries(summary.categories.map((c, k) => [c, summary.colors[k]])));
  return el;
}

/* Median, mean and 5-95 / 25-75 % bands of a numeric state over agents. */
function bandsChart({title, key, summary, xmax, markers, spans, note, xLabel}) {
  const q = k => summary.steps.map((t, i) => [t, summary.quantiles[i] ? summary.quantiles[i][k] : null]);
  const blue = "#2f6fdf";
  const series = [
    {label: "95 %", color: "rgba(47,111,223,0.25)", width: 0.5, points: q(4), noPoints: true},
    {label: "75 %", color: "rgba(47,111,223,0.4)", width: 0.5, points: q(3), noPoints: true},
    {label: "median", color: blue, width: 1.8, points: q(2)},
    {label: "25 %", color: "rgba(47,111,223,0.4)", width: 0.5, points: q(1), noPoints: true},
    {label: "5 %", color: "rgba(47,111,223,0.25)", width: 0.5, points: q(0), noPoints: true},
    {label: "mean", color: "#1d2330", width: 1.2, dash: [5, 3], points: summary.steps.map((t, i) => [t, summary.mean[i]]), noPoints: true},
  ];
  return timeChart({title, key, mode: "bands", series, xmax, markers, spans, note, xLabel,
    bands: [{upper: 0, lower: 4, fill: "rgba(47,111,223,0.12)"}, {upper: 1, lower: 3, fill: "rgba(47,111,223,0.25)"}]});
}
