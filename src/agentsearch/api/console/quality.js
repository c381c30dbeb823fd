// A collection's Quality panel: the runs measured on its question set (GET /v1/collections/{id}/eval-runs, oldest
// first) as a chart of nDCG@10 and hit@5 over time and a table of every figure; an editor runs the set again
// (POST .../eval-runs). Staged changes show their two sides (kinds 'current' and 'staged') beside the plain runs.

import { api } from './api.js';
import { clear, formatTime, h, toast } from './dom.js';
import { may } from './roles.js';

const SVG = 'http://www.w3.org/2000/svg';
const FIGURES = [['hit@5', 'hit@5'], ['ndcg@10', 'nDCG@10'], ['gold_span_rate', 'gold span'],
  ['supported_rate', 'supported'], ['fallback_rate', 'fallback'], ['latency_p50_ms', 'p50 ms']];
const LINES = [['ndcg@10', '#2457d6'], ['hit@5', '#1a8a5a']];

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  return el;
}

/** A line per figure of LINES over the runs (0 to 1 high), newest on the right; null when fewer than two runs. */
export function chart(runs, width = 480, height = 140) {
  if (runs.length < 2) return null;
  const box = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img',
    'aria-label': `nDCG@10 and hit@5 of the last ${runs.length} runs` });
  const x = (i) => 10 + (i * (width - 20)) / (runs.length - 1);
  const y = (v) => height - 10 - v * (height - 20);
  box.append(svg('line', { x1: 10, y1: y(0), x2: width - 10, y2: y(0), stroke: '#ccd' }));
  for (const [name, colour] of LINES) {
    const points = runs.map((r, i) => [x(i), r.figures[name]]).filter(([, v]) => typeof v === 'number');
    box.append(svg('polyline', { points: points.map(([px, v]) => `${px},${y(v)}`).join(' '), fill: 'none',
      stroke: colour, 'stroke-width': 2 }));
  }
  return box;
}

function cell(value) {
  return h('td', null, value === null || value === undefined ? '–' : String(value));
}

export async function renderQuality(collection, ctx) {
  const body = h('tbody');
  const chartBox = h('div', { class: 'quality-chart' });
  const note = h('p', { class: 'muted', 'aria-live': 'polite' });
  async function load() {
    const { runs } = await api(`/v1/collections/${collection.id}/eval-runs?limit=50`, { signal: ctx.signal });
    clear(body);
    for (const run of [...runs].reverse()) {
      body.append(h('tr', null, h('td', null, formatTime(run.created_at)), h('td', null, `${run.kind} (${run.status})`),
        FIGURES.map(([name]) => cell(run.figures[name])), cell(run.questions)));
    }
    clear(chartBox).append(chart(runs.filter((r) => r.kind === 'run')) || '');
    note.textContent = runs.length ? `${runs.length} runs on the question set; the chart shows nDCG@10 (blue) and hit@5 (green).`
      : 'No run yet: make a question set (agentsearch eval generate) and run it.';
  }
  const button = h('button', { type: 'button', class: 'button-quiet' }, 'Run the question set');
  button.addEventListener('click', async () => {
    button.disabled = true;
    note.textContent = 'Running the question set…';
    try {
      await api(`/v1/collections/${collection.id}/eval-runs`, { method: 'POST' });
      await load();
    } catch (exc) {
      toast(`Could not run: ${exc.message}`, 'error');
    } finally {
      button.disabled = false;
    }
  });
  const card = h('div', { class: 'card table-card quality' },
    h('div', { class: 'card-head' }, h('h3', { class: 'card-subtitle' }, 'Quality'),
      may(collection, 'runQuality') ? button : null),
    note, chartBox,
    h('table', { class: 'table' }, h('caption', { class: 'visually-hidden' }, `Quality runs of ${collection.name}`),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'When'), h('th', { scope: 'col' }, 'Run'),
        FIGURES.map(([, label]) => h('th', { scope: 'col' }, label)), h('th', { scope: 'col' }, 'Questions'))),
      body));
  load().catch((exc) => { if (exc.name !== 'AbortError') note.textContent = `Could not load the runs: ${exc.message}`; });
  return card;
}

/** A staged change's two sets of figures side by side (the `gate` of a 200, the `detail` of a 409), each fall marked. */
export function comparison(gate) {
  const fell = new Set((gate.falls || []).map((f) => f.figure));
  const { current = {}, staged = {} } = gate.figures || {};
  return h('table', { class: 'table quality-comparison' },
    h('caption', null, `${gate.verdict === 'applied' ? 'Applied' : 'Not applied'}: ${gate.reason}`),
    h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Figure'), h('th', { scope: 'col' }, 'Now'),
      h('th', { scope: 'col' }, 'With the change'))),
    h('tbody', null, FIGURES.map(([name, label]) => h('tr', { class: fell.has(name) ? 'quality-fell' : null },
      h('th', { scope: 'row' }, label), cell(current[name]), cell(staged[name])))));
}
