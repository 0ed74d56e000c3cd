// sdk/html/experiment.js: the page of a tuning experiment
// (experiment_page.cc): TS.data is the experiment.json.
const d = TS.data;
const spec = d.spec;
// The trial field of each objective (sdk/tuning/objectives.h).
const field = spec.objective === 'time_to_target' ? 'time_to_target_s' : spec.objective;
const unit = spec.objective === 'time_to_target' ? 's'
    : spec.objective === 'steady_samples_per_s' ? 'samples/s' : 'ms';
const verdict = TS.section('Verdict', d.hypothesis ? 'Hypothesis: ' + d.hypothesis : null);
verdict.id = 'experiment';
verdict.setAttribute('data-variants', String(d.variants.length));
verdict.appendChild(TS.el('p', '\u2192 ' + (d.verdict.reason ||
    (d.verdict.accepted !== null ? 'accepted ' + d.verdict.accepted : 'nothing accepted')),
    {class: 'verdict', id: 'verdict'}));
verdict.setAttribute('data-accepted', d.verdict.accepted === null ? '' : d.verdict.accepted);
if (!d.complete) {
  verdict.appendChild(TS.el('p', 'The experiment did not finish: these are the trials so far ' +
      '(trainscope experiment run ... --resume goes on).', {id: 'incomplete'}));
}
TS.table(verdict, ['field', 'value'], [
  ['objective', spec.objective + (spec.lower_is_better ? ' (lower is better)' : ' (higher is better)')],
  ['practical threshold', (100 * spec.threshold).toFixed(1) + '%'],
  ['interval level', (100 * spec.level).toFixed(0) + '%'],
  ['command', spec.command.join(' ')],
]).id = 'spec';

// Ratios and intervals are null where a median was infinite (failed
// trials count as never reaching the target): shown as such, drawn capped.
const f3 = v => v === null ? '\u221e' : v.toFixed(3);
const c = d.verdict.comparisons;
if (c.length) {
  const ratios = TS.section('Ratio to the baseline (' + d.variants[0].name + ')',
      'Each variant\'s median ' + spec.objective + ' over the baseline\'s, with its bootstrap ' +
      'interval; the grey band is the practical threshold: an interval wholly beyond it is a ' +
      'difference worth having.');
  ratios.id = 'ratios';
  // The baseline first, at 1, so that the threshold's lines span the chart.
  const all = [{variant: d.variants[0].name, ratio: 1, ci_low: 1, ci_high: 1, accepted: false}]
      .concat(c);
  const finite = all.flatMap(x => [x.ratio, x.ci_low, x.ci_high]).filter(v => v !== null);
  const cap = 1.2 * Math.max(1 + spec.threshold, ...finite);
  const capped = v => v === null ? cap : v;
  const line = (label, value) => ({type: 'line', label: label, data: all.map(() => value),
      borderColor: '#8c959f', borderDash: [4, 4], pointRadius: 0, borderWidth: 1, order: 1});
  TS.chart(ratios, {type: 'bar', data: {labels: all.map(x => x.variant), datasets: [
      {type: 'line', label: 'ratio of medians', data: all.map(x => capped(x.ratio)), showLine: false,
       pointRadius: 5, borderColor: '#24292f', backgroundColor: '#24292f', order: 0},
      {label: 'interval', data: all.map(x => [capped(x.ci_low), capped(x.ci_high)]), order: 2,
       minBarLength: 2,
       backgroundColor: all.map(x => x.accepted ? TS.palette[4] : TS.palette[0])},
      line('threshold', 1 - spec.threshold), line('', 1 + spec.threshold)]},
      options: {scales: {y: {title: {display: true, text: 'ratio to the baseline'}}}}},
      'chart-ratios');
  TS.table(ratios, ['variant', 'ratio', 'interval', 'p (Holm)', 'trials', 'failures', 'accepted',
                    'why'],
      c.map(x => [x.variant, f3(x.ratio), f3(x.ci_low) + ' \u2013 ' + f3(x.ci_high),
                  f3(x.p_adjusted), x.trials, x.failures, x.accepted ? 'yes' : 'no', x.reason]),
      [false, true, true, true, true, true, false, false]).id = 'comparisons';
}

const trials = TS.section('Trials', 'Each trial\'s ' + spec.objective + ' (' + unit +
    '), per variant; failed trials (counted as the worst value: never reaching the target, ' +
    'no throughput) are listed.');
trials.id = 'trials';
const points = [];
d.variants.forEach(v => v.trials.forEach(t => {
  if (!t.failed && t[field] !== undefined && t[field] !== null) points.push({x: v.name, y: t[field]});
}));
trials.setAttribute('data-trials', String(d.variants.reduce((n, v) => n + v.trials.length, 0)));
TS.chart(trials, {type: 'line', data: {labels: d.variants.map(v => v.name), datasets: [
    {label: spec.objective, data: points, showLine: false, pointRadius: 4,
     backgroundColor: TS.palette[0], borderColor: TS.palette[0]}]},
    options: {scales: {x: {offset: true}, y: {title: {display: true, text: unit}}}}},
    'chart-trials');
TS.table(trials, ['variant', 'args', 'trials', 'failed', 'failures'],
    d.variants.map(v => [v.name, (v.args || []).join(' '), v.trials.length,
                         v.trials.filter(t => t.failed).length,
                         [...new Set(v.trials.filter(t => t.failed).map(t => t.failure))].join('; ')]),
    [false, false, true, true, false]).id = 'variants';

if (d.preset && d.preset.variant) {
  const preset = TS.section('The configuration it justified',
      'What to run from now on, recorded with the experiment that justified it.');
  TS.table(preset, ['field', 'value'], [
    ['variant', d.preset.variant], ['changed', d.preset.changed ? 'yes' : 'no'],
    ['justified by', d.preset.justified_by], ['command', (d.preset.argv || []).join(' ')],
  ]).id = 'preset';
}
