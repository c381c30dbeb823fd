// Collections: list and create them; upload files (PDF, scans, Office files, CSV, HTML, Markdown, text, e-mail, JSON
// Lines) with the indexing's progress (documents and chunks done, the rate, the time left: ingestion.js) and the
// files refused with their reasons; read and delete a collection's documents, each with its format, the pages a
// worker has parsed so far, what the reading noted and why one failed. Upload and delete are offered only to a
// role that may take them (roles.js); the API's 403 stays the rule. Its Sources panel is sources.js, its Quality
// panel quality.js.

import { api } from './api.js';
import { badge, clear, formatTime, h, showFieldErrors, clearInvalid, toast, uid } from './dom.js';
import { ingestionText } from './ingestion.js';
import { renderQuality } from './quality.js';
import { may } from './roles.js';
import { renderSources } from './sources.js';

export async function renderCollections(main, [collectionId], ctx) {
  // The teams the caller may add a collection to (a key that may not read teams offers none).
  const [collections, teams] = await Promise.all([api('/v1/collections', { signal: ctx.signal }),
    api('/v1/teams', { signal: ctx.signal }).catch(() => [])]);
  const selected = collections.find((c) => c.id === collectionId) || (collectionId ? null : collections[0]);
  const countLabels = new Map();
  const list = h('ul', { class: 'collection-list', 'aria-label': 'Your collections' },
    collections.map((c) => {
      const label = h('span', { class: 'muted' }, countsText(c));
      countLabels.set(c.id, label);
      return h('li', null, h('a', {
        href: `#/collections/${c.id}`, class: 'collection-item', 'aria-current': selected && selected.id === c.id ? 'true' : null,
      }, h('span', { class: 'collection-name' }, c.team ? `${c.team}/${c.name}` : c.name), label));
    }));
  if (!collections.length) list.append(h('li', { class: 'muted' }, 'No collections yet.'));
  const aside = h('aside', { class: 'side card', 'aria-label': 'Collections' },
    h('h2', { class: 'card-title' }, 'Collections'), list, createForm(teams.filter((t) => t.role === 'admin')));
  const detail = h('section', { class: 'detail', 'aria-label': 'Collection' });
  main.append(h('div', { class: 'view view-collections' }, h('h1', { class: 'view-title' }, 'Collections'),
    h('div', { class: 'split' }, aside, detail)));
  if (selected) await renderDetail(detail, selected, ctx, (c) => { countLabels.get(c.id).textContent = countsText(c); });
  else if (collectionId) detail.append(h('p', { class: 'notice notice-error' }, 'That collection does not exist (or is not yours).'));
  else detail.append(h('div', { class: 'card empty-state' }, h('p', null, 'Create a collection, then upload documents into it.')));
}

// What the upload's file picker offers: every format the workers parse (the API tells a file's format from its
// bytes, so the extension only guides the picker).
const UPLOAD_ACCEPT = ['.pdf', '.png', '.jpg', '.jpeg', '.tif', '.tiff', '.docx', '.pptx', '.xlsx', '.csv', '.tsv',
  '.html', '.htm', '.md', '.markdown', '.txt', '.eml', '.jsonl', '.ndjson'].join(',');
// A document's `metadata.format` as its reader calls it ("office": an Office file not yet told Word, PowerPoint or
// Excel, which its parsing does).
const FORMATS = {
  pdf: 'PDF', image: 'image', office: 'Office file', docx: 'Word', pptx: 'PowerPoint', xlsx: 'Excel', csv: 'CSV',
  html: 'HTML', markdown: 'Markdown', text: 'text', eml: 'e-mail', jsonl: 'JSON Lines',
};

/** How far a worker has read a pending document: 'parsing, 12 of 200 pages' (null for a format without pages). */
export function parsingText(doc) {
  if (doc.status !== 'pending' || !Number.isInteger(doc.pages_total)) return null;
  const done = Number.isInteger(doc.pages_done) ? doc.pages_done : 0;
  return `parsing, ${done} of ${doc.pages_total} page${doc.pages_total === 1 ? '' : 's'}`;
}

