// dom.js - building the page from data without markup: every value goes in as text.

// h - a new element. @attrs: "text" sets textContent, "on<event>" adds a listener, "hidden",
// "disabled", "checked" set those properties, anything else is setAttribute() (callers pass
// only safe attributes). @children: nodes, or strings and numbers as text nodes; null skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'hidden' || k === 'disabled' || k === 'checked') el[k] = Boolean(v);
    else if (k === 'value') el.value = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

// append - add @children (as h() takes them) to @el.
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// clear - remove every child of @el.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// text - a value as the page shows it: "" for null, JSON for objects.
export function text(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

// table - a table with a caption, @cols [{label, cell(row) -> node|string, className?}], @rows.
export function table(caption, cols, rows, attrs) {
  const head = h('tr', null, cols.map((c) => h('th', { scope: 'col', class: c.className }, c.label)));
  const body = h('tbody', null, rows.map((r) =>
    h('tr', null, cols.map((c) => h('td', { class: c.className }, c.cell(r))))));
  return h('table', attrs, caption ? h('caption', null, caption) : null, h('thead', null, head), body);
}

// dl - a definition list from [[term, value]] pairs (values as h() children).
export function dl(pairs, attrs) {
  return h('dl', attrs, pairs.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

// when - a date-time from the server, as it was sent, in a <time> element; "" when null.
export function when(s) {
  if (!s) return '';
  return h('time', { datetime: String(s) }, String(s));
}

// link - an in-page link to #/@parts (each part URI-encoded).
export function link(label, ...parts) {
  return h('a', { href: '#/' + parts.map((p) => encodeURIComponent(String(p))).join('/') }, label);
}

// status - a status line (role=status), with class "error" when @isError.
export function statusLine(id) {
  return h('p', { id, class: 'status', role: 'status' });
}

export function say(el, message, isError) {
  el.textContent = message;
  el.classList.toggle('error', Boolean(isError));
}

// confirmDialog - the page's own confirmation (never window.confirm): resolves true on "ok".
export function confirmDialog(title, message, okLabel) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = message;
  document.getElementById('confirm-ok').textContent = okLabel || 'OK';
  dlg.returnValue = '';
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
    dlg.showModal();
    document.getElementById('confirm-cancel').focus();
  });
}

// put - replace the children of @el by @children (as h() takes them).
export function put(el, ...children) {
  return append(clear(el), children);
}
