// Agents: the catalogue with each agent's description; a collection's agent set by stage (priority order,
// enabled, reorder, remove); and a config form generated from the chosen agent's JSON schema, whose 422 is shown
// next to the field at fault. A role below editor reads the set as it is, with nothing to change it (roles.js);
// the API's 403 stays the rule.

import { api } from './api.js';
import { clear, clearInvalid, h, showFieldErrors, toast, uid } from './dom.js';
import { comparison } from './quality.js';
import { may } from './roles.js';
import { schemaForm } from './schema_form.js';

const STAGES = [['pre_search', 'Pre-search'], ['post_search', 'Post-search'], ['response', 'Response']];
const stageName = (stage) => (STAGES.find(([key]) => key === stage) || [stage, stage])[1];

export async function renderAgents(main, [collectionId], ctx) {
  const [collections, catalogue] = await Promise.all([api('/v1/collections', { signal: ctx.signal }), api('/v1/agents', { signal: ctx.signal })]);
  const collection = collections.find((c) => c.id === collectionId) || collections[0] || null;
  const picker = h('select', { id: 'agents-collection' },
    collections.map((c) => h('option', { value: c.id, selected: collection && c.id === collection.id }, c.name)));
  picker.addEventListener('change', () => { location.hash = `#/agents/${picker.value}`; });
  const setCard = h('section', { class: 'card', 'aria-labelledby': 'set-title' });
  const addCard = h('section', { class: 'card', 'aria-labelledby': 'add-title' });
  const catalogueCard = h('section', { class: 'card catalogue', 'aria-labelledby': 'catalogue-title' });
  main.append(h('div', { class: 'view view-agents' },
    h('div', { class: 'view-head' }, h('h1', { class: 'view-title' }, 'Agents'),
      collections.length ? h('div', { class: 'field field-inline' }, h('label', { for: 'agents-collection' }, 'Collection'), picker) : null),
    h('div', { class: 'agents-layout' }, h('div', { class: 'agents-main' }, setCard, addCard), catalogueCard)));

  const editable = !collection || may(collection, 'editAgents'); // no collection yet: the form shows, disabled
  const addForm = editable ? renderAddForm(addCard, catalogue, collection, () => loadSet()) : null;
  if (!editable) addCard.remove();
  renderCatalogue(catalogueCard, catalogue, addForm ? (agentId) => addForm.choose(agentId) : null);

  async function loadSet() {
    clear(setCard).append(h('h2', { class: 'card-title', id: 'set-title' }, collection ? `Agent set of ${collection.name}` : 'Agent set'));
    if (!collection) { setCard.append(h('p', { class: 'muted' }, 'Create a collection first (Collections).')); return; }
    const [set, configs] = await Promise.all([api(`/v1/collections/${collection.id}/agents`), api('/v1/agent-configs')]);
    if (!editable) {
      setCard.append(h('p', { class: 'notice role-note' },
        `Your role in team ${collection.team} is ${collection.role}: an editor changes this set.`));
    }
    renderSet(setCard, collection, set.agents, new Map(configs.map((c) => [c.id, c])), loadSet, editable);
  }
  await loadSet();
}

function effectivePriority(entry, config) {
  return entry.priority !== null && entry.priority !== undefined ? entry.priority : config.priority;
}

/** The set by stage; with `editable`, each entry's controls (enabled, priority, move, remove), else its state as
 * words. */
