// Teams: the caller's teams with its role in each; a team's members and roles, its document groups, and its
// collections. A team's admins add members by user name, change a member's role and remove a member here, and put
// members in document groups and take them out (a group is its members: the first makes it, the last ends it); the
// API refuses the rest (one's own role, the last admin) and the console shows its reason. Another member sees only
// the groups it holds, as the API gives them.

import { api } from './api.js';
import { clear, h, showFieldErrors, clearInvalid, toast, uid } from './dom.js';

const ROLES = ['viewer', 'editor', 'admin'];

export async function renderTeams(main, [teamId], ctx) {
  const teams = await api('/v1/teams', { signal: ctx.signal });
  const selected = teams.find((t) => t.id === teamId) || (teamId ? null : teams[0]);
  const list = h('ul', { class: 'collection-list', 'aria-label': 'Your teams' },
    teams.map((t) => h('li', null, h('a', {
      href: `#/teams/${t.id}`, class: 'collection-item',
      'aria-current': selected && selected.id === t.id ? 'true' : null,
    }, h('span', { class: 'collection-name' }, t.name), h('span', { class: 'muted' }, t.role)))));
  if (!teams.length) list.append(h('li', { class: 'muted' }, 'No teams yet.'));
  const detail = h('section', { class: 'detail', 'aria-label': 'Team' });
  main.append(h('div', { class: 'view view-teams' }, h('h1', { class: 'view-title' }, 'Teams'),
    h('div', { class: 'split' },
      h('aside', { class: 'side card', 'aria-label': 'Teams' }, h('h2', { class: 'card-title' }, 'Teams'), list,
        createForm()),
      detail)));
  if (selected) await renderTeam(detail, selected.id, ctx);
  else if (teamId) {
    detail.append(h('p', { class: 'notice notice-error' }, 'That team does not exist (or you are not in it).'));
  }
  else detail.append(h('div', { class: 'card empty-state' }, h('p', null, 'Create a team, then add its members.')));
}

function createForm() {
  const name = uid('team-name');
  const errors = {
    'body.name': h('p', { class: 'field-error', hidden: true, id: uid('err'), dataset: { for: name } }),
  };
  const formError = h('p', { class: 'field-error', role: 'alert', hidden: true });
  const form = h('form', { class: 'stack', novalidate: true, 'aria-labelledby': `${name}-title` },
    h('h3', { class: 'card-subtitle', id: `${name}-title` }, 'New team'),
    h('div', { class: 'field' }, h('label', { for: name }, 'Name'),
      h('input', { id: name, name: 'name', type: 'text', required: true, autocomplete: 'off',
        'aria-describedby': errors['body.name'].id }),
      errors['body.name']),
    formError,
    h('button', { type: 'submit', class: 'button-primary' }, 'Create team'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearInvalid(form);
    try {
      const created = await api('/v1/teams', { method: 'POST', json: { name: new FormData(form).get('name').trim() } });
      toast(`Team ${created.name} created`);
      location.hash = `#/teams/${created.id}`;
    } catch (exc) {
      showFieldErrors(exc, errors, formError);
    }
  });
  return form;
}

function roleSelect(id, value, label) {
  return h('select', { id, name: 'role', 'aria-label': label },
    ROLES.map((role) => h('option', { value: role, selected: role === value }, role)));
}

async function renderTeam(detail, teamId, ctx) {
  const team = await api(`/v1/teams/${teamId}`, { signal: ctx.signal });
  const admin = team.role === 'admin';
  const error = h('p', { class: 'field-error team-error', role: 'alert', hidden: true });
  const change = async (path, options, done) => {
    error.hidden = true;
    try {
      await api(path, options);
      toast(done);
      clear(detail);
      await renderTeam(detail, teamId, ctx);
    } catch (exc) {
      error.textContent = exc.message;
      error.hidden = false;
    }
  };
  const member = (m) => {
    const path = `/v1/teams/${team.id}/members/${encodeURIComponent(m.user_id)}`;
    const select = roleSelect(uid('role'), m.role, `Role of ${m.name}`);
    select.addEventListener('change', () => change(path, { method: 'PUT', json: { role: select.value } },
      `${m.name} is now ${select.value}`));
    return h('tr', { dataset: { member: m.name, role: m.role } },
      h('td', null, m.name),
      h('td', null, admin ? select : m.role),
      h('td', { class: 'cell-actions' }, admin ? h('button', {
        type: 'button', class: 'button-quiet button-danger', 'aria-label': `Remove ${m.name} from the team`,
        onclick: () => change(path, { method: 'DELETE' }, `${m.name} removed`),
      }, 'Remove') : null));
  };
  detail.append(h('div', { class: 'card' },
    h('h2', { class: 'card-title' }, team.name, h('span', { class: 'muted' }, ` · your role: ${team.role}`)),
    h('table', { class: 'table members', 'aria-label': 'Members' },
      h('thead', null, h('tr', null, h('th', null, 'Member'), h('th', null, 'Role'), h('th', null, ''))),
      h('tbody', null, team.members.map(member))),
    error,
    admin ? addForm(team, change) : null,
    h('h3', { class: 'card-subtitle' }, 'Document groups'),
    admin ? groupsTable(team, change) : heldGroups(team),
    admin ? groupForm(team, change) : null,
    h('h3', { class: 'card-subtitle' }, 'Collections'),
    team.collections.length
      ? h('ul', { class: 'team-collections' }, team.collections.map((c) => h('li', null,
        h('a', { href: `#/collections/${c.id}` }, `${team.name}/${c.name}`))))
      : h('p', { class: 'muted' }, admin ? 'None yet: pick this team when creating a collection.' : 'None yet.')));
}

