// dlq.js - dead letters: drain, the groups, search, the letter list with pagination and
// selection, and replay of a group or a selection as a server-side job.
import { call, get, query } from './api.js';
import { confirmDialog, h, link, put, say, statusLine, table, text, when } from './dom.js';

const PAGE = 50;
const FILTERS = ['q', 'event_id', 'payment_id', 'group'];

// startJob - confirm, POST /admin/replays with @selector, then open the job's page.
export async function startJob(selector, what, statusEl) {
  const ok = await confirmDialog('Replay dead letters',
    `Replay ${what}? Each letter is published again once; the job records who asked.`, 'Replay');
  if (!ok) {
    say(statusEl, 'Replay cancelled.');
    return;
  }
  try {
    const r = await call('POST', '/admin/replays', selector);
    location.hash = `#/jobs/${encodeURIComponent(r.data.id)}`;
  } catch (e) {
    say(statusEl, `The replay was not started: ${e.message}`, true);
  }
}

function groupsTable(groups, statusEl) {
  return table('Groups: first death reason and error class', [
    { label: 'Reason', cell: (g) => text(g.reason) },
    { label: 'Error', cell: (g) => h('span', { class: 'error-text' }, text(g.error)) },
    { label: 'Letters', cell: (g) => text(g.count), className: 'num' },
    { label: 'Not replayed', cell: (g) => text(g.not_replayed), className: 'num' },
    { label: 'First seen', cell: (g) => when(g.first_seen) },
    { label: 'Last seen', cell: (g) => when(g.last_seen) },
    {
      label: 'Actions',
      cell: (g) => h('span', { class: 'actions' },
        h('a', { href: '#/dlq' + query({ group: g.key }), class: 'button' }, 'Show letters'),
        h('button', {
          type: 'button',
          class: 'danger',
          disabled: !(Number(g.not_replayed) > 0),
          onclick: () => startJob({ group: g.key },
            `the group "${text(g.reason)} / ${text(g.error)}" (${text(g.not_replayed)} letters not replayed)`,
            statusEl),
        }, 'Replay group')),
    },
  ], groups, { id: 'dlq-groups' });
}

function searchForm(params) {
  const kinds = [['q', 'Any (error, event id, payment id)'], ['event_id', 'Event id'],
    ['payment_id', 'Payment id']];
  const current = kinds.find(([k]) => params.get(k)) || kinds[0];
  const input = h('input', { id: 'dlq-search', type: 'search', value: params.get(current[0]) || '',
    maxlength: '200' });
  const kind = h('select', { id: 'dlq-search-kind' },
    kinds.map(([k, label]) => h('option', { value: k, selected: k === current[0] }, label)));
  return h('form', {
    id: 'dlq-search-form',
    role: 'search',
    class: 'inline',
    onsubmit: (ev) => {
      ev.preventDefault();
      const v = input.value.trim();
      location.hash = '#/dlq' + (v ? query({ [kind.value]: v }) : '');
    },
  },
  h('label', { for: 'dlq-search' }, 'Search letters'), input,
  h('label', { for: 'dlq-search-kind', class: 'visually-hidden' }, 'Search in'), kind,
  h('button', { type: 'submit' }, 'Search'),
  h('a', { href: '#/dlq', class: 'button' }, 'Clear'));
}

function drainBox() {
  const max = h('input', { id: 'drain-max', type: 'number', min: '1', max: '1000', value: '100' });
  const result = statusLine('drain-result');
  const btn = h('button', {
    type: 'button',
    id: 'drain',
    onclick: async () => {
      btn.disabled = true;
      say(result, 'Draining…');
      try {
        const r = await call('POST', '/admin/dlq/drain' + query({ max: max.value }));
        say(result, `Drained ${text(r.data.drained)} letter(s) from the DLQ queue into the store.`);
      } catch (e) {
        say(result, `Drain failed: ${e.message}`, true);
      } finally {
        btn.disabled = false;
      }
    },
  }, 'Drain the DLQ queue');
  return h('div', { class: 'inline' }, h('label', { for: 'drain-max' }, 'At most'), max, btn, result);
}

