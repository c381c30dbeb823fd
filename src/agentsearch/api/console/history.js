// History: the user's jobs, newest first; opening one replays its pipeline from the events route.

import { api } from './api.js';
import { badge, formatMs, formatTime, h, parseTime } from './dom.js';
import { JobView } from './jobview.js';

const PAGE = 25;

export async function renderHistory(main, _params, ctx) {
  const body = h('tbody');
  const more = h('button', { type: 'button', class: 'button-quiet', hidden: true }, 'Show older jobs');
  const filter = h('select', { id: 'history-status', 'aria-label': 'Status' },
    h('option', { value: '' }, 'Every status'),
    ['succeeded', 'failed', 'cancelled', 'running', 'queued'].map((s) => h('option', { value: s }, s)));
  const total = h('p', { class: 'muted', 'aria-live': 'polite' });
  let offset = 0;
  const collections = new Map((await api('/v1/collections', { signal: ctx.signal })).map((c) => [c.id, c.name]));

  async function load(reset) {
    if (reset) { offset = 0; body.replaceChildren(); }
    const status = filter.value ? `&status=${filter.value}` : '';
    const page = await api(`/v1/jobs?limit=${PAGE}&offset=${offset}${status}`, { signal: ctx.signal });
    for (const job of page.items) {
      const started = parseTime(job.created_at);
      const ended = parseTime(job.finished_at);
      body.append(h('tr', { dataset: { job: job.job_id } },
        h('td', { class: 'cell-query' }, h('a', { href: `#/jobs/${job.job_id}` }, job.query || '(empty query)')),
        h('td', { class: 'cell-collection' }, collections.get(job.collection_id) || h('span', { class: 'muted' }, 'deleted')),
        h('td', null, badge(job.status), job.cached ? h('span', { class: 'muted' }, ' cached') : null),
        h('td', { class: 'cell-time' }, h('time', { datetime: started ? started.toISOString() : '' }, formatTime(job.created_at))),
        h('td', { class: 'cell-num' }, started && ended ? formatMs(ended - started) : '')));
    }
    offset += page.items.length;
    total.textContent = page.total ? `${offset} of ${page.total} jobs` : 'No jobs yet: ask something in Search.';
    more.hidden = offset >= page.total;
  }

  more.addEventListener('click', () => load(false));
  filter.addEventListener('change', () => load(true));
  main.append(h('div', { class: 'view view-history' },
    h('div', { class: 'view-head' }, h('h1', { class: 'view-title' }, 'History'),
      h('div', { class: 'field field-inline' }, h('label', { for: 'history-status' }, 'Show'), filter)),
    h('div', { class: 'card table-card' },
      h('table', { class: 'table' },
        h('caption', { class: 'visually-hidden' }, 'Your jobs, newest first'),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Question'), h('th', { scope: 'col', class: 'cell-collection' }, 'Collection'),
          h('th', { scope: 'col' }, 'Status'),
          h('th', { scope: 'col', class: 'cell-time' }, 'Asked'), h('th', { scope: 'col', class: 'cell-num' }, 'Took'))),
        body)),
    total, more));
  await load(true);
}

export async function renderJob(main, [jobId], ctx) {
  const back = h('a', { href: '#/history', class: 'back-link' }, '← History');
  const job = new JobView(jobId);
  ctx.signal.addEventListener('abort', () => job.stop());
  main.append(h('div', { class: 'view view-job' }, back, h('h1', { class: 'view-title visually-hidden' }, 'Job'), job.el));
  await job.start();
}
