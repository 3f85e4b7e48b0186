// overview.js - the live state: outbox backlog, queue depths, dead letters and settle rate,
// refreshed every 2 seconds while the view is open. (No payments by status: that is a scan of
// the whole table, too dear every 2 s; the reconciliation view has the counts.)
import { get } from './api.js';
import { dl, h, put, say, statusLine, table, text } from './dom.js';

const REFRESH_MS = 2000;

function seconds(v) {
  if (v === null || v === undefined) return '—';
  const n = Number(v);
  return Number.isFinite(n) ? `${n.toFixed(n < 10 ? 1 : 0)} s` : text(v);
}

function fill(box, o) {
  const outbox = o.outbox || {};
  const dlqs = o.dlq || {};
  const rate = Number(o.settle_rate_per_s);
  put(box, 
    h('div', { class: 'cards' },
      h('section', { class: 'card', 'aria-labelledby': 'ov-outbox' },
        h('h3', { id: 'ov-outbox' }, 'Outbox'),
        dl([['Pending', text(outbox.pending)],
          ['Oldest pending', seconds(outbox.oldest_pending_seconds)]], { id: 'overview-outbox' })),
      h('section', { class: 'card', 'aria-labelledby': 'ov-dlq' },
        h('h3', { id: 'ov-dlq' }, 'Dead letters'),
        dl([['In the DLQ queue', text(dlqs.broker)], ['Stored', text(dlqs.stored)],
          ['Not replayed', text(dlqs.not_replayed)]], { id: 'overview-dlq' })),
      h('section', { class: 'card', 'aria-labelledby': 'ov-settle' },
        h('h3', { id: 'ov-settle' }, 'Settlement'),
        dl([['Settled in the last minute', text(o.settled_last_minute)],
          ['Rate', Number.isFinite(rate) ? `${rate.toFixed(2)} /s` : text(o.settle_rate_per_s)]],
        { id: 'overview-settle' }))),
    table('Queues', [
      { label: 'Queue', cell: (q) => text(q.name) },
      { label: 'Messages', cell: (q) => text(q.messages), className: 'num' },
      { label: 'Consumers', cell: (q) => text(q.consumers), className: 'num' },
    ], Array.isArray(o.queues) ? o.queues : [], { id: 'overview-queues' }),
  );
}

export function render(el) {
  const box = h('div', { id: 'overview' });
  const status = statusLine('overview-status');
  let timer = null;
  let stopped = false;

  put(el, h('h2', null, 'Overview'), status, box);

  async function tick() {
    try {
      const o = await get('/admin/overview');
      if (stopped) return;
      fill(box, o);
      say(status, `Updated ${new Date().toLocaleTimeString()}; refreshed every 2 s.`);
    } catch (e) {
      if (!stopped) say(status, `Could not load the overview: ${e.message}`, true);
    }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  }
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
