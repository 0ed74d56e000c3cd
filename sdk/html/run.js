// sdk/html/run.js: the page of one run (run_page.cc): TS.data is the
// report's sections, drawn in order.
const d = TS.data;
const overview = TS.section('Baseline record');
if (d.recommendation) {
  overview.appendChild(TS.el('p', '\u2192 ' + d.recommendation, {class: 'verdict', id: 'verdict'}));
}
if (d.next.length) {
  const list = TS.el('ul', null, {id: 'next-steps'});
  for (const n of d.next) {
    const item = TS.el('li', n.what + ' \u2014 ');
    item.appendChild(TS.el('a', 'docs/' + n.doc, {href: d.docs + '/' + n.doc}));
    if (n.command) {
      item.appendChild(TS.el('br'));
      item.appendChild(TS.el('code', n.command));
    }
    list.appendChild(item);
  }
  overview.appendChild(TS.el('p', 'Next steps:', {class: 'note'}));
  overview.appendChild(list);
}
TS.table(overview, ['field', 'value'], d.record).id = 'record';
if (d.config.length) {
  const more = TS.el('details');
  more.appendChild(TS.el('summary', 'configuration (' + d.config.length + ' keys)'));
  TS.table(more, ['key', 'value'], d.config).id = 'config';
  overview.appendChild(more);
}
overview.appendChild(TS.el('p', 'How to read each section and act on it: docs/html-report.md; ' +
    'every field: docs/report-schema.md.', {class: 'note'}));

const s = d.steps;
const labels = s.first.map((f, k) => f === s.last[k] ? String(f) : f + '\u2013' + s.last[k]);
const stepsNote = s.per_bar > 1
    ? s.count + ' steps in ' + labels.length + ' bars of ' + s.per_bar +
      ' consecutive steps: each phase\'s mean per step, with each bar\'s fastest and slowest step'
    : s.count + ' steps, one bar each';
const steps = TS.section('Step time by phase', stepsNote);
steps.id = 'steps';
steps.setAttribute('data-steps', String(s.count));
steps.setAttribute('data-bars', String(labels.length));
if (s.count === 0) {
  steps.appendChild(TS.el('p', 'No step rows (' + d.steps_file + ').'));
} else {
  const sets = d.phases.map((p, k) => ({label: p, data: s.phase_ms[p], stack: 'phases',
      backgroundColor: d.phase_colors[k]}));
  if (s.per_bar > 1) {
    sets.push({type: 'line', label: 'slowest step', data: s.max_ms, borderColor: '#24292f',
               borderWidth: 1, pointRadius: 0});
    sets.push({type: 'line', label: 'fastest step', data: s.min_ms, borderColor: '#8c959f',
               borderWidth: 1, pointRadius: 0});
  }
  TS.chart(steps, {type: 'bar', data: {labels: labels, datasets: sets},
      options: {scales: {x: {stacked: true, title: {display: true, text: 'step'}},
                         y: {stacked: true, title: {display: true, text: 'ms'}}}}}, 'chart-steps');

  const idle = TS.section('Idle time per step, by its top cause',
      'The compute\'s idle time inside each step (' + d.busy_source + '), coloured by the cause ' +
      'with the most of it in that step.');
  idle.id = 'idle';
  // A cause named as a phase (eval, data_wait, ...) in that phase's colour.
  // Other causes in colours no phase has.
  const others = ['#ff9da7', '#1b9e77', '#7570b3', '#66a61e', '#e7298a', '#a6761d', '#666666'];
  let other = 0;
  const causeColor = c => d.phases.indexOf(c) >= 0
      ? d.phase_colors[d.phases.indexOf(c)] : others[other++ % others.length];
  const causeSets = s.causes.map(c => ({label: c, data: s.idle_ms[c], stack: 'idle',
      backgroundColor: causeColor(c)}));
  TS.chart(idle, {type: 'bar', data: {labels: labels, datasets: causeSets},
      options: {scales: {x: {stacked: true, title: {display: true, text: 'step'}},
                         y: {stacked: true, title: {display: true, text: 'idle ms per step'}}}}},
      'chart-idle');
}

