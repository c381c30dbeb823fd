// The API as the page calls it. The key lives in sessionStorage only (gone when the browser session ends) and
// travels in the Authorization header: never in a URL, where logs and the history would keep it. Signed in through
// single sign-on instead, the page holds no key: the browser sends the session's HttpOnly cookie (which no script
// can read), and every change carries the session's CSRF token from GET /v1/me in X-CSRF-Token.

const KEY = 'agentsearch.apiKey';
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
let csrf = null; // the single sign-on session's CSRF token, in this page's memory only

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set(key) { sessionStorage.setItem(KEY, key); },
  setCsrf(token) { csrf = token || null; },
  get sso() { return !this.key && Boolean(csrf); },
  clear() { sessionStorage.removeItem(KEY); csrf = null; },
};

export class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === 'string' ? detail : (Array.isArray(detail) ? detail.map((d) => d.msg).join('; ') : `HTTP ${status}`));
    this.status = status;
    this.detail = detail;
  }
}

function headers(extra, method = 'GET') {
  if (session.key) return { Authorization: `Bearer ${session.key}`, ...extra };
  return SAFE.has(method) || !csrf ? { ...extra } : { 'X-CSRF-Token': csrf, ...extra };
}

async function failure(response) {
  let detail = null;
  try { detail = (await response.json()).detail; } catch { detail = null; }
  if (!detail) detail = response.status === 429 ? 'too many requests; try again shortly' : `HTTP ${response.status}`;
  const error = new ApiError(response.status, detail);
  if (response.status === 401) window.dispatchEvent(new CustomEvent('agentsearch:unauthorized', { detail: error.message }));
  return error;
}

/** api('/v1/collections'), api(path, {method: 'POST', json: {...}}), api(path, {method: 'POST', form: formData}) */
export async function api(path, { method = 'GET', json, form, signal } = {}) {
  const init = { method, headers: headers({}, method), signal, credentials: 'same-origin' };
  if (json !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(json);
  } else if (form !== undefined) {
    init.body = form;
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  if (response.status === 204) return null;
  return response.json();
}

/** The job's server-sent events, parsed from fetch's streamed body (EventSource cannot send a header):
 * yields {event, data} until the server ends the stream or `signal` aborts. */
export async function* jobEvents(jobId, signal) {
  const response = await fetch(`/v1/jobs/${encodeURIComponent(jobId)}/events`,
    { headers: headers({ Accept: 'text/event-stream' }), signal, credentials: 'same-origin' });
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const parsed = parseBlock(block);
        if (parsed) yield parsed;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function parseBlock(block) {
  let event = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return null;
  const text = data.join('\n');
  try { return { event, data: JSON.parse(text) }; } catch { return { event, data: text }; }
}

/** Artifact bytes (inlined as base64 in the job's view) as a Blob. */
export function base64Blob(data, type) {
  const binary = atob(data);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return new Blob([bytes], { type });
}
