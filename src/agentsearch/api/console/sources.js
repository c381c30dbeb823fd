// A collection's Sources panel: each source (GET /v1/collections/{id}/sources) with its kind, where it reads, its
// schedule, its last run (status, documents new/changed/unchanged/removed/failed, the first errors) and its next;
// an editor adds one through a form made from its kind's config schema (GET /v1/source-kinds: credentials are
// password inputs, write-only, listed afterwards only as "set"), runs one now (POST .../runs, the row read again
// until the run ends), edits it (a form prefilled from the source, its credentials shown as set and sent only when
// a new one is typed; PATCH with only what changed), disables or enables it (PATCH) and removes it (DELETE: its
// documents go with it).

import { api } from './api.js';
import { schemaForm } from './schema_form.js';
import { badge, clear, formatTime, h, showFieldErrors, clearInvalid, toast, uid } from './dom.js';
import { may } from './roles.js';

const COUNTS = ['new', 'changed', 'unchanged', 'removed', 'failed'];
const UNDER_WAY = new Set(['queued', 'running']);
const POLL_MS = 500;

/** 'every 1 h', 'every 5 min', 'every 90 s'; 'only when asked' without a schedule. */
export function scheduleText(seconds) {
  if (!seconds) return 'only when asked';
  if (seconds % 86400 === 0) return `every ${seconds / 86400} d`;
  if (seconds % 3600 === 0) return `every ${seconds / 3600} h`;
  if (seconds % 60 === 0) return `every ${seconds / 60} min`;
  return `every ${seconds} s`;
}

/** Where a source reads, in a line: its URL, its mailbox or its bucket; each credential it holds named "set". */
export function whereText(source) {
  const c = source.config || {};
  let where = c.url || '';
  if (!where && c.host) where = `${c.username ? `${c.username}@` : ''}${c.host}:${c.port ?? ''} ${(c.folders || []).join(', ')}`;
  if (!where && c.bucket) where = `s3://${c.bucket}/${c.prefix || ''}`;
  return where.trim();
}

/** '3 new · 0 changed · 1 unchanged · 0 removed · 0 failed' */
export function countsText(run) {
  const d = (run && run.documents) || {};
  return COUNTS.map((name) => `${d[name] ?? 0} ${name}`).join(' · ');
}

function lastRunCell(run) {
  if (!run) return h('td', { class: 'source-run' }, h('span', { class: 'muted' }, 'not run yet'));
  const errors = (run.errors || []).slice(0, 3);
  return h('td', { class: 'source-run', dataset: { runStatus: run.status } },
    badge(run.status), ' ', h('span', { class: 'muted' }, formatTime(run.finished_at || run.started_at || run.created_at)),
    UNDER_WAY.has(run.status) ? null : h('p', { class: 'hint source-counts' }, countsText(run)),
    errors.length ? h('ul', { class: 'field-error source-errors', 'aria-label': 'First errors of the run' },
      errors.map((e) => h('li', null, e))) : null);
}

