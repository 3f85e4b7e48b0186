// api.js - the console's calls to payments-api: the session cookie, and the CSRF token
// kept in this module's memory only (never in storage, never in a URL).

let csrf = null;
let onUnauthorized = () => {};

export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem && (problem.detail || problem.title);
    super(detail ? `${status}: ${detail}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// whenUnauthorized - @f runs on every 401 (the session is gone: show the login form).
export function whenUnauthorized(f) {
  onUnauthorized = f;
}

export function setCsrf(token) {
  csrf = token || null;
}

// call - @method @path (same origin) with an optional JSON @body; resolves {status, data},
// throws ApiError for anything but 2xx. POST and DELETE carry X-CSRF-Token.
export async function call(method, path, body) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store', redirect: 'error' };
  if (method !== 'GET' && csrf) headers['X-CSRF-Token'] = csrf;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const raw = await r.text();
  let data = null;
  if (raw) {
    try {
      data = JSON.parse(raw);
    } catch {
      data = null;
    }
  }
  if (r.status === 401) {
    csrf = null;
    onUnauthorized(path);
  }
  if (!r.ok) throw new ApiError(r.status, data);
  return { status: r.status, data };
}

export const get = (path) => call('GET', path).then((r) => r.data);

// query - "?k=v&..." of the members of @params that are not empty.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

// ---- sessions --------------------------------------------------------------------------------
export async function resume() {
  const s = await get('/admin/session');
  setCsrf(s.csrf);
  return s;
}

export async function login(token, operator) {
  const body = { token };
  if (operator) body.operator = operator;
  const r = await call('POST', '/admin/session', body);
  setCsrf(r.data.csrf);
  return r.data;
}

export async function logout() {
  try {
    await call('DELETE', '/admin/session');
  } finally {
    setCsrf(null);
  }
}
