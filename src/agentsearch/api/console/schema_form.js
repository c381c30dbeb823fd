// A form generated from an agent's config JSON schema (what GET /v1/agents gives): one labelled field per
// property, its description as the hint, and an error slot the API's 422 fills (loc body.config.<field>).
// The browser validates nothing itself: the API is the one judge, and says which field is wrong. A write-only
// string (a source's credential: `"format": "password"`) is a password input that starts empty and is sent only
// when typed in.
// Given a config's values (a source being edited), the form starts from them rather than from the defaults, a
// credential the source holds shows as set (its value is never given), and read() gives only what was changed: a
// field emptied is sent as its default or null, a credential only when a new one is typed.

import { h, uid } from './dom.js';

function resolve(prop, defs) {
  let out = { ...prop };
  if (out.$ref) {
    const name = out.$ref.split('/').pop();
    out = { ...(defs[name] || {}), ...out };
    delete out.$ref;
  }
  if (out.allOf && out.allOf.length === 1) out = { ...resolve(out.allOf[0], defs), ...out, allOf: undefined };
  if (out.anyOf) {
    const others = out.anyOf.filter((p) => p.type !== 'null');
    out.nullable = others.length < out.anyOf.length;
    if (others.length === 1) out = { ...resolve(others[0], defs), ...out, anyOf: undefined, nullable: out.nullable };
  }
  return out;
}

function kind(prop) {
  if (prop.const !== undefined) return 'const';
  if (prop.anyOf) return 'json';
  if (Array.isArray(prop.enum)) return 'enum';
  if (prop.type === 'boolean') return 'boolean';
  if (prop.type === 'integer' || prop.type === 'number') return 'number';
  if (prop.type === 'string' && (prop.format === 'password' || prop.writeOnly)) return 'secret';
  if (prop.type === 'string') return 'string';
  if (prop.type === 'array' && prop.items && Array.isArray(resolveItems(prop).enum)) return 'multi';
  if (prop.type === 'array' && prop.items && ['string', 'number', 'integer'].includes(resolveItems(prop).type)) return 'lines';
  return 'json';
}