/** A document's row: its title with its format, what the reading noted and why it failed; its status with the
 * pages parsed so far while a worker reads it; its Delete button when `remove` is given (the caller's role may). */
function documentRow(doc, remove) {
  const format = doc.metadata && typeof doc.metadata.format === 'string' ? doc.metadata.format : null;
  const notes = Array.isArray(doc.notes) ? doc.notes.filter((note) => typeof note === 'string' && note) : [];
  const parsing = parsingText(doc);
  return h('tr', { dataset: { document: doc.id, status: doc.status } },
    h('td', { class: 'cell-title' }, h('span', { class: 'doc-title' }, doc.title || '(untitled)'),
      format ? h('span', { class: 'muted doc-format', dataset: { format } }, ` · ${FORMATS[format] || format}`) : null,
      doc.error ? h('p', { class: 'field-error doc-error' }, doc.error) : null,
      notes.length ? h('ul', { class: 'hint doc-notes', 'aria-label': 'What the reading noted' },
        notes.map((note) => h('li', null, note))) : null),
    h('td', { class: 'cell-id' }, h('code', null, doc.id)),
    h('td', null, badge(doc.status),
      parsing ? h('p', { class: 'hint doc-progress' }, parsing,
        h('progress', { class: 'progress', max: String(doc.pages_total || 1), value: String(doc.pages_done || 0),
          'aria-label': `Pages of ${doc.title || doc.id} parsed` })) : null),
    remove ? h('td', { class: 'cell-actions' }, h('button', {
      type: 'button', class: 'button-quiet button-danger', 'aria-label': `Delete document ${doc.title || doc.id}`,
      onclick: () => remove(doc),
    }, 'Delete')) : null);
}

/** The files an upload refused, each with the API's reason: its answer's `rejected`, or a 422 refusing every file
 * (its `detail` names each by its index in the request). */
function refusedFiles(answerOrError, files) {
  if (Array.isArray(answerOrError.rejected)) return answerOrError.rejected;
  const detail = Array.isArray(answerOrError.detail) ? answerOrError.detail : [];
  return detail.filter((d) => d.loc && d.loc[1] === 'files' && Number.isInteger(d.loc[2])).map((d) => {
    const file = files[d.loc[2]] ? files[d.loc[2]].name : '';
    const msg = String(d.msg || '');
    return { file, error: file && msg.startsWith(`${file}: `) ? msg.slice(file.length + 2) : msg };
  });
}

function countsText(c) {
  const d = c.documents;
  return `${d.indexed} indexed${d.pending ? ` · ${d.pending} pending` : ''}${d.failed ? ` · ${d.failed} failed` : ''}`;
}

function createForm(teams) {
  const name = uid('name');
  const team = uid('team');
  const description = uid('description');
  const errors = {
    'body.name': h('p', { class: 'field-error', hidden: true, id: uid('err'), dataset: { for: name } }),
    'body.description': h('p', { class: 'field-error', hidden: true, id: uid('err'), dataset: { for: description } }),
  };
  const formError = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': `${name}-title` },
    h('h3', { class: 'card-subtitle', id: `${name}-title` }, 'New collection'),
    h('div', { class: 'field' }, h('label', { for: name }, 'Name'),
      h('input', { id: name, name: 'name', type: 'text', required: true, autocomplete: 'off', 'aria-describedby': errors['body.name'].id }),
      errors['body.name']),
    h('div', { class: 'field' }, h('label', { for: description }, 'Description ', h('span', { class: 'muted' }, '(optional)')),
      h('input', { id: description, name: 'description', type: 'text', autocomplete: 'off', 'aria-describedby': errors['body.description'].id }),
      errors['body.description']),
    teams.length ? h('div', { class: 'field' }, h('label', { for: team }, 'Team'),
      h('select', { id: team, name: 'team_id' }, h('option', { value: '' }, 'Personal (only you)'),
        teams.map((t) => h('option', { value: t.id }, t.name)))) : null,
    formError,
    h('button', { type: 'submit', class: 'button-primary' }, 'Create collection'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearInvalid(form);
    const data = new FormData(form);
    try {
      const json = { name: data.get('name').trim(), description: data.get('description').trim() || null };
      if (data.get('team_id')) json.team_id = data.get('team_id');
      const created = await api('/v1/collections', { method: 'POST', json });
      toast(`Collection ${created.name} created`);
      location.hash = `#/collections/${created.id}`;
    } catch (exc) {
      showFieldErrors(exc, errors, formError);
    }
  });
  return form;
}

