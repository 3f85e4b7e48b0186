// tests/console/console.mjs - the operator console in a real browser (Debian's chromium driven by
// playwright-core), against a running payments-api that already holds dead letters.
//
// Environment (set by test_console.c):
//   GW_CONSOLE_URL         the API's base URL, e.g. http://127.0.0.1:PORT
//   GW_ADMIN_TOKEN         ADMIN_TOKEN;  GW_API_TOKEN: API_TOKEN (must never open /admin/*)
//   GW_CONSOLE_ZERO        how many R$ 0 letters are stored (one group)
//   GW_CONSOLE_DOWN        how many bank-down letters are stored (another group)
//   GW_CONSOLE_DOWN_PAYMENT  the payment_id of one bank-down letter (searched, opened, replayed)
//   GW_CONSOLE_POISON      a substring of the poison letter's event id (searched)
//   GW_CONSOLE_TRAP        the loopback URL the poison's payload points at: no request may go there
//   GW_CONSOLE_SCREENSHOTS a folder: screenshots of the main views go there (unset: none)
//   GW_CHROMIUM            the browser (default /usr/bin/chromium)
// Prints "ok - ..." / "not ok - ..." per assertion and exits 1 when any failed.
import { chromium } from 'playwright-core';
import path from 'node:path';

const env = (k, d) => {
  const v = process.env[k];
  if (v === undefined || v === '') {
    if (d !== undefined) return d;
    throw new Error(`${k} is not set`);
  }
  return v;
};
const BASE = env('GW_CONSOLE_URL').replace(/\/$/, '');
const UI = `${BASE}/admin/ui/`;
const ADMIN_TOKEN = env('GW_ADMIN_TOKEN');
const API_TOKEN = env('GW_API_TOKEN');
const ZERO = Number(env('GW_CONSOLE_ZERO'));
const DOWN = Number(env('GW_CONSOLE_DOWN'));
const DOWN_PAYMENT = env('GW_CONSOLE_DOWN_PAYMENT');
const POISON = env('GW_CONSOLE_POISON');
const TRAP = env('GW_CONSOLE_TRAP');
const SHOTS = process.env.GW_CONSOLE_SCREENSHOTS || '';
const CHROMIUM = env('GW_CHROMIUM', '/usr/bin/chromium');
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
  "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const T = 20000; // a step's timeout (ms)

let passed = 0;
let failed = 0;
function check(name, cond, detail) {
  if (cond) {
    passed++;
    console.log(`ok - ${name}`);
  } else {
    failed++;
    console.log(`not ok - ${name}${detail !== undefined ? `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}` : ''}`);
  }
  return Boolean(cond);
}

// scenario - run @f; an exception is one failed assertion, and the next scenario still runs.
async function scenario(name, f) {
  console.log(`# ${name}`);
  try {
    await f();
  } catch (e) {
    check(`${name}: ran to the end`, false, e && e.stack ? e.stack : String(e));
  }
}

async function shot(page, name) {
  if (!SHOTS) return;
  await page.waitForTimeout(300); // the last paint
  await page.screenshot({ path: path.join(SHOTS, `console-${name}.png`), fullPage: false });
  console.log(`# screenshot ${name}`);
}

// The browser: no proxy, loopback only. Every page gets the traps of scenario 2.
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-proxy-server', '--disable-background-networking'],
});

