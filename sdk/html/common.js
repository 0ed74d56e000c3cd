// sdk/html/common.js: TS, the helpers every page kind's script uses (the
// data, text-only elements, tables, charts, the timeline), first in the
// page's last <script>; the page kind's script (run.js, ...) follows in the
// same element, then TS.finish() (sdk/html/page.cc). Chart is Chart.js's.
'use strict';
const TS = {
  data: JSON.parse(document.getElementById('trainscope-data').textContent),
  errors: [],
  // An element with text (never markup) and children.
  el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  },
  section(title, note) {
    const s = TS.el('section');
    s.appendChild(TS.el('h2', title));
    if (note) s.appendChild(TS.el('p', note, {class: 'note'}));
    document.getElementById('content').appendChild(s);
    return s;
  },
  table(parent, head, rows, numeric) {
    const t = TS.el('table');
    const tr = TS.el('tr');
    head.forEach(h => tr.appendChild(TS.el('th', h)));
    t.appendChild(tr);
    rows.forEach(r => {
      const row = TS.el('tr');
      r.forEach((v, k) => row.appendChild(TS.el('td', v, numeric && numeric[k] ? {class: 'num'} : {})));
      t.appendChild(row);
    });
    parent.appendChild(t);
    return t;
  },
  charts: [],
  chart(parent, config, id) {
    const box = TS.el('div', null, {class: 'chart'});
    const canvas = TS.el('canvas', null, {id: id});
    box.appendChild(canvas);
    parent.appendChild(box);
    config.options = Object.assign({animation: false, responsive: true, maintainAspectRatio: false}, config.options || {});
    TS.charts.push(new Chart(canvas, config));
  },
  // The histogram of gap lengths: each bucket's count and total time, on
  // two logarithmic axes.
  gapChart(parent, labels, counts, totals_ms) {
    TS.chart(parent, {type: 'bar', data: {labels: labels, datasets: [
        {label: 'gaps', data: counts, backgroundColor: '#4e79a7', yAxisID: 'y'},
        {label: 'their total ms', data: totals_ms, backgroundColor: '#f28e2b', yAxisID: 'total'}]},
        options: {scales: {y: {type: 'logarithmic', title: {display: true, text: 'gaps'}},
                           total: {type: 'logarithmic', position: 'right',
                                   grid: {drawOnChartArea: false},
                                   title: {display: true, text: 'total ms'}}}}}, 'chart-gaps');
  },
  // What HTA's two charts show, for the section's note.
  htaNote: 'Idle: no stream ran anything. host_wait: the launch came after the stream ran dry ' +
      '(the host is late); kernel_wait: under 30 us between queued kernels (launch latency); ' +
      'other: the rest.',
  // HTA's temporal breakdown (one stacked bar) and idle time by stream:
  // streams [{stream, host_wait, kernel_wait, other}], all in `unit`.
  htaCharts(parent, compute, nonCompute, idle, streams, unit) {
    TS.chart(parent, {type: 'bar', data: {labels: ['kernel time'], datasets: [
        {label: 'compute', data: [compute], backgroundColor: TS.palette[4]},
        {label: 'non-compute', data: [nonCompute], backgroundColor: TS.palette[0]},
        {label: 'idle', data: [idle], backgroundColor: TS.palette[2]}]},
        options: {indexAxis: 'y', scales: {x: {stacked: true, title: {display: true, text: unit}},
                                           y: {stacked: true}}}}, 'chart-hta-temporal');
    const cats = ['host_wait', 'kernel_wait', 'other'];
    TS.chart(parent, {type: 'bar', data: {labels: streams.map(x => 'stream ' + x.stream),
        datasets: cats.map((c, k) => ({label: c, data: streams.map(x => x[c]),
                                       backgroundColor: TS.palette[k + 1]}))},
        options: {scales: {x: {stacked: true}, y: {stacked: true,
                           title: {display: true, text: 'idle ' + unit}}}}}, 'chart-hta-streams');
    parent.setAttribute('data-streams', String(streams.length));
  },
  // A few steps on a canvas, from the page's timeline element (the JSON
  // of sdk/analysis/timeline_view.h): host threads' nested ranges above
  // device streams. Ctrl (or Cmd) + wheel, or a pinch: zoom around the
  // pointer (a plain wheel scrolls the page); drag or a sideways wheel:
  // pan; double-click: the whole window; the buttons do the same. Names
  // are canvas text or the tooltip's text, never markup. False when the
  // page has no timeline.
  timeline(parent) {
    const source = document.getElementById('trainscope-timeline');
    if (!source) return false;
    const v = JSON.parse(source.textContent);
    const merged = v.boxes.filter(b => b[6] > 1).length;
    parent.appendChild(TS.el('p', v.choice + ' ' + v.intervals + ' intervals in the window, drawn as ' +
        v.boxes.length + ' boxes' + (merged ? ' (' + merged + ' of them short neighbours ' +
        'merged, under ' + TS.ms(v.window_us / v.resolution / 1000) + ' ms each)' : '') +
        (v.lanes_dropped ? '; ' + v.lanes_dropped + ' more threads or streams not shown' : '') +
        (v.ranges_dropped ? '; ' + v.ranges_dropped + ' intervals past a lane\'s ' +
            'rows not shown' : '') +
        (v.names_dropped ? '; ' + v.names_dropped + ' boxes named by their kind only' : '') +
        '. Ctrl + wheel or a pinch: zoom; drag: pan; double-click: the whole window.',
        {class: 'note'}));
    const keys = TS.el('div', null, {id: 'timeline-key'});
    [...new Set(v.boxes.map(b => b[5]))].sort((a, b) => a - b).forEach(c => {
      const key = TS.el('span', v.classes[c].name, {class: 'key'});
      const swatch = TS.el('i');
      swatch.style.background = v.classes[c].color;
      key.prepend(swatch);
      keys.appendChild(key);
    });
    parent.appendChild(keys);
    const buttons = TS.el('div');
    const zoomIn = TS.el('button', 'zoom in', {id: 'timeline-zoom-in'});
    const zoomOut = TS.el('button', 'zoom out');
    const whole = TS.el('button', 'the whole window');
    [zoomIn, zoomOut, whole].forEach(b => buttons.appendChild(b));
    parent.appendChild(buttons);
    const rowH = 16, axisH = 32, labelW = 150;
    let y = axisH;
    const laneY = v.lanes.map(l => { const at = y; y += l.rows * rowH + 6; return at; });
    const height = y;
    const frame = TS.el('div', null, {class: 'timeline'});
    const canvas = TS.el('canvas', null, {id: 'timeline'});
    const tip = TS.el('div', null, {class: 'tip', id: 'timeline-tip'});
    frame.appendChild(canvas);
    frame.appendChild(tip);
    parent.appendChild(frame);
    const width = Math.max(600, parent.clientWidth || 1100);
    const dpr = Math.min(2, window.devicePixelRatio || 1);  // a tall canvas stays drawable
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.width = width + 'px';
    canvas.style.height = height + 'px';
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    const plotW = width - labelW;
    const full = Math.max(v.window_us, 0.001);
    let v0 = 0, v1 = full;
    const xOf = t => labelW + (t - v0) / (v1 - v0) * plotW;
    const tOf = x => v0 + (x - labelW) / plotW * (v1 - v0);
    const unit = span => span >= 2000 ? [1000, 'ms'] : [1, '\u00b5s'];
    // White text on the dark colours.
    const dark = v.classes.map(c => {
      const n = parseInt(c.color.slice(1), 16);
      return 0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255) < 110;
    });
    const draw = () => {
      ctx.clearRect(0, 0, width, height);
      ctx.font = '11px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      v.lanes.forEach((l, k) => {
        ctx.fillStyle = k % 2 ? '#ffffff' : '#f6f8fa';
        ctx.fillRect(0, laneY[k] - 3, width, l.rows * rowH + 6);
        ctx.fillStyle = l.device ? '#0b4f8a' : '#1b1f24';
        ctx.fillText(l.name, 4, laneY[k] + rowH / 2, labelW - 8);
      });
      ctx.save();
      ctx.beginPath();
      ctx.rect(labelW, 0, plotW, height);
      ctx.clip();
      for (const [lane, row, start, dur, name, cls, n] of v.boxes) {
        if (start > v1 || start + dur < v0) continue;
        const x0 = Math.max(labelW, xOf(start));
        const w = Math.max(1, Math.min(width, xOf(start + dur)) - x0);
        const top = laneY[lane] + row * rowH;
        ctx.globalAlpha = n > 1 ? 0.5 : 1;
        ctx.fillStyle = v.classes[cls].color;
        ctx.fillRect(x0, top + 1, w, rowH - 2);
        ctx.globalAlpha = 1;
        if (w > 36) {
          ctx.fillStyle = dark[cls] ? '#fff' : '#111';
          ctx.fillText((n > 1 ? n + '\u00d7 ' : '') + v.names[name], x0 + 3, top + rowH / 2, w - 6);
        }
      }
      // The time axis, and a line where each step begins.
      const [scale, label] = unit(v1 - v0);
      const rough = (v1 - v0) / 8;
      const pow = Math.pow(10, Math.floor(Math.log10(rough)));
      const tick = pow * (rough / pow >= 5 ? 5 : rough / pow >= 2 ? 2 : 1);
      ctx.fillStyle = '#57606a';
      ctx.strokeStyle = '#d8dee4';
      for (let t = Math.ceil(v0 / tick) * tick; t <= v1; t += tick) {
        const x = xOf(t);
        ctx.fillRect(x, axisH - 6, 1, 5);
        ctx.fillText(+(t / scale).toPrecision(6) + ' ' + label, x + 2, 8);
      }
      ctx.strokeStyle = '#57606a';
      for (const [step, start] of v.steps) {
        const x = Math.round(xOf(start)) + 0.5;
        ctx.beginPath();
        ctx.moveTo(x, axisH - 4);
        ctx.lineTo(x, height);
        ctx.stroke();
        ctx.fillText('step ' + step, x + 3, axisH - 10);
      }
      ctx.restore();
      canvas.setAttribute('data-view', v0.toFixed(3) + ' ' + v1.toFixed(3));
    };
    const clamp = () => {
      const span = Math.min(full, Math.max(v1 - v0, full / 1e6));
      v0 = Math.min(Math.max(0, v0), full - span);
      v1 = v0 + span;
    };
    const xIn = e => e.clientX - canvas.getBoundingClientRect().left;
    // Zoom by `f` (< 1: in) around time t; the whole window.
    const zoom = (t, f) => {
      v0 = t - (t - v0) * f;
      v1 = t + (v1 - t) * f;
      clamp();
      tip.style.display = 'none';
      draw();
    };
    const all = () => { v0 = 0; v1 = full; tip.style.display = 'none'; draw(); };
    canvas.addEventListener('wheel', e => {
      const px = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;  // lines, pages
      if (e.ctrlKey || e.metaKey) {
        e.preventDefault();
        const dy = Math.max(-2000, Math.min(2000, e.deltaY * px));
        zoom(tOf(Math.max(labelW, xIn(e))), Math.pow(1.0015, dy));
      } else if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        e.preventDefault();
        const dt = e.deltaX * px / plotW * (v1 - v0);
        v0 += dt;
        v1 += dt;
        clamp();
        tip.style.display = 'none';
        draw();
      }
    }, {passive: false});
    zoomIn.addEventListener('click', () => zoom((v0 + v1) / 2, 0.5));
    zoomOut.addEventListener('click', () => zoom((v0 + v1) / 2, 2));
    whole.addEventListener('click', all);
    let drag = null;
    canvas.addEventListener('mousedown', e => { drag = {x: xIn(e), v0: v0, v1: v1}; });
    window.addEventListener('mouseup', () => { drag = null; });
    canvas.addEventListener('dblclick', all);
    canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
    canvas.addEventListener('mousemove', e => {
      const x = xIn(e);
      if (drag) {
        const dt = (x - drag.x) / plotW * (drag.v1 - drag.v0);
        v0 = drag.v0 - dt;
        v1 = drag.v1 - dt;
        clamp();
        draw();
        return;
      }
      const yy = e.clientY - canvas.getBoundingClientRect().top;
      const lane = laneY.findIndex((top, k) => yy >= top && yy < top + v.lanes[k].rows * rowH);
      const t = tOf(x), slack = 2 / plotW * (v1 - v0);
      // The box under the pointer, else the nearest within 2 pixels.
      const row = Math.floor((yy - laneY[Math.max(0, lane)]) / rowH);
      let hit, gap = slack;
      if (lane >= 0 && x >= labelW) {
        for (const b of v.boxes) {
          if (b[0] !== lane || b[1] !== row) continue;
          const off = t < b[2] ? b[2] - t : t > b[2] + b[3] ? t - b[2] - b[3] : -1;
          if (off < 0) { hit = b; break; }
          if (off <= gap) { hit = b; gap = off; }
        }
      }
      if (!hit) { tip.style.display = 'none'; return; }
      const [, , start, dur, name, cls, n] = hit;
      tip.textContent = n > 1
          ? n + ' short intervals in ' + TS.ms(dur / 1000) + ' ms, from ' + TS.ms(start / 1000) +
            ' ms; the longest:\n' + v.names[name] + ' (' + v.classes[cls].name + ')'
          : v.names[name] + '\n' + v.classes[cls].name + ' \u00b7 ' + TS.ms(dur / 1000) +
            ' ms, from ' + TS.ms(start / 1000) + ' ms';
      tip.style.display = 'block';
      tip.style.left = Math.min(x + 12, width - 300) + 'px';
      tip.style.top = (yy + 14) + 'px';
    });
    draw();
    TS.charts.push({canvas: canvas});
    parent.setAttribute('data-boxes', String(v.boxes.length));
    parent.setAttribute('data-lanes', String(v.lanes.length));
    // For the browser tests: a plain turn of the wheel (the page's, not
    // a zoom), one with Ctrl (zooming in at the middle), then the pointer
    // over the last box of thread 1's deepest row still in view (its
    // tooltip).
    if (location.hash === '#timeline-test') {
      const r = canvas.getBoundingClientRect();
      const at = {cancelable: true, clientX: r.left + labelW + plotW / 2, clientY: r.top + axisH + 2};
      const plain = new WheelEvent('wheel', Object.assign({deltaY: -500}, at));
      canvas.dispatchEvent(plain);
      canvas.setAttribute('data-plain-wheel', plain.defaultPrevented ? 'taken' : 'left to the page');
      canvas.dispatchEvent(new WheelEvent('wheel', Object.assign({deltaY: -500, ctrlKey: true}, at)));
      const seen = v.boxes.filter(b => b[0] === 0 && b[2] <= v1 && b[2] + b[3] >= v0);
      const deep = seen.reduce((m, b) => Math.max(m, b[1]), -1);
      const deepest = seen.filter(b => b[1] === deep);
      if (deepest.length) {
        const last = deepest[deepest.length - 1];
        const mid = Math.max(v0, Math.min(v1, last[2] + last[3] / 2));
        canvas.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + xOf(mid),
            clientY: r.top + laneY[0] + last[1] * rowH + rowH / 2}));
      }
    }
    return true;
  },
  ms(v) { return v === null || v === undefined ? '' : (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(3)); },
  palette: ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac', '#1b9e77', '#7570b3'],
  // After the page's code: how many charts drew something, for the tests.
  finish() {
    let drawn = 0;
    for (const c of TS.charts) {
      const ctx = c.canvas.getContext('2d');
      const pixels = ctx.getImageData(0, 0, c.canvas.width, c.canvas.height).data;
      for (let k = 3; k < pixels.length; k += 4) { if (pixels[k] !== 0) { drawn++; break; } }
    }
    document.body.setAttribute('data-charts', String(TS.charts.length));
    document.body.setAttribute('data-charts-drawn', String(drawn));
    document.body.setAttribute('data-errors', String(TS.errors.length));
    if (TS.errors.length) document.body.setAttribute('data-error-text', TS.errors.join(' | '));
    document.body.setAttribute('data-rendered', 'yes');
  },
};
window.addEventListener('error', e => TS.errors.push(String(e.message)));