async function renderDetail(detail, collection, ctx, onCounts) {
  const canUpload = may(collection, 'upload');
  const canDelete = may(collection, 'deleteDocument');
  const counts = h('p', { class: 'muted counts', 'aria-live': 'polite' });
  const fileInput = h('input', { id: 'upload-files', type: 'file', multiple: true, accept: UPLOAD_ACCEPT,
    'aria-describedby': 'upload-hint upload-error upload-rejected' });
  const uploadButton = h('button', { type: 'submit', class: 'button-primary' }, 'Upload');
  const uploadError = h('p', { class: 'field-error', id: 'upload-error', role: 'alert', hidden: true });
  const rejectedEl = h('div', { class: 'upload-rejected', id: 'upload-rejected', role: 'status', hidden: true });
  const progress = h('progress', { class: 'progress', max: '1', value: '0', 'aria-label': 'Indexing progress', hidden: true });
  const progressText = h('p', { class: 'muted progress-text', 'aria-live': 'polite' });
  const docsBody = h('tbody');
  const docsNote = h('p', { class: 'muted' });

  function showCounts(c) {
    const d = c.documents;
    counts.textContent = `${d.indexed} indexed · ${d.pending} pending · ${d.failed} failed · created ${formatTime(c.created_at)}`;
    if (onCounts) onCounts(c);
  }
  showCounts(collection);

  async function loadDocuments() {
    const page = await api(`/v1/collections/${collection.id}/documents?limit=500`, { signal: ctx.signal });
    clear(docsBody);
    for (const doc of page.items) docsBody.append(documentRow(doc, canDelete ? remove : null));
    docsNote.textContent = page.total ? `${page.total} document${page.total === 1 ? '' : 's'}${page.total > page.items.length ? ` (first ${page.items.length} shown)` : ''}`
      : `No documents yet${canUpload ? ': upload some above' : ''}.`;
  }

  async function remove(doc) {
    if (!window.confirm(`Delete “${doc.title || doc.id}” from ${collection.name}?`)) return;
    try {
      await api(`/v1/collections/${collection.id}/documents/${encodeURIComponent(doc.id)}`, { method: 'DELETE' });
      toast('Document deleted');
      showCounts(await api(`/v1/collections/${collection.id}`));
      await loadDocuments();
    } catch (exc) {
      toast(`Could not delete: ${exc.message}`, 'error');
    }
  }

  function showRejected(refused) {
    clear(rejectedEl).hidden = !refused.length;
    if (!refused.length) return;
    const count = refused.length === 1 ? '1 file was' : `${refused.length} files were`;
    rejectedEl.append(h('p', { class: 'field-error' }, `${count} not taken:`),
      h('ul', { class: 'hint' }, refused.map((r) => h('li', { dataset: { file: r.file } },
        h('strong', null, r.file || '(unnamed file)'), `: ${r.error}`))));
  }

  async function watchIndexing(accepted) {
    progress.hidden = false;
    // The listing is read again while documents are pending, at most once a second: the pages each worker parsed.
    let listedAt = performance.now();
    for (;;) {
      const c = await api(`/v1/collections/${collection.id}`, { signal: ctx.signal });
      showCounts(c);
      const pending = c.documents.pending;
      // The collection's current ingestion (what other uploads sent meanwhile included), else this upload alone.
      const ingestion = c.ingestion && c.ingestion.documents_total ? c.ingestion : null;
      const total = ingestion ? ingestion.documents_total : accepted;
      const done = ingestion ? ingestion.documents_done : Math.max(0, accepted - pending);
      progress.max = total;
      progress.value = done;
      progressText.dataset.pending = String(pending);
      if (!pending) {
        await loadDocuments();
        const failed = `${c.documents.failed} failed in the collection`;
        progressText.textContent = ingestionText(ingestion)
          || `Indexed: ${accepted} document${accepted === 1 ? '' : 's'} (${failed}).`;
        return;
      }
      progressText.textContent = ingestionText(ingestion) || `Indexing: ${done} of ${accepted} documents done…`;
      if (performance.now() - listedAt > 1000) { await loadDocuments(); listedAt = performance.now(); }
      await new Promise((resolve) => { setTimeout(resolve, 400); });
    }
  }

  const uploadForm = h('form', { class: 'upload', novalidate: true, 'aria-label': 'Upload files' },
    h('label', { for: 'upload-files' }, 'Files'),
    h('div', { class: 'upload-row' }, fileInput, uploadButton),
    h('p', { class: 'hint', id: 'upload-hint' },
      'PDF, scans and images, Word, PowerPoint, Excel, CSV, HTML, Markdown, text and e-mail files (one document '
      + 'each, read by a worker), or JSON Lines (one document per line: id, title, text, metadata; a file with a bad '
      + 'line is refused whole).'),
    uploadError, rejectedEl, progress, progressText);
  uploadForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    uploadError.hidden = true;
    showRejected([]);
    fileInput.removeAttribute('aria-invalid');
    if (!fileInput.files.length) { uploadError.textContent = 'Choose one or more files.'; uploadError.hidden = false; fileInput.focus(); return; }
    const form = new FormData();
    const files = [...fileInput.files];
    for (const file of files) form.append('files', file, file.name);
    uploadButton.disabled = true;
    progressText.textContent = 'Uploading…';
    try {
      const accepted = await api(`/v1/collections/${collection.id}/files`, { method: 'POST', form });
      fileInput.value = '';
      showRejected(refusedFiles(accepted, files));
      toast(`${accepted.accepted} document${accepted.accepted === 1 ? '' : 's'} accepted`);
      await loadDocuments();
      await watchIndexing(accepted.accepted);
    } catch (exc) {
      if (exc.name === 'AbortError') return;
      progressText.textContent = '';
      const refused = exc.status === 422 ? refusedFiles(exc, files) : [];
      showRejected(refused);
      uploadError.textContent = refused.length ? 'No file was taken.' : exc.message;
      uploadError.hidden = false;
      fileInput.setAttribute('aria-invalid', 'true');
    } finally {
      uploadButton.disabled = false;
    }
  });

  // A member below the role reads the documents; the page says who may change them instead of offering it.
  const readOnly = canUpload ? null : h('p', { class: 'notice role-note' },
    `Your role in team ${collection.team} is ${collection.role}: an editor uploads and deletes documents.`);
  detail.append(
    h('div', { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title' }, collection.name),
        h('a', { href: `#/agents/${collection.id}`, class: 'button-quiet' }, 'Agents of this collection')),
      collection.description ? h('p', null, collection.description) : null,
      counts, canUpload ? uploadForm : readOnly),
    h('div', { class: 'card table-card' },
      h('h3', { class: 'card-subtitle' }, 'Documents'), docsNote,
      h('table', { class: 'table' }, h('caption', { class: 'visually-hidden' }, `Documents of ${collection.name}`),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Id'),
          h('th', { scope: 'col' }, 'Status'),
          canDelete ? h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')) : null)),
        docsBody)),
    await renderSources(collection, ctx),
    await renderQuality(collection, ctx));
  await loadDocuments();
  if (collection.documents.pending) watchIndexing(collection.documents.pending + collection.documents.indexed + collection.documents.failed).catch(() => {});
}