function addForm(team, change) {
  const user = uid('member');
  const form = h('form', { class: 'stack add-member', novalidate: true, 'aria-label': 'Add a member' },
    h('h3', { class: 'card-subtitle' }, 'Add a member'),
    h('div', { class: 'field' }, h('label', { for: user }, 'User name'),
      h('input', { id: user, name: 'user', type: 'text', required: true, autocomplete: 'off' })),
    h('div', { class: 'field' }, h('label', { for: `${user}-role` }, 'Role'),
      roleSelect(`${user}-role`, 'viewer', 'Role')),
    h('button', { type: 'submit', class: 'button-primary' }, 'Add member'));
  return onSubmit(form, 'user', (name, data) => {
    const role = data.get('role');
    change(`/v1/teams/${team.id}/members/${encodeURIComponent(name)}`, { method: 'PUT', json: { role } },
      `${name} added as ${role}`);
  });
}

// The form's submit: `act` with its `field` trimmed (nothing when that is empty) and the form's data.
function onSubmit(form, field, act) {
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const value = String(data.get(field)).trim();
    if (value) act(value, data);
  });
  return form;
}

// An admin's view of the groups: each with its members, each member with a button taking it out.
function groupsTable(team, change) {
  if (!team.groups.length) {
    return h('p', { class: 'muted' }, 'No groups yet. A document restricted to groups is found only by their '
      + 'members; a group is made by its first member.');
  }
  const member = (group, m) => h('li', { dataset: { groupMember: m.name } }, m.name, h('button', {
    type: 'button', class: 'button-quiet button-danger', 'aria-label': `Take ${m.name} out of group ${group.name}`,
    onclick: () => change(
      `/v1/teams/${team.id}/groups/${encodeURIComponent(group.name)}/members/${encodeURIComponent(m.user_id)}`,
      { method: 'DELETE' }, `${m.name} taken out of ${group.name}`),
  }, 'Remove'));
  return h('table', { class: 'table groups', 'aria-label': 'Document groups' },
    h('thead', null, h('tr', null, h('th', null, 'Group'), h('th', null, 'Members'))),
    h('tbody', null, team.groups.map((group) => h('tr', { dataset: { group: group.name } },
      h('td', null, group.name),
      h('td', null, h('ul', { class: 'group-members' }, group.members.map((m) => member(group, m))))))));
}

// Another member's view: the groups it holds here, by name.
function heldGroups(team) {
  if (!team.groups.length) return h('p', { class: 'muted' }, "You are in none of this team's document groups.");
  return h('ul', { class: 'held-groups' }, team.groups.map((group) => h('li', null, group.name)));
}

function groupForm(team, change) {
  const group = uid('group');
  const form = h('form', { class: 'stack add-group-member', novalidate: true, 'aria-label': 'Add a member to a group' },
    h('h3', { class: 'card-subtitle' }, 'Add a member to a group'),
    h('div', { class: 'field' }, h('label', { for: group }, 'Group'),
      h('input', { id: group, name: 'group', type: 'text', required: true, autocomplete: 'off',
        list: `${group}-names` }),
      h('datalist', { id: `${group}-names` }, team.groups.map((g) => h('option', { value: g.name })))),
    h('div', { class: 'field' }, h('label', { for: `${group}-member` }, 'Member'),
      h('select', { id: `${group}-member`, name: 'user' },
        team.members.map((m) => h('option', { value: m.user_id }, m.name)))),
    h('button', { type: 'submit', class: 'button-primary' }, 'Add to group'));
  return onSubmit(form, 'group', (name, data) => {
    const who = team.members.find((m) => m.user_id === data.get('user'));
    change(`/v1/teams/${team.id}/groups/${encodeURIComponent(name)}/members/${encodeURIComponent(who.user_id)}`,
      { method: 'PUT' }, `${who.name} added to ${name}`);
  });
}
