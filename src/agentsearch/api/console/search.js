// Search: a question over a collection (its agent set, or agents picked for this job), the job's live pipeline,
// and follow-up questions in the same conversation. The view outlives a visit to another section: a running job
// keeps streaming, and coming back shows the conversation as it was left.

import { api } from './api.js';
import { clear, h, showFieldErrors, uid } from './dom.js';
import { JobView } from './jobview.js';

const STRATEGIES = [
  ['hybrid', 'Hybrid (vectors and keywords)'],
  ['semantic', 'Semantic (vectors)'],
  ['keyword', 'Keyword'],
  ['adaptive', 'Adaptive'],
];
const STAGE_NAMES = { pre_search: 'Pre-search', post_search: 'Post-search', response: 'Response' };

let view = null; // {root, ...}: built once per page load

/** Signing out ends the conversation on screen and its streams: the next user starts afresh. */
export function resetSearch() {
  if (view) view.stop();
  view = null;
}

export async function renderSearch(main, _params, ctx) {
  if (view && view.user !== ctx.me.user.id) view = null;
  if (!view) view = build(ctx.me.user.id);
  main.append(view.root);
  await view.refresh();
}

function build(userId) {
  const ids = { query: uid('query'), collection: uid('collection'), strategy: uid('strategy'), cot: uid('cot') };
  const errors = {
    'body.query': h('p', { class: 'field-error', hidden: true, dataset: { for: ids.query }, id: uid('err') }),
    'body.collection_id': h('p', { class: 'field-error', hidden: true, dataset: { for: ids.collection }, id: uid('err') }),
    'body.search': h('p', { class: 'field-error', hidden: true, dataset: { for: ids.strategy }, id: uid('err') }),
  };
  const formError = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const query = h('input', { id: ids.query, name: 'query', type: 'text', autocomplete: 'off', required: true,
    placeholder: 'What was Northwind Energy’s revenue in Q4 2025?', 'aria-describedby': errors['body.query'].id });
  const collection = h('select', { id: ids.collection, name: 'collection', 'aria-describedby': errors['body.collection_id'].id });
  const strategy = h('select', { id: ids.strategy, name: 'strategy' }, STRATEGIES.map(([v, label]) => h('option', { value: v }, label)));
  const cot = h('input', { id: ids.cot, name: 'cot', type: 'checkbox' });
  const agentMode = uid('agents');
  const useSet = h('input', { type: 'radio', name: agentMode, value: 'set', id: `${agentMode}-set`, checked: true });
  const usePicked = h('input', { type: 'radio', name: agentMode, value: 'picked', id: `${agentMode}-picked` });
  const picker = h('div', { class: 'agent-picker', hidden: true });
  const setSummary = h('span', { class: 'muted set-summary' });
  for (const radio of [useSet, usePicked]) radio.addEventListener('change', () => { picker.hidden = !usePicked.checked; });
  const submit = h('button', { type: 'submit', class: 'button-primary' }, 'Search');
  const newConversation = h('button', { type: 'button', class: 'button-quiet', hidden: true }, 'New conversation');
  const conversationNote = h('p', { class: 'conversation-note muted', hidden: true });
  const thread = h('div', { class: 'thread', 'aria-label': 'Questions and answers', role: 'feed' });
  const empty = h('div', { class: 'empty-state' },
    h('p', null, 'Ask a question to watch the pipeline run agent by agent.'),
    h('p', { class: 'muted' }, 'Follow-up questions stay in the same conversation; each answer cites its sources.'));

  const state = { conversationId: null, turns: [], catalogue: [], collections: [] };

  const form = h('form', { class: 'search-form card', novalidate: true, 'aria-label': 'Search' },
    h('div', { class: 'field field-query' }, h('label', { for: ids.query }, 'Question'),
      h('div', { class: 'query-row' }, query, submit), errors['body.query']),
    h('div', { class: 'search-options' },
      h('div', { class: 'field' }, h('label', { for: ids.collection }, 'Collection'), collection, errors['body.collection_id']),
      h('div', { class: 'field' }, h('label', { for: ids.strategy }, 'Strategy'), strategy, errors['body.search']),
      h('div', { class: 'field field-check' }, cot, h('label', { for: ids.cot }, 'Show reasoning steps'))),
    h('fieldset', { class: 'agents-choice' }, h('legend', null, 'Agents'),
      h('div', { class: 'radio-row' },
        h('span', { class: 'radio' }, useSet, h('label', { for: useSet.id }, 'The collection’s agent set', setSummary)),
        h('span', { class: 'radio' }, usePicked, h('label', { for: usePicked.id }, 'Pick agents for this search (default configs)'))),
      picker),
    formError,
    h('div', { class: 'conversation-bar' }, conversationNote, newConversation));

  newConversation.addEventListener('click', () => {
    for (const turn of state.turns) turn.stop();
    state.turns = [];
    state.conversationId = null;
    clear(thread).append(empty);
    newConversation.hidden = true;
    conversationNote.hidden = true;
    submit.textContent = 'Search';
    collection.disabled = false;
    query.focus();
  });

  async function refreshSetSummary() {
    if (!collection.value) { setSummary.textContent = ''; return; }
    try {
      const [set, configs] = await Promise.all([api(`/v1/collections/${collection.value}/agents`), api('/v1/agent-configs')]);
      const byId = new Map(configs.map((c) => [c.id, c]));
      const names = set.agents.filter((a) => a.enabled).map((a) => (byId.get(a.agent_config_id) || {}).agent_id).filter(Boolean);
      setSummary.textContent = names.length ? names.join(', ') : 'none: search and answer only';
    } catch { setSummary.textContent = ''; }
  }
  collection.addEventListener('change', refreshSetSummary);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showFieldErrors(null, errors, formError);
    const text = query.value.trim();
    if (!text) { showFieldErrors({ detail: [{ loc: ['body', 'query'], msg: 'Enter a question.' }] }, errors, formError); return; }
    if (!collection.value) { showFieldErrors({ detail: [{ loc: ['body', 'collection_id'], msg: 'Create a collection first (Collections).' }] }, errors, formError); return; }
    const body = { collection_id: collection.value, query: text, cot: cot.checked, search: { strategy: strategy.value } };
    if (usePicked.checked) body.agents = [...picker.querySelectorAll('input:checked')].map((c) => c.value);
    submit.disabled = true;
    try {
      if (!state.conversationId) {
        const conversation = await api('/v1/conversations', { method: 'POST', json: { title: text.slice(0, 200) } });
        state.conversationId = conversation.id;
      }
      body.conversation_id = state.conversationId;
      const accepted = await api('/v1/search', { method: 'POST', json: body });
      if (!state.turns.length) clear(thread);
      const turn = new JobView(accepted.job_id, { question: text });
      state.turns.push(turn);
      thread.append(turn.el);
      turn.start();
      query.value = '';
      submit.textContent = 'Ask a follow-up';
      query.placeholder = 'Ask a follow-up question…';
      collection.disabled = true;
      newConversation.hidden = false;
      conversationNote.hidden = false;
      conversationNote.textContent = `Conversation of ${state.turns.length} question${state.turns.length === 1 ? '' : 's'}: follow-ups are read in its context.`;
      turn.el.scrollIntoView({ behavior: 'smooth', block: 'start' });
    } catch (exc) {
      showFieldErrors(exc, errors, formError);
    } finally {
      submit.disabled = false;
    }
  });

  const root = h('div', { class: 'view view-search' },
    h('h1', { class: 'view-title' }, 'Search'), form, thread);
  thread.append(empty);

  async function refresh() {
    const [collections, catalogue] = await Promise.all([api('/v1/collections'), api('/v1/agents')]);
    state.collections = collections;
    const chosen = collection.value;
    clear(collection);
    if (!collections.length) collection.append(h('option', { value: '' }, 'No collections yet'));
    for (const c of collections) {
      const n = c.documents.indexed;
      collection.append(h('option', { value: c.id }, `${c.name} (${n} document${n === 1 ? '' : 's'})`));
    }
    if (chosen && collections.some((c) => c.id === chosen)) collection.value = chosen;
    if (!state.catalogue.length) {
      state.catalogue = catalogue;
      clear(picker);
      for (const stage of ['pre_search', 'post_search', 'response']) {
        const agents = catalogue.filter((a) => a.stage === stage);
        picker.append(h('fieldset', { class: 'picker-stage' }, h('legend', null, STAGE_NAMES[stage]),
          agents.map((a) => {
            const id = uid('pick');
            return h('span', { class: 'check' }, h('input', { type: 'checkbox', id, value: a.agent_id }),
              h('label', { for: id, title: a.description }, a.agent_id));
          })));
      }
    }
    await refreshSetSummary();
    if (!state.turns.length) query.focus();
  }

  return { root, refresh, user: userId, stop: () => { for (const turn of state.turns) turn.stop(); } };
}
