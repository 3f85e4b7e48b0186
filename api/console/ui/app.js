// app.js - the console's entry: the session (log in, resume, log out) and the hash router.
import * as api from './api.js';
import { clear, h } from './dom.js';
import * as overview from './overview.js';
import * as dlq from './dlq.js';
import * as letter from './letter.js';
import * as jobs from './jobs.js';
import * as reconciliation from './reconciliation.js';

const $ = (id) => document.getElementById(id);
let session = null; // {operator, expires_at}; the CSRF token lives in api.js only
let leaveView = null; // stops the current view's timers

// routes: "#/<name>/<arg>?<query>" -> a view's render(el, arg, params) that returns a stop function.
const routes = {
  overview: overview.render,
  dlq: dlq.render,
  letter: letter.render,
  jobs: jobs.render,
  reconciliation: reconciliation.render,
};

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs] = raw.split('?', 2);
  const [name, ...rest] = path.split('/').map((p) => decodeURIComponent(p));
  return { name: name || 'overview', arg: rest.join('/'), params: new URLSearchParams(qs || '') };
}

function stopView() {
  if (leaveView) {
    try {
      leaveView();
    } catch {
      /* a view's cleanup never blocks the next one */
    }
  }
  leaveView = null;
}

function showLogin(message) {
  stopView();
  session = null;
  $('view').hidden = true;
  clear($('view'));
  $('nav').hidden = true;
  $('who').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('login-token').value = '';
  $('login-token').focus();
}

function showApp() {
  $('login').hidden = true;
  $('nav').hidden = false;
  $('who').hidden = false;
  $('operator').textContent = session.operator;
  $('view').hidden = false;
  route();
}

function route() {
  if (!session) return;
  stopView();
  const { name, arg, params } = parseHash();
  const render = routes[name] || overview.render;
  for (const a of document.querySelectorAll('#nav a')) {
    const current = a.dataset.view === name || (name === 'letter' && a.dataset.view === 'dlq');
    if (current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const el = clear($('view'));
  el.appendChild(h('p', { class: 'loading' }, 'Loading…'));
  leaveView = render(el, arg, params, { operator: session.operator }) || null;
}

async function onLogin(ev) {
  ev.preventDefault();
  const token = $('login-token').value;
  const operator = $('login-operator').value.trim();
  $('login-error').textContent = '';
  try {
    session = await api.login(token, operator);
    $('login-token').value = '';
    showApp();
  } catch (e) {
    $('login-token').value = '';
    const msg = e.status === 401 ? 'The token was not accepted.' : `Could not log in (${e.message}).`;
    showLogin(msg);
  }
}

async function onLogout() {
  try {
    await api.logout();
  } catch {
    /* logged out either way */
  }
  showLogin('Logged out.');
}

api.whenUnauthorized((path) => {
  if (path === '/admin/session') return; // the login form handles its own answers
  if (session) showLogin('Your session has ended: log in again.');
});

async function start() {
  $('login-form').addEventListener('submit', onLogin);
  $('logout').addEventListener('click', onLogout);
  window.addEventListener('hashchange', route);
  try {
    session = await api.resume();
    showApp();
  } catch {
    showLogin('');
  }
}

start();
