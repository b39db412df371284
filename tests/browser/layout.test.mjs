// The page's layout on a full 8-GPU box with queued apps: the apps are above
// the fold at 1280x800; the header names the host and says whether the page
// is live; /queue opens at the queue; the queue lists apps as `torchx
// queue` does and names the head that holds the reservation; on a phone the
// reason an app waits stays readable. Screenshots at 1280x800 and 390x844.
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { renameSync, writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { Daemon, launch, openPage, screenshot, skipReason, until } from './harness.mjs';

const skip = (await skipReason()) || (process.env.FAKE_NVML ? null : 'no FAKE_NVML (the fake libnvidia-ml)');
if (skip && process.env.FAKE_NVML === undefined) console.log(`browser tests skipped: ${skip}`);

const gpu = (i) => ({ uuid: `GPU-0000000${i}`, pci_bus_id: `00000000:0${i}:00.0`, memory_total_mb: 81920,
  memory_used_mb: 1024, util_gpu: 50, util_mem: 20, temperature_c: 40, power_mw: 200000, power_limit_mw: 400000,
  sm_clock_mhz: 1410, ecc_uncorrected: 0, ecc_corrected: 0 });

describe('the page on a full box', { skip: skip || false, timeout: 120000 }, () => {
  let daemon, browser, big, head, other;
  const app = (name, gpus, seconds, queue) => {
    const file = `${daemon.dir}/${name}.json`;
    writeFileSync(file, JSON.stringify({ name, roles: [{ name: 'w', entrypoint: 'sleep', args: [String(seconds)],
      resource: { cpu: 1, gpu: gpus, memMB: 1024 } }] }));
    return daemon.run(...(queue ? ['-cfg', `queue=${queue}`] : []), file);
  };

  before(async () => {
    daemon = new Daemon(['--nvml-library', process.env.FAKE_NVML, '--gpu-sample-period', '0.5',
      '--queue', 'default', '--queue', 'research:weight=2']);
    const nvml = `${daemon.dir}/nvml.json`;
    process.env.TORCHXD_FAKE_NVML = nvml;
    writeFileSync(nvml + '.tmp', JSON.stringify({ gpus: [0, 1, 2, 3, 4, 5, 6, 7].map(gpu) }));
    renameSync(nvml + '.tmp', nvml);
    await daemon.start();
    for (let i = 0; i < 6; i++) app(`done-${i}`, 0, 0);
    big = app('big', 6, 600);
    head = app('wide', 4, 60, 'research');
    other = app('small', 3, 60);  // 2 GPUs are free, and the head holds them back
    await until(() => /PENDING/.test(daemon.torchx('status', head)), 'the wide app to wait');
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await daemon?.stop();
    delete process.env.TORCHXD_FAKE_NVML;
  });

  test('1280x800: apps above the fold, the host and liveness in the header, the queue as torchx queue lists it', async () => {
    const page = await openPage(browser, daemon);
    await page.locator('#gpu-tiles .gpu-tile').nth(7).waitFor();
    await page.locator(`#app-table tr[data-handle="${big}"]`).waitFor();
    await page.locator('#queue-table tbody tr').nth(1).waitFor();
    const firstApp = await page.locator('#app-table tbody tr').first().boundingBox();
    assert.ok(firstApp.y + firstApp.height <= 800, `the first app row ends at ${firstApp.y + firstApp.height}px, below the fold`);
    assert.equal(await page.locator('#host').textContent(), hostname());
    await page.locator('#live', { hasText: 'live' }).waitFor();
    // Queue by queue, as the CLI: default's apps, then research's.
    const queues = await page.locator('#queue-table tbody tr td:nth-child(3)').allTextContents();
    const text = daemon.torchx('queue');
    const cli = text.slice(text.indexOf('\nPOS ')).split('\n').filter((l) => /^\d+\s/.test(l)).map((l) => l.split(/\s+/)[2]);
    assert.deepEqual(queues, cli);
    // The GPUs the head holds back name it.
    const reserved = page.locator('#gpu-tiles .gpu-tile', { hasText: 'reserved for' });
    await until(async () => (await reserved.count()) > 0, 'a reserved GPU');
    assert.match(await reserved.first().textContent(), new RegExp('reserved for ' + head.split('/').pop()));
    await screenshot(page, 'layout-1280x800');
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('/queue opens at the queue; on a phone why an app waits stays readable', async () => {
    const page = await openPage(browser, daemon, { width: 390, height: 844 });
    await page.goto(daemon.origin + '/queue');
    await page.locator('#queue-table tbody tr').nth(1).waitFor();
    await until(async () => {
      const box = await page.locator('#queue-title').boundingBox();
      return box && box.y >= 0 && box.y < 200;
    }, 'the queue at the top of the screen');
    const reason = page.locator('#queue-table tbody tr', { hasText: head.split('/').pop() }).locator('td').last();
    const box = await reason.boundingBox();
    assert.ok(box.width >= 150, `the reason is ${box.width}px wide`);
    assert.ok(box.x + box.width <= 390 + 1, `the reason runs off the screen (${box.x + box.width}px)`);
    assert.match(await reason.textContent(), /next to start|waiting for/);
    await screenshot(page, 'layout-queue-390x844');
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  test('the header says when the page is offline', async () => {
    const page = await openPage(browser, daemon);
    await page.locator('#live', { hasText: 'live' }).waitFor();
    await daemon.kill('SIGKILL');
    await page.locator('#live', { hasText: 'offline' }).waitFor({ timeout: 15000 });
    await daemon.start();
    await page.locator('#live', { hasText: 'live' }).waitFor({ timeout: 20000 });
    await page.context().close();
  });
});