export async function renderSources(collection, ctx) {
  const base = `/v1/collections/${collection.id}/sources`;
  const canManage = may(collection, 'manageSources');
  const body = h('tbody');
  const note = h('p', { class: 'muted', 'aria-live': 'polite' });
  const rows = new Map();

  function row(source) {
    const credentials = Object.entries(source.config || {}).filter(([, v]) => v === 'set').map(([k]) => k);
    const buttons = canManage ? h('td', { class: 'cell-actions' },
      h('button', { type: 'button', class: 'button-quiet', onclick: () => runNow(source),
        'aria-label': `Run source ${whereText(source)} now` }, 'Run now'),
      kinds ? h('button', { type: 'button', class: 'button-quiet', onclick: () => edit(source),
        'aria-label': `Edit source ${whereText(source)}` }, 'Edit') : null,
      h('button', { type: 'button', class: 'button-quiet', onclick: () => toggle(source),
        'aria-label': `${source.enabled ? 'Disable' : 'Enable'} source ${whereText(source)}` },
      source.enabled ? 'Disable' : 'Enable'),
      h('button', { type: 'button', class: 'button-quiet button-danger', onclick: () => remove(source),
        'aria-label': `Remove source ${whereText(source)}` }, 'Remove')) : null;
    const next = source.enabled && source.next_run_at ? formatTime(source.next_run_at)
      : (source.enabled ? '–' : 'disabled');
    return h('tr', { dataset: { source: source.id, kind: source.kind, enabled: String(source.enabled) } },
      h('td', null, h('strong', null, source.kind)),
      h('td', { class: 'cell-title' }, h('span', { class: 'source-where' }, whereText(source)),
        credentials.length ? h('p', { class: 'hint' }, credentials.map((k) => `${k}: set`).join(' · ')) : null,
        h('p', { class: 'hint' }, `${source.items} item${source.items === 1 ? '' : 's'}`)),
      h('td', null, scheduleText(source.schedule_s)),
      lastRunCell(source.last_run),
      h('td', { class: 'source-next' }, next),
      buttons);
  }

  function show(source) {
    const fresh = row(source);
    const old = rows.get(source.id);
    if (old) old.replaceWith(fresh); else body.append(fresh);
    rows.set(source.id, fresh);
  }

  async function load() {
    const { items } = await api(base, { signal: ctx.signal });
    clear(body);
    rows.clear();
    for (const source of items) show(source);
    note.textContent = items.length ? `${items.length} source${items.length === 1 ? '' : 's'}`
      : `No sources yet${canManage ? ': add a web site, a feed, a mailbox, a drive or a bucket below' : ''}.`;
    for (const source of items) if (source.last_run && UNDER_WAY.has(source.last_run.status)) follow(source.id).catch(() => {});
  }

  // The source read again until its last run has ended, so its counts appear without reloading the page.
  async function follow(sourceId) {
    for (;;) {
      await new Promise((resolve) => { setTimeout(resolve, POLL_MS); });
      if (ctx.signal && ctx.signal.aborted) return;
      const source = await api(`${base}/${sourceId}`, { signal: ctx.signal });
      show(source);
      if (!source.last_run || !UNDER_WAY.has(source.last_run.status)) return;
    }
  }

  async function runNow(source) {
    try {
      await api(`${base}/${source.id}/runs`, { method: 'POST' });
      toast('Run queued');
      show(await api(`${base}/${source.id}`, { signal: ctx.signal }));
      await follow(source.id);
    } catch (exc) {
      if (exc.name !== 'AbortError') toast(`Could not run: ${exc.message}`, 'error');
    }
  }

  async function toggle(source) {
    try {
      await api(`${base}/${source.id}`, { method: 'PATCH', json: { enabled: !source.enabled } });
      show(await api(`${base}/${source.id}`, { signal: ctx.signal }));  // with its last run, which PATCH leaves out
      toast(source.enabled ? 'Source disabled' : 'Source enabled');
    } catch (exc) {
      toast(`Could not change it: ${exc.message}`, 'error');
    }
  }

  function edit(source) {
    const kind = kinds.find((k) => k.kind === source.kind);
    if (!kind) { toast(`The kind ${source.kind} is not offered here`, 'error'); return; }
    clear(editBox).append(editForm(base, kind, source, async (saved) => {
      clear(editBox);
      show(await api(`${base}/${saved.id}`, { signal: ctx.signal }));  // with its last run, which PATCH leaves out
      toast('Source saved');
    }, () => clear(editBox)));
    editBox.querySelector('input, select, textarea')?.focus();
  }

  async function remove(source) {
    if (!window.confirm(`Remove the ${source.kind} source ${whereText(source)} and the documents it brought?`)) return;
    try {
      const gone = await api(`${base}/${source.id}`, { method: 'DELETE' });
      toast(`Source removed with ${gone.removed} document${gone.removed === 1 ? '' : 's'}`);
      await load();
    } catch (exc) {
      toast(`Could not remove: ${exc.message}`, 'error');
    }
  }

  let kinds = null;
  let kindsError = null;
  if (canManage) {
    try {
      ({ items: kinds } = await api('/v1/source-kinds', { signal: ctx.signal }));
    } catch (exc) {
      kindsError = h('p', { class: 'field-error' }, `Could not load the kinds of source: ${exc.message}`);
    }
  }
  const editBox = h('div', { class: 'source-edit' });
  const card = h('div', { class: 'card table-card sources' },
    h('div', { class: 'card-head' }, h('h3', { class: 'card-subtitle' }, 'Sources')), note,
    h('table', { class: 'table' }, h('caption', { class: 'visually-hidden' }, `Sources of ${collection.name}`),
      h('thead', null, h('tr', null, ['Kind', 'Reads', 'Schedule', 'Last run', 'Next run'].map(
        (label) => h('th', { scope: 'col' }, label)),
      canManage ? h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')) : null)),
      body),
    editBox,
    kinds ? addForm(base, kinds, load) : kindsError);
  load().catch((exc) => { if (exc.name !== 'AbortError') note.textContent = `Could not load the sources: ${exc.message}`; });
  return card;
}

/** The schedule's field ({el, error, value()}): seconds between runs, empty for only when asked. */
function scheduleField(seconds) {
  const id = uid('source-schedule');
  const error = h('p', { class: 'field-error', id: `${id}-error`, hidden: true, dataset: { for: id } });
  const input = h('input', { id, name: 'schedule_s', type: 'number', inputmode: 'numeric', step: '1', min: '1',
    value: seconds ?? '', 'aria-describedby': error.id });
  const el = h('div', { class: 'field' }, h('label', { for: id }, 'Schedule (seconds between runs) ',
    h('span', { class: 'muted' }, '(optional: empty runs it only when asked)')), input, error);
  return { el, error, value: () => (input.value === '' ? null : Number(input.value)) };
}

/** A source's form sent: its 422 shown under the fields at fault, else ``done`` with the answer. */
function sendForm(form, generated, schedule, extraErrors, formError, send, done) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearInvalid(form);
    const { config, problems } = generated().read();
    const errors = { ...generated().errors, 'body.schedule_s': schedule.error, ...extraErrors };
    if (problems.length) { showFieldErrors({ detail: problems }, errors, formError); return; }
    try {
      const answer = await send(config);
      showFieldErrors(null, errors, formError);
      await done(answer);
    } catch (exc) {
      showFieldErrors(exc, errors, formError);
    }
  });
}

