// Building the page: every piece of user content (document text, answers, titles, artifact names) enters the DOM
// as a text node or an attribute value, never as markup. Nothing here assigns innerHTML.

/** h('button', {class: 'primary', onclick: fn, 'aria-label': 'Close'}, 'text', childNode, [more]) */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'value') el.value = value;
    else if (key === 'checked' || key === 'selected' || key === 'disabled' || key === 'hidden') el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

let ids = 0;
export function uid(prefix = 'id') {
  ids += 1;
  return `${prefix}-${ids}`;
}

export function formatMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '';
  if (ms < 1) return '<1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

// The API writes UTC times; some without a zone (SQLite), which are UTC too.
export function parseTime(value) {
  if (!value) return null;
  const text = /[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value}Z`;
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? null : date;
}

export function formatTime(value) {
  const date = parseTime(value);
  if (!date) return '';
  const today = new Date().toDateString() === date.toDateString();
  return today
    ? date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : date.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
}

/** A status word as a badge: ok, error, timeout, circuit_open, skipped, running, ... */
export function badge(status, extra) {
  const words = { circuit_open: 'circuit open', not_run: 'not run' };
  return h('span', { class: `badge badge-${status}`, dataset: { status } }, words[status] || status, extra ? ` · ${extra}` : null);
}

let toastTimer = null;
let toastShownAt = 0;
export function toast(message, kind = 'info') {
  const el = document.getElementById('toast');
  if (!el) return;
  toastShownAt = performance.now();
  el.textContent = message;
  el.className = `toast toast-${kind}`;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 4000);
}

/** A note about what was done on another screen is not left over this one (one that led here stays). */
export function dropStaleToast() {
  const el = document.getElementById('toast');
  if (el && performance.now() - toastShownAt > 300) el.hidden = true;
}

/** A 422's field errors put next to their fields: `fields` maps a loc joined with '.' (e.g. 'body.config.threshold')
 * to the element that shows that field's error; what matches no field goes to `fallback`. */
export function showFieldErrors(error, fields, fallback) {
  for (const el of Object.values(fields)) { el.textContent = ''; el.hidden = true; }
  if (fallback) { fallback.textContent = ''; fallback.hidden = true; }
  if (!error) return;
  const problems = Array.isArray(error.detail) ? error.detail : [{ loc: [], msg: error.message }];
  const unmatched = [];
  for (const problem of problems) {
    const loc = (problem.loc || []).map(String);
    let target = null;
    for (let n = loc.length; n > 0 && !target; n -= 1) target = fields[loc.slice(0, n).join('.')] || null;
    if (target) {
      target.textContent = target.textContent ? `${target.textContent}; ${problem.msg}` : problem.msg;
      target.hidden = false;
      const input = target.dataset.for && document.getElementById(target.dataset.for);
      if (input) input.setAttribute('aria-invalid', 'true');
    } else {
      unmatched.push(loc.length ? `${loc.join('.')}: ${problem.msg}` : problem.msg);
    }
  }
  if (unmatched.length && fallback) { fallback.textContent = unmatched.join('; '); fallback.hidden = false; }
  const first = Object.values(fields).find((el) => !el.hidden);
  const input = first && first.dataset.for && document.getElementById(first.dataset.for);
  if (input) input.focus();
}

export function clearInvalid(form) {
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
}
