// sdk/html/trace.js: the page of a trace (trace_page.cc): TS.data is
// `trainscope analyze --format=json`'s document, drawn section by section.
const d = TS.data;
const g = d.gaps;
const us = v => TS.ms(v / 1000);
const pct = v => (100 * v).toFixed(1) + '%';
const causes = Object.keys(g.by_cause_us);
const overview = TS.section('What the trace holds');
if (causes.length) {
  const top = causes[0];
  overview.appendChild(TS.el('p', '\u2192 the compute idles ' + pct(g.idle_share) + ' of ' +
      us(g.window_us) + ' ms; the largest cause is ' + top + ' (' +
      pct(g.by_cause_us[top] / Math.max(1, g.idle_us)) + ' of the idle time): ' +
      'docs/gap-analysis.md says what each cause means and what to do.',
      {class: 'verdict', id: 'verdict'}));
}
const e = d.events;
TS.table(overview, ['field', 'value'], [
  ['trace', d.trace], ['rank', String(d.rank)],
  ['device work', e.kernels + ' kernels, ' + e.memcpys + ' copies, ' + e.memsets + ' sets'],
  ['CUDA calls', e.runtime_calls + ' runtime, ' + e.sync_calls + ' synchronisations'],
  ['profiler steps', String(e.steps)],
  ['busy source', g.busy_source + (g.step_windows > 1 ? ', over ' + g.step_windows +
      ' windows of consecutive steps' : '')],
  ['read', (d.parse.json_bytes / 1e6).toFixed(1) + ' MB of JSON in ' + d.parse.seconds.toFixed(3) +
      ' s (' + d.parse.threads + ' threads)'],
]).id = 'record';
overview.setAttribute('data-kernels', String(e.kernels));

const timeline = TS.section('A few steps on the timeline');
timeline.id = 'timeline-section';
if (!TS.timeline(timeline)) timeline.appendChild(TS.el('p', 'No timeline.', {id: 'no-timeline'}));

const h = d.hta;
const t = h.temporal_breakdown_us;
const device = TS.section('Device time, by Holistic Trace Analysis\' rules',
    h.rules.device_rows + ' device rows' + (h.rules.last_step_dropped
        ? ', the last of ' + h.rules.profiler_steps + ' profiler steps left out as HTA does' : '') +
    '. ' + TS.htaNote);
device.id = 'hta';
if (h.rules.device_rows > 0) {
  const idleByStream = [...new Set(h.idle_time_breakdown_us.map(r => r.stream))].map(stream => {
    const row = {stream: stream, host_wait: 0, kernel_wait: 0, other: 0};
    for (const r of h.idle_time_breakdown_us) {
      if (r.stream === stream) row[r.category] = r.idle_time / 1000;
    }
    return row;
  });
  TS.htaCharts(device, t['compute_time(us)'] / 1000, t['non_compute_time(us)'] / 1000,
               t['idle_time(us)'] / 1000, idleByStream, 'ms');
} else {
  device.appendChild(TS.el('p', 'No GPU kernels, copies or sets in this trace: a CPU-only ' +
      'profile has no device time to break down.', {id: 'no-device'}));
}

const idle = TS.section('The compute\'s idle time by cause',
    us(g.idle_us) + ' ms idle of ' + us(g.window_us) + ' ms (' + g.busy_source + ').');
idle.id = 'causes';
if (causes.length) {
  TS.chart(idle, {type: 'bar', data: {labels: causes, datasets: [{label: 'idle ms',
      data: causes.map(c => g.by_cause_us[c] / 1000), backgroundColor: TS.palette[2]}]},
      options: {indexAxis: 'y'}}, 'chart-causes');
}

const gaps = TS.section('Idle gaps by length', g.gaps + ' gaps. Many short gaps with cause ' +
    'launch or host: kernels too short for their launch cost; a few long ones: the list below.');
gaps.id = 'gaps';
gaps.setAttribute('data-gaps', String(g.gaps));
if (g.gaps > 0) {
  TS.gapChart(gaps, g.histogram.map(b => b.bucket), g.histogram.map(b => b.count),
      g.histogram.map(b => b.total_us / 1000));
  const longest = TS.section('The longest gaps', 'Start: from the analysed window\'s start.');
  TS.table(longest, ['start ms', 'ms', 'step', 'cause'],
      g.largest_gaps.map(x => [us(x.start_us), us(x.duration_us), x.step < 0 ? 'between steps' : x.step, x.cause]),
      [true, true, true, false]).id = 'longest-table';
}

const streams = TS.section('Streams', 'Each stream\'s busy time in the analysed window.');
TS.table(streams, ['device', 'stream', 'intervals', 'busy ms', 'busy share'],
    g.streams.map(s => [s.device, s.stream, s.intervals, us(s.busy_us), pct(s.busy_share)]),
    [true, true, true, true, true]).id = 'stream-table';
