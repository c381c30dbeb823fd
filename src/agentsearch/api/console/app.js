// The console's shell: sign in, the sections, and which view the address shows (#/search, #/collections/ID,
// #/agents/ID, #/teams/ID, #/history, #/jobs/ID). The address never holds the key.

import { api, session } from './api.js';
import { clear, dropStaleToast, h, toast } from './dom.js';
import { renderAgents } from './agents.js';
import { renderCollections } from './collections.js';
import { renderHistory, renderJob } from './history.js';
import { renderSearch, resetSearch } from './search.js';
import { renderTeams } from './teams.js';

const VIEWS = {
  search: { render: renderSearch, title: 'Search' },
  collections: { render: renderCollections, title: 'Collections' },
  agents: { render: renderAgents, title: 'Agents' },
  teams: { render: renderTeams, title: 'Teams' },
  history: { render: renderHistory, title: 'History' },
  jobs: { render: renderJob, title: 'Job', section: 'history' },
};

const main = document.getElementById('main');
let current = null; // the AbortController of the view on screen: its requests and streams end with it
let me = null;

function signInView(message) {
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  document.title = 'Sign in · agentsearch';
  clear(main);
  const error = h('p', { class: 'field-error', id: 'sign-in-error', role: 'alert', hidden: !message }, message || '');
  const input = h('input', {
    id: 'api-key', name: 'api-key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    placeholder: 'as_…', 'aria-describedby': 'api-key-hint sign-in-error',
  });
  const button = h('button', { type: 'submit', class: 'button-primary' }, 'Sign in');
  const form = h('form', { class: 'sign-in card', 'aria-labelledby': 'sign-in-title', novalidate: true },
    h('h1', { id: 'sign-in-title' }, 'Sign in to agentsearch'),
    h('p', { class: 'muted' }, 'Ask questions of your collections and watch each agent of the pipeline work.'),
    h('label', { for: 'api-key' }, 'API key'),
    input,
    h('p', { class: 'hint', id: 'api-key-hint' },
      'Kept for this browser tab only. An operator creates one with ', h('code', null, 'agentsearch users create NAME'), '.'),
    error,
    button);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) {
      error.textContent = 'Enter an API key.';
      error.hidden = false;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    button.disabled = true;
    session.set(key);
    try {
      me = await api('/v1/me');
      if (!location.hash || location.hash === '#main') location.hash = '#/search';
      await route();
    } catch (exc) {
      session.clear();
      error.textContent = exc.status === 401 ? `That key was refused: ${exc.message}.` : `Could not sign in: ${exc.message}`;
      error.hidden = false;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  main.append(h('div', { class: 'sign-in-wrap' }, form));
  input.focus();
  offerSso(form);
}

// The operator's identity provider, when the server is configured for it: a plain link, since the sign-in is a
// round trip of the whole page through the provider and back to /v1/auth/callback.
async function offerSso(form) {
  let config = null;
  try { config = await api('/v1/auth/config'); } catch { return; }
  if (!config.sso || !form.isConnected) return;
  form.append(
    h('p', { class: 'sign-in-or muted' }, 'or'),
    h('a', { class: 'button-quiet sign-in-sso', id: 'sso-sign-in', href: config.login_url }, 'Sign in with SSO'));
}

// A single sign-on session opens the console without a key: its cookie is sent with the request.
async function sessionMe() {
  try {
    const found = await api('/v1/me');
    session.setCsrf(found.csrf_token);
    return found.csrf_token ? found : null;
  } catch {
    return null;
  }
}

async function route() {
  if (!session.key && !me) me = await sessionMe();
  if (!session.key && !me) { signInView(); return; }
  if (!me) {
    try { me = await api('/v1/me'); } catch (exc) { session.clear(); signInView(exc.status === 401 ? `That key was refused: ${exc.message}.` : exc.message); return; }
  }
  document.getElementById('nav').hidden = false;
  document.getElementById('who').hidden = false;
  document.getElementById('who-name').textContent = me.user.name;
  const [name, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  const key = VIEWS[name] ? name : 'search';
  const view = VIEWS[key];
  for (const link of document.querySelectorAll('#nav a')) {
    if (link.dataset.view === (view.section || key)) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (current) current.abort();
  current = new AbortController();
  dropStaleToast();
  clear(main);
  document.title = `${view.title} · agentsearch`;
  try {
    await view.render(main, rest.filter(Boolean).map(decodeURIComponent), { signal: current.signal, me });
  } catch (exc) {
    if (exc.name === 'AbortError') return;
    main.append(h('p', { class: 'notice notice-error', role: 'alert' }, `Could not load this page: ${exc.message}`));
  }
}

window.addEventListener('hashchange', () => { if (location.hash !== '#main') route(); });
window.addEventListener('agentsearch:unauthorized', (event) => {
  if (!me) return; // signing in: the sign-in form says it itself
  const what = session.sso ? 'Your session' : 'Your key';
  session.clear();
  me = null;
  resetSearch();
  if (current) current.abort();
  signInView(`${what} was refused (${event.detail}); sign in again.`);
});
document.getElementById('sign-out').addEventListener('click', async () => {
  if (session.sso) {
    // Ended on the server, so the cookie opens nothing even where a copy of it is kept.
    try { await api('/v1/auth/logout', { method: 'POST' }); } catch (exc) { toast(`Could not sign out: ${exc.message}`); return; }
  }
  session.clear();
  me = null;
  resetSearch();
  if (current) current.abort();
  toast('Signed out');
  signInView();
});
document.getElementById('skip-link').addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});

route();