function resolveItems(prop) { return prop._items || prop.items || {}; }

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** What a field emptied while editing stands for: its default, else an empty list or mapping like the value it
 * held (a source's `groups`, `folders`), else null. */
function emptied(dflt, held) {
  if (dflt !== undefined) return dflt;
  if (Array.isArray(held)) return [];
  if (held !== null && typeof held === 'object') return {};
  return null;
}

/** {el, errors, read()}: read() gives {config} or {problems: {loc: message}} for what cannot even be sent. */
export function schemaForm(schema, empty = 'This agent has nothing to configure.', values = null) {
  const defs = schema.$defs || schema.definitions || {};
  const required = new Set(schema.required || []);
  const errors = {};
  const readers = [];
  const fields = [];
  for (const [name, raw] of Object.entries(schema.properties || {})) {
    const prop = resolve(raw, defs);
    if (prop.items) prop._items = resolve(prop.items, defs);
    const type = kind(prop);
    if (type === 'const') continue;
    const id = uid(`cfg-${name}`);
    const hintId = `${id}-hint`;
    const error = h('p', { class: 'field-error', id: `${id}-error`, hidden: true, dataset: { for: id } });
    errors[`body.config.${name}`] = error;
    const describedBy = [prop.description ? hintId : null, error.id].filter(Boolean).join(' ');
    const label = h('label', { for: id }, prop.title || name, required.has(name) ? h('span', { class: 'required', 'aria-hidden': 'true' }, ' *') : null);
    const dflt = prop.default;
    const start = values && Object.hasOwn(values, name) ? values[name] : dflt;
    let control;
    let read;
    if (type === 'enum') {
      control = h('select', { id, name, 'aria-describedby': describedBy, required: required.has(name) },
        prop.nullable || dflt === undefined ? h('option', { value: '' }, dflt === undefined ? '— choose —' : '(none)') : null,
        prop.enum.map((v) => h('option', { value: String(v), selected: same(v, start) }, String(v))));
      read = () => (control.value === '' ? (prop.nullable ? null : undefined) : prop.enum.find((v) => String(v) === control.value));
    } else if (type === 'boolean') {
      control = h('input', { id, name, type: 'checkbox', checked: Boolean(start), 'aria-describedby': describedBy });
      read = () => control.checked;
    } else if (type === 'number') {
      control = h('input', { id, name, type: 'number', inputmode: prop.type === 'integer' ? 'numeric' : 'decimal',
        step: prop.type === 'integer' ? '1' : 'any', value: start ?? '', 'aria-describedby': describedBy,
        min: prop.minimum, max: prop.maximum });
      read = () => (control.value === '' ? (prop.nullable && dflt !== null && dflt !== undefined ? null : undefined) : Number(control.value));
    } else if (type === 'string') {
      // An address stays one line however long it may be.
      const long = ((prop.maxLength || 0) > 300 && !/url$/.test(name)) || /template|prompt|system/.test(name);
      control = long
        ? h('textarea', { id, name, rows: '3', 'aria-describedby': describedBy }, start ?? '')
        : h('input', { id, name, type: 'text', value: start ?? '', 'aria-describedby': describedBy, autocomplete: 'off' });
      read = () => (control.value === '' && (dflt === null || dflt === undefined) ? undefined : control.value);
    } else if (type === 'secret') {
      control = h('input', { id, name, type: 'password', value: '', 'aria-describedby': describedBy,
        autocomplete: 'new-password', placeholder: start === 'set' ? 'set: type a new one to replace it' : null,
        dataset: { set: String(start === 'set') } });
      read = () => (control.value === '' ? undefined : control.value);
    } else if (type === 'multi') {
      const options = resolveItems(prop).enum;
      const boxes = options.map((v) => {
        const boxId = uid(`${id}-opt`);
        return [h('input', { type: 'checkbox', id: boxId, value: String(v), checked: Array.isArray(start) && start.includes(v) }), h('label', { for: boxId }, String(v))];
      });
      control = h('div', { class: 'check-group', id, role: 'group', 'aria-labelledby': `${id}-label`, 'aria-describedby': describedBy, tabindex: '-1' },
        boxes.map(([box, boxLabel]) => h('span', { class: 'check' }, box, boxLabel)));
      label.id = `${id}-label`;
      label.removeAttribute('for');
      read = () => boxes.filter(([box]) => box.checked).map(([box]) => options.find((v) => String(v) === box.value));
    } else if (type === 'lines') {
      control = h('textarea', { id, name, rows: '3', 'aria-describedby': describedBy, placeholder: 'one per line' },
        Array.isArray(start) ? start.join('\n') : '');
      const itemType = resolveItems(prop).type;
      read = () => control.value.split('\n').map((s) => s.trim()).filter(Boolean).map((s) => (itemType === 'string' ? s : Number(s)));
    } else {
      control = h('textarea', { id, name, rows: '3', class: 'code', spellcheck: 'false', 'aria-describedby': `${describedBy}`,
        placeholder: 'JSON' }, start === undefined || start === null || same(start, {}) || same(start, []) ? '' : JSON.stringify(start, null, 2));
      read = () => {
        if (!control.value.trim()) return undefined;
        try { return JSON.parse(control.value); } catch { throw new Error('not valid JSON'); }
      };
    }
    readers.push({ name, read, dflt, required: required.has(name), secret: type === 'secret' });
    fields.push(h('div', { class: `field field-${type}` },
      type === 'boolean' ? h('div', { class: 'field-check' }, control, label) : [label, control],
      prop.description ? h('p', { class: 'hint', id: hintId }, prop.description) : null,
      error));
  }
  const el = h('div', { class: 'schema-form' }, fields.length ? fields : h('p', { class: 'muted' }, empty));

  function read() {
    const config = {};
    const problems = [];
    for (const { name, read: get, dflt, required: must, secret } of readers) {
      let value;
      try { value = get(); } catch (exc) { problems.push({ loc: ['body', 'config', name], msg: exc.message }); continue; }
      if (values && !secret) {
        // Editing: what the form read before any change stands for the stored value, so only a change is sent.
        if (same(value, initial[name])) continue;
        config[name] = value !== undefined ? value : emptied(dflt, values[name]);
        continue;
      }
      if (value === undefined) continue;
      if (!must && dflt !== undefined && same(value, dflt)) continue;
      config[name] = value;
    }
    return { config, problems };
  }
  const initial = {};
  for (const { name, read: get } of readers) {
    try { initial[name] = get(); } catch { initial[name] = undefined; }
  }
  return { el, errors, read };
}
