// jobs.js - replay jobs: the list (who, when, what, progress) and one job, polled until it is
// finished, with each letter's result.
import { get, query } from './api.js';
import { dl, h, link, put, say, statusLine, table, text, when } from './dom.js';

const POLL_MS = 1000;
const LETTERS_PAGE = 500;

export function finished(job) {
  return Boolean(job.finished_at) || !['queued', 'running'].includes(job.status);
}

function what(sel) {
  if (!sel || typeof sel !== 'object') return text(sel);
  if (Array.isArray(sel.ids)) return `${sel.ids.length} selected letter(s)`;
  if (sel.group !== undefined) return `group ${text(sel.group)}`;
  return JSON.stringify(sel);
}

function progress(job) {
  const total = Number(job.total) || 0;
  const done = Number(job.done) || 0;
  return h('span', { class: 'progress' },
    h('progress', { max: String(Math.max(total, 1)), value: String(total ? done : 0),
      'aria-label': `job ${text(job.id)} progress` }),
    ` ${done} / ${total}`);
}

function listView(el) {
  const status = statusLine('jobs-status');
  const box = h('div');
  let stopped = false;
  let timer = null;
  put(el, h('h2', null, 'Replay jobs'), status, box);

  async function load() {
    try {
      const r = await get('/admin/replays');
      if (stopped) return;
      const items = Array.isArray(r.items) ? r.items : [];
      put(box, items.length ? table(null, [
        { label: 'Job', cell: (j) => link(text(j.id), 'jobs', j.id) },
        { label: 'Requested by', cell: (j) => text(j.requested_by) },
        { label: 'Requested at', cell: (j) => when(j.requested_at) },
        { label: 'What', cell: (j) => what(j.selector) },
        { label: 'Status', cell: (j) => text(j.status) },
        { label: 'Progress', cell: (j) => progress(j) },
        { label: 'Replayed', cell: (j) => text(j.replayed), className: 'num' },
        { label: 'Failed', cell: (j) => text(j.failed), className: 'num' },
        { label: 'Finished at', cell: (j) => when(j.finished_at) },
      ], items, { id: 'jobs-table' }) : h('p', null, 'No replay job yet.'));
      say(status, '');
      if (items.some((j) => !finished(j))) timer = setTimeout(load, POLL_MS * 2);
    } catch (e) {
      if (!stopped) say(status, `Could not load the jobs: ${e.message}`, true);
    }
  }
  load();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function jobView(el, id) {
  const status = statusLine('job-status');
  const head = h('div', { id: 'job-summary' });
  const lettersBox = h('div', { id: 'job-letters-box' });
  const more = h('button', { type: 'button', hidden: true, onclick: () => loadLetters(true) }, 'More letters');
  let stopped = false;
  let timer = null;
  let letters = [];
  let next = null;

  put(el, h('p', null, link('← Replay jobs', 'jobs')), h('h2', null, `Replay job ${id}`), status, head,
    h('h3', null, 'Letters'), lettersBox, h('p', null, more));

  function showLetters() {
    put(lettersBox, letters.length ? table(null, [
      { label: 'Letter', cell: (r) => link(text(r.letter_id), 'letter', r.letter_id) },
      { label: 'Result', cell: (r) => h('span', { class: `result result-${text(r.result).replace(/[^a-z_]/g, '')}` }, text(r.result)) },
      { label: 'Detail', cell: (r) => text(r.detail) },
      { label: 'At', cell: (r) => when(r.at) },
    ], letters, { id: 'job-letters' }) : h('p', null, 'No letter has a result yet.'));
    more.hidden = next === null || next === undefined;
  }

  async function loadLetters(append) {
    const r = await get(`/admin/replays/${encodeURIComponent(id)}` +
      query({ limit: LETTERS_PAGE, after: append ? next : null }));
    letters = append ? letters.concat(r.letters || []) : (r.letters || []);
    next = r.next === undefined ? null : r.next;
    showLetters();
    return r.job;
  }

  async function poll() {
    try {
      const job = await loadLetters(false);
      if (stopped) return;
      const done = finished(job);
      put(head,
        h('p', { id: 'job-state', class: done ? 'ok' : '' },
          done ? `Finished: ${text(job.status)}` : `In progress: ${text(job.status)}`),
        progress(job),
        dl([
          ['Requested by', text(job.requested_by)],
          ['Requested at', when(job.requested_at)],
          ['What', what(job.selector)],
          ['Letters', text(job.total)],
          ['Done', text(job.done)],
          ['Replayed', h('span', { id: 'job-replayed' }, text(job.replayed))],
          ['Failed', h('span', { id: 'job-failed' }, text(job.failed))],
          ['Finished at', when(job.finished_at)],
        ]));
      say(status, done ? '' : 'Updating every second…');
      if (!done) timer = setTimeout(poll, POLL_MS);
    } catch (e) {
      if (!stopped) {
        say(status, `Could not load the job: ${e.message}`, true);
        if (e.status !== 401 && e.status !== 404) timer = setTimeout(poll, POLL_MS * 3);
      }
    }
  }
  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

export function render(el, id) {
  return id ? jobView(el, id) : listView(el);
}