// newPage - a fresh context (no cookie) and page, with every sign of a payload that ran recorded.
async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, baseURL: BASE });
  const trips = { dialogs: [], foreign: [], csp: [], errors: [] };
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  const page = await context.newPage();
  page.on('dialog', (d) => {
    trips.dialogs.push(`${d.type()}: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(BASE + '/') && !u.startsWith('data:') && u !== 'about:blank') trips.foreign.push(u);
  });
  page.on('console', (m) => {
    const t = m.text();
    if (/Content.Security.Policy/i.test(t)) trips.csp.push(t);
    // a 401 or 409 the page asked for and handled is logged by the browser as a failed load
    if (m.type() === 'error' && !/^Failed to load resource/.test(t)) trips.errors.push(t);
  });
  page.on('pageerror', (e) => trips.errors.push(String(e)));
  return { context, page, trips };
}

async function login(page, operator) {
  await page.goto(UI);
  await page.locator('#login-token').waitFor({ state: 'visible', timeout: T });
  await page.fill('#login-token', ADMIN_TOKEN);
  await page.fill('#login-operator', operator);
  await page.click('#login-form button[type=submit]');
  await page.locator('#nav').waitFor({ state: 'visible', timeout: T });
}

async function go(page, hash, selector) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  if (selector) await page.locator(selector).first().waitFor({ state: 'attached', timeout: T });
}

// groupRows - the groups table as [{reason, error, count, notReplayed}] (cells as text).
async function groupRows(page) {
  await page.locator('#dlq-groups tbody tr').first().waitFor({ timeout: T });
  return page.$$eval('#dlq-groups tbody tr', (trs) => trs.map((tr) => {
    const c = [...tr.querySelectorAll('td')].map((td) => td.textContent);
    return { reason: c[0], error: c[1], count: Number(c[2]), notReplayed: Number(c[3]) };
  }));
}

async function confirmInDialog(page) {
  const dlg = page.locator('dialog#confirm');
  await dlg.waitFor({ state: 'visible', timeout: T });
  await page.click('#confirm-ok');
  await dlg.waitFor({ state: 'hidden', timeout: T });
}

// ---------------------------------------------------------------------------------------------
await scenario('1. log in, groups, search, one letter, replay, a group job, drain, log out', async () => {
  const { context, page, trips } = await newPage();
  await login(page, 'alice');
  check('logged in as alice', (await page.textContent('#operator')) === 'alice');

  // overview
  await go(page, '#/overview', '#overview-queues');
  await page.locator('#overview-queues tbody tr').first().waitFor({ timeout: T });
  const ovDlq = await page.textContent('#overview-dlq');
  check('overview shows the stored dead letters', /Stored/.test(ovDlq) && /\d/.test(ovDlq), ovDlq);
  const queues = await page.$$eval('#overview-queues tbody tr td:first-child', (t) => t.map((x) => x.textContent));
  check('overview lists the settlement queue and the DLQ', queues.includes('payments.settlement') && queues.includes('payments.settlement.dlq'), queues);
  await shot(page, 'overview');

  // groups
  await go(page, '#/dlq', '#dlq-groups');
  const groups = await groupRows(page);
  const zero = groups.filter((g) => g.count === ZERO);
  const down = groups.filter((g) => g.count === DOWN);
  check(`a group of the ${ZERO} R$ 0 letters`, zero.length === 1 && zero[0].notReplayed === ZERO, groups);
  check(`a group of the ${DOWN} bank-down letters`, down.length === 1 && down[0].notReplayed === DOWN, groups);
  check('the two groups are different classes of error', zero.length === 1 && down.length === 1 && zero[0].error !== down[0].error, groups);
  await shot(page, 'groups');

  // search by payment_id
  await page.selectOption('#dlq-search-kind', 'payment_id');
  await page.fill('#dlq-search', DOWN_PAYMENT);
  await page.click('#dlq-search-form button[type=submit]');
  await page.waitForFunction(() => location.hash.includes('payment_id='), null, { timeout: T });
  await page.locator('#dlq-letters tbody tr, #dlq-none').first().waitFor({ timeout: T });
  const found = await page.$$eval('#dlq-letters tbody tr', (trs) => trs.map((tr) => tr.querySelectorAll('td')[3].textContent));
  check(`the search by payment_id finds ${DOWN_PAYMENT} alone`, found.length === 1 && found[0] === DOWN_PAYMENT, found);

  // open it: x-death
  await page.click('#dlq-letters tbody tr td:nth-child(2) a');
  await page.locator('#letter-fields').waitFor({ timeout: T });
  const xd = await page.$$eval('#letter-xdeath tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
  check('the letter shows its x-death (payments.settlement)', xd.some((r) => r[0] === 'payments.settlement'), xd);
  check('the letter shows its body as JSON', (await page.textContent('#letter-body')).includes(DOWN_PAYMENT));
  check('the letter shows its headers', await page.locator('#letter-headers').count() === 1);
  await shot(page, 'letter');

  // replay it, through the page's own confirmation
  await page.click('#letter-replay-button');
  await confirmInDialog(page);
  await page.waitForFunction(() => /Replay answered|refused/.test(document.querySelector('#letter-status')?.textContent || ''), null, { timeout: T });
  const st = await page.textContent('#letter-status');
  check('the replay of one letter answered 202', /Replay answered 202/.test(st), st);
  const rec = await page.textContent('#letter-replay');
  check('the letter records the replay by alice', rec.includes('alice'), rec);
  check('the Replay button is now disabled', await page.locator('#letter-replay-button').isDisabled());

  // replay the group of R$ 0 letters as a job
  await go(page, '#/dlq', '#dlq-groups');
  await groupRows(page);
  const idx = await page.$$eval('#dlq-groups tbody tr', (trs, n) => trs.findIndex((tr) => Number(tr.querySelectorAll('td')[2].textContent) === n), ZERO);
  check('the R$ 0 group is in the table', idx >= 0);
  await page.locator('#dlq-groups tbody tr').nth(idx).locator('button', { hasText: 'Replay group' }).click();
  await confirmInDialog(page);
  await page.waitForFunction(() => /^#\/jobs\/[^/]+$/.test(location.hash), null, { timeout: T });
  await page.waitForFunction(() => /Finished/.test(document.querySelector('#job-state')?.textContent || ''), null, { timeout: 120000 });
  const replayed = Number(await page.textContent('#job-replayed'));
  check(`the group job finished with ${ZERO} replayed`, replayed === ZERO, replayed);
  check('the job failed no letter', Number(await page.textContent('#job-failed')) === 0);
  const results = await page.$$eval('#job-letters tbody tr td:nth-child(2)', (t) => t.map((x) => x.textContent));
  check(`the job lists ${ZERO} letters, each replayed`, results.length === ZERO && results.every((r) => r === 'replayed'), results.slice(0, 5));
  await shot(page, 'job');

  // the jobs list
  await go(page, '#/jobs', '#jobs-table');
  const jobRow = await page.$$eval('#jobs-table tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
  check('the jobs list shows the job, asked by alice', jobRow.length >= 1 && jobRow[0][1] === 'alice' && /group/.test(jobRow[0][3]), jobRow);

  // drain (the replayed R$ 0 letters die again and wait in the queue)
  await go(page, '#/dlq', '#drain');
  await page.click('#drain');
  await page.waitForFunction(() => /Drained|failed/.test(document.querySelector('#drain-result')?.textContent || ''), null, { timeout: T });
  const dr = await page.textContent('#drain-result');
  check('the Drain button shows how many were drained', /^Drained \d+ letter/.test(dr), dr);

  // reconciliation
  await go(page, '#/reconciliation', '#reconciliation-checks');
  const checks = await page.$$eval('#reconciliation-checks tbody tr', (trs) => trs.map((tr) => tr.querySelectorAll('td')[1].textContent));
  check('the reconciliation shows each check with OK or FAILED', checks.length >= 4 && checks.every((c) => c === 'OK' || c === 'FAILED'), checks);
  await shot(page, 'reconciliation');

  // log out: the API refuses, the page shows the login form
  await page.click('#logout');
  await page.locator('#login-form').waitFor({ state: 'visible', timeout: T });
  const after = await page.evaluate(async () => (await fetch('/admin/overview', { credentials: 'same-origin' })).status);
  check('after logout /admin/overview answers 401', after === 401, after);
  await page.reload();
  await page.locator('#login-form').waitFor({ state: 'visible', timeout: T });
  check('after logout a reload shows the login form', await page.locator('#nav').isHidden());
  check('no page error in scenario 1', trips.errors.length === 0 && trips.dialogs.length === 0, trips);
  await context.close();
});

// ---------------------------------------------------------------------------------------------
await scenario('2. a poison letter is only ever text', async () => {
  const { context, page, trips } = await newPage();
  await login(page, 'bob');
  const pwned = () => page.evaluate(() => [window.__paygw_pwned, window.__csp]);

  await go(page, '#/overview', '#overview-queues');
  await go(page, '#/dlq', '#dlq-groups');
  const groups = await groupRows(page);
  check('the poison letter has a group of its own, its error shown as text',
    groups.some((g) => g.error.includes('<script>')), groups);
  // the list, searched
  await page.fill('#dlq-search', POISON);
  await page.click('#dlq-search-form button[type=submit]');
  await page.locator('#dlq-letters tbody tr').first().waitFor({ timeout: T });
  const rows = await page.$$eval('#dlq-letters tbody tr', (trs) => trs.map((tr) => tr.textContent));
  check('the search finds the poison letter', rows.length === 1 && rows[0].includes('<img'), rows);
  // select it and replay the selection: the job shows it too
  await page.check('#dlq-letters tbody tr input[type=checkbox]');
  await page.click('#replay-selected');
  await confirmInDialog(page);
  await page.waitForFunction(() => /Finished/.test(document.querySelector('#job-state')?.textContent || ''), null, { timeout: 60000 });
  check('the selection job finished', true);
  await page.click('#job-letters tbody tr td:first-child a');
  await page.locator('#letter-body').waitFor({ timeout: T });
  const body = await page.textContent('#letter-body');
  check('the letter shows the body\'s <script> as text', body.includes('<script>') && body.includes(TRAP), body);
  const heads = await page.textContent('#letter-headers');
  check('the letter shows the headers\' markup as text', heads.includes('<img') && heads.includes('<script>'), heads);
  check('no element came from the payload', await page.evaluate(() =>
    document.querySelectorAll('main script, main img, main iframe, main svg, main object').length) === 0);
  await go(page, '#/jobs', '#jobs-table');
  await go(page, '#/reconciliation', '#reconciliation-checks');
  await page.waitForTimeout(1000);
  const [pw, csp] = await pwned();
  check('no global set by the payload', pw === undefined, pw);
  check('no securitypolicyviolation event', Array.isArray(csp) && csp.length === 0, csp);
  check('no CSP console message', trips.csp.length === 0, trips.csp);
  check('no dialog opened', trips.dialogs.length === 0, trips.dialogs);
  check('no request left the API\'s origin (the trap included)', trips.foreign.length === 0, trips.foreign);
  check('no page error', trips.errors.length === 0, trips.errors);
  await context.close();
});

// ---------------------------------------------------------------------------------------------
await scenario('3. the API: no session 401, the API token 401, no CSRF token 403', async () => {
  const calls = [
    ['GET', '/admin/session'], ['GET', '/admin/overview'], ['GET', '/admin/dlq/groups'],
    ['GET', '/admin/dlq'], ['GET', '/admin/dlq?q=x'], ['GET', '/admin/dlq/1'], ['GET', '/admin/replays'],
    ['GET', '/admin/replays/1'], ['GET', '/admin/reconciliation'], ['POST', '/admin/dlq/drain'],
    ['POST', '/admin/dlq/1/replay'], ['POST', '/admin/replays'], ['DELETE', '/admin/session'],
  ];
  const send = (method, p, headers, body) => fetch(BASE + p, { method, headers, body, redirect: 'manual' });
  for (const [m, p] of calls) {
    const body = m === 'POST' && p === '/admin/replays' ? JSON.stringify({ ids: [1] }) : undefined;
    const ct = body ? { 'Content-Type': 'application/json' } : {};
    const r1 = await send(m, p, { ...ct }, body);
    check(`${m} ${p} without a session: 401`, r1.status === 401, r1.status);
    const r2 = await send(m, p, { ...ct, Authorization: `Bearer ${API_TOKEN}` }, body);
    check(`${m} ${p} with the API token: 401`, r2.status === 401, r2.status);
  }
  // a session, by the API
  const bad = await send('POST', '/admin/session', { 'Content-Type': 'application/json' }, JSON.stringify({ token: API_TOKEN, operator: 'eve' }));
  check('POST /admin/session with the API token: 401', bad.status === 401, bad.status);
  const s = await send('POST', '/admin/session', { 'Content-Type': 'application/json' }, JSON.stringify({ token: ADMIN_TOKEN, operator: 'carol' }));
  check('POST /admin/session with the admin token: 201', s.status === 201, s.status);
  const cookies = s.headers.getSetCookie ? s.headers.getSetCookie() : [s.headers.get('set-cookie')];
  const sc = cookies.find((c) => c && c.startsWith('paygw_admin=')) || '';
  check('the cookie is HttpOnly, SameSite=Strict, Path=/admin', /HttpOnly/i.test(sc) && /SameSite=Strict/i.test(sc) && /Path=\/admin/i.test(sc), sc);
  const sess = await s.json();
  check('the session answers operator and csrf', sess.operator === 'carol' && typeof sess.csrf === 'string' && sess.csrf.length >= 16, sess);
  const cookie = sc.split(';')[0];
  const g = await send('GET', '/admin/overview', { Cookie: cookie });
  check('GET /admin/overview with the cookie: 200', g.status === 200, g.status);
  for (const [m, p] of calls.filter(([m2]) => m2 !== 'GET')) {
    const body = p === '/admin/replays' ? JSON.stringify({ ids: [1] }) : undefined;
    const ct = body ? { 'Content-Type': 'application/json' } : {};
    const r = await send(m, p, { ...ct, Cookie: cookie }, body);
    check(`${m} ${p} with the cookie and no X-CSRF-Token: 403`, r.status === 403, r.status);
    const w = await send(m, p, { ...ct, Cookie: cookie, 'X-CSRF-Token': 'x' + sess.csrf }, body);
    check(`${m} ${p} with a wrong X-CSRF-Token: 403`, w.status === 403, w.status);
  }
  // the page itself: open to all, with its headers
  const ui = await send('GET', '/admin/ui/', {});
  check('GET /admin/ui/: 200 text/html', ui.status === 200 && /text\/html/.test(ui.headers.get('content-type') || ''), ui.status);
  check('the page\'s Content-Security-Policy', ui.headers.get('content-security-policy') === CSP, ui.headers.get('content-security-policy'));
  check('nosniff, no-referrer, no-store', ui.headers.get('x-content-type-options') === 'nosniff' &&
    ui.headers.get('referrer-policy') === 'no-referrer' && /no-store/.test(ui.headers.get('cache-control') || ''),
  [...ui.headers.entries()]);
  const js = await send('GET', '/admin/ui/app.js', {});
  check('app.js is JavaScript under the same policy', js.status === 200 && /javascript/.test(js.headers.get('content-type') || '') &&
    js.headers.get('content-security-policy') === CSP, [js.status, js.headers.get('content-type')]);
  const del = await send('DELETE', '/admin/session', { Cookie: cookie, 'X-CSRF-Token': sess.csrf });
  check('DELETE /admin/session with the CSRF token: 2xx', del.status >= 200 && del.status < 300, del.status);
  const gone = await send('GET', '/admin/overview', { Cookie: cookie });
  check('the cookie is refused after logout: 401', gone.status === 401, gone.status);
});

await browser.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