export function render(el, _arg, params) {
  const status = statusLine('dlq-status');
  const groupsBox = h('div', { id: 'dlq-groups-box' });
  const listBox = h('div', { id: 'dlq-list-box' });
  const filters = {};
  for (const k of FILTERS) if (params.get(k)) filters[k] = params.get(k);
  const cursors = [null]; // the "after" of each page seen; the last is the current page's
  let next = null;
  let stopped = false;
  const selected = new Map(); // letter id -> true

  const replaySel = h('button', {
    type: 'button',
    id: 'replay-selected',
    class: 'danger',
    disabled: true,
    onclick: () => startJob({ ids: [...selected.keys()] }, `${selected.size} selected letter(s)`, status),
  }, 'Replay selected');
  const prev = h('button', { type: 'button', id: 'page-prev', disabled: true,
    onclick: () => { cursors.pop(); loadLetters(); } }, 'Previous page');
  const nextBtn = h('button', { type: 'button', id: 'page-next', disabled: true,
    onclick: () => { cursors.push(next); loadLetters(); } }, 'Next page');
  const pageInfo = h('span', { id: 'page-info' });

  function updateSel() {
    replaySel.disabled = selected.size === 0;
    replaySel.textContent = selected.size ? `Replay selected (${selected.size})` : 'Replay selected';
  }

  const filterText = Object.entries(filters).map(([k, v]) => `${k} = "${v}"`).join(', ');
  put(el, 
    h('h2', null, 'Dead letters'),
    drainBox(),
    h('h3', null, 'Groups'),
    groupsBox,
    h('h3', null, 'Letters'),
    searchForm(params),
    filterText ? h('p', { id: 'dlq-filter' }, 'Showing letters where ', filterText) : null,
    status,
    h('p', { class: 'inline' }, replaySel),
    listBox,
    h('p', { class: 'inline' }, prev, nextBtn, pageInfo),
  );

  async function loadGroups() {
    try {
      const r = await get('/admin/dlq/groups');
      if (stopped) return;
      const groups = Array.isArray(r.groups) ? r.groups : [];
      put(groupsBox, groups.length ? groupsTable(groups, status)
        : h('p', null, 'No dead letters are stored.'));
    } catch (e) {
      if (!stopped) put(groupsBox, h('p', { class: 'error' }, `Could not load the groups: ${e.message}`));
    }
  }

  async function loadLetters() {
    const after = cursors[cursors.length - 1];
    try {
      const r = await get('/admin/dlq' + query({ limit: PAGE, after, ...filters }));
      if (stopped) return;
      const items = Array.isArray(r.items) ? r.items : [];
      next = r.next === undefined ? null : r.next;
      prev.disabled = cursors.length <= 1;
      nextBtn.disabled = next === null;
      pageInfo.textContent = `Page ${cursors.length}, ${items.length} letter(s)`;
      put(listBox, items.length ? table(null, [
        {
          label: 'Select',
          cell: (l) => h('input', {
            type: 'checkbox',
            'aria-label': `Select letter ${text(l.id)}`,
            'data-letter': text(l.id),
            checked: selected.has(l.id),
            disabled: Boolean(l.replayed_at),
            onchange: (ev) => {
              if (ev.target.checked) selected.set(l.id, true);
              else selected.delete(l.id);
              updateSel();
            },
          }),
        },
        { label: 'Letter', cell: (l) => link(text(l.id), 'letter', l.id) },
        { label: 'Event id', cell: (l) => text(l.event_id) },
        { label: 'Payment id', cell: (l) => text(l.payment_id) },
        { label: 'Reason', cell: (l) => text(l.first_death_reason) },
        { label: 'Error', cell: (l) => h('span', { class: 'error-text' }, text(l.last_error)) },
        { label: 'Attempt', cell: (l) => text(l.attempt), className: 'num' },
        { label: 'Drained', cell: (l) => when(l.drained_at) },
        { label: 'Replayed', cell: (l) => (l.replayed_at ? when(l.replayed_at) : 'no') },
      ], items, { id: 'dlq-letters' }) : h('p', { id: 'dlq-none' }, 'No letter matches.'));
    } catch (e) {
      if (!stopped) put(listBox, h('p', { class: 'error' }, `Could not load the letters: ${e.message}`));
    }
  }

  loadGroups();
  loadLetters();
  return () => {
    stopped = true;
  };
}