function renderSet(card, collection, entries, configs, reload, editable) {
  const status = h('p', { class: 'muted', 'aria-live': 'polite' });
  // Staged: each change is measured on the collection's question set first (quality.js shows both sides); a change
  // the gate refused is applied only when the user confirms it after reading the comparison.
  const staging = h('input', { type: 'checkbox', id: 'stage-changes' });
  const gateView = h('div', { class: 'gate-view', 'aria-live': 'polite' });

  async function save(next, message, staged = staging.checked) {
    clear(gateView);
    try {
      const path = `/v1/collections/${collection.id}/agents${staged ? '?stage=true' : ''}`;
      if (staged) status.textContent = 'Measuring the change on the question set…';
      const saved = await api(path, { method: 'PUT', json: { agents: next } });
      if (saved.gate) gateView.append(comparison(saved.gate));
      status.textContent = '';
      toast(message);
      await reload();
    } catch (exc) {
      status.textContent = `Not saved: ${exc.detail && exc.detail.reason ? exc.detail.reason : exc.message}`;
      if (exc.status === 409 && exc.detail && exc.detail.figures) {
        gateView.append(comparison(exc.detail), h('button', { type: 'button', class: 'button-quiet',
          onclick: () => save(next, `${message} (confirmed despite the comparison)`, false) }, 'Apply anyway'));
      }
    }
  }

  const known = entries.filter((e) => configs.has(e.agent_config_id));
  if (!known.length) {
    card.append(h('p', { class: 'muted' }, `No agents yet: the job searches and answers only.${editable ? ' Add agents below.' : ''}`));
  }
  for (const [stage, label] of STAGES) {
    const rows = known.filter((e) => configs.get(e.agent_config_id).trigger_stage === stage);
    if (!rows.length) continue;
    card.append(h('h3', { class: 'card-subtitle' }, `${label} `, h('span', { class: 'muted' }, '(runs top to bottom)')));
    const list = h('ol', { class: 'set-list', 'aria-label': `${label} agents` });
    rows.forEach((entry, index) => {
      const config = configs.get(entry.agent_config_id);
      const name = config.name || config.agent_id;
      const enabledId = uid('enabled');
      const priorityId = uid('priority');
      const move = (delta) => {
        const order = [...rows];
        const [moved] = order.splice(index, 1);
        order.splice(index + delta, 0, moved);
        // The stage's order written as the collection's priorities: 10, 20, 30, ...
        const priorities = new Map(order.map((e, i) => [e.agent_config_id, (i + 1) * 10]));
        save(entries.map((e) => (priorities.has(e.agent_config_id) ? { ...e, priority: priorities.get(e.agent_config_id) } : e)),
          `${name} moved ${delta < 0 ? 'up' : 'down'}`);
      };
      const enabled = h('input', { type: 'checkbox', id: enabledId, checked: entry.enabled });
      enabled.addEventListener('change', () => save(entries.map((e) => (e === entry ? { ...e, enabled: enabled.checked } : e)),
        `${name} ${enabled.checked ? 'enabled' : 'disabled'}`));
      const priority = h('input', { type: 'number', id: priorityId, class: 'priority-input', step: '1', value: effectivePriority(entry, config) });
      priority.addEventListener('change', () => save(entries.map((e) => (e === entry ? { ...e, priority: Number(priority.value) } : e)),
        `${name}: priority ${priority.value}`));
      const summary = Object.entries(config.config || {}).filter(([, v]) => v !== null && v !== '' && !(Array.isArray(v) && !v.length))
        .slice(0, 4).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ');
      list.append(h('li', { class: `set-item${entry.enabled ? '' : ' is-disabled'}`, dataset: { agent: config.agent_id, config: config.id } },
        h('div', { class: 'set-name' }, h('strong', null, name),
          name !== config.agent_id ? h('span', { class: 'muted' }, ` ${config.agent_id}`) : null,
          summary ? h('div', { class: 'muted set-config' }, summary) : null),
        editable ? h('div', { class: 'set-controls' },
          h('span', { class: 'field-check' }, enabled, h('label', { for: enabledId }, 'Enabled')),
          h('span', { class: 'priority' }, h('label', { for: priorityId }, 'Priority'), priority),
          h('button', { type: 'button', class: 'button-icon', disabled: index === 0, 'aria-label': `Move ${name} up`, onclick: () => move(-1) }, '↑'),
          h('button', { type: 'button', class: 'button-icon', disabled: index === rows.length - 1, 'aria-label': `Move ${name} down`, onclick: () => move(1) }, '↓'),
          h('button', { type: 'button', class: 'button-quiet button-danger', 'aria-label': `Remove ${name} from ${collection.name}`,
            onclick: () => save(entries.filter((e) => e !== entry), `${name} removed`) }, 'Remove'))
          : h('div', { class: 'set-controls muted' },
            `${entry.enabled ? 'Enabled' : 'Disabled'} · priority ${effectivePriority(entry, config)}`)));
    });
    card.append(list);
  }
  if (editable) {
    card.append(h('p', { class: 'field-inline' }, staging,
      h('label', { for: 'stage-changes' }, ' Measure each change on the question set before it goes live')));
  }
  card.append(status, gateView);
}

