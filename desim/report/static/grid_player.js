(function () {
  const D = JSON.parse(document.getElementById('desim-grid-data').textContent);
  const CODES = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  const canvas = document.getElementById('grid'), ctx = canvas.getContext('2d');
  const label = document.getElementById('label'), counts = document.getElementById('counts');
  const cell = Math.max(2, Math.floor(760 / Math.max(D.width, D.height)));
  canvas.width = cell * D.width; canvas.height = cell * D.height;
  // a numeric field can be coloured on the whole run's range, each frame's own, or a log scale
  const scaleSel = document.getElementById('scale');
  let current = 0;
  const fmt = v => (Math.abs(v) >= 1000 || Number.isInteger(v) ? String(Math.round(v)) : v.toPrecision(3));
  function cellsOf(f) {
    const name = scaleSel ? scaleSel.value : 'run';
    return name === 'run' ? f.cells : f.scaled[name];
  }
  function showRange(k) {
    if (!scaleSel) return;
    const sc = D.scales[scaleSel.value], r = sc.ranges.length > 1 ? sc.ranges[k] : sc.ranges[0];
    document.getElementById('scale-lo').textContent = fmt(r[0]);
    document.getElementById('scale-hi').textContent = fmt(r[1]) + (scaleSel.value === 'log' ? ' (log scale)' : '');
    canvas.dataset.scale = scaleSel.value;
  }
  if (scaleSel) scaleSel.addEventListener('change', () => draw(current));
  function draw(k) {
    current = k;
    const f = D.frames[k], lay = D.layer ? D.layer.frames[k] : null, cells = cellsOf(f);
    ctx.fillStyle = D.layer ? '#ffffff' : '#f2f2f2'; ctx.fillRect(0, 0, canvas.width, canvas.height);
    for (let i = 0; i < D.width * D.height; i++) {
      const x = (i % D.width) * cell, y = Math.floor(i / D.width) * cell;
      if (lay) { ctx.fillStyle = D.layer.palette[CODES.indexOf(lay.cells[i])]; ctx.fillRect(x, y, cell, cell); }
      const c = cells[i];
      if (c !== '.') {
        ctx.fillStyle = D.palette[CODES.indexOf(c)];
        if (lay) { ctx.beginPath(); ctx.arc(x + cell / 2, y + cell / 2, cell * 0.4, 0, 2 * Math.PI); ctx.fill(); }
        else ctx.fillRect(x, y, cell, cell);
      }
    }
    label.textContent = (f.step === 0 ? 'initial state' : D.time_unit + ' ' + f.step) +
      ' (frame ' + (k + 1) + ' of ' + D.frames.length + '), ' + f.agents + ' agents shown';
    let text = D.kind === 'categorical'
      ? D.categories.map(c => D.field + ' ' + c + ': ' + f.counts[c]).join(' \u00b7 ')
      : 'mean ' + (f.mean === null ? 'n/a' : f.mean.toFixed(3));
    if (lay) text += ' \u00b7 ' + D.layer.name + ' in all: ' + Math.round(lay.total).toLocaleString();
    counts.textContent = text;
    showRange(k);
    canvas.dataset.frame = String(k);
  }
  desimControls(D.frames.length, draw, 300);
})();
