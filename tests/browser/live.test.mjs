// What must hold while things change under the page: a daemon SIGKILLed and
// restarted mid-tail (no gap, no duplicate), GPUs and the queue with its
// reasons, eight tabs on one daemon. One daemon for the file (--live-restore,
// two GPUs from a topology file).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { Daemon, launch, openPage, screenshot, skipReason, until } from './harness.mjs';

const skip = await skipReason();

function gpuApp(daemon, name, gpus) {
  const file = `${daemon.dir}/${name}.json`;
  writeFileSync(file, JSON.stringify({ name, roles: [{ name: 'w', entrypoint: 'sleep', args: ['600'],
    resource: { cpu: 1, gpu: gpus, memMB: 1024 } }] }));
  return daemon.run(file);
}

describe('live', { skip: skip || false, timeout: 150000 }, () => {
  let daemon, browser;
  before(async () => {
    daemon = new Daemon(['--live-restore']);
    const topology = `${daemon.dir}/gpus.json`;
    writeFileSync(topology, JSON.stringify({ gpus: [{ index: 0, uuid: 'GPU-0', numa_node: 0 }, { index: 1, uuid: 'GPU-1', numa_node: 0 }] }));
    daemon.extraArgs.push('--gpu-topology', topology);
    await daemon.start();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await daemon?.stop();
  });

  test('a tail survives a daemon SIGKILL and restart: banner, then the same lines with no gap or duplicate', async () => {
    const h = daemon.run('utils.sh', 'sh', '-c', 'for i in $(seq 1 300); do echo "n $i"; sleep 0.05; done');
    const page = await openPage(browser, daemon);
    await page.goto(daemon.origin + '/apps/' + encodeURIComponent(h) + '?role=sh&replica=0');
    await page.locator('#log', { hasText: 'n 20\n' }).waitFor();
    await daemon.kill('SIGKILL');
    await page.locator('#banner', { hasText: 'reconnecting' }).waitFor();
    await daemon.start();  // the same port and state: the replica was kept running
    await page.locator('#banner').waitFor({ state: 'hidden', timeout: 15000 });
    await until(() => /SUCCEEDED/.test(daemon.torchx('status', h)), 'the app to end', 40000);
    await page.locator('#log', { hasText: 'n 300\n' }).waitFor({ timeout: 15000 });
    const lines = (await page.locator('#log').textContent()).trim().split('\n');
    assert.equal(lines.length, 300, lines.filter((l, i) => l !== `n ${i + 1}`).slice(0, 3).join('|'));
    lines.forEach((l, i) => assert.equal(l, `n ${i + 1}`));
    await page.context().close();
  });

  test('GPUs show who holds them; a pending app shows its position and why, and starts when they free', async () => {
    const big = gpuApp(daemon, 'big', 2);
    await until(() => /RUNNING/.test(daemon.torchx('status', big)), 'the first app to run');
    const small = gpuApp(daemon, 'small', 1);
    const page = await openPage(browser, daemon);
    const tiles = page.locator('#gpu-tiles .gpu-tile');
    await until(async () => (await tiles.count()) === 2, 'two GPU tiles');
    for (const tile of await tiles.all()) {
      await tile.locator('.holder', { hasText: big.split('/').pop() }).waitFor();
      assert.equal(await tile.locator('.value.util').textContent(), 'util –');  // a topology file: no readings
    }
    await page.locator('#gpu-note', { hasText: 'sampling is off' }).waitFor();
    const pending = page.locator('#queue-table tbody tr');
    await pending.first().waitFor();
    const cells = await pending.first().locator('td').allTextContents();
    assert.equal(cells[0], '1');
    assert.equal(cells[1], small.split('/').pop());
    assert.match(cells[5], /GPU/);  // e.g. "needs 1 GPU, 0 free"
    await screenshot(page, 'queue-1280x800');
    daemon.torchx('cancel', big);
    await pending.first().waitFor({ state: 'detached', timeout: 15000 });
    await page.locator('#queue-note', { hasText: 'nothing is waiting' }).waitFor();
    await until(() => /RUNNING/.test(daemon.torchx('status', small)), 'the pending app to start');
    daemon.torchx('cancel', small);
    await page.context().close();
  });

  test('eight tabs: streams stay under the browser limit, a cancel from any tab answers, a tab looked at catches up', async () => {
    const h = daemon.run('utils.sh', 'sleep', '600');
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const url = daemon.url.replace('/?', '/apps/' + encodeURIComponent(h) + '?');
    const pages = [];
    // Each tab records when each of its streams opened and closed (one clock
    // for all tabs): as tabs load and take slots over, never more than four
    // at any moment. (Asking each tab in turn whether it streams is no
    // snapshot: on a busy machine the tabs answer at different moments.)
    await context.addInitScript(() => {
      const Native = window.EventSource;
      window.streamSpans = [];
      window.EventSource = class extends Native {
        constructor(...args) {
          super(...args);
          this.span = { open: Date.now(), close: null };
          window.streamSpans.push(this.span);
        }
        close() {
          if (this.span.close === null) this.span.close = Date.now();
          super.close();
        }
      };
    });
    for (let i = 0; i < 8; i++) {
      const p = await context.newPage();
      p.setDefaultTimeout(30000);  // eight tabs of one browser, on a machine whose cores may all be busy
      await p.goto(url);
      pages.push(p);
    }
    // Every tab shows the app; at most four hold a stream.
    for (const p of pages) await p.locator('#app-summary .state.RUNNING').waitFor();
    const streaming = await Promise.all(pages.map((p) => p.evaluate(() => S.es !== null)));
    assert.ok(streaming.filter(Boolean).length <= 4, JSON.stringify(streaming));
    const idle = pages[streaming.indexOf(false)];
    assert.ok(idle, 'some tab waits without a stream');
    // A cancel from a tab with no stream goes through at once (a connection is free).
    await idle.locator('#cancel-btn').click();
    await idle.locator('#cancel-confirm').click();
    await idle.locator('#cancel-dialog').waitFor({ state: 'hidden' });
    assert.match(daemon.torchx('status', h), /CANCELLED/);
    // Looking at a waiting tab gives it a stream: it catches up.
    await idle.bringToFront();
    await idle.evaluate(() => window.dispatchEvent(new Event('focus')));
    await idle.locator('#app-summary .state.CANCELLED').waitFor({ timeout: 15000 });
    await idle.waitForFunction(() => S.es !== null, null, { timeout: 15000 });
    const after = await Promise.all(pages.map((p) => p.evaluate(() => S.es !== null)));
    assert.ok(after.filter(Boolean).length <= 4, JSON.stringify(after));
    const spans = (await Promise.all(pages.map((p, tab) => p.evaluate(() => window.streamSpans)
      .then((list) => list.map((x) => ({ tab, ...x })))))).flat();
    assert.ok(spans.length >= 5, JSON.stringify(spans));  // the four first tabs' and the looked-at tab's
    // A span is [open, close): one closing as another opens in the same millisecond do not overlap.
    const edges = spans.flatMap((x) => [[x.open, 1], [x.close === null ? Infinity : x.close, -1]])
      .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let open = 0, most = 0;
    for (const [, step] of edges) most = Math.max(most, (open += step));
    assert.ok(most <= 4, `${most} streams at once: ${JSON.stringify(spans)}`);
    await context.close();
  });
});