/** The form of a source's settings as they are: only what is changed is sent (PATCH merges it over the rest; a
 * credential left empty is kept). */
function editForm(base, kind, source, onSaved, onCancel) {
  const generated = schemaForm(kind.schema, 'This kind has nothing to configure.', source.config || {});
  const schedule = scheduleField(source.schedule_s);
  const formError = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const form = h('form', { class: 'stack source-edit-form', novalidate: true, 'aria-label': `Edit the ${source.kind} source`,
    dataset: { source: source.id } },
  h('h4', { class: 'card-subtitle' }, `Edit the ${source.kind} source`),
  generated.el, schedule.el, formError,
  h('div', { class: 'form-buttons' }, h('button', { type: 'submit', class: 'button-primary' }, 'Save'),
    h('button', { type: 'button', class: 'button-quiet', onclick: onCancel }, 'Cancel')));
  sendForm(form, () => generated, schedule, {}, formError, (config) => {
    const json = {};
    if (Object.keys(config).length) json.config = config;
    if (schedule.value() !== (source.schedule_s ?? null)) json.schedule_s = schedule.value();
    return api(`${base}/${source.id}`, { method: 'PATCH', json });
  }, onSaved);
  return form;
}

/** The form of a new source: its kind, the kind's config (a form from its schema), its schedule and whether it runs. */
function addForm(base, kinds, onAdded) {
  const kindId = uid('source-kind');
  const enabledId = uid('source-enabled');
  const schedule = scheduleField(null);
  const formError = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const kindError = h('p', { class: 'field-error', id: `${kindId}-error`, hidden: true, dataset: { for: kindId } });
  const select = h('select', { id: kindId, name: 'kind', 'aria-describedby': kindError.id },
    kinds.map((k) => h('option', { value: k.kind, selected: k.kind === 'web' }, k.kind)));
  const configBox = h('div', { class: 'config-fields' });
  let generated = null;
  function showKind() {
    const kind = kinds.find((k) => k.kind === select.value);
    generated = schemaForm(kind.schema, 'This kind has nothing to configure.');
    clear(configBox).append(generated.el);
  }
  select.addEventListener('change', showKind);
  showKind();
  const form = h('form', { class: 'stack source-form', novalidate: true, 'aria-label': 'Add a source' },
    h('h4', { class: 'card-subtitle' }, 'Add a source'),
    h('div', { class: 'field' }, h('label', { for: kindId }, 'Kind'), select, kindError),
    configBox,
    schedule.el,
    h('div', { class: 'field field-check' }, h('input', { id: enabledId, name: 'enabled', type: 'checkbox', checked: true }),
      h('label', { for: enabledId }, 'Enabled')),
    formError,
    h('button', { type: 'submit', class: 'button-primary' }, 'Add source'));
  sendForm(form, () => generated, schedule, { 'body.kind': kindError }, formError, (config) => api(base, {
    method: 'POST', json: { kind: select.value, config, enabled: form.elements.enabled.checked, schedule_s: schedule.value() },
  }), async (added) => {
    toast(`${added.kind} source added`);
    showKind();
    form.elements.schedule_s.value = '';
    await onAdded();
  });
  return form;
}
