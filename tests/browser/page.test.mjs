// The page as a user sees it: sign-in by token, the live app list, a failing
// replica first, the log tail (text only, filter, pause, download), cancel
// by keyboard, deep links. One daemon for the file.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Daemon, launch, openPage, screenshot, skipReason, until } from './harness.mjs';

const skip = await skipReason();

// The whole file: ~30 s on a quiet machine, four times that with both cores busy.
describe('the page', { skip: skip || false, timeout: 240000 }, () => {
  let daemon, browser;
  before(async () => {
    daemon = await new Daemon().start();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await daemon?.stop();
  });

  test('the token becomes an HttpOnly SameSite=Strict cookie and leaves the address bar', async () => {
    const page = await openPage(browser, daemon);
    assert.equal(new URL(page.url()).search, '');
    const cookies = await page.context().cookies();
    const c = cookies.find((x) => x.name === `torchxd_token_${daemon.port}`);
    assert.ok(c, 'the token cookie is set');
    assert.equal(c.httpOnly, true);
    assert.equal(c.sameSite, 'Strict');
    assert.equal(await page.evaluate(() => document.cookie), '');  // scripts cannot read it
    await page.locator('#who').filter({ hasText: /\w/ }).waitFor();
    // Without a token: no page.
    const other = await browser.newPage();
    const r = await other.goto(daemon.origin + '/');
    assert.equal(r.status(), 401);
    const wrong = await other.goto(daemon.origin + '/?token=' + 'f'.repeat(64));
    assert.equal(wrong.status(), 401);
    await other.close();
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('an app appears without a reload and goes PENDING/RUNNING to SUCCEEDED; its duration matches status', async () => {
    const page = await openPage(browser, daemon);
    await page.locator('#app-table').waitFor();
    const h = daemon.run('utils.sh', 'sh', '-c', 'sleep 2; echo done');
    const row = page.locator(`#app-table tr[data-handle="${h}"]`);
    await row.locator('.state.RUNNING').waitFor();
    await row.locator('.state.SUCCEEDED').waitFor({ timeout: 15000 });
    const shown = await row.locator('td').nth(6).textContent();
    assert.match(shown, /^[23]s$/);  // 2 s of sleep, as the daemon measured it
    assert.deepEqual(page.errors, []);
    assert.deepEqual([...page.origins], [daemon.origin]);  // nothing from anywhere else
    await screenshot(page, 'list-1280x800');
    await page.context().close();
  });

  test('replicas: the failing one first with its exit code and error.json message; its log tail is text', async () => {
    const xss = '<img src=x onerror="window.__pwned=1">';
    const script = `if [ "$1" = 1 ]; then printf '{"message": {"message": "loss is NaN at step 7"}}' > "$TORCHELASTIC_ERROR_FILE"; ` +
      `echo '${xss}'; printf '\\033[31mred\\033[0m plain\\n'; exit 3; fi; echo ok "$1"`;
    const app = JSON.stringify({ name: 'mix', roles: [{ name: 'w', entrypoint: 'sh', args: ['-c', script, 'sh', '${replica_id}'], num_replicas: 2 }] });
    const file = daemon.dir + '/mix.json';
    (await import('node:fs')).writeFileSync(file, app);
    const h = daemon.run(file);
    await until(() => /FAILED/.test(daemon.torchx('status', h)), 'the app to fail', 15000);
    const page = await openPage(browser, daemon);
    await page.goto(daemon.origin + '/apps/' + encodeURIComponent(h));
    const first = page.locator('#replica-table tbody tr').first();
    await first.locator('.state.FAILED').waitFor();
    const cells = await first.locator('td').allTextContents();
    assert.equal(cells[0], 'w');
    assert.equal(cells[1], '1');
    assert.equal(cells[4], '3');
    assert.match(cells[8], /loss is NaN at step 7/);
    // The tail opened on the failing replica: the payload is text, no element, no dialog.
    await page.locator('#log', { hasText: 'plain' }).waitFor();
    assert.equal(await page.locator('#log img').count(), 0);
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    const text = await page.locator('#log').textContent();
    assert.ok(text.includes(xss), text);
    assert.ok(text.includes('red plain') && !text.includes('\u001b'), 'ANSI codes are stripped');
    await screenshot(page, 'app-1280x800');
    await page.context().close();
  });

  test('tail: in order with no duplicate, streams switch, a regex filters new lines, pause counts, download equals torchx log', async () => {
    // It prints until the test is done with the live steps: a loaded machine may take longer
    // over them than any fixed number of lines lasts, and "new lines keep coming" needs it alive.
    const stop = join(daemon.dir, 'stop-tail');
    const h = daemon.run('utils.sh', 'sh', '-c',
      `i=0; while [ ! -e ${stop} ] || [ $i -lt 40 ]; do i=$((i+1)); echo "n $i"; echo "e $i" >&2; sleep 0.02; done`);
    const page = await openPage(browser, daemon);
    await page.goto(daemon.origin + '/apps/' + encodeURIComponent(h) + '?role=sh&replica=0&stream=stdout');
    await page.locator('#log', { hasText: 'n 30' }).waitFor();
    let lines = (await page.locator('#log').textContent()).trim().split('\n');
    assert.ok(lines.every((l, i) => l === `n ${i + 1}`), lines.slice(0, 5).join('|'));
    await page.selectOption('#t-stream', 'stderr');
    await page.locator('#log', { hasText: 'e 40' }).waitFor();
    lines = (await page.locator('#log').textContent()).trim().split('\n');
    assert.ok(lines.every((l) => l.startsWith('e ')), 'stderr only');
    // Regex: only matches, and matching new lines keep coming.
    await page.fill('#t-regex', '^e [0-9]*0$');
    await until(async () => /[?&]regex=/.test(page.url()), 'the filter to apply');
    await page.locator('#log', { hasText: /e \d+0\n/ }).waitFor();
    const before = (await page.locator('#log').textContent()).trim().split('\n').length;
    await until(async () => (await page.locator('#log').textContent()).trim().split('\n').length > before, 'new matching lines');
    lines = (await page.locator('#log').textContent()).trim().split('\n');
    assert.ok(lines.every((l) => /^e \d*0$/.test(l)), lines.join('|'));
    // An invalid regex says so.
    await page.fill('#t-regex', '(');
    await page.locator('#t-error', { hasText: /regex|missing/i }).waitFor();
    await page.fill('#t-regex', '');
    await until(async () => !/[?&]regex=/.test(page.url()), 'the filter to go');
    // Pause: the view holds still and counts what arrives.
    await page.click('#t-pause');
    const frozen = await page.locator('#log').textContent();
    await page.locator('#t-new', { hasText: /\d+ new lines?/ }).waitFor();
    assert.equal(await page.locator('#log').textContent(), frozen);
    await page.click('#t-new');  // resume catches up
    await until(async () => (await page.locator('#log').textContent()).length > frozen.length, 'the held lines');
    // Download: exactly what `torchx log` prints for the same selection.
    writeFileSync(stop, '');
    await until(() => /SUCCEEDED/.test(daemon.torchx('status', h)), 'the app to end', 30000);
    const href = await page.locator('#t-download').getAttribute('href');
    const body = await page.evaluate(async (u) => (await fetch(u)).text(), href);
    assert.equal(body, daemon.torchx('log', h + '/sh/0', '--streams', 'stderr'));
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('cancel by keyboard: the dialog names the app, dismiss keeps it, confirm cancels once; gone when terminal', async () => {
    const h = daemon.run('utils.sh', 'sleep', '600');
    const page = await openPage(browser, daemon);
    const posts = [];
    page.on('request', (r) => { if (r.method() === 'POST') posts.push(r.url()); });
    await page.goto(daemon.origin + '/apps/' + encodeURIComponent(h));
    const button = page.locator('#cancel-btn');
    await button.waitFor();
    await button.focus();
    await page.keyboard.press('Enter');
    const dialog = page.locator('#cancel-dialog');
    await dialog.waitFor();
    const text = await page.locator('#cancel-text').textContent();
    assert.ok(text.includes(h) && text.includes('1 replica') && text.includes('SIGTERM'), text);
    await page.keyboard.press('Escape');  // dismiss
    await dialog.waitFor({ state: 'hidden' });
    assert.match(daemon.torchx('status', h), /RUNNING/);
    await button.focus();
    await page.keyboard.press('Enter');
    await page.locator('#cancel-keep').waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.id), 'cancel-keep');  // the safe choice has focus
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'cancel-confirm');
    await page.locator('#cancel-confirm').dblclick();  // a double click sends one request
    await page.locator('#app-summary .state.CANCELLED').waitFor({ timeout: 15000 });
    assert.equal(posts.length, 1);
    await button.waitFor({ state: 'hidden' });
    assert.match(daemon.torchx('status', h), /CANCELLED/);
    await page.context().close();
  });

  test('a page on another local origin cannot cancel, by form or by fetch, though the cookie rides along', async () => {
    const h = daemon.run('utils.sh', 'sleep', '600');
    const { createServer } = await import('node:http');
    const evil = `<!doctype html><form id=f method=POST action="${daemon.origin}/api/cancel" enctype="text/plain">
      <input name='{"app_handle":"${h}","x":"' value='"}'></form>
      <script>
        window.fetchResult = fetch(${JSON.stringify(daemon.origin + '/api/cancel')}, { method: 'POST', credentials: 'include',
          headers: { 'Content-Type': 'application/json', 'X-Torchxd-Csrf': 'guess' }, body: JSON.stringify({ app_handle: ${JSON.stringify(h)} }) })
          .then((r) => 'status ' + r.status, (e) => 'blocked: ' + e.message);
      </script>`;
    const server = createServer((req, res) => { res.writeHead(200, { 'Content-Type': 'text/html' }); res.end(evil); });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const page = await openPage(browser, daemon);  // signed in: the cookie is in this browser
      await page.goto(`http://127.0.0.1:${server.address().port}/`);
      assert.match(await page.evaluate(() => window.fetchResult), /^blocked/);  // the preflight is never granted
      const [answer] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/api/cancel')),
        page.evaluate(() => document.getElementById('f').submit())]);
      assert.equal(answer.status(), 403);
      assert.match(daemon.torchx('status', h), /RUNNING/);
      await page.context().close();
    } finally {
      server.close();
      daemon.torchx('cancel', h);
    }
  });

  test('a fast log keeps the page responsive: the DOM keeps at most 5,000 lines and the newest arrive', async () => {
    const h = daemon.run('utils.sh', 'sh', '-c', 'sleep 1; seq 1 30000');
    const page = await openPage(browser, daemon);
    await page.goto(daemon.origin + '/apps/' + encodeURIComponent(h) + '?role=sh&replica=0');
    await page.locator('#log', { hasText: '\n30000\n' }).waitFor({ timeout: 20000 });
    const nodes = await page.evaluate(() => document.getElementById('log').childNodes.length);
    assert.ok(nodes <= 5000, `${nodes} nodes`);
    const t0 = Date.now();
    await page.locator('#log').evaluate((e) => { e.scrollTop = 0; });
    await page.click('#t-pause');
    // A page that kept every line in its DOM would take tens of seconds here; a busy machine, a few.
    assert.ok(Date.now() - t0 < 5000, 'the page answers');
    await page.context().close();
  });

  test('deep links survive reload and back/forward; the phone layout renders', async () => {
    const h = daemon.run('utils.sh', 'sh', '-c', 'echo out; echo err >&2');
    await until(() => /SUCCEEDED/.test(daemon.torchx('status', h)), 'the app to end');
    const page = await openPage(browser, daemon, { width: 390, height: 844 });
    const deep = daemon.origin + '/apps/' + encodeURIComponent(h) + '?role=sh&replica=0&stream=stderr';
    await page.goto(deep);
    await page.locator('#log', { hasText: 'err' }).waitFor();
    await page.reload();
    await page.locator('#log', { hasText: 'err' }).waitFor();
    assert.equal(await page.inputValue('#t-stream'), 'stderr');
    assert.ok(!(await page.locator('#log').textContent()).includes('out'));
    await page.click('#back');
    await page.locator('#app-table').waitFor();
    await page.goBack();
    await page.locator('#log', { hasText: 'err' }).waitFor();
    assert.equal(page.url(), deep);
    await screenshot(page, 'app-390x844');
    await page.goBack();
    await page.locator('#list-view').waitFor();
    await screenshot(page, 'list-390x844');
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });
});
