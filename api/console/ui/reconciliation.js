// reconciliation.js - GET /admin/reconciliation: each check, ok or not, with its offending ids.
import { get } from './api.js';
import { h, put, say, statusLine, table, text } from './dom.js';

function verdict(ok) {
  return h('span', { class: ok ? 'ok' : 'bad' }, ok ? 'OK' : 'FAILED');
}

export function render(el) {
  const status = statusLine('reconciliation-status');
  const box = h('div', { id: 'reconciliation' });
  const again = h('button', { type: 'button', onclick: () => load() }, 'Run again');
  let stopped = false;
  put(el, h('h2', null, 'Reconciliation'), h('p', null, again), status, box);

  async function load() {
    say(status, 'Running the checks…');
    try {
      const r = await get('/admin/reconciliation');
      if (stopped) return;
      const checks = Array.isArray(r.checks) ? r.checks : [];
      put(box, 
        h('p', { id: 'reconciliation-overall', class: r.ok ? 'ok' : 'bad' },
          r.ok ? 'Every check holds.' : 'At least one check FAILED.'),
        table('Checks', [
          { label: 'Check', cell: (c) => text(c.name) },
          { label: 'Result', cell: (c) => verdict(c.ok) },
          { label: 'Detail', cell: (c) => text(c.detail) },
          {
            label: 'Offending ids',
            cell: (c) => {
              const ids = Array.isArray(c.offending) ? c.offending : [];
              if (!ids.length) return '—';
              return h('ul', { class: 'ids' }, ids.map((id) => h('li', null, text(id))),
                c.truncated ? h('li', null, '… (more not shown)') : null);
            },
          },
        ], checks, { id: 'reconciliation-checks' }),
        table('Payments by status', [
          { label: 'Status', cell: (e) => e[0] },
          { label: 'Payments', cell: (e) => text(e[1] && e[1].count), className: 'num' },
          { label: 'Amount (cents)', cell: (e) => text(e[1] && e[1].amount_cents), className: 'num' },
        ], Object.entries(r.by_status || {}), { id: 'reconciliation-by-status' }),
      );
      say(status, `Checked at ${new Date().toLocaleTimeString()}.`);
    } catch (e) {
      if (!stopped) say(status, `Could not run the reconciliation: ${e.message}`, true);
    }
  }
  load();
  return () => {
    stopped = true;
  };
}
