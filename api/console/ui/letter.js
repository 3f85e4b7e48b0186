// letter.js - one dead letter whole: its fields, the body (pretty-printed when JSON), the
// headers, x-death, the replay record, and a Replay button behind a confirmation.
import { call, get } from './api.js';
import { confirmDialog, dl, h, link, put, say, statusLine, table, text, when } from './dom.js';

// bodyText - the body as text: JSON pretty-printed; base64 decoded when it is UTF-8.
function bodyView(l) {
  if (l.body !== undefined && l.body !== null) {
    return [h('p', null, 'JSON:'), h('pre', { id: 'letter-body', class: 'body' }, JSON.stringify(l.body, null, 2))];
  }
  if (typeof l.body_base64 === 'string') {
    let decoded = null;
    try {
      const bin = atob(l.body_base64);
      const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
      decoded = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      decoded = null;
    }
    return [
      h('p', null, decoded === null ? 'Not JSON and not UTF-8; base64:' : 'Not JSON; as text:'),
      h('pre', { id: 'letter-body', class: 'body' }, decoded === null ? l.body_base64 : decoded),
    ];
  }
  return [h('p', { id: 'letter-body' }, 'No body.')];
}

function headersTable(headers) {
  const rows = headers && typeof headers === 'object' ? Object.entries(headers) : [];
  if (!rows.length) return h('p', { id: 'letter-headers' }, 'No headers.');
  return table(null, [
    { label: 'Header', cell: (r) => r[0] },
    { label: 'Value', cell: (r) => h('code', null, typeof r[1] === 'string' ? r[1] : JSON.stringify(r[1])) },
  ], rows, { id: 'letter-headers' });
}

function xDeathTable(xd) {
  const rows = Array.isArray(xd) ? xd : [];
  if (!rows.length) return h('p', { id: 'letter-xdeath' }, 'No x-death (the letter did not go through a dead-letter exchange).');
  return table(null, [
    { label: 'Queue', cell: (d) => text(d.queue) },
    { label: 'Reason', cell: (d) => text(d.reason) },
    { label: 'Count', cell: (d) => text(d.count), className: 'num' },
    { label: 'Exchange', cell: (d) => text(d.exchange) },
    { label: 'Routing keys', cell: (d) => (Array.isArray(d.routing_keys) ? d.routing_keys.join(', ') : text(d.routing_keys)) },
    { label: 'Time', cell: (d) => when(d.time) },
  ], rows, { id: 'letter-xdeath' });
}

function replayRecord(l) {
  const r = l.replay;
  if (r && typeof r === 'object') {
    return dl([['Replayed at', when(r.at)], ['By', text(r.by)],
      ['Job', r.job === null || r.job === undefined ? '— (one letter)' : link(`job ${text(r.job)}`, 'jobs', r.job)]],
    { id: 'letter-replay' });
  }
  if (l.replayed_at) {
    return dl([['Replayed at', when(l.replayed_at)], ['By', text(l.replayed_by)]], { id: 'letter-replay' });
  }
  return h('p', { id: 'letter-replay' }, 'Not replayed.');
}

export function render(el, id) {
  const status = statusLine('letter-status');
  let stopped = false;

  async function replay(l) {
    const ok = await confirmDialog('Replay this letter',
      `Replay letter ${text(l.id)} (event ${text(l.event_id)}, payment ${text(l.payment_id)})? ` +
      'Its body is published again with x-attempt 1.', 'Replay');
    if (!ok) {
      say(status, 'Replay cancelled.');
      return;
    }
    try {
      const r = await call('POST', `/admin/dlq/${encodeURIComponent(l.id)}/replay`);
      await load();
      say(status, `Replay answered ${r.status}: ${text(r.data && r.data.status)}.`);
    } catch (e) {
      say(status, `Replay refused: ${e.message}`, true);
    }
  }

  async function load() {
    try {
      const l = await get(`/admin/dlq/${encodeURIComponent(id)}`);
      if (stopped) return;
      const replayed = Boolean(l.replayed_at || l.replay);
      put(el,
        h('p', null, link('← Dead letters', 'dlq')),
        h('h2', null, `Letter ${text(l.id)}`),
        status,
        h('p', null, h('button', { type: 'button', id: 'letter-replay-button', class: 'danger',
          disabled: replayed, onclick: () => replay(l) }, replayed ? 'Already replayed' : 'Replay this letter')),
        dl([
          ['Event id', text(l.event_id)],
          ['Payment id', text(l.payment_id)],
          ['Message id', text(l.message_id)],
          ['Routing key', text(l.routing_key)],
          ['Attempt', text(l.attempt)],
          ['Last error', h('span', { class: 'error-text' }, text(l.last_error))],
          ['First death', `${text(l.first_death_reason)} in ${text(l.first_death_queue)} (exchange ${text(l.first_death_exchange)})`],
          ['Drained at', when(l.drained_at)],
        ], { id: 'letter-fields' }),
        h('h3', null, 'Replay'), replayRecord(l),
        h('h3', null, 'Body'), bodyView(l),
        h('h3', null, 'Headers'), headersTable(l.headers),
        h('h3', null, 'x-death'), xDeathTable(l.x_death),
      );
    } catch (e) {
      if (!stopped) put(el, h('h2', null, 'Letter'), h('p', { class: 'error' }, `Could not load the letter: ${e.message}`));
    }
  }
  load();
  return () => {
    stopped = true;
  };
}
