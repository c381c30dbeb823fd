// A banner over an answer whose cited documents changed or were deleted since it was written (`stale` of
// GET /v1/jobs/{id}: docs/answers.md), with "Ask again": the same question searched anew (not from the cache),
// opened as a job of its own. The banner names the documents and how, never what they say now.

import { api } from './api.js';
import { h, toast } from './dom.js';

const HOW = { changed: 'changed', deleted: 'deleted' };

/** The banner for a finished job, or null when none of its cited documents changed. */
export function staleBanner(job) {
  const stale = job && job.stale;
  if (!stale || !Object.keys(stale).length) return null;
  const named = Object.entries(stale).map(([id, how]) => `${id} (${HOW[how] || how})`).join(', ');
  const again = h('button', { type: 'button', class: 'button-quiet' }, 'Ask again');
  again.addEventListener('click', async () => {
    again.disabled = true;
    try {
      const accepted = await api('/v1/search', { method: 'POST',
        json: { collection_id: job.collection_id, query: job.query, use_cache: false } });
      window.location.hash = `#/jobs/${accepted.job_id}`;
    } catch (exc) {
      toast(`Could not ask again: ${exc.message}`, 'error');
      again.disabled = false;
    }
  });
  return h('div', { class: 'notice notice-stale', role: 'status', dataset: { stale: Object.keys(stale).join(' ') } },
    h('span', null, `Out of date: documents this answer cites have changed since it was written: ${named}. `), again);
}