function renderAddForm(card, catalogue, collection, onAdded) {
  const select = h('select', { id: 'add-agent' },
    h('option', { value: '' }, '— choose an agent —'),
    STAGES.map(([stage, label]) => h('optgroup', { label },
      catalogue.filter((a) => a.stage === stage).map((a) => h('option', { value: a.agent_id }, a.agent_id)))));
  const body = h('div', { class: 'add-body' });
  card.append(h('h2', { class: 'card-title', id: 'add-title' }, collection ? `Add an agent to ${collection.name}` : 'Add an agent'),
    h('div', { class: 'field' }, h('label', { for: 'add-agent' }, 'Agent'), select), body);
  if (!collection) select.disabled = true;

  function show(agentId) {
    clear(body);
    const agent = catalogue.find((a) => a.agent_id === agentId);
    if (!agent) return;
    const form = schemaForm(agent.config_schema);
    const nameId = uid('config-name');
    const priorityId = uid('config-priority');
    const timeoutId = uid('config-timeout');
    const errors = {
      ...form.errors,
      'body.name': h('p', { class: 'field-error', hidden: true, id: `${nameId}-error`, dataset: { for: nameId } }),
      'body.priority': h('p', { class: 'field-error', hidden: true, id: `${priorityId}-error`, dataset: { for: priorityId } }),
      'body.timeout_s': h('p', { class: 'field-error', hidden: true, id: `${timeoutId}-error`, dataset: { for: timeoutId } }),
    };
    const formError = h('p', { class: 'field-error', role: 'alert', hidden: true });
    const submit = h('button', { type: 'submit', class: 'button-primary' }, `Add ${agent.agent_id}`);
    const el = h('form', { class: 'agent-form', novalidate: true, 'aria-label': `Configure ${agent.agent_id}`, dataset: { agent: agent.agent_id } },
      h('p', { class: 'agent-description' }, h('span', { class: 'chip' }, stageName(agent.stage)), ' ', agent.description),
      h('div', { class: 'form-row' },
        h('div', { class: 'field' }, h('label', { for: nameId }, 'Name'),
          h('input', { id: nameId, type: 'text', value: agent.agent_id, autocomplete: 'off', 'aria-describedby': `${nameId}-error` }), errors['body.name']),
        h('div', { class: 'field field-small' }, h('label', { for: priorityId }, 'Priority'),
          h('input', { id: priorityId, type: 'number', step: '1', value: '0', 'aria-describedby': `${priorityId}-hint ${priorityId}-error` }),
          h('p', { class: 'hint', id: `${priorityId}-hint` }, 'Lower runs first.'), errors['body.priority']),
        h('div', { class: 'field field-small' }, h('label', { for: timeoutId }, 'Timeout (s)'),
          h('input', { id: timeoutId, type: 'number', step: 'any', placeholder: String(agent.default_timeout_s), 'aria-describedby': `${timeoutId}-error` }),
          errors['body.timeout_s'])),
      h('fieldset', { class: 'config-fields' }, h('legend', null, 'Configuration'), form.el),
      formError, submit);
    el.addEventListener('submit', async (event) => {
      event.preventDefault();
      clearInvalid(el);
      const { config, problems } = form.read();
      if (problems.length) { showFieldErrors({ detail: problems }, errors, formError); return; }
      const timeout = el.querySelector(`#${timeoutId}`).value;
      const payload = {
        agent_id: agent.agent_id, name: el.querySelector(`#${nameId}`).value.trim() || null, config,
        priority: Number(el.querySelector(`#${priorityId}`).value || 0),
        ...(timeout ? { timeout_s: Number(timeout) } : {}),
      };
      submit.disabled = true;
      try {
        const created = await api('/v1/agent-configs', { method: 'POST', json: payload });
        showFieldErrors(null, errors, formError);
        const set = await api(`/v1/collections/${collection.id}/agents`);
        await api(`/v1/collections/${collection.id}/agents`, { method: 'PUT', json: { agents: [...set.agents, { agent_config_id: created.id }] } });
        toast(`${created.name} added to ${collection.name}`);
        select.value = '';
        clear(body);
        await onAdded();
      } catch (exc) {
        showFieldErrors(exc, errors, formError);
      } finally {
        submit.disabled = false;
      }
    });
    body.append(el);
  }

  select.addEventListener('change', () => show(select.value));
  return {
    choose(agentId) {
      select.value = agentId;
      show(agentId);
      select.focus();
      card.scrollIntoView({ behavior: 'smooth', block: 'start' });
    },
  };
}

/** The catalogue; `choose` (none: the caller may not change the set) opens an agent's config form. */
function renderCatalogue(card, catalogue, choose) {
  card.append(h('h2', { class: 'card-title', id: 'catalogue-title' }, 'Catalogue'),
    h('p', { class: 'muted' }, `${catalogue.length} agents in three stages: before the search (the query), after it (the documents), and on the answer (artifacts).`));
  for (const [stage, label] of STAGES) {
    card.append(h('h3', { class: 'card-subtitle' }, label),
      h('ul', { class: 'catalogue-list' }, catalogue.filter((a) => a.stage === stage).map((agent) => h('li', { dataset: { agent: agent.agent_id } },
        h('div', { class: 'catalogue-head' }, h('strong', null, agent.agent_id),
          choose ? h('button', { type: 'button', class: 'button-quiet', 'aria-label': `Configure ${agent.agent_id}`, onclick: () => choose(agent.agent_id) }, 'Configure') : null),
        h('p', { class: 'catalogue-description' }, agent.description),
        h('p', { class: 'catalogue-meta muted' }, `version ${agent.version} · timeout ${agent.default_timeout_s} s${agent.cacheable ? ' · results cached' : ''}`)))));
  }
}
