// Collections: list and create them; upload files (JSON Lines, text, Markdown, PDF) with the indexing's progress;
// read and delete a collection's documents.

import { api } from './api.js';
import { badge, clear, formatTime, h, showFieldErrors, clearInvalid, toast, uid } from './dom.js';

export async function renderCollections(main, [collectionId], ctx) {
  const collections = await api('/v1/collections', { signal: ctx.signal });
  const selected = collections.find((c) => c.id === collectionId) || (collectionId ? null : collections[0]);
  const countLabels = new Map();
  const list = h('ul', { class: 'collection-list', 'aria-label': 'Your collections' },
    collections.map((c) => {
      const label = h('span', { class: 'muted' }, countsText(c));
      countLabels.set(c.id, label);
      return h('li', null, h('a', {
        href: `#/collections/${c.id}`, class: 'collection-item', 'aria-current': selected && selected.id === c.id ? 'true' : null,
      }, h('span', { class: 'collection-name' }, c.name), label));
    }));
  if (!collections.length) list.append(h('li', { class: 'muted' }, 'No collections yet.'));
  const aside = h('aside', { class: 'side card', 'aria-label': 'Collections' },
    h('h2', { class: 'card-title' }, 'Collections'), list, createForm());
  const detail = h('section', { class: 'detail', 'aria-label': 'Collection' });
  main.append(h('div', { class: 'view view-collections' }, h('h1', { class: 'view-title' }, 'Collections'),
    h('div', { class: 'split' }, aside, detail)));
  if (selected) await renderDetail(detail, selected, ctx, (c) => { countLabels.get(c.id).textContent = countsText(c); });
  else if (collectionId) detail.append(h('p', { class: 'notice notice-error' }, 'That collection does not exist (or is not yours).'));
  else detail.append(h('div', { class: 'card empty-state' }, h('p', null, 'Create a collection, then upload documents into it.')));
}

function countsText(c) {
  const d = c.documents;
  return `${d.indexed} indexed${d.pending ? ` · ${d.pending} pending` : ''}${d.failed ? ` · ${d.failed} failed` : ''}`;
}

function createForm() {
  const name = uid('name');
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
    formError,
    h('button', { type: 'submit', class: 'button-primary' }, 'Create collection'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearInvalid(form);
    const data = new FormData(form);
    try {
      const created = await api('/v1/collections', { method: 'POST', json: { name: data.get('name').trim(), description: data.get('description').trim() || null } });
      toast(`Collection ${created.name} created`);
      location.hash = `#/collections/${created.id}`;
    } catch (exc) {
      showFieldErrors(exc, errors, formError);
    }
  });
  return form;
}

async function renderDetail(detail, collection, ctx, onCounts) {
  const counts = h('p', { class: 'muted counts', 'aria-live': 'polite' });
  const fileInput = h('input', { id: 'upload-files', type: 'file', multiple: true, accept: '.jsonl,.ndjson,.txt,.md,.markdown,.pdf',
    'aria-describedby': 'upload-hint upload-error' });
  const uploadButton = h('button', { type: 'submit', class: 'button-primary' }, 'Upload');
  const uploadError = h('p', { class: 'field-error', id: 'upload-error', role: 'alert', hidden: true });
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
    for (const doc of page.items) {
      docsBody.append(h('tr', { dataset: { document: doc.id } },
        h('td', { class: 'cell-title' }, h('span', { class: 'doc-title' }, doc.title || '(untitled)'),
          doc.error ? h('span', { class: 'field-error' }, ` ${doc.error}`) : null),
        h('td', { class: 'cell-id' }, h('code', null, doc.id)),
        h('td', null, badge(doc.status)),
        h('td', { class: 'cell-actions' }, h('button', {
          type: 'button', class: 'button-quiet button-danger', 'aria-label': `Delete document ${doc.title || doc.id}`,
          onclick: () => remove(doc),
        }, 'Delete'))));
    }
    docsNote.textContent = page.total ? `${page.total} document${page.total === 1 ? '' : 's'}${page.total > page.items.length ? ` (first ${page.items.length} shown)` : ''}` : 'No documents yet: upload some above.';
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

  async function watchIndexing(accepted) {
    progress.hidden = false;
    for (;;) {
      const c = await api(`/v1/collections/${collection.id}`, { signal: ctx.signal });
      showCounts(c);
      const pending = c.documents.pending;
      const done = Math.max(0, accepted - pending);
      progress.max = accepted;
      progress.value = done;
      if (!pending) {
        await loadDocuments();
        progressText.textContent = `Indexed: ${accepted} document${accepted === 1 ? '' : 's'} (${c.documents.failed} failed in the collection).`;
        return;
      }
      progressText.textContent = `Indexing: ${done} of ${accepted} documents done…`;
      await new Promise((resolve) => { setTimeout(resolve, 400); });
    }
  }

  const uploadForm = h('form', { class: 'upload', novalidate: true, 'aria-label': 'Upload files' },
    h('label', { for: 'upload-files' }, 'Files'),
    h('div', { class: 'upload-row' }, fileInput, uploadButton),
    h('p', { class: 'hint', id: 'upload-hint' },
      'JSON Lines (one document per line: id, title, text, metadata), or .txt, .md and .pdf files (one document each). A file with a bad line is refused whole.'),
    uploadError, progress, progressText);
  uploadForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    uploadError.hidden = true;
    fileInput.removeAttribute('aria-invalid');
    if (!fileInput.files.length) { uploadError.textContent = 'Choose one or more files.'; uploadError.hidden = false; fileInput.focus(); return; }
    const form = new FormData();
    for (const file of fileInput.files) form.append('files', file, file.name);
    uploadButton.disabled = true;
    progressText.textContent = 'Uploading…';
    try {
      const accepted = await api(`/v1/collections/${collection.id}/files`, { method: 'POST', form });
      fileInput.value = '';
      toast(`${accepted.accepted} document${accepted.accepted === 1 ? '' : 's'} accepted`);
      await watchIndexing(accepted.accepted);
    } catch (exc) {
      if (exc.name === 'AbortError') return;
      progressText.textContent = '';
      uploadError.textContent = exc.message;
      uploadError.hidden = false;
      fileInput.setAttribute('aria-invalid', 'true');
    } finally {
      uploadButton.disabled = false;
    }
  });

  detail.append(
    h('div', { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', { class: 'card-title' }, collection.name),
        h('a', { href: `#/agents/${collection.id}`, class: 'button-quiet' }, 'Agents of this collection')),
      collection.description ? h('p', null, collection.description) : null,
      counts, uploadForm),
    h('div', { class: 'card table-card' },
      h('h3', { class: 'card-subtitle' }, 'Documents'), docsNote,
      h('table', { class: 'table' }, h('caption', { class: 'visually-hidden' }, `Documents of ${collection.name}`),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Id'),
          h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
        docsBody)));
  await loadDocuments();
  if (collection.documents.pending) watchIndexing(collection.documents.pending + collection.documents.indexed + collection.documents.failed).catch(() => {});
}