const timeline = TS.section('A few steps on the timeline');
timeline.id = 'timeline-section';
if (!TS.timeline(timeline)) {
  timeline.appendChild(TS.el('p', d.timeline_note, {id: 'no-timeline'}));
}

const g = d.gaps;
const gaps = TS.section('Idle gaps by length',
    g.count + ' gaps; the longest ' + TS.ms(g.largest_ms) + ' ms. Many short gaps with cause ' +
    'launch or host: kernels too short for their launch cost; a few long ones: the steps below.');
gaps.id = 'gaps';
gaps.setAttribute('data-gaps', String(g.count));
if (g.count > 0) {
  TS.gapChart(gaps, g.histogram.map(b => b.label), g.histogram.map(b => b.count),
      g.histogram.map(b => b.total_ms));
  const longest = TS.section('The longest gaps');
  longest.id = 'longest';
  TS.table(longest, ['began (s)', 'ms', 'step', 'cause'],
      g.largest.map(x => [x.start_s === null ? '' : x.start_s.toFixed(6), TS.ms(x.duration_ms), x.step < 0 ? 'between steps' : x.step, x.cause]),
      [true, true, true, false]).id = 'longest-table';
}

const h = d.hta;
if (h.rows > 0) {
  const device = TS.section('Device time, by Holistic Trace Analysis\' rules',
      h.rows + ' kernels, copies and sets over the whole run. ' + TS.htaNote +
      (h.late_rows > 0 ? ' ' + h.late_rows + ' rows came out of order: approximate.' : ''));
  device.id = 'hta';
  TS.htaCharts(device, h.compute_s, h.non_compute_s, h.idle_s,
      h.streams.map(x => ({stream: x.stream, host_wait: x.host_wait_s,
                           kernel_wait: x.kernel_wait_s, other: x.other_s})), 's');
}

if (d.loaders.length) {
  const input = TS.section('Input pipeline',
      'Each loader the program described (report.loaders): its settings, the CPU spent ' +
      'making its batches, and the batches ready when a step asked for one. A queue near 0 ' +
      'with a large data_wait share: the workers do not keep up; full all along: fewer would ' +
      'do (trainscope tune loader finds the knee).');
  input.id = 'loaders';
  TS.table(input, ['loader', 'kind', 'workers', 'prefetch', 'pinned', 'batches',
                   'CPU ms a batch', 'cores busy', 'queue mean', 'queue max'],
      d.loaders.map(l => [l.name, l.kind, l.workers, l.prefetch, l.pin_memory ? 'yes' : 'no',
                          l.batches, TS.ms(l.cpu_ms_per_batch), l.cpu_cores.toFixed(2),
                          l.queue_depth_mean.toFixed(2), l.queue_depth_max]),
      [false, false, true, true, false, true, true, true, true, true]).id = 'loader-table';
  d.loaders.forEach((l, k) => {
    if (!l.queue.start_s.length) return;
    TS.chart(input, {type: 'line', data: {labels: l.queue.start_s.map(x => x.toFixed(1)),
        datasets: [{label: l.name + ': batches ready, mean', data: l.queue.mean,
                    borderColor: '#4e79a7', pointRadius: 0, spanGaps: false},
                   {label: l.name + ': most ready', data: l.queue.max,
                    borderColor: '#8c959f', borderWidth: 1, pointRadius: 0}]},
        options: {scales: {x: {title: {display: true, text: 'seconds from process start'}},
                           y: {beginAtZero: true, title: {display: true, text: 'batches'}}}}},
        'chart-queue-' + k);
  });
}

const phases = TS.section('Phases', 'Per-step time in each phase, over every step.');
TS.table(phases, ['phase', 'steps', 'median ms', 'p90 ms', 'max ms', 'of step time'],
    d.phase_table, [false, true, true, true, true, true]).id = 'phase-table';
