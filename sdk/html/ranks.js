// sdk/html/ranks.js: the page of a distributed run's ranks (ranks_page.cc):
// TS.data is `trainscope ranks --format=json`'s report and each rank's step
// times.
const d = TS.data;
const r = d.report;
const overview = TS.section('Ranks', r.ranks_reporting + ' of ' + r.world_size + ' ranks reported; ' +
    r.common_steps + ' steps on every rank.');
overview.id = 'ranks';
overview.setAttribute('data-ranks', String(r.ranks.length));
const ms = v => TS.ms(v);
overview.appendChild(TS.el('p', r.straggler
    ? '\u2192 rank ' + r.slowest_rank + ' is the straggler: ' + ms(r.lag_ms) + ' ms a step behind ' +
      'the others, who waited ' + r.wait_caused_s.toFixed(2) + ' s for it (' +
      (100 * r.wait_share).toFixed(0) + '% of their step time). Look at that rank\'s page: its ' +
      'input, its host, its GPU (docs/distributed.md).'
    : '\u2192 no straggler' + (r.slowest_rank !== null && r.slowest_rank >= 0
        ? ': the slowest, rank ' + r.slowest_rank + ', is ' + ms(Math.abs(r.lag_ms)) +
          ' ms a step behind, under 5% of a step'
        : ' to name: fewer than two ranks with common steps'),
    {class: 'verdict', id: 'verdict'}));
if (r.missing_ranks.length || r.errors.length) {
  overview.appendChild(TS.el('p', 'missing ranks: ' + (r.missing_ranks.join(', ') || 'none') +
      (r.errors.length ? '; errors: ' + r.errors.join(' | ') : ''), {id: 'missing'}));
}
const labels = r.ranks.map(x => 'rank ' + x.rank);
TS.chart(overview, {type: 'bar', data: {labels: labels, datasets: [
    {label: 'compute ms (median a step)', data: r.ranks.map(x => x.median_compute_ms),
     backgroundColor: TS.palette[0], stack: 's'},
    {label: 'sync ms (median a step)', data: r.ranks.map(x => x.median_sync_ms),
     backgroundColor: TS.palette[1], stack: 's'}]},
    options: {scales: {x: {stacked: true}, y: {stacked: true, title: {display: true, text: 'ms'}}}}},
    'chart-ranks');
TS.table(overview, ['rank', 'steps', 'step ms', 'compute ms', 'sync ms', 'sync total s', 'slowest'],
    r.ranks.map(x => [x.rank, x.steps, ms(x.median_step_ms), ms(x.median_compute_ms),
                      ms(x.median_sync_ms), x.total_sync_s.toFixed(3), x.times_slowest]),
    [true, true, true, true, true, true, true]).id = 'rank-table';

if (d.series.length) {
  const most = Math.max(...d.series.map(s => s.per_point));
  const over = TS.section('Step time over the run, per rank', most > 1
      ? 'Each point the mean of ' + most + ' consecutive steps at most.' : 'A point a step.');
  TS.chart(over, {type: 'line', data: {datasets: d.series.map((s, k) => ({
      label: 'rank ' + s.rank, data: s.steps.map((x, i) => ({x: x, y: s.mean_ms[i]})),
      borderColor: TS.palette[k % TS.palette.length], pointRadius: 0, borderWidth: 1}))},
      options: {scales: {x: {type: 'linear', title: {display: true, text: 'step'}},
                         y: {title: {display: true, text: 'step ms'}}}}}, 'chart-rank-steps');
}
